"""A stage's requests answered through the provider's batch API, with nothing paid twice.

The rules, in the order they act:

* A batch is recorded in the run store (``submitting``, with the row keys it answers) before it
  is sent, and its provider id stored the moment it comes back, before anyone waits on it.
* A rerun (killed mid-wait, or any later ``gamut run``, with ``--batch`` or without) re-attaches
  to the stage's open batches instead of sending their requests again; a submission cut off
  before its id came back is looked for by its tag (OpenAI keeps it as metadata).
* A batch's answers are stored as they come, matched by ``custom_id`` (the row's content key),
  in any order; a custom_id given twice keeps its first answer; an error line is an error with the
  provider's message, as a synchronous call's is.
* What a failed or expired batch left unanswered is sent once more in a new batch (or, with
  ``--batch-fallback sync``, asked synchronously); what is still unanswered after that waits for
  a rerun. A verdict that cannot be read is asked again in a new batch, as often as
  ``--judge-retries`` allows.
* A stored batch the provider does not know is refused in one line before anything is sent
  (``--batch-forget-unknown`` gives it up and sends its requests again).
* A batch's answers to requests this invocation does not ask (a rerun with a narrower selection
  waited on the wider run's batch) are kept in the store, and stored as rows by the run that asks
  them, which sends nothing for them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gamut_hf.backends.base import Backend, ChatRequest, Completion, Constraint
from gamut_hf.backends.batch import FINISHED_STATES, BatchAPI, UnknownBatch, within_limits
from gamut_hf.evaluation.config import BatchMode
from gamut_hf.evaluation.store import RunStore, StoredBatch
from gamut_hf.files import InputError

MAX_POLL_SECONDS = 600.0
POLL_GROWTH = 1.5

# Stores a batch's answers (by row key; the batch's provider id and the answers' attempt) and
# returns the keys to ask again in a new batch (a verdict that could not be read).
StoreAnswers = Callable[[dict[str, Completion], str | None, int], list[str]]


@dataclass
class BatchOutcome:
    """What the batches of one stage did in this invocation."""

    submitted: int = 0  # batches sent now
    reattached: int = 0  # batches sent earlier and waited on now
    answered: int = 0  # requests answered (an error line included)
    unanswered: int = 0  # requests no batch answered, for a rerun
    kept: int = 0  # answers to requests this invocation does not ask, kept for the run that does


class StageBatches:
    """The open and new batches of one stage of one model."""

    def __init__(
        self,
        api: BatchAPI,
        store: RunStore,
        *,
        stage: str,
        model: str,
        constraint: Constraint,
        mode: BatchMode | None,
        wanted: Sequence[str],
        echo: Callable[[str], None],
    ):
        self.api = api
        self.store = store
        self.stage = stage
        self.model = model
        self.constraint = constraint
        self.mode = mode or BatchMode()
        self.wanted = set(wanted)  # the keys this invocation asks
        self.echo = echo
        self.waiting: list[StoredBatch] = []
        self.outcome = BatchOutcome()

    # -- re-attaching ---------------------------------------------------------------------

    def reattach(self) -> set[str]:
        """The keys of this stage's open batches, which are waited on instead of sent again."""
        unknown = []
        for batch in self.store.batches(self.stage, self.model, open_only=True):
            if batch.batch_id is None:  # cut off before its id came back: created or not?
                found = self.api.find(batch.tag)
                if found is None:
                    self.store.update_batch(batch.tag, state="abandoned", message="never created")
                    continue
                self.store.update_batch(batch.tag, batch_id=found, state="running")
                batch = replace(batch, batch_id=found, state="running")
            try:
                self.api.status(batch.batch_id or "")
            except UnknownBatch as error:
                if not self.mode.forget_unknown:
                    unknown.append(str(error))
                    continue
                self.store.update_batch(batch.tag, state="forgotten", message=str(error))
                self.echo(f"{self.stage}: {error}: given up, its {len(batch.custom_ids)} requests are sent again")
                continue
            self.waiting.append(batch)
        if unknown:
            raise InputError(
                f"{self.store.path}: {unknown[0]}{f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''}: "
                "was it sent with another API key or endpoint? Rerun with those, or with --batch "
                "--batch-forget-unknown to give it up and send its requests again"
            )
        self.outcome.reattached = len(self.waiting)
        if self.waiting:
            count = sum(len(b.custom_ids) for b in self.waiting)
            self.echo(f"{self.stage}: waiting on {len(self.waiting)} batches sent earlier ({count} requests)")
        return {key for batch in self.waiting for key in batch.custom_ids}

    # -- sending --------------------------------------------------------------------------

    def send(
        self, keys: Sequence[str], request_for: Callable[[str], ChatRequest], *, attempt: int = 1, resubmission: int = 0
    ) -> None:
        """Send ``keys`` as batches within the provider's limits, each stored before it is sent."""
        lines = ((key, self.api.line(key, request_for(key), self.constraint)) for key in keys)
        for chunk in within_limits(lines, self.api.limits):
            tag = f"gamut-{uuid.uuid4().hex}"
            batch = StoredBatch(
                tag=tag,
                provider=self.api.name,
                endpoint=self.api.endpoint,
                stage=self.stage,
                model=self.model,
                batch_id=None,
                state="submitting",
                custom_ids=tuple(key for key, _ in chunk),
                attempt=attempt,
                resubmission=resubmission,
            )
            self.store.add_batch(batch)
            # Should this fail, it stays "submitting": a rerun looks for it by its tag before sending again.
            batch_id = self.api.submit([line for _, line in chunk], tag)
            self.store.update_batch(tag, batch_id=batch_id, state="running")
            self.waiting.append(replace(batch, batch_id=batch_id, state="running"))
            self.outcome.submitted += 1
            self.echo(
                f"{self.stage}: batch {batch_id} sent ({len(chunk)} requests to {self.api.name}); "
                "kept in the run store: a rerun waits on it instead of sending it again"
            )

    # -- waiting --------------------------------------------------------------------------

    def wait(
        self,
        store_answers: StoreAnswers,
        request_for: Callable[[str], ChatRequest],
        sync: Callable[[list[str]], None],
    ) -> BatchOutcome:
        """Poll every waiting batch, with a growing pause, storing each one's answers as it finishes."""
        delay = self.mode.poll
        while self.waiting:
            for batch in list(self.waiting):
                status = self.api.status(batch.batch_id or "")
                if status.state in FINISHED_STATES:
                    self.waiting.remove(batch)
                    self._collect(batch, status.state, status.message, store_answers, request_for, sync)
            if self.waiting:
                time.sleep(delay)
                delay = min(delay * POLL_GROWTH, MAX_POLL_SECONDS)
        return self.outcome

    def _collect(
        self,
        batch: StoredBatch,
        state: str,
        message: str | None,
        store_answers: StoreAnswers,
        request_for: Callable[[str], ChatRequest],
        sync: Callable[[list[str]], None],
    ) -> None:
        answers = self.api.results(batch.batch_id or "", self.constraint)
        mine = {key: answers[key] for key in batch.custom_ids if key in answers}
        others = {key: answer for key, answer in mine.items() if key not in self.wanted}
        if others:
            self.store.keep_batch_answers(self.stage, self.model, batch.batch_id or "", batch.attempt, others)
            self.outcome.kept += len(others)
        again = store_answers({k: a for k, a in mine.items() if k not in others}, batch.batch_id, batch.attempt)
        left = [key for key in batch.custom_ids if key not in mine and key in self.wanted]
        self.outcome.answered += len(mine)
        self.store.update_batch(batch.tag, state="collected" if state == "ended" else state, message=message)
        if again:
            self.send(again, request_for, attempt=batch.attempt + 1, resubmission=batch.resubmission)
        if not left:
            return
        why = f"batch {batch.batch_id} {state}" + (f" ({message})" if message else "")
        if self.mode.fallback == "sync":
            self.echo(f"{self.stage}: {why} with {len(left)} requests unanswered: asked synchronously")
            sync(left)
        elif batch.resubmission == 0:
            self.echo(f"{self.stage}: {why} with {len(left)} requests unanswered: sent once more")
            self.send(left, request_for, attempt=batch.attempt, resubmission=1)
        else:
            self.outcome.unanswered += len(left)
            self.echo(
                f"{self.stage}: {why} with {len(left)} requests unanswered after a second batch: a rerun asks again"
            )


def answer_in_batches(
    backend: Backend,
    store: RunStore,
    *,
    stage: str,
    model: str,
    constraint: Constraint,
    mode: BatchMode | None,
    keys: Sequence[str],
    request_for: Callable[[str], ChatRequest],
    store_answers: StoreAnswers,
    sync: Callable[[list[str]], None],
    echo: Callable[[str], None],
) -> set[str]:
    """The keys of a stage answered through provider batches: those an earlier batch answered for
    another selection (kept in the store), those of its batches sent earlier, waited on again (with
    ``--batch`` or without: nothing is paid twice), and with ``mode`` (--batch) every other key of
    ``keys``. The rest are the stage's to ask synchronously."""
    kept = store.kept_batch_answers(keys)
    if mode is None and not kept and not store.batches(stage, model, open_only=True):
        return set()
    api = backend.batch_api()
    if api is None:
        raise InputError(f"--batch: the {backend.name} backend has no batch API (the openai backend has)")
    batches = StageBatches(
        api, store, stage=stage, model=model, constraint=constraint, mode=mode, wanted=keys, echo=echo
    )
    handled = batches.reattach() | set(kept)  # first: an unknown batch is refused before anything is stored
    if kept:
        echo(f"{stage}: {len(kept)} answers stored from a batch collected earlier (for another selection)")
        groups: dict[tuple[str, int], dict[str, Completion]] = {}
        for key, answer in kept.items():
            groups.setdefault((answer.batch_id, answer.attempt), {})[key] = answer.completion
        for (batch_id, attempt), answers in groups.items():
            batches.send(store_answers(answers, batch_id, attempt), request_for, attempt=attempt + 1)
        store.drop_batch_answers(kept)
    new = [key for key in keys if key not in handled] if mode is not None else []
    batches.send(new, request_for)
    outcome = batches.wait(store_answers, request_for, sync)
    if outcome.submitted or outcome.reattached:
        echo(
            f"{stage}: {outcome.submitted} batches sent, {outcome.reattached} sent earlier; "
            f"{outcome.answered} requests answered in batches"
            + (f", {outcome.unanswered} unanswered (rerun to ask again)" if outcome.unanswered else "")
            + (f"; {outcome.kept} answers to questions this run does not ask kept for the run that does"
               if outcome.kept else "")
        )  # fmt: skip
    return handled | set(new)
