"""The evaluation pipeline: generate an answer per question, judge every check, score.

Three stages over one run store (:mod:`gamut_hf.evaluation.store`):

1. **generate**: the candidate answers each question; fixed batches over the question list,
   each committed in one transaction, so a rerun after a crash redoes only unfinished batches
   and sees exactly the batches an uninterrupted run would have seen.
2. **judge**: every check of every answered question on its own (SPEC section 3), whole
   questions per backend call so a question's checks share their prompt prefix; an
   unreadable verdict is retried, then stored as ``error`` with the raw output.
3. **score**: from the store alone (SPEC section 4), writing the run folder's outputs
   (:mod:`gamut_hf.evaluation.run_folder`: results.json, details.parquet, responses.parquet).

Every row is keyed by a content hash of what determines it, so what is already stored is
recognised before any model is loaded: a finished run starts no engine at all.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import fmean
from typing import Any, cast

from tqdm.auto import tqdm

from gamut_hf.backends.base import Backend, ChatRequest, Completion
from gamut_hf.backends.images import fit_to_budget, image_id
from gamut_hf.core.rubric import Check
from gamut_hf.core.scorer import (
    DEFAULT_SCORE_PARAMS,
    Outcome,
    ScoreParams,
    expected_question_score,
    score_run,
    top_verdict_share,
)
from gamut_hf.dataset.features import DETAILS_FEATURES
from gamut_hf.evaluation.batches import answer_in_batches
from gamut_hf.evaluation.config import ModelSpec, RunConfig, check_batch, stored_config
from gamut_hf.evaluation.judge import (
    GENERATE_PROMPT_VERSION,
    JUDGE_PROMPT_VERSION,
    generate_request,
    judge_constraint,
    judge_request,
    parse_verdict,
)
from gamut_hf.evaluation.panel import MemberScore, PanelSummary, agreement, panel_fingerprint, panel_verdict
from gamut_hf.evaluation.prices import Price, given_prices, run_prices, stage_costs
from gamut_hf.evaluation.run_folder import (
    EscalationSummary,
    RunResults,
    StageReport,
    hold_run_folder,
    stored_stages,
    unclosed_line,
    write_outputs,
)
from gamut_hf.evaluation.source import PlannedQuestion, Questions, QuestionSource
from gamut_hf.evaluation.store import (
    RunStore,
    StoredGeneration,
    StoredVerdict,
    content_key,
)

# -- keys ------------------------------------------------------------------------------------


def generation_key(candidate: ModelSpec, question: PlannedQuestion, variant: str, max_tokens: int) -> str:
    return content_key(
        kind="generation",
        model=candidate.fingerprint(),
        prompt_version=GENERATE_PROMPT_VERSION,
        question_id=question.id,
        variant=variant,
        prompt=question.prompt,
        image=question.image_sha,
        max_tokens=max_tokens,
        temperature=0,
    )


def verdict_key(judge: ModelSpec, generation: StoredGeneration, check: Check, rationale: bool) -> str:
    return content_key(
        kind="verdict",
        judge=judge.fingerprint(),
        prompt_version=JUDGE_PROMPT_VERSION,
        rationale=rationale,
        generation=generation.key,
        response=hashlib.sha256(generation.response.encode()).hexdigest(),
        question_id=generation.question_id,
        check_id=check.id,
        check_text=check.text,
        temperature=0,
    )


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


Echo = Callable[[str], None]


# -- stage 1: generate -----------------------------------------------------------------------


def generate(config: RunConfig, source: Questions, store: RunStore, echo: Echo = print) -> StageReport:
    """Answer every selected question that has no stored answer yet."""
    report = StageReport(stage="generate")
    questions = source.questions
    keys = [generation_key(config.candidate, q, config.variant, config.max_tokens) for q in questions]
    stored = store.generations(keys)
    done = {k for k, g in stored.items() if g.error is None}
    report.done_before = len(done)
    if len(done) == len(keys):
        echo(report.line("answers"))
        _echo_unclosed(stored.values(), echo)
        return report
    backend = config.candidate.load()
    size = config.batch_size or backend.default_batch_size
    model = json.dumps(config.candidate.fingerprint(), sort_keys=True)
    by_key = dict(zip(keys, questions, strict=True))

    def request_for(key: str) -> ChatRequest:
        question = by_key[key]
        image, name = shown_image(source, question, config.candidate)
        return replace(generate_request(question.prompt, image, config.max_tokens), image_id=name)

    def store_answers(answers: Mapping[str, Completion], batch_id: str | None = None) -> None:
        store.add_generations(
            {
                "key": k,
                "question_id": by_key[k].id,
                "variant": config.variant,
                "model": model,
                "response": c.text,
                "error": c.error,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "seconds": c.seconds,
                # Kept apart: the judge reads the response only.
                "reasoning": c.reasoning,
                "reasoning_unclosed": c.reasoning_unclosed,
                "batch_id": batch_id,
            }
            for k, c in answers.items()
        )
        completions = list(answers.values())
        report.add(completions)
        report.failed += sum(c.error is not None for c in completions)
        report.done_now += sum(c.error is None for c in completions)
        bar.update(len(completions))

    def in_batch(answers: dict[str, Completion], batch_id: str | None, attempt: int) -> list[str]:
        store_answers(answers, batch_id)
        return []

    def asked_now(left: list[str]) -> None:
        store_answers(dict(zip(left, backend.complete([request_for(k) for k in left]), strict=True)))

    started = time.perf_counter()
    try:
        with tqdm(total=len(keys) - len(done), desc="generate", unit="answer", dynamic_ncols=True) as bar:
            todo_keys = [k for k in keys if k not in done]
            batched = answer_in_batches(
                backend, store, stage="generate", model=model, constraint=None, mode=config.batch, keys=todo_keys,
                request_for=request_for, store_answers=in_batch, sync=asked_now, echo=echo,
            )  # fmt: skip
            # Fixed batches over the whole list: a resumed run sees the batches an
            # uninterrupted one would (batched decoding is not invariant to batch makeup).
            for batch in _chunks(list(zip(questions, keys, strict=True)), size):
                todo = [k for _, k in batch if k not in done and k not in batched]
                if todo:
                    asked_now(todo)
    finally:
        report.seconds = time.perf_counter() - started
        backend.close()
    echo(report.line("answers"))
    _echo_unclosed(store.generations(keys).values(), echo)
    return report


def _echo_unclosed(generations: Iterable[StoredGeneration], echo: Echo) -> None:
    count = sum(g.error is None and g.reasoning_unclosed for g in generations)
    if count:
        echo(f"generate: {unclosed_line(count)}")


def import_answers(config: RunConfig, source: Questions, store: RunStore, responses: Mapping[str, str]) -> int:
    """Store given answers (a submission's) as the candidate's generations, under the keys the
    generate stage would use: the judge stage and scoring then treat them like any other answers."""
    fingerprint = json.dumps(config.candidate.fingerprint(), sort_keys=True)
    rows = [
        {
            "key": generation_key(config.candidate, q, config.variant, config.max_tokens),
            "question_id": q.id,
            "variant": config.variant,
            "model": fingerprint,
            "response": responses[q.id],
            "error": None,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "seconds": 0.0,
        }
        for q in source.questions
        if q.id in responses
    ]
    store.add_generations(rows)
    return len(rows)


# -- stage 2: judge --------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeJob:
    question: PlannedQuestion
    generation: StoredGeneration
    check: Check
    key: str


def _answered_checks(
    config: RunConfig, questions: Sequence[PlannedQuestion], store: RunStore
) -> tuple[dict[str, StoredGeneration], list[JudgeJob]]:
    """The stored answers (failed ones too) and a job, with its verdict key, for every check of
    every successfully answered question: what the judge stage works through and scoring reads."""
    generation_keys = {q.id: generation_key(config.candidate, q, config.variant, config.max_tokens) for q in questions}
    generations = store.generations(generation_keys.values())
    jobs: list[JudgeJob] = []
    for question in questions:
        generation = generations.get(generation_keys[question.id])
        if generation is not None and generation.error is None:
            jobs.extend(
                JudgeJob(question, generation, check, verdict_key(config.judge, generation, check, config.rationale))
                for check in question.checks
            )
    return generations, jobs


def _judge_jobs(
    config: RunConfig,
    questions: Sequence[PlannedQuestion],
    store: RunStore,
    only: Callable[[JudgeJob], bool] | None = None,
) -> tuple[list[JudgeJob], int, int]:
    """The checks still to judge, whole questions together, and how many are stored or unanswerable.
    ``only``: the checks to judge at all (an escalation's), the others are none of this judge's."""
    _, jobs = _answered_checks(config, questions, store)
    unanswered = sum(len(q.checks) for q in questions) - len(jobs)
    if only is not None:
        jobs = [job for job in jobs if only(job)]
    if config.retry_errors:
        store.forget_errors(job.key for job in jobs)
    stored = store.verdicts(job.key for job in jobs)
    return [job for job in jobs if job.key not in stored], len(stored), unanswered


def shown_image(source: Questions, question: PlannedQuestion, model: ModelSpec) -> tuple[Any, str | None]:
    """The question's photo as ``model`` is shown it (downscaled to its max_pixels) and its
    content id; (None, None) for the text_only variant."""
    image = source.image(question)
    if image is None:
        return None, None
    budget = model.options.get("max_pixels")
    return fit_to_budget(image, budget), image_id(question.image_sha, budget)


def _question_batches(jobs: Sequence[JudgeJob], size: int) -> Iterator[list[JudgeJob]]:
    """Batches of about ``size`` checks that never split a question."""
    batch: list[JudgeJob] = []
    for job in jobs:
        if len(batch) >= size and batch[-1].question.id != job.question.id:
            yield batch
            batch = []
        batch.append(job)
    if batch:
        yield batch


class SharedBackend:
    """A model's backend started at its first use and kept for every stage that shares it, until
    closed: the judge's audit and the run's judge stage in one process load the judge once (a
    30B judge is about 62 GB of weights and a minute or two of engine start)."""

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self._backend: Backend | None = None

    def get(self) -> Backend:
        if self._backend is None:
            self._backend = self.spec.load()
        return self._backend

    def close(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()


def judge(
    config: RunConfig,
    source: Questions,
    store: RunStore,
    echo: Echo = print,
    shared: SharedBackend | None = None,
    *,
    only: Callable[[JudgeJob], bool] | None = None,
    stage: str = "judge",
) -> StageReport:
    """Judge every check of every answered question that has no stored verdict yet (``only``:
    of these checks only). The judge is loaded only when there is something to judge, from
    ``shared`` where given (which the caller then closes), else for this stage alone."""
    report = StageReport(stage=stage)
    jobs, report.done_before, unanswered = _judge_jobs(config, source.questions, store, only)
    if unanswered and only is None:
        echo(f"judge: {unanswered} checks wait for an answer that is missing or failed (run generate again)")
    if not jobs:
        echo(report.line("checks"))
        return report
    if shared is not None and shared.spec.fingerprint() != config.judge.fingerprint():
        raise ValueError("the shared backend is not this run's judge")
    backend = (shared or SharedBackend(config.judge)).get()
    size = config.judge_batch_size or config.batch_size or backend.default_batch_size
    constraint = judge_constraint(config.rationale)
    judge_name = json.dumps(config.judge.fingerprint(), sort_keys=True)
    by_key = {job.key: job for job in jobs}
    shown: dict[str, tuple[Any, str | None]] = {}  # the photo of the question being asked

    def request_for(key: str) -> ChatRequest:
        job = by_key[key]
        if job.question.id not in shown:  # each question's photo fetched and downscaled once
            shown.clear()
            shown[job.question.id] = shown_image(source, job.question, config.judge)
        image, name = shown[job.question.id]
        request = judge_request(
            job.question.prompt, image, job.generation.response, job.check, rationale=config.rationale
        )
        return replace(request, prefix_key=job.generation.key, image_id=name)

    errors = 0

    def store_rows(rows: list[dict[str, Any]], failed: int) -> None:
        nonlocal errors
        for row in rows:
            row["judge"] = judge_name
        store.add_verdicts(rows)
        errors += sum(row["verdict"] == "error" for row in rows)
        report.failed += failed
        report.done_now += len(rows)
        bar.update(len(rows) + failed)

    def in_batch(answers: dict[str, Completion], batch_id: str | None, attempt: int) -> list[str]:
        """A batch's verdicts stored; those that cannot be read yet, asked again while retries last."""
        rows, again, failed = [], [], 0
        for key, completion in answers.items():
            report.add([completion])
            unreadable = completion.error is None and parse_verdict(completion.text).verdict is None
            if unreadable and attempt <= config.judge_retries:
                again.append(key)
            elif (row := _verdict_row(by_key[key], completion, attempt)) is None:
                failed += 1
            else:
                rows.append({**row, "batch_id": batch_id})
        store_rows(rows, failed)
        return again

    def asked_now(left: list[str]) -> None:
        batch = [by_key[key] for key in left]
        store_rows(
            *_judge_batch(backend, batch, [request_for(k) for k in left], constraint, config.judge_retries, report)
        )

    started = time.perf_counter()
    try:
        with tqdm(total=len(jobs), desc=stage, unit="check", dynamic_ncols=True) as bar:
            batched = answer_in_batches(
                backend, store, stage=stage, model=judge_name, constraint=constraint, mode=config.batch,
                keys=list(by_key), request_for=request_for, store_answers=in_batch, sync=asked_now, echo=echo,
            )  # fmt: skip
            for batch in _question_batches([job for job in jobs if job.key not in batched], size):
                asked_now([job.key for job in batch])
    finally:
        report.seconds = time.perf_counter() - started
        if shared is None:
            backend.close()
    echo(report.line("checks"))
    if errors:
        echo(
            f"judge: {errors} verdicts unreadable after {config.judge_retries} retries, stored as error "
            "(--retry-errors judges them again)"
        )
    return report


def member_config(config: RunConfig, position: int) -> RunConfig:
    """The run as one judge of its panel sees it: that judge alone."""
    return config.model_copy(update={"judge": config.judges[position], "panel": ()})


def is_unsure(verdict: StoredVerdict, below: float) -> bool:
    """Whether a stored verdict is one to escalate: unreadable, or its most probable verdict under ``below``."""
    if verdict.verdict == "error":
        return True
    share = top_verdict_share(verdict.probabilities) if verdict.probabilities is not None else None
    return share is not None and share < below


def escalated_jobs(config: RunConfig, questions: Sequence[PlannedQuestion], store: RunStore) -> dict[str, JudgeJob]:
    """The escalation judge's jobs, by the first judge's verdict key: every check the first judge
    answered unsure of (or could not answer); none without an escalation."""
    if config.escalation is None:
        return {}
    second = config.model_copy(update={"judge": config.escalation.judge})
    _, jobs = _answered_checks(config, questions, store)
    first = store.verdicts(job.key for job in jobs)
    return {
        job.key: replace(job, key=verdict_key(second.judge, job.generation, job.check, config.rationale))
        for job in jobs
        if job.key in first and is_unsure(first[job.key], config.escalation.below)
    }


def escalate(config: RunConfig, source: Questions, store: RunStore, echo: Echo = print) -> StageReport:
    """Ask the escalation judge the checks the first judge was unsure of (``--escalate-below``)."""
    assert config.escalation is not None
    wanted = {job.key for job in escalated_jobs(config, source.questions, store).values()}
    second = config.model_copy(update={"judge": config.escalation.judge})
    return judge(second, source, store, echo, only=lambda job: job.key in wanted, stage="escalate")


def complete_verdicts(
    backend: Backend,
    requests: Sequence[ChatRequest],
    constraint: Any,
    retries: int,
    report: StageReport | None = None,
) -> list[tuple[Completion, int]]:
    """Each judge request's last completion and the attempt (from 1) that gave it: an answer
    that cannot be read as a verdict is asked again, up to ``retries`` more times (the judge
    stage and :func:`gamut_hf.api.judge_response` share this rule)."""
    outcomes: dict[int, tuple[Completion, int]] = {}
    pending = list(range(len(requests)))
    for attempt in range(1, retries + 2):
        completions = backend.complete([requests[i] for i in pending], constraint)
        if report is not None:
            report.add(completions)
        still = []
        for i, completion in zip(pending, completions, strict=True):
            outcomes[i] = (completion, attempt)
            if completion.error is None and parse_verdict(completion.text).verdict is None:
                still.append(i)
        pending = still
        if not pending:
            break
    return [outcomes[i] for i in range(len(requests))]


def _judge_batch(
    backend: Backend, batch: Sequence[JudgeJob], requests: list[Any], constraint: Any, retries: int, report: StageReport
) -> tuple[list[dict[str, Any]], int]:
    """Judge a batch; unreadable answers are asked again up to ``retries`` times.

    Returns the rows to store and the number of requests that failed outright (transport
    errors after the backend's own retries): those are not stored, so a rerun asks again.
    """
    outcomes = complete_verdicts(backend, requests, constraint, retries, report)
    rows = [row for job, (c, attempts) in zip(batch, outcomes, strict=True) if (row := _verdict_row(job, c, attempts))]
    return rows, len(batch) - len(rows)


def _verdict_row(job: JudgeJob, completion: Completion, attempts: int) -> dict[str, Any] | None:
    """The verdict to store from a judge's last answer (an unreadable one as ``error``); None for a
    request that failed outright, which is not stored (a rerun asks again)."""
    if completion.error is not None:
        return None
    parsed = parse_verdict(completion.text)
    return {
        "key": job.key,
        "generation_key": job.generation.key,
        "question_id": job.question.id,
        "check_id": job.check.id,
        "verdict": parsed.verdict or "error",
        "rationale": parsed.rationale,
        "raw": completion.text,
        "attempts": attempts,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "cached_tokens": completion.cached_tokens,
        "seconds": completion.seconds,
        # Each verdict's probability where the judge's backend gives them (not for a rationale).
        "probabilities": completion.option_probabilities if parsed.verdict else None,
    }


# -- stage 3: score --------------------------------------------------------------------------


def _tokens(rows: Sequence[StoredGeneration | StoredVerdict]) -> dict[str, int]:
    """The calls and tokens of ``rows``."""
    return {
        "calls": len(rows),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in rows),
        "completion_tokens": sum(r.completion_tokens or 0 for r in rows),
        "cached_tokens": sum(getattr(r, "cached_tokens", 0) or 0 for r in rows),
    }


def _usage(rows: Sequence[StoredGeneration | StoredVerdict]) -> dict[str, float]:
    tokens = _tokens(rows)
    prompt, cached = tokens["prompt_tokens"], tokens["cached_tokens"]
    usage: dict[str, float] = {
        **tokens,
        "seconds": round(sum(r.seconds or 0.0 for r in rows), 3),
        "cached_share": round(cached / prompt, 4) if prompt else 0.0,
    }
    batched = [r for r in rows if r.batch_id is not None]
    if batched:  # answered in provider batches: priced at the batch rate
        usage.update({f"batched_{name}": value for name, value in _tokens(batched).items()})
    return usage


@dataclass
class PanelVerdicts:
    """A panel run's verdicts as scoring reads them: each check's panel verdict (a StoredVerdict
    of its own, under a key of the check's members' keys), and what each member said."""

    keys: dict[tuple[str, str], str]  # (question, check) -> the panel verdict's key in ``verdicts``
    verdicts: dict[str, StoredVerdict]  # checks every member has answered
    votes: dict[tuple[str, str], list[str]]  # each member's verdict ("error" unreadable), in panel order
    members: list[dict[tuple[str, str], Outcome]]  # each member's own outcomes, for its own score
    calls: list[list[StoredVerdict]]  # each member's stored verdicts: its usage and cost


def _panel_verdicts(config: RunConfig, questions: Sequence[PlannedQuestion], store: RunStore) -> PanelVerdicts:
    keyed = []
    for position in range(len(config.judges)):
        _, jobs = _answered_checks(member_config(config, position), questions, store)
        stored = store.verdicts(job.key for job in jobs)
        keyed.append({(job.question.id, job.check.id): stored.get(job.key) for job in jobs})
    panel = PanelVerdicts({}, {}, {}, [{} for _ in keyed], [[v for v in mine.values() if v] for mine in keyed])
    for check in keyed[0]:
        said = [mine.get(check) for mine in keyed]
        for own, verdict in zip(panel.members, said, strict=True):
            if verdict is not None:
                own[check] = cast(Outcome, verdict.verdict)
        if any(verdict is None for verdict in said):
            continue  # a member has not judged it yet: unfinished
        votes = [verdict.verdict for verdict in said if verdict is not None]
        key = content_key(kind="panel", members=[verdict.key for verdict in said if verdict is not None])
        first = said[0]
        assert first is not None
        panel.keys[check] = key
        panel.votes[check] = votes
        panel.verdicts[key] = replace(
            first, key=key, verdict=panel_verdict(cast(list[Outcome], votes)), rationale=None, raw=json.dumps(votes),
            probabilities=None,
        )  # fmt: skip
    return panel


def _panel_summary(
    config: RunConfig, panel: PanelVerdicts, questions: Sequence[PlannedQuestion], params: ScoreParams
) -> PanelSummary:
    """Each member's own score over the run's checks (unjudged ones block it, as in the run's
    score), and the members' agreement over the checks all of them could read."""
    members = []
    for spec, own in zip(config.judges, panel.members, strict=True):
        outcomes = [(q.checks, {c.id: own.get((q.id, c.id), "error") for c in q.checks}) for q in questions]
        members.append(
            MemberScore(
                judge=spec.fingerprint(),
                gamut=score_run(outcomes, params).gamut,
                errors=sum(v == "error" for v in own.values()),
                unfinished=sum(len(q.checks) for q in questions) - len(own),
            )
        )
    readable = [votes for votes in panel.votes.values() if "error" not in votes]
    alpha, pairs = agreement([f"{j.name} ({j.backend})" for j in config.judges], readable)
    return PanelSummary(members=members, checks=len(readable), krippendorff_alpha=alpha, pairwise_kappa=pairs)


def _expected_gamut(
    questions: Sequence[PlannedQuestion], scored: Mapping[tuple[str, str], StoredVerdict | None], params: ScoreParams
) -> float | None:
    """The Gamut score from each check's verdict probabilities; None unless every check has them."""
    given = {key: v.probabilities for key, v in scored.items() if v is not None and v.probabilities is not None}
    if not questions or len(given) < len(scored):
        return None
    return 100 * fmean(
        expected_question_score(q.checks, {c.id: given[q.id, c.id] for c in q.checks}, params) for q in questions
    )


def score(
    store: RunStore,
    out: str | Path,
    *,
    errors_as_missing: bool = False,
    params: ScoreParams = DEFAULT_SCORE_PARAMS,
    stages: Sequence[StageReport] | None = None,
) -> RunResults:
    """Score the run recorded in ``store`` from the store alone; write the run folder's outputs.

    ``stages``: what this invocation's stages did; None (a rescore, `gamut score RUN_DIR`) keeps
    the stages the folder's results.json already records (their timings and tokens)."""
    if stages is None:
        stages = stored_stages(out)
    config = stored_config(store)
    if config is None:
        from gamut_hf.files import InputError

        raise InputError(f"{store.path}: no run recorded here (run `gamut run` or `gamut generate` first)")
    info = store.info()
    questions = [PlannedQuestion.from_store(row, i) for i, row in enumerate(store.questions(config.variant))]
    selected = set(info.get("question_ids", [q.id for q in questions]))
    questions = [q for q in questions if q.id in selected]
    generations, jobs = _answered_checks(member_config(config, 0), questions, store)
    verdict_keys = {(job.question.id, job.check.id): job.key for job in jobs}
    verdicts = store.verdicts(verdict_keys.values())
    first_judge = list(verdicts.values())  # every call the first judge made, escalated checks too
    panel = _panel_verdicts(config, questions, store) if config.panel else None
    if panel is not None:  # each check's verdict is the panel's
        verdict_keys, verdicts = panel.keys, panel.verdicts
        first_judge = [verdict for calls in panel.calls for verdict in calls]
    # An escalated check's verdict is the second judge's (unfinished until it has answered).
    escalated = escalated_jobs(config, questions, store)
    second = store.verdicts(job.key for job in escalated.values())
    for first_key, job in escalated.items():
        verdict_keys[job.question.id, job.check.id] = job.key
        verdicts.pop(first_key, None)
        if job.key in second:
            verdicts[job.key] = second[job.key]
    second_keys = {job.key for job in escalated.values()}

    per_question: list[tuple[list[Check], dict[str, Outcome]]] = []
    details: list[dict[str, Any]] = []
    judge_errors = unfinished = 0
    for q in questions:
        outcomes: dict[str, Outcome] = {}
        for check in q.checks:
            stored = verdicts.get(verdict_keys.get((q.id, check.id), ""))
            if stored is None:
                unfinished += 1
            elif stored.verdict == "error":
                judge_errors += 1
            # Unfinished work blocks the score exactly as a judge error does.
            outcomes[check.id] = stored.verdict if stored is not None else "error"  # type: ignore[assignment]
            details.append(
                {
                    "question_id": q.id,
                    "domain": q.domain,
                    "check_id": check.id,
                    "tier": check.tier,
                    "kind": check.kind,
                    "item_id": check.item_id,
                    "check_text": check.text,
                    "verdict": stored.verdict if stored else None,
                    "rationale": stored.rationale if stored else None,
                    "raw": stored.raw if stored else None,
                    "verdict_probabilities": stored.probabilities if stored else None,
                    "escalated": verdict_keys.get((q.id, check.id)) in second_keys,
                    "panel_verdicts": panel.votes.get((q.id, check.id)) if panel is not None else None,
                }
            )
        per_question.append((q.checks, outcomes))
    run_score = score_run(per_question, params, errors_as_missing=errors_as_missing)
    scored = {
        key: verdicts.get(verdict_keys.get(key, "")) for key in ((q.id, c.id) for q in questions for c in q.checks)
    }
    usage = {"generation": _usage(list(generations.values())), "judge": _usage(first_judge)}
    if config.escalation is not None:
        usage["escalation"] = _usage(list(second.values()))
    for position, calls in enumerate(panel.calls if panel is not None else [], 1):
        usage[f"judge {position}"] = _usage(calls)  # each panel judge's own, priced at its own price
    by_question = {g.question_id: g for g in generations.values()}
    answered = [by_question[q.id] for q in questions if q.id in by_question]
    results = RunResults(
        model=config.candidate.fingerprint(),
        judge=panel_fingerprint([j.fingerprint() for j in config.judges])
        if config.panel
        else config.judge.fingerprint(),
        dataset={"source": config.dataset, "revision": config.revision, "fingerprint": info.get("dataset_fingerprint")},
        variant=config.variant,
        prompt_versions={"generate": GENERATE_PROMPT_VERSION, "judge": JUDGE_PROMPT_VERSION},
        score=run_score,
        score_params=params,
        judge_errors=judge_errors,
        unfinished_checks=unfinished,
        unclosed_reasoning=sum(g.error is None and g.reasoning_unclosed for g in answered),
        usage=usage,
        expected_gamut=_expected_gamut(questions, scored, params),
        escalation=None
        if config.escalation is None
        else EscalationSummary(
            judge=config.escalation.judge.fingerprint(),
            below=config.escalation.below,
            escalated=len(escalated),
            answered=len(second),
            checks=len(jobs),
        ),
        cost=stage_costs(
            run_prices(config, {}, info.get("prices")), usage, panel=len(config.panel) + 1 if panel else 0
        ),
        panel=_panel_summary(config, panel, questions, params) if panel is not None else None,
        stages=list(stages),
    )
    responses: dict[str, list[Any]] = {
        "question_id": [g.question_id for g in answered],
        "response": [g.response for g in answered],
        "error": [g.error for g in answered],
        "reasoning": [g.reasoning for g in answered],
    }
    return write_outputs(out, results, {name: [row[name] for row in details] for name in DETAILS_FEATURES}, responses)


def rescore(
    out: str | Path, *, errors_as_missing: bool = False, params: ScoreParams = DEFAULT_SCORE_PARAMS
) -> RunResults:
    """Score the run folder ``out`` again from its store (`gamut score RUN_DIR`)."""
    from gamut_hf.evaluation.store import has_store
    from gamut_hf.files import InputError

    if not has_store(out):
        raise InputError(f"{out}: no run store here (store.sqlite)")
    with hold_run_folder(out), RunStore(out) as store:
        return score(store, out, errors_as_missing=errors_as_missing, params=params)


# -- the whole run ---------------------------------------------------------------------------


def record_run(
    config: RunConfig, source: QuestionSource, store: RunStore, prices: dict[str, Price | None] | None = None
) -> None:
    """Put the run's questions and settings in the store, and the prices given (each with the model
    it is for, beside those given before): from then on it scores alone."""
    store.put_questions(q.stored(config.variant) for q in source.questions)
    store.set_info(
        config=config.model_dump(mode="json"),
        question_ids=[q.id for q in source.questions],
        dataset_fingerprint=source.data._fingerprint,
        prices={**store.info().get("prices", {}), **given_prices(prices or {}, config)},
    )


def run(
    config: RunConfig,
    out: str | Path,
    *,
    stages: Sequence[str] = ("generate", "judge", "score"),
    echo: Echo = print,
    before_judging: Callable[[SharedBackend], object] | None = None,
    prices: dict[str, Price | None] | None = None,
) -> tuple[RunResults | None, list[StageReport]]:
    """Generate, judge and score (or some of these) into the run folder ``out``: the results
    (None without the score stage) and what each stage did. ``before_judging`` runs after
    generation (its engine closed) with the judge that the judge stage then uses: the judge's
    audit (``gamut run --audit``), without a second load of the judge. ``prices``: the candidate's
    and the judge's given prices (``--model-price``, ``--judge-price``), kept for the run's cost."""
    check_batch(config, stages)  # before a model loads or the folder is touched
    source = QuestionSource(config)
    with hold_run_folder(out), RunStore(out) as store:
        record_run(config, source, store, prices)
        reports = []
        if "generate" in stages:
            reports.append(generate(config, source, store, echo))
        shared = SharedBackend(config.judge)
        try:
            if before_judging is not None:
                before_judging(shared)
            if "judge" in stages:
                reports.append(judge(member_config(config, 0), source, store, echo, shared))
        finally:
            shared.close()
        if "judge" in stages:
            # A panel's other judges, one engine at a time: each asked only what it has not judged.
            for position in range(1, len(config.judges)):
                reports.append(
                    judge(member_config(config, position), source, store, echo, stage=f"judge {position + 1}")
                )
        if "judge" in stages and config.escalation is not None:  # after the first judge's engine is closed
            reports.append(escalate(config, source, store, echo))
        if "score" in stages:
            return score(store, out, errors_as_missing=config.errors_as_missing, stages=reports), reports
    return None, reports
