"""GAMUT from Python, on dataset rows exactly as ``datasets.load_dataset`` returns them.

Four functions, each the same rules as its command (docs/spec.md):

- :func:`compile_rubric`: a meta-rubric (a row, its ``meta_rubric`` column, a meta-rubric
  document or a :class:`~gamut_hf.core.rubric.MetaRubric`) -> its checks, as `gamut compile`;
- :func:`score_question`: checks (a row, its ``binary_rubric`` column, :class:`Check` objects)
  and a verdict per check -> the score, tiers and counts `gamut score` prints;
- :func:`judge_response`: a row and a response -> a verdict per check, through the project's
  backends with the prompt and parser of `gamut judge`;
- :func:`load_run`: a run folder -> its details and responses as pandas DataFrames, and its
  Gamut score (or why it has none).

Rows hold typed structs: each meta-rubric item carries every item type's payload fields, null
where a field does not belong to its type. A null field is read as an absent one, so rows load
as they are. ``import gamut_hf`` imports this module only when one of its names is used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gamut_hf.core.compiler import DEFAULT_COMPILE_PARAMS, CompileParams
from gamut_hf.core.compiler import compile_rubric as compile_meta_rubric
from gamut_hf.core.names import VARIANTS, Variant
from gamut_hf.core.rubric import Check, MetaRubric, Problem, RubricError, parse_checks, parse_meta_rubric
from gamut_hf.core.scorer import DEFAULT_SCORE_PARAMS, Outcome, QuestionScore, ScoreParams, ScoringError
from gamut_hf.core.scorer import score_question as score_checks
from gamut_hf.errors import shown
from gamut_hf.files import InputError

if TYPE_CHECKING:
    import pandas as pd
    from PIL import Image

    from gamut_hf.backends.base import Backend
    from gamut_hf.core.scorer import RunScore
    from gamut_hf.evaluation.run_folder import RunResults

# The judge `gamut judge` uses when none is named (the embedded default, on the CPU).
DEFAULT_JUDGE = "smollm2-135m"
DEFAULT_JUDGE_BACKEND = "transformers"
# Extra attempts at an unreadable verdict, as `gamut judge --judge-retries` by default.
DEFAULT_JUDGE_RETRIES = 2

__all__ = [
    "JudgedResponse",
    "RunOutputs",
    "compile_rubric",
    "judge_response",
    "load_run",
    "score_question",
]


# -- rows -> rubric types ----------------------------------------------------------------------


def _without_nulls(value: Any) -> Any:
    """A row's struct with its null fields dropped (a null field is an absent one), recursively."""
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(item) for item in value]
    return value


def _question_id(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value.strip() else None


def _meta_rubric(meta_rubric: Any, question_id: str | None) -> MetaRubric:
    """A MetaRubric from any of the forms :func:`compile_rubric` takes."""
    if isinstance(meta_rubric, MetaRubric):
        return meta_rubric
    if isinstance(meta_rubric, Mapping) and "meta_rubric" in meta_rubric:  # a dataset row or annotation line
        return _meta_rubric(meta_rubric["meta_rubric"], question_id or _question_id(meta_rubric, "id"))
    if isinstance(meta_rubric, Mapping) and "items" in meta_rubric:  # a meta-rubric document (JSON on disk)
        qid = question_id or _question_id(meta_rubric, "question_id") or "?"
        return parse_meta_rubric({**_without_nulls(meta_rubric), "question_id": qid}, question_id=qid)
    if isinstance(meta_rubric, list | tuple):  # a row's meta_rubric column: the items
        qid = question_id or "?"
        return parse_meta_rubric({"question_id": qid, "items": _without_nulls(meta_rubric)}, question_id=qid)
    raise RubricError(
        [
            Problem(
                question_id or "?",
                None,
                None,
                f"expected a meta-rubric (a dataset row, its meta_rubric list of items, a document with "
                f"items, or a MetaRubric), got {type(meta_rubric).__name__}",
            )
        ]
    )


def _is_item_list(entries: Sequence[Any]) -> bool:
    """A row's meta_rubric column (items have a type; checks have a kind)."""
    return bool(entries) and all(isinstance(e, Mapping) and "type" in e and "kind" not in e for e in entries)


def _checks(rubric: Any, params: CompileParams, question_id: str | None = None) -> list[Check]:
    """The checks to judge or score: the released binary rubric where one is given (SPEC: it is
    the authority; annotators may have edited it), else the meta-rubric compiled."""
    if isinstance(rubric, Mapping) and "binary_rubric" in rubric:  # a dataset row
        return _checks(rubric["binary_rubric"], params, question_id or _question_id(rubric, "id"))
    if isinstance(rubric, list | tuple) and rubric and all(isinstance(entry, Check) for entry in rubric):
        return list(rubric)
    if isinstance(rubric, list | tuple) and not _is_item_list(rubric):  # a row's binary_rubric column
        return parse_checks(_without_nulls(rubric), question_id=question_id or "?")
    return compile_meta_rubric(_meta_rubric(rubric, question_id), params)


# -- the public functions ----------------------------------------------------------------------


def compile_rubric(
    meta_rubric: Any, params: CompileParams = DEFAULT_COMPILE_PARAMS, *, question_id: str | None = None
) -> list[Check]:
    """The checks a meta-rubric compiles to, in compile order (as `gamut compile` prints them).

    ``meta_rubric`` is a dataset row (its ``meta_rubric`` is used), a row's ``meta_rubric``
    column (a list of items, with their null fields), a meta-rubric document
    ``{"question_id", "items"}`` or a :class:`~gamut_hf.core.rubric.MetaRubric`. An invalid
    rubric raises :class:`~gamut_hf.core.rubric.RubricError` naming question, item and field
    (``question_id`` names the question when the input has no id). Each check is a pydantic
    model; ``check.model_dump()`` is its dict, as in a row's ``binary_rubric``.

    >>> checks = compile_rubric(row["meta_rubric"])                      # doctest: +SKIP
    >>> [check.id for check in checks][:3]                               # doctest: +SKIP
    ['i1.fact', 'i2.step.1', 'i2.step.2']
    """
    return compile_meta_rubric(_meta_rubric(meta_rubric, question_id), params)


def score_question(
    rubric: Any,
    verdicts: Mapping[str, str],
    params: ScoreParams = DEFAULT_SCORE_PARAMS,
    *,
    errors_as_missing: bool = False,
    compile_params: CompileParams = DEFAULT_COMPILE_PARAMS,
) -> QuestionScore:
    """Score one response from a verdict per check: the numbers `gamut score` prints.

    ``rubric`` is a dataset row (its released ``binary_rubric`` is used), a row's
    ``binary_rubric`` column (a list of check dicts), a list of
    :class:`~gamut_hf.core.rubric.Check`, or a meta-rubric in any form :func:`compile_rubric`
    takes (compiled first, as `gamut score` does with a meta-rubric file). ``verdicts`` maps
    every check id to ``meets``, ``partially_meets``, ``missing`` or ``contradicts``; a
    :class:`JudgedResponse` is such a mapping. A verdict the judge could not read (``error``)
    is refused unless ``errors_as_missing``, which counts it as ``missing`` (``gamut score
    --errors-as-missing``). An unknown check id, an unknown verdict or a check without one
    raises :class:`~gamut_hf.core.scorer.ScoringError`.

    The result has ``.score`` (in [-1, 1]), ``.tiers`` (each tier's score, None for a tier
    without checks), ``.counts`` and ``.tier_counts`` (checks per verdict).

    >>> verdicts = {check["id"]: "meets" for check in row["binary_rubric"]}   # doctest: +SKIP
    >>> score_question(row, verdicts).score                                      # doctest: +SKIP
    1.0
    """
    if not isinstance(verdicts, Mapping):
        raise ScoringError(f"verdicts: expected a mapping of check id to verdict, got {type(verdicts).__name__}")
    checks = _checks(rubric, compile_params)
    errors = [check_id for check_id, verdict in verdicts.items() if verdict == "error"]
    if errors and not errors_as_missing:
        raise ScoringError(
            f"check {shown(errors[0])}: the judge's answer could not be read as a verdict ({len(errors)} such in "
            "all); judge it again, or pass errors_as_missing=True to count it as missing"
        )
    resolved = {check_id: "missing" if verdict == "error" else verdict for check_id, verdict in verdicts.items()}
    return score_checks(checks, resolved, params)  # type: ignore[arg-type]  # the core names a bad verdict


@dataclass(frozen=True)
class JudgedResponse(Mapping[str, Outcome]):
    """The judge's verdict on every check of one response, in check order.

    A mapping of check id -> ``meets``, ``partially_meets``, ``missing``, ``contradicts`` or
    ``error`` (the judge's answer could not be read as a verdict after the retries; its text is
    in ``raw``), so it goes straight into :func:`score_question`. ``rationales`` holds the
    judge's rationale per check when it was asked for one (``rationale=True``); ``probabilities``
    each verdict's probability per check, where the judge's backend gives them (transformers,
    vllm, a vLLM server with ``structured="vllm"``), else None.
    """

    question_id: str
    verdicts: dict[str, Outcome]
    rationales: dict[str, str | None]
    raw: dict[str, str]
    probabilities: dict[str, dict[str, float] | None] = field(default_factory=dict)

    def __getitem__(self, check_id: str) -> Outcome:
        return self.verdicts[check_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    @property
    def errors(self) -> list[str]:
        """The checks whose verdict could not be read."""
        return [check_id for check_id, verdict in self.verdicts.items() if verdict == "error"]


def _variant_of(variant: str | None, image: Any) -> Variant:
    """The variant asked for, else the row's: multimodal where there is an image."""
    if variant is None:
        return "multimodal" if image is not None else "text_only"
    if variant not in VARIANTS:
        raise InputError(f"variant: {variant!r} is not one of {', '.join(VARIANTS)}")
    return variant


def _row_text(row: Mapping[str, Any], field: str, question_id: str) -> str:
    value = row.get(field)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"question {shown(question_id)}: the row has no {field} text to ask the judge about")
    return value


def judge_response(
    row: Mapping[str, Any],
    response: str,
    judge: str | Backend = DEFAULT_JUDGE,
    backend: str = DEFAULT_JUDGE_BACKEND,
    *,
    variant: str | None = None,
    image: Image.Image | None = None,
    rationale: bool = False,
    retries: int = DEFAULT_JUDGE_RETRIES,
    **options: Any,
) -> JudgedResponse:
    """Judge ``response`` to the question of ``row`` on each of the row's checks, one check at a
    time: the prompt, verdict constraint, parser and retries of `gamut judge`.

    ``judge`` is a model name served by ``backend`` (``transformers``, ``vllm`` or ``openai``),
    started for this call with ``options`` (what ``--judge-option`` takes, and ``base_url`` for
    an OpenAI-compatible endpoint) and closed after it; or a backend already started
    (``gamut_hf.backends.load_backend(...)``), reused and left open, for many responses in a row.
    The variant is the row's: multimodal (the question, with the image) when the row has an
    image or ``image`` is given, else text-only (the named ``text_question``); ``variant``
    chooses. ``rationale``: the judge writes a short rationale before its verdict.

    A request the backend could not complete raises
    :class:`~gamut_hf.backends.base.BackendError`; an answer that is not a verdict after
    ``retries`` more attempts is recorded as ``error`` with its raw text, never guessed.

    >>> judged = judge_response(row, "Brush daily ...", "Qwen/Qwen3-VL-8B-Instruct",   # doctest: +SKIP
    ...                         "openai", base_url="http://127.0.0.1:8000/v1")
    >>> score_question(row, judged).score                                               # doctest: +SKIP
    0.41
    """
    from gamut_hf.backends import load_backend
    from gamut_hf.backends.base import Backend, BackendError
    from gamut_hf.evaluation.judge import judge_constraint, judge_request, parse_verdict
    from gamut_hf.evaluation.pipeline import complete_verdicts

    if not isinstance(row, Mapping):
        raise InputError(f"row: expected a dataset row (a dict), got {type(row).__name__}")
    question_id = _question_id(row, "id") or "?"
    if not isinstance(response, str):
        raise InputError(f"question {shown(question_id)}: the response must be text, got {type(response).__name__}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise InputError(f"retries: expected a whole number of at least 0, got {retries!r}")
    checks = _checks(row, DEFAULT_COMPILE_PARAMS, question_id)
    image = image if image is not None else row.get("image")
    chosen = _variant_of(variant, image)
    if chosen == "multimodal" and image is None:
        raise InputError(
            f"question {shown(question_id)}: the multimodal variant shows the judge the image; the row has "
            "none (pass image=..., or variant='text_only')"
        )
    prompt = _row_text(row, "question" if chosen == "multimodal" else "text_question", question_id)
    shown_image, shown_id = None, None
    if chosen == "multimodal" and image is not None:  # (None was refused above)
        from gamut_hf.backends.images import fit_to_budget
        from gamut_hf.backends.images import image_id as content_id
        from gamut_hf.evaluation.source import image_sha

        budget = (judge.options if isinstance(judge, Backend) else options).get("max_pixels")
        shown_image, shown_id = fit_to_budget(image, budget), content_id(image_sha(image), budget)
    # Every check of this response shares the prompt up to the check: one prefix for the backend to reuse.
    prefix = hashlib.sha256(f"{question_id}\0{chosen}\0{response}".encode()).hexdigest()
    requests = [
        replace(
            judge_request(prompt, shown_image, response, check, rationale=rationale),
            prefix_key=prefix,
            image_id=shown_id,
        )
        for check in checks
    ]
    if isinstance(judge, Backend):
        if options:
            raise InputError(
                f"options {', '.join(sorted(options))}: the judge given is already started; pass them to load_backend"
            )
        started, close = judge, False
    else:
        started, close = load_backend(backend, judge, **options), True
    try:
        outcomes = complete_verdicts(started, requests, judge_constraint(rationale), retries)
    finally:
        if close:
            started.close()
    verdicts: dict[str, Outcome] = {}
    rationales: dict[str, str | None] = {}
    raw: dict[str, str] = {}
    probabilities: dict[str, dict[str, float] | None] = {}
    for check, (completion, _) in zip(checks, outcomes, strict=True):
        if completion.error is not None:
            raise BackendError(f"judge {started.model}: check {check.id} of question {question_id}: {completion.error}")
        parsed = parse_verdict(completion.text)
        verdicts[check.id] = parsed.verdict or "error"
        rationales[check.id] = parsed.rationale
        raw[check.id] = completion.text
        probabilities[check.id] = completion.option_probabilities if parsed.verdict else None
    return JudgedResponse(question_id, verdicts, rationales, raw, probabilities)


@dataclass(frozen=True)
class RunOutputs:
    """A run folder's outputs, read and verified (``gamut_hf.evaluation.run_folder``).

    ``details``: details.parquet as a DataFrame, one row per check (question_id, domain,
    check_id, tier, kind, item_id, check_text, verdict, rationale, raw); ``responses``:
    responses.parquet (question_id, response, error, reasoning); ``results``: results.json.
    """

    folder: Path
    results: RunResults
    details: pd.DataFrame
    responses: pd.DataFrame

    @property
    def score(self) -> RunScore:
        """The run's figures: Gamut score, tier scores, verdict shares, counts."""
        return self.results.score

    @property
    def gamut(self) -> float | None:
        """The Gamut score, 0-100 (100 x the mean question score); None when the run has none:
        :attr:`why_no_gamut` says why."""
        return self.results.score.gamut

    @property
    def why_no_gamut(self) -> str | None:
        """Why the run has no Gamut score; None when it has one."""
        if self.gamut is not None:
            return None
        if self.results.score.questions == 0:
            return "the run has no questions"
        return (
            f"{self.results.judge_errors} judge errors and {self.results.unfinished_checks} unjudged checks; rerun "
            f"to finish, or `gamut score {self.folder} --errors-as-missing` to count them as missing"
        )


def load_run(folder: str | Path) -> RunOutputs:
    """Read a run folder (`gamut run`, `gamut judge`, `gamut merge` or a leaderboard result
    folder): its results.json and both tables, each verified against the size and digest
    results.json records. A folder that is not a run, or whose tables do not match, raises
    :class:`~gamut_hf.evaluation.run_folder.RunFolderError` naming the file.

    >>> run = load_run("runs/default")                                       # doctest: +SKIP
    >>> run.gamut if run.gamut is not None else run.why_no_gamut             # doctest: +SKIP
    12.3
    >>> run.details.groupby("tier")["verdict"].value_counts()                # doctest: +SKIP
    """
    from gamut_hf.evaluation.run_folder import DETAILS_FILE, RESPONSES_FILE, read_run_folder

    run = read_run_folder(folder)
    return RunOutputs(
        folder=run.folder,
        results=run.results,
        details=run.table(DETAILS_FILE).to_pandas(),
        responses=run.table(RESPONSES_FILE).to_pandas(),
    )
