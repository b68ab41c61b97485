"""`gamut worker`: judge queued submissions and publish their results.

Takes the oldest PENDING request, marks it RUNNING, stores its responses as the candidate's
answers in a run store of its own, runs the judge stage and scoring of the pipeline, and
writes the result folder (results.json, details.parquet, responses.parquet, model.json) into
the results folder under the request's key. The request ends FINISHED, or FAILED with the
reason; a score is only ever computed here, from the judge's verdicts.

Whose failure it was decides what follows. An upload that cannot be read or fails validation
is the submission's: FAILED at once. Anything else (the judge's endpoint or engine failing,
checks left unjudged, an exception while judging) is not: the request waits and is tried again
(:data:`gamut_hf.leaderboard.queue.RETRY_WAITS`), its stored verdicts kept, and is FAILED only
after the last try; :func:`put_back` returns it to the queue once the judge is healthy.

While it judges, the worker renews its claim (a heartbeat every third of the lease), so a
worker that dies leaves a claim that goes stale and another worker takes over. With a hub
requests repository, each claim and renewal is an exclusive commit on top of the commit just
read: of two workers claiming one request, the hub accepts one commit and the other worker
reads the repository again and moves on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gamut_hf.atomic import OwnedFolder
from gamut_hf.core.names import Variant
from gamut_hf.dataset.hub import HubFolder, PushConflict, PushError
from gamut_hf.evaluation.config import ModelSpec, RunConfig
from gamut_hf.evaluation.pipeline import Echo, import_answers, judge, record_run, score
from gamut_hf.evaluation.run_folder import DETAILS_FILE, RESPONSES_FILE, RESULTS_FILE
from gamut_hf.evaluation.source import QuestionSource
from gamut_hf.evaluation.store import RunStore
from gamut_hf.leaderboard.entries import CARD_FILE
from gamut_hf.leaderboard.queue import (
    LEASE,
    RETRY_WAITS,
    ClaimLost,
    Fault,
    RequestFileError,
    RequestQueue,
    RequestRecord,
)

# A submission's answers are data, not a model: this backend name marks them and loads nothing.
SUBMITTED_BACKEND = "submitted"
CLAIM_ATTEMPTS = 5  # reads of the requests repo per claim before giving way to busier workers
# An absolute path's folders (what comes before its last name); not a URL's path nor a relative one.
_FOLDERS_OF_A_PATH = re.compile(r"(?<![\w:/.~-])/(?:[^\s'\"/:]+/)+")


class JudgeIncomplete(RuntimeError):
    """The judge left checks without a verdict: the judge's failure, not the submission's."""


def fault_of(error: BaseException) -> Fault:
    """Whose failure ``error`` is: the submission's when its upload cannot be read or taken
    (RequestFileError), else the judge's side (endpoint, engine, dataset, anything unexpected),
    which a later try may not meet."""
    return "submission" if isinstance(error, RequestFileError) else "judge"


def question_ids(dataset: str, variant: Variant) -> list[str]:
    """The questions of ``dataset`` a submission may answer (only the id column is read)."""
    from gamut_hf.dataset.loader import dataset_question_ids, load_gamut

    return dataset_question_ids(load_gamut(dataset, variant))


def public_reason(error: BaseException, folders: tuple[Path, ...]) -> str:
    """A failure's reason as the public queue shows it: one line, without the worker's paths (its
    own folders cut off, any other absolute path cut to its last name)."""
    line = f"{type(error).__name__}: {error}".splitlines()[0]
    for folder in folders:
        for form in sorted({str(folder), str(Path(folder).resolve())}, key=len, reverse=True):
            if os.path.isabs(form):
                line = line.replace(form + os.sep, "").replace(form, Path(form).name)
    return _FOLDERS_OF_A_PATH.sub("", line)


def worker_id() -> str:
    """Who holds a claim: this machine and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def submission_config(
    record: RequestRecord, responses: dict[str, str], dataset: str, judge_spec: ModelSpec
) -> RunConfig:
    upload = hashlib.sha256(json.dumps(responses, sort_keys=True).encode()).hexdigest()
    candidate = ModelSpec(name=record.model.name, backend=SUBMITTED_BACKEND, options={"upload": upload})
    return RunConfig(
        dataset=dataset,
        variant=record.model.variant,
        candidate=candidate,
        judge=judge_spec,
        question_ids=tuple(sorted(responses)) if record.partial else (),
        retry_errors=True,  # a try after a failed one asks again what the judge answered unreadably
    )


def evaluate(
    record: RequestRecord,
    responses: dict[str, str],
    dataset: str,
    judge_spec: ModelSpec,
    work: Path,
    out: Path,
    echo: Echo = print,
) -> None:
    """Judge one submission into ``out``; raises with the reason when it cannot be scored."""
    config = submission_config(record, responses, dataset, judge_spec)
    source = QuestionSource(config)
    with RunStore(work) as store:
        record_run(config, source, store)
        import_answers(config, source, store, responses)
        stage = judge(config, source, store, echo)
        results = score(store, work)
    if results.score.gamut is None:
        if stage.first_error:  # for the maintainer's log; the public reason does not name the endpoint
            echo(f"{record.key}: the judge's first error: {stage.first_error}")
        raise JudgeIncomplete(
            f"the judge left {results.judge_errors} checks unreadable and {results.unfinished_checks} unjudged"
        )
    # The result folder is the worker's own: a rerun replaces its files, each atomically, and leaves
    # anything a maintainer put beside them (a reader checks the tables against results.json, so a
    # crash between two files is refused, never read as a mix).
    with OwnedFolder(out, "worker", others_allowed=False, advice="move it away to let the worker write it") as owned:
        for name in (DETAILS_FILE, RESPONSES_FILE, RESULTS_FILE):
            shutil.copy2(work / name, owned.path(name))
        card = {
            **record.model.model_dump(mode="json"),
            "partial": record.partial,
            "submitted_by": record.submitted_by,
            "submitted_at": record.submitted_at.isoformat(),
            "request": record.key,
        }
        owned.write_text(CARD_FILE, json.dumps(card, indent=2) + "\n")


def publish_claim(queue: RequestQueue, record: RequestRecord, requests_hub: HubFolder, message: str) -> None:
    """Commit the request file on top of the commit last read; PushConflict when another commit came first."""
    requests_hub.push(queue.files(record.key)[:1], message, exclusive=True)


def claim_next(
    queue: RequestQueue,
    worker: str,
    *,
    lease: timedelta = LEASE,
    requests_hub: HubFolder | None = None,
    echo: Echo = print,
    now: datetime | None = None,
) -> RequestRecord | None:
    """Claim the oldest free request, visibly to every worker sharing the queue; None when none is free."""
    for _ in range(CLAIM_ATTEMPTS):
        if requests_hub is not None:
            requests_hub.pull()  # also puts the hub's copy back over a claim that lost its race
        before = {r.key: r for r in queue.records()}
        record = queue.claim(worker, lease=lease, now=now)
        if record is None or requests_hub is None:
            break
        try:
            publish_claim(queue, record, requests_hub, f"{record.key}: RUNNING ({worker})")
        except PushConflict:
            echo(f"{record.key}: the requests repo changed while claiming it; reading it again")
            continue
        except PushError:
            queue.release(record)  # not visible to other workers: leave it waiting, here too
            raise
        break
    else:
        return None
    if record is not None and before[record.key].status == "RUNNING":
        previous = before[record.key]
        echo(
            f"{record.key}: taking over from {previous.worker or 'a worker'}, silent since "
            f"{(previous.heartbeat or previous.updated_at):%Y-%m-%d %H:%M:%S} UTC"
        )
    return record


class Heartbeat(threading.Thread):
    """Renews a claim every third of the lease while it is judged (on the hub too, exclusively)."""

    def __init__(
        self, queue: RequestQueue, record: RequestRecord, lease: timedelta, requests_hub: HubFolder | None, echo: Echo
    ):
        super().__init__(daemon=True, name=f"heartbeat {record.key}")
        self.queue, self.record, self.requests_hub, self.echo = queue, record, requests_hub, echo
        self.interval = lease.total_seconds() / 3
        self.stopped = threading.Event()
        self.lost: ClaimLost | None = None

    def beat(self) -> None:
        for _ in range(CLAIM_ATTEMPTS):
            if self.requests_hub is not None:
                self.requests_hub.pull()  # another worker's takeover shows up here, as ClaimLost
            self.record = self.queue.renew(self.record)
            if self.requests_hub is None:
                return
            try:
                publish_claim(self.queue, self.record, self.requests_hub, f"{self.record.key}: heartbeat")
                return
            except PushConflict:
                continue

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.beat()
            except ClaimLost as error:
                self.lost = error
                self.echo(f"{error}; this worker's result will not be recorded")
                return
            except PushError as error:  # the hub is down: the next beat tries again
                self.echo(f"heartbeat of {self.record.key} not sent: {error}")

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def process_next(
    queue: RequestQueue,
    results: Path,
    work_root: Path,
    dataset: str,
    judge_spec: ModelSpec,
    echo: Echo = print,
    *,
    requests_hub: HubFolder | None = None,
    results_hub: HubFolder | None = None,
    worker: str | None = None,
    lease: timedelta = LEASE,
    retry_waits: Sequence[timedelta] = RETRY_WAITS,
    now: datetime | None = None,
) -> RequestRecord | None:
    """Handle the oldest request that is due (as of ``now``); None when there is none. With hub
    mirrors, every status change and the result folder are pushed as they happen."""
    worker = worker or worker_id()
    record = claim_next(queue, worker, lease=lease, requests_hub=requests_hub, echo=echo, now=now)
    if record is None:
        return None
    again = f", try {record.attempts + 1}" if record.attempts else ""
    echo(
        f"judging {record.model.name} ({record.model.variant}, {record.questions} answers{again}) "
        f"for {record.submitted_by}"
    )
    heartbeat = Heartbeat(queue, record, lease, requests_hub, echo)
    heartbeat.start()
    failure: tuple[str, Fault] | None = None
    try:
        responses = queue.responses(record.key, question_ids(dataset, record.model.variant), partial=record.partial)
        evaluate(record, responses, dataset, judge_spec, work_root / record.key, results / record.key, echo)
        heartbeat.stop()
        if heartbeat.lost is not None:
            return None
        if results_hub is not None:
            # The result files only: the folder's manifest is this machine's bookkeeping.
            published = [path for path in sorted((results / record.key).iterdir()) if not path.name.startswith(".")]
            results_hub.push(published, f"results of {record.key}")
    except Exception as error:  # noqa: BLE001 - every failure becomes the request's reason, never a crash
        heartbeat.stop()
        if heartbeat.lost is not None:
            return None
        failure = public_reason(error, (queue.folder, results, work_root)), fault_of(error)
    try:
        if failure is None:
            record = queue.finish(heartbeat.record, "FINISHED")
        else:
            record = queue.fail(heartbeat.record, *failure, waits=retry_waits, now=now)
    except ClaimLost as error:
        echo(f"{error}; this worker's result will not be recorded")
        return None
    echo(f"{record.status} {record.key}{f': {record.reason}' if record.reason else ''}")
    if requests_hub is not None:
        requests_hub.push(queue.files(record.key)[:1], f"{record.key}: {record.status}")
    return record


def put_back(
    queue: RequestQueue,
    keys: Sequence[str] = (),
    *,
    every_failed: bool = False,
    requests_hub: HubFolder | None = None,
    echo: Echo = print,
) -> list[RequestRecord]:
    """Return FAILED requests to the queue as PENDING, due now: ``keys`` whatever their fault,
    and with ``every_failed`` each one that was not the submission's fault. Says how many and
    which; RequeueRefused (nothing changed for that key) when a key is not FAILED or PENDING."""
    if requests_hub is not None:
        requests_hub.pull()
    back = {key: queue.requeue(key) for key in keys}
    if every_failed:
        back.update((record.key, record) for record in queue.retry_failed() if record.key not in back)
    names = ", ".join(f"{r.key} ({r.model.name}, {r.model.variant})" for r in back.values())
    echo(f"put back {len(back)} request{'' if len(back) == 1 else 's'} as PENDING{f': {names}' if names else ''}")
    if requests_hub is not None and back:
        try:
            requests_hub.push([path for key in back for path in queue.files(key)[:1]], f"put back {', '.join(back)}")
        except PushError as error:  # kept by HubFolder over pulls and sent with the next push
            echo(f"the requests put back are not on the hub yet ({error}); they go with the next push")
    return list(back.values())


def serve(
    queue: RequestQueue,
    results: Path,
    work_root: Path,
    dataset: str,
    judge_spec: ModelSpec,
    *,
    once: bool,
    poll: float,
    echo: Echo = print,
    requests_hub: HubFolder | None = None,
    results_hub: HubFolder | None = None,
    lease: timedelta = LEASE,
    retry_waits: Sequence[timedelta] = RETRY_WAITS,
) -> int:
    """Work through the queue; with ``once``, stop when nothing is due. Returns how many requests
    were handled (tried at least once)."""
    handled: set[str] = set()
    while True:
        record = process_next(
            queue,
            results,
            work_root,
            dataset,
            judge_spec,
            echo,
            requests_hub=requests_hub,
            results_hub=results_hub,
            lease=lease,
            retry_waits=retry_waits,
        )
        if record is not None:
            handled.add(record.key)
            continue
        if once:
            waiting = sorted(r.retry_after for r in queue.records() if r.status == "PENDING" and r.retry_after)
            if waiting:
                echo(
                    f"{len(waiting)} request{'' if len(waiting) == 1 else 's'} wait to be tried again, "
                    f"the first after {waiting[0].astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
                )
            return len(handled)
        time.sleep(poll)
