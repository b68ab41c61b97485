"""GAMUT as an inspect_ai task: ``inspect eval gamut_hf/gamut --model M --model-role grader=J``.

The task is registered through the ``inspect_ai`` entry point of this package (pyproject.toml),
so inspect finds it once gamut-hf is installed with its ``inspect`` extra. One sample per
question: its id is the question id, its metadata the domain and the compiled checks.

Where inspect's defaults differ from GAMUT's rules, GAMUT's hold:

- The candidate and the grader decode greedily (temperature 0), as `gamut run` does; inspect
  would otherwise use each provider's default temperature.
- Every check is judged on its own by the ``grader`` model role with the project's own prompt,
  quoting, constraint and parser (:mod:`gamut_hf.evaluation.judge`, the same prompt version, so a
  verdict means what it means in `gamut judge`). An unreadable verdict is asked again, then kept
  as ``error`` with the raw text, never guessed. The grader never falls back to the model under
  test unless ``grader_fallback=true``.
- The candidate's reasoning never reaches the grader: only the answer is quoted.
- A question the model did not answer is scored, not dropped (``score_on_error``): its checks
  count as unresolved, like judge errors, and a run with any unresolved check reports no Gamut
  score (NaN) unless ``errors_as_missing=true``, which counts each of them as ``missing``.

Metrics: the Gamut score (100 x the mean question score) with its 95% bootstrap interval (the
reports' resampling), the tier scores and the share of each verdict. `gamut import-inspect`
turns the log into a run folder (:mod:`gamut_hf.integrations.inspect_log`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageSystem,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentText,
    GenerateConfig,
    Model,
    ResponseSchema,
    get_model,
)
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import JSONSchema
from pydantic import ValidationError

from gamut_hf.backends.base import ChatRequest, Choice, JsonSchema
from gamut_hf.backends.options import STRUCTURED_MODES
from gamut_hf.backends.reasoning import split_text
from gamut_hf.core.names import VARIANTS
from gamut_hf.core.rubric import TIERS, VERDICTS, Check, parse_checks
from gamut_hf.core.scorer import DEFAULT_SCORE_PARAMS, OUTCOMES, score_question
from gamut_hf.errors import GamutError, first_problem
from gamut_hf.evaluation.judge import (
    JUDGE_PROMPT_VERSION,
    generate_request,
    judge_constraint,
    judge_request,
    parse_verdict,
)
from gamut_hf.files import InputError

try:  # what inspect itself raises for a setup error: shown in one line, without a traceback
    from inspect_ai._util.error import PrerequisiteError
except ImportError:  # a private name: should inspect move it, the refusals still stop the eval

    class PrerequisiteError(RuntimeError):  # type: ignore[no-redef]
        pass


# The scorer's name in the log (and the key import-inspect reads its verdicts from).
SCORER_NAME = "gamut_grader"
GRADER_ROLE = "grader"


# -- the dataset ---------------------------------------------------------------------------------


def _question_ids(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """``-T question_ids=a,b`` arrives as one string; from Python, a list."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return tuple(str(part) for part in value)


def _user_content(request: ChatRequest) -> str | list[Content]:
    """A ChatRequest's user turn as inspect content: the image first (as the backends send it),
    as the same data URL the openai backend sends, then the text."""
    if request.image is None:
        return request.user
    from gamut_hf.backends.openai_backend import image_part_for

    data_url = image_part_for(request.image)["image_url"]["url"]
    return [ContentImage(image=data_url), ContentText(text=request.user)]


def judge_messages(request: ChatRequest, image: ContentImage | None) -> list[ChatMessage]:
    """A judge request as inspect messages, with the sample's own image content (the very image
    the candidate saw) where the variant shows one."""
    user: str | list[Content] = request.user if image is None else [image, ContentText(text=request.user)]
    return [ChatMessageSystem(content=request.system or ""), ChatMessageUser(content=user)]


def gamut_samples(
    dataset: str = "gamut-sample",
    variant: str = "text_only",
    *,
    revision: str | None = None,
    limit: int | None = None,
    question_ids: str | Sequence[str] | None = None,
    images: str | None = None,
    fetch_image_urls: bool = False,
) -> list[Sample]:
    """One sample per selected question, as `gamut run` selects them (the same RunConfig rules)."""
    from gamut_hf.evaluation.config import RunConfig
    from gamut_hf.evaluation.source import QuestionSource

    if variant not in VARIANTS:
        raise PrerequisiteError(f"gamut_hf/gamut: -T variant: expected one of {', '.join(VARIANTS)}, got {variant!r}")
    try:
        config = RunConfig(
            dataset=dataset,
            revision=revision,
            variant=variant,
            limit=limit,
            question_ids=_question_ids(question_ids),
            images=images,
            fetch_image_urls=fetch_image_urls,
        )
    except ValidationError as error:
        where, message = first_problem(error)
        raise PrerequisiteError(f"gamut_hf/gamut: -T {where}: {message}") from None
    try:
        source = QuestionSource(config)
    except (GamutError, InputError) as error:  # the user's to fix: one line, as inspect shows its own
        raise PrerequisiteError(f"gamut_hf/gamut: {error}") from None
    samples = []
    for question in source.questions:
        # max_tokens is the task's GenerateConfig, not the request's.
        request = generate_request(question.prompt, source.image(question), max_tokens=1)
        samples.append(
            Sample(
                id=question.id,
                input=[ChatMessageUser(content=_user_content(request))],
                metadata={
                    "domain": question.domain,
                    "prompt": question.prompt,
                    "variant": variant,
                    "image_sha": question.image_sha,
                    "checks": [check.model_dump(mode="json") for check in question.checks],
                },
            )
        )
    return samples


# -- the task ------------------------------------------------------------------------------------


@task
def gamut(
    dataset: str = "gamut-sample",
    variant: str = "text_only",
    revision: str | None = None,
    limit: int | None = None,
    question_ids: str | list[str] | None = None,
    images: str | None = None,
    fetch_image_urls: bool = False,
    max_tokens: int = 1024,
    rationale: bool = False,
    judge_retries: int = 2,
    structured: str = "json_schema",
    errors_as_missing: bool = False,
    grader_fallback: bool = False,
) -> Task:
    """GAMUT: factual completeness of long answers, graded check by check.

    Args:
        dataset: the sample (``gamut-sample``, the default), a built folder or a hub id.
        variant: ``text_only`` or ``multimodal`` (the image as inspect image content).
        revision: the dataset's hub revision.
        limit: the first N questions (after ``question_ids``).
        question_ids: these questions only (a comma-separated string or a list).
        images: where referenced images are (``crag-mm``, ``crag-mm=PATH`` or a folder).
        fetch_image_urls: download the CRAG-MM photos held only as an ``image_url``.
        max_tokens: the candidate's answer length cap.
        rationale: the grader writes a short rationale before each verdict.
        judge_retries: extra attempts at a verdict that cannot be read.
        structured: how the verdict constraint is sent: ``json_schema``, ``vllm`` or ``none``.
        errors_as_missing: score unreadable verdicts and unanswered questions as ``missing``.
        grader_fallback: let the model under test grade when no ``grader`` role is given.
    """
    if structured not in STRUCTURED_MODES:
        modes = ", ".join(STRUCTURED_MODES)
        raise PrerequisiteError(f"gamut_hf/gamut: -T structured: expected one of {modes}, got {structured!r}")
    if judge_retries < 0:
        raise PrerequisiteError(
            f"gamut_hf/gamut: -T judge_retries: expected a whole number of at least 0, got {judge_retries}"
        )
    samples = gamut_samples(
        dataset,
        variant,
        revision=revision,
        limit=limit,
        question_ids=question_ids,
        images=images,
        fetch_image_urls=fetch_image_urls,
    )
    return Task(
        dataset=MemoryDataset(samples, name=dataset),
        solver=answer(grader_fallback=grader_fallback),
        scorer=gamut_grader(
            rationale=rationale,
            judge_retries=judge_retries,
            structured=structured,
            errors_as_missing=errors_as_missing,
            grader_fallback=grader_fallback,
        ),
        config=GenerateConfig(temperature=0, max_tokens=max_tokens),
        # An unanswered question stays in the run (GAMUT scores every question); the log is
        # still marked as failed by inspect's fail_on_error rule, and eval-retry redoes it.
        score_on_error=True,
        version=JUDGE_PROMPT_VERSION,
    )


@solver
def answer(grader_fallback: bool = False) -> Solver:
    """The candidate answers the question once; its reasoning is kept apart from the answer.
    Without a grader nothing is asked of the candidate: the sample stops with the reason."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        _grader(grader_fallback)
        state = await generate(state)
        # The answer only: a reasoning the server did not separate (<think>...</think> in the
        # text) is split off here, as the backends do, and never shown to the grader.
        split = split_text(state.output.completion)
        state.metadata["answer"] = split.answer
        state.metadata["reasoning"] = split.reasoning or _reasoning_of(state) or None
        state.metadata["reasoning_unclosed"] = not split.closed
        return state

    return solve


def _reasoning_of(state: TaskState) -> str:
    from inspect_ai.model import ContentReasoning

    if not state.output.choices:
        return ""
    content = state.output.choices[0].message.content
    if isinstance(content, str):
        return ""
    return "\n".join(part.reasoning for part in content if isinstance(part, ContentReasoning)).strip()


# -- the metrics ---------------------------------------------------------------------------------


def _blocked(scores: list[SampleScore]) -> bool:
    """A run with an unresolved check anywhere has no Gamut score unless the task was asked to
    count unresolved checks as missing. (Not NaN sample values: inspect leaves those out of every
    metric, which is the dropping of unanswered questions that GAMUT forbids.)"""
    return any((s.score.metadata or {}).get("blocks_score") for s in scores)


def _question_scores(scores: list[SampleScore]) -> list[float]:
    return [float((s.score.metadata or {})["question_score"]) for s in scores]


@metric(name="gamut")
def gamut_score() -> Metric:
    """The Gamut score: 100 x the mean question score, in [-100, 100]; NaN while a check is unresolved."""

    def compute(scores: list[SampleScore]) -> float:
        if not scores or _blocked(scores):
            return math.nan
        values = _question_scores(scores)
        return 100 * sum(values) / len(values)

    return compute


@metric
def gamut_interval() -> Metric:
    """The Gamut score's 95% bootstrap interval over questions, drawn as `gamut report` draws it."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        if not scores or _blocked(scores):
            return {"low": math.nan, "high": math.nan}
        import numpy as np

        from gamut_hf.reports.statistics import Bootstrap

        (interval,) = Bootstrap().intervals([100 * np.asarray(_question_scores(scores))], np.mean)
        return {"low": interval.low, "high": interval.high}

    return compute


@metric
def tier_scores() -> Metric:
    """Each tier's score: 100 x its mean over the questions that have the tier."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        tiers: dict[str, float] = {}
        for tier in TIERS:
            values = [v for s in scores if (v := (s.score.metadata or {})["tiers"][tier]) is not None]
            tiers[tier] = math.nan if _blocked(scores) or not values else 100 * sum(values) / len(values)
        return tiers

    return compute


@metric
def verdict_shares() -> Metric:
    """The share of each outcome over all checks (``error``: unreadable, unjudged or unanswered)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        totals = {outcome: sum((s.score.metadata or {})["counts"][outcome] for s in scores) for outcome in OUTCOMES}
        checks = sum(totals.values())
        return {outcome: count / checks if checks else 0.0 for outcome, count in totals.items()}

    return compute


# -- the scorer ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgedCheck:
    """One check's outcome: a verdict, ``error`` (unreadable after the retries) or ``unjudged``
    (the grader could not be reached); ``raw`` is the grader's last output."""

    check_id: str
    tier: str
    verdict: str
    rationale: str | None
    raw: str | None
    attempts: int
    failure: str | None = None


def grader_config(request: ChatRequest, constraint: Choice | JsonSchema, structured: str) -> GenerateConfig:
    """Greedy, with the verdict constraint in the dialect the grader's server understands (as the
    openai backend sends it: a Choice becomes ``{"verdict": ...}`` under OpenAI's json_schema)."""
    max_tokens = request.max_tokens
    extra: dict[str, Any] = {}
    if structured == "vllm":
        rule = {"choice": list(constraint.options)} if isinstance(constraint, Choice) else {"json": constraint.schema}
        extra["extra_body"] = {"structured_outputs": rule}
    elif structured == "json_schema":
        if isinstance(constraint, Choice):
            from gamut_hf.backends.openai_backend import CHOICE_JSON_MIN_TOKENS, choice_schema

            constraint = JsonSchema(choice_schema(constraint.options), name="verdict")
            max_tokens = max(max_tokens, CHOICE_JSON_MIN_TOKENS)
        extra["response_schema"] = ResponseSchema(
            name=constraint.name, json_schema=JSONSchema.model_validate(constraint.schema), strict=True
        )
    return GenerateConfig(temperature=0, max_tokens=max_tokens, **extra)


async def judge_check(
    grader: Model, messages: list[ChatMessage], check: Check, config: GenerateConfig, retries: int
) -> JudgedCheck:
    """One check, asked again while the answer is not a verdict (the rule of
    :func:`gamut_hf.evaluation.pipeline.complete_verdicts`), at most ``retries`` more times."""
    for attempt in range(1, retries + 2):
        try:
            output = await grader.generate(messages, config=config)
        except Exception as error:  # noqa: BLE001 - the grader's failure is this check's outcome, not the run's
            # Unjudged, as a request `gamut judge` could not complete: it blocks the score.
            return JudgedCheck(
                check.id, check.tier, "unjudged", None, None, attempt, f"{type(error).__name__}: {error}"
            )
        parsed = parse_verdict(output.completion)
        if parsed.verdict is not None or attempt == retries + 1:
            return JudgedCheck(
                check.id, check.tier, parsed.verdict or "error", parsed.rationale, output.completion, attempt
            )
    raise AssertionError("unreachable: the last attempt returns")


def _grader(fallback: bool) -> Model:
    if fallback:
        return get_model(role=GRADER_ROLE)
    try:
        return get_model(role=GRADER_ROLE, required=True)
    except PrerequisiteError:
        raise PrerequisiteError(
            "gamut_hf/gamut: no grader: name one with --model-role grader=MODEL "
            "(or -T grader_fallback=true to let the model under test grade itself)"
        ) from None


@scorer(metrics=[gamut_score(), gamut_interval(), tier_scores(), verdict_shares()], name=SCORER_NAME)
def gamut_grader(
    rationale: bool = False,
    judge_retries: int = 2,
    structured: str = "json_schema",
    errors_as_missing: bool = False,
    grader_fallback: bool = False,
) -> Scorer:
    """Every check judged on its own by the ``grader`` role; the question's score, tiers, per-check
    verdicts and raw grader outputs in the score's metadata."""
    import anyio

    constraint = judge_constraint(rationale)

    async def score(state: TaskState, target: Target) -> Score:
        grader = _grader(grader_fallback)
        question_id = str(state.sample_id)
        checks = parse_checks(state.metadata["checks"], question_id=question_id)
        answered = bool(state.output.choices) and "answer" in state.metadata
        if not answered:
            judged = [JudgedCheck(c.id, c.tier, "unanswered", None, None, 0) for c in checks]
        else:
            image = _image_of(state)
            requests = [
                judge_request(state.metadata["prompt"], None, state.metadata["answer"], check, rationale=rationale)
                for check in checks
            ]
            outcomes: dict[int, JudgedCheck] = {}

            async def one(i: int) -> None:
                config = grader_config(requests[i], constraint, structured)
                messages = judge_messages(requests[i], image)
                outcomes[i] = await judge_check(grader, messages, checks[i], config, judge_retries)

            # A question's checks share their prompt prefix: sent together, a prefix cache reuses it.
            async with anyio.create_task_group() as group:
                for i in range(len(checks)):
                    group.start_soon(one, i)
            judged = [outcomes[i] for i in range(len(checks))]
        return question_score(checks, judged, answered=answered, errors_as_missing=errors_as_missing)

    return score


def _image_of(state: TaskState) -> ContentImage | None:
    content = state.input[0].content if isinstance(state.input, list) else None
    if isinstance(content, list):
        return next((part for part in content if isinstance(part, ContentImage)), None)
    return None


def question_score(
    checks: list[Check], judged: Sequence[JudgedCheck], *, answered: bool, errors_as_missing: bool
) -> Score:
    """The question's score (unresolved checks counted as missing; ``blocks_score`` tells the
    metrics that the run has no Gamut score) with everything a reader of the log needs."""
    resolved = {j.check_id: j.verdict if j.verdict in VERDICTS else "missing" for j in judged}
    result = score_question(checks, resolved, DEFAULT_SCORE_PARAMS)
    unresolved = sum(j.verdict not in VERDICTS for j in judged)
    counts = {outcome: sum(j.verdict == outcome for j in judged) for outcome in OUTCOMES}
    counts["error"] = unresolved
    return Score(
        # Unresolved checks count as missing in this number; the metrics withhold the run's score.
        value=result.score,
        answer=None,
        explanation=(
            f"{unresolved} of {len(checks)} checks unresolved "
            f"({'the question was not answered' if not answered else 'judge errors'})"
            if unresolved
            else None
        ),
        metadata={
            "question_score": result.score,
            "tiers": {tier: result.tiers[tier] for tier in TIERS},
            "counts": counts,
            "unresolved": unresolved,
            "blocks_score": unresolved > 0 and not errors_as_missing,
            "answered": answered,
            "judge_prompt_version": JUDGE_PROMPT_VERSION,
            "verdicts": [
                {
                    "check_id": j.check_id,
                    "tier": j.tier,
                    "verdict": j.verdict,
                    "rationale": j.rationale,
                    "raw": j.raw,
                    "attempts": j.attempts,
                    "failure": j.failure,
                }
                for j in judged
            ],
        },
    )
