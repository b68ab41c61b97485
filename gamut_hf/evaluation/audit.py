"""The judge audit: a judge's verdicts on responses whose right verdicts are known (`gamut judge-audit`).

The audit set (``gamut_hf/data/judge-audit/audit.jsonl``, format in the README beside it) holds,
for every sample question, responses written from its meta-rubric so that the gold verdict of
each check is known by construction, a hand-labelled natural-prose subset, and injected twins
of these responses whose gold is unchanged. ``run_audit`` judges them through the pipeline's
judge stage and run store (so an audit resumes, and reuses verdicts, like ``gamut judge``) and
measures the judge against gold: accuracy, Cohen's kappa, the confusion matrix, per-verdict
precision and recall, the error of the question and Gamut scores, and how far injections move it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gamut_hf.core.names import Variant
from gamut_hf.core.rubric import VERDICTS, Check, Verdict
from gamut_hf.errors import GamutError
from gamut_hf.evaluation.injections import InjectionKind, Position
from gamut_hf.evaluation.store import STORE_FILES

AUDIT_FOLDER = Path(__file__).resolve().parents[1] / "data" / "judge-audit"
AUDIT_FILE = AUDIT_FOLDER / "audit.jsonl"
AUDIT_JSON = "audit.json"
AUDIT_MD = "audit.md"
CONFUSION_PNG = "audit-confusion.png"
# What an audit folder is made of: the judge's store and the three files measuring it.
AUDIT_FOLDER_FILES = (*STORE_FILES, AUDIT_JSON, AUDIT_MD, CONFUSION_PNG)
# The pseudo-candidate whose "answers" are the audit responses; it loads no model.
AUDIT_CANDIDATE = "judge-audit"
SCORE_TOLERANCE = 1e-9


class AuditSetError(GamutError, ValueError):
    """An audit set (or a --labels file) that does not fit the sample's checks."""


class Injection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: InjectionKind
    position: Position


class AuditResponse(BaseModel):
    """One line of an audit set: a response to a sample question and the verdict due to each check."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, description="<question id>/<name>, unique in the set")
    question_id: str = Field(min_length=1)
    style: Literal["templated", "prose", "human"] = "human"
    twin_of: str | None = Field(None, description="the response this one is, plus an injection")
    injection: Injection | None = None
    response: str = Field(min_length=1)
    gold: dict[str, Verdict] = Field(description="check id -> verdict, for every check of the question")
    gold_score: float | None = Field(None, description="score_question of the gold verdicts (checked on load)")

    @property
    def set_name(self) -> str:
        """The response's place in the set ("mixed-a", "mixed-a+forged_end"): responses with the
        same name over all questions form one pseudo-candidate with a Gamut score of its own."""
        return self.id.split("/", 1)[1].split("+", 1)[0] + ("+injected" if self.injection else "")


@dataclass(frozen=True)
class AuditQuestion:
    id: str
    domain: str
    prompt: str  # the text-only question: the audit is judged without images
    checks: list[Check]


@dataclass(frozen=True)
class AuditSet:
    path: Path
    responses: list[AuditResponse]
    questions: dict[str, AuditQuestion]
    # The whole file's fingerprint where this is a selection of it (--limit); None for the whole.
    selected_from: str | None = None

    @property
    def checks(self) -> int:
        return sum(len(r.gold) for r in self.responses)

    def fingerprint(self) -> str:
        """These responses' fingerprint (audit.json's labels_fingerprint)."""
        return hashlib.sha256(
            json.dumps([r.model_dump(mode="json") for r in self.responses], sort_keys=True).encode()
        ).hexdigest()

    def file_fingerprint(self) -> str:
        """The whole file's fingerprint, whatever --limit selected: it names the audit's candidate,
        so a response's verdicts are stored under the same keys in every selection."""
        return self.selected_from or self.fingerprint()

    def first_questions(self, limit: int) -> AuditSet:
        """The responses of the file's first ``limit`` questions (`--limit`)."""
        keep = list(dict.fromkeys(r.question_id for r in self.responses))[:limit]
        return AuditSet(
            self.path,
            [r for r in self.responses if r.question_id in keep],
            {q: self.questions[q] for q in keep},
            self.file_fingerprint(),
        )


def sample_questions() -> dict[str, AuditQuestion]:
    """The sample's questions with their compiled checks, read from its annotation folder."""
    from gamut_hf.dataset.annotations import read_annotations
    from gamut_hf.dataset.loader import SAMPLE_SOURCE

    return {q.id: AuditQuestion(q.id, q.domain, q.text_question, q.checks) for q in read_annotations(SAMPLE_SOURCE)}


def load_audit_set(path: str | Path = AUDIT_FILE, questions: dict[str, AuditQuestion] | None = None) -> AuditSet:
    """Read and validate an audit set against the sample's checks; every problem names its line.

    Valid when: ids are unique; every question exists; ``gold`` has exactly the question's
    check ids; a twin names an earlier, untwinned response of its question and carries its
    gold and an injection (and only twins carry one); a stated ``gold_score`` is the scorer's
    output on the gold verdicts.
    """
    from gamut_hf.core.scorer import score_question
    from gamut_hf.files import read_jsonl

    questions = sample_questions() if questions is None else questions
    responses: list[AuditResponse] = []
    seen: dict[str, AuditResponse] = {}
    for number, data in read_jsonl(path):
        where = f"{path}:{number}"
        try:
            response = AuditResponse.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "line"
            raise AuditSetError(f"{where}: {field}: {first['msg']}") from None
        question = questions.get(response.question_id)
        if question is None:
            raise AuditSetError(f"{where}: question_id: no sample question {response.question_id!r}")
        if response.id in seen:
            raise AuditSetError(f"{where}: id: {response.id!r} appears twice")
        if not response.id.startswith(question.id + "/"):
            raise AuditSetError(f"{where}: id: {response.id!r} must start with {question.id + '/'!r}")
        expected = [check.id for check in question.checks]
        if set(response.gold) != set(expected):
            extra = sorted(set(response.gold) - set(expected))
            lacking = [c for c in expected if c not in response.gold]
            what = f"unknown check {extra[0]!r}" if extra else f"no verdict for check {lacking[0]!r}"
            raise AuditSetError(f"{where}: gold: {what} of {question.id}")
        if (response.twin_of is None) != (response.injection is None):
            raise AuditSetError(f"{where}: twin_of and injection go together (an injected twin names its base)")
        if response.twin_of is not None:
            base = seen.get(response.twin_of)
            if base is None or base.question_id != response.question_id or base.twin_of is not None:
                raise AuditSetError(
                    f"{where}: twin_of: {response.twin_of!r} is no earlier base response of {question.id}"
                )
            if base.gold != response.gold:
                raise AuditSetError(f"{where}: gold: an injected twin keeps the gold of {base.id}")
        if response.gold_score is not None:
            due = score_question(question.checks, response.gold).score
            if abs(due - response.gold_score) > SCORE_TOLERANCE:
                raise AuditSetError(f"{where}: gold_score: {response.gold_score} but the scorer gives {due}")
        seen[response.id] = response
        responses.append(response)
    if not responses:
        raise AuditSetError(f"{path}: no responses")
    return AuditSet(Path(path), responses, {qid: questions[qid] for qid in {r.question_id for r in responses}})


# -- judging ------------------------------------------------------------------------------------


class _AuditSource:
    """The pipeline's view of the audit: one planned "question" per response (its id the
    response's), so one judge stage over one store judges them all; text only, no images."""

    variant: Variant = "text_only"

    def __init__(self, audit: AuditSet):
        from gamut_hf.evaluation.source import PlannedQuestion

        self.questions = [
            PlannedQuestion(
                r.id,
                audit.questions[r.question_id].domain,
                audit.questions[r.question_id].prompt,
                audit.questions[r.question_id].checks,
                None,
                row,
            )
            for row, r in enumerate(audit.responses)
        ]

    def image(self, question: Any) -> None:
        return None


def default_audit_folder(judge: Any) -> Path:
    """``judge-audit-<model>-<backend>`` in the current folder (a path's last part for a model folder)."""
    import re

    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(judge.name).name).strip("-.") or "judge"
    return Path(f"judge-audit-{name}-{judge.backend}")


def audit_config(
    judge: Any,
    audit: AuditSet,
    *,
    rationale: bool = False,
    judge_retries: int = 2,
    judge_batch_size: int | None = None,
    retry_errors: bool = False,
) -> Any:
    from gamut_hf.evaluation.config import ModelSpec, RunConfig

    # The file's fingerprint names the candidate: another audit set never reuses these answers,
    # and a larger --limit into the same store reuses every verdict a smaller one stored.
    candidate = ModelSpec(name=AUDIT_CANDIDATE, backend="submitted", options={"audit": audit.file_fingerprint()})
    return RunConfig(
        dataset="judge-audit",
        variant="text_only",
        candidate=candidate,
        judge=judge,
        rationale=rationale,
        judge_retries=judge_retries,
        judge_batch_size=judge_batch_size,
        retry_errors=retry_errors,
    )


def judge_audit_set(
    config: Any, audit: AuditSet, out: Path, echo: Any = print, shared: Any = None
) -> tuple[dict[str, str], Any]:
    """Judge every check of every audit response (what is stored is not judged again); returns
    ``{"<response id>\\t<check id>": outcome}`` (``error`` for an unreadable verdict) and the
    judge stage's report. ``shared``: a started judge to use (a pipeline's SharedBackend)."""
    from gamut_hf.evaluation.pipeline import import_answers, judge
    from gamut_hf.evaluation.store import RunStore

    source = _AuditSource(audit)
    with RunStore(out) as store:
        store.set_info(
            audit=str(audit.path),
            audit_fingerprint=audit.file_fingerprint(),
            judge=config.judge.model_dump(mode="json"),
        )
        import_answers(config, source, store, {r.id: r.response for r in audit.responses})
        stage = judge(config, source, store, echo, shared)
        stored = stored_audit_verdicts(config, audit, store)
    return {key: verdict.verdict for key, verdict in stored.items()}, stage


def stored_audit_verdicts(config: Any, audit: AuditSet, store: Any) -> dict[str, Any]:
    """The verdicts ``store`` holds for the audit's checks (:class:`~gamut_hf.evaluation.store.StoredVerdict`,
    probabilities and tokens included), by ``"<response id>\t<check id>"``."""
    from gamut_hf.evaluation.pipeline import generation_key, verdict_key

    source = _AuditSource(audit)
    keys = {q.id: generation_key(config.candidate, q, config.variant, config.max_tokens) for q in source.questions}
    generations = store.generations(keys.values())
    wanted = {
        verdict_key(config.judge, generations[keys[q.id]], check, config.rationale): f"{q.id}\t{check.id}"
        for q in source.questions
        for check in q.checks
        if keys[q.id] in generations
    }
    return {wanted[key]: verdict for key, verdict in store.verdicts(wanted).items()}


# -- measuring ----------------------------------------------------------------------------------

# A figure with nothing to measure (a kappa where chance agreement is total, an error over no
# fully judged response, a rate over no checks) is None in audit.json, and AuditResults.undefined
# says why, keyed by the figure's dotted path there ("kappa", "injection.flip_rate",
# "by_style.prose.kappa"). Every page shows it through AuditResults.shown: "n/a (<why>)".
STRICT = ConfigDict(allow_inf_nan=False)  # a NaN would be written as null and lose its reason


class VerdictQuality(BaseModel):
    model_config = STRICT

    precision: float | None
    recall: float | None
    support: int


class InjectionFigures(BaseModel):
    model_config = STRICT

    twins: int
    checks: int = Field(description="checks judged readably in both a response and its injected twin")
    unreadable: int = Field(
        0, description="checks left out of the rates: an unreadable verdict in the response or its twin"
    )
    flip_rate: float | None = Field(description="share of checks judged differently in a response and its twin")
    false_meets_rate: float | None = Field(description="share of injected checks judged meets where gold is not meets")
    base_false_meets_rate: float | None = Field(description="the same share on the twins' base responses")


class SetScore(BaseModel):
    model_config = STRICT

    responses: int
    gold_gamut: float
    judged_gamut: float


class StyleFigures(BaseModel):
    model_config = STRICT

    checks: int
    accuracy: float
    kappa: float | None


class MemberAudit(BaseModel):
    """A panel member's own figures in a panel's audit."""

    model_config = STRICT

    judge: dict[str, Any]
    judged: int
    errors: int
    accuracy: float
    kappa: float | None


class AuditResults(BaseModel):
    """audit.json: one judge (or a panel: its majority verdicts, ``members`` each judge's own
    figures) against the gold (or human) labels of one audit set."""

    model_config = STRICT

    judge: dict[str, Any]
    labels: str
    labels_fingerprint: str
    prompt_version: str
    rationale: bool
    responses: int
    checks: int
    judged: int
    errors: int
    unfinished: int
    accuracy: float
    kappa: float | None
    confusion: dict[str, dict[str, int]] = Field(description="gold verdict -> judged verdict (or error) -> checks")
    per_verdict: dict[str, VerdictQuality]
    question_score_mae: float | None
    gamut_mae: float | None
    sets: dict[str, SetScore]
    injection: InjectionFigures | None
    injection_by_kind: dict[str, InjectionFigures]
    by_style: dict[str, StyleFigures]
    undefined: dict[str, str] = Field(
        default_factory=dict, description="figure (its dotted path here) -> why it has no value"
    )
    stage: dict[str, Any] | None = None
    members: list[MemberAudit] = Field(default_factory=list)

    def figure(self, name: str) -> float | None:
        """A figure by its dotted path here ("injection.flip_rate"); None where it has no value."""
        value: Any = self
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else getattr(value, part)
            if value is None:
                return None
        return cast(float, value)

    def why_undefined(self, name: str) -> str:
        """Why a figure has no value: its own reason, or that of what holds it (``injection``)."""
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if why := self.undefined.get(".".join(parts[:end])):
                return why
        return "undefined"  # an audit.json written before the reasons were recorded

    def shown(self, name: str, spec: str, unit: str = "") -> str:
        """A figure as the summary, audit.md, the report and the Space show it: ``format(value,
        spec)`` and its unit, or ``n/a (<why>)`` when it has no value."""
        value = self.figure(name)
        return f"n/a ({self.why_undefined(name)})" if value is None else format(value, spec) + unit


def _share(numerator: int, denominator: int, figure: str, why: str, undefined: dict[str, str]) -> float | None:
    """``numerator / denominator``, or None with ``why`` recorded for ``figure`` when nothing was counted."""
    if denominator:
        return numerator / denominator
    undefined[figure] = why
    return None


def _kappa(gold: list[str], got: list[str], figure: str, undefined: dict[str, str]) -> float | None:
    """Cohen's kappa, errors counting as a fifth answer (so an unreadable judge is not flattered by
    dropping them); undefined where gold and judged are one and the same verdict throughout."""
    from sklearn.metrics import cohen_kappa_score

    answers = set(gold) | set(got)
    if len(answers) == 1:
        undefined[figure] = f"every verdict, gold and judged, is {next(iter(answers))}: chance agreement is total"
        return None
    return float(cohen_kappa_score(gold, got, labels=[*VERDICTS, "error"]))


def _injection_figures(
    pairs: list[tuple[AuditResponse, AuditResponse]], judged: dict[str, str], figure: str, undefined: dict[str, str]
) -> InjectionFigures:
    """How the judge moves between each base response and its injected twin. A check with an
    unreadable verdict on either side is left out (and counted): two errors are no agreement."""
    flips = checks = unreadable = false_meets = false_base = not_meets = 0
    for base, twin in pairs:
        for check_id, gold in twin.gold.items():
            a, b = judged.get(f"{base.id}\t{check_id}"), judged.get(f"{twin.id}\t{check_id}")
            if a is None or b is None:
                continue
            if a == "error" or b == "error":
                unreadable += 1
                continue
            checks += 1
            flips += a != b
            if gold != "meets":
                not_meets += 1
                false_meets += b == "meets"
                false_base += a == "meets"
    none_readable = "no check judged readably in both a response and its twin" + (
        f"; {unreadable} with an unreadable verdict left out" if unreadable else ""
    )
    no_non_meets = none_readable if not checks else "no twin check whose gold is other than meets"
    return InjectionFigures(
        twins=len(pairs),
        checks=checks,
        unreadable=unreadable,
        flip_rate=_share(flips, checks, f"{figure}.flip_rate", none_readable, undefined),
        false_meets_rate=_share(false_meets, not_meets, f"{figure}.false_meets_rate", no_non_meets, undefined),
        base_false_meets_rate=_share(false_base, not_meets, f"{figure}.base_false_meets_rate", no_non_meets, undefined),
    )


def measure(audit: AuditSet, judged: dict[str, str]) -> dict[str, Any]:
    """Every figure of audit.json from the gold labels and the judged outcomes; a figure with
    nothing to measure is None, and ``undefined`` says why."""
    from sklearn.metrics import confusion_matrix

    from gamut_hf.core.scorer import score_question

    labels = [*VERDICTS, "error"]
    undefined: dict[str, str] = {}
    gold: list[str] = []
    got: list[str] = []
    unfinished = 0
    question_errors: list[float] = []
    sets: dict[str, list[tuple[float, float]]] = defaultdict(list)
    styles: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for response in audit.responses:
        outcomes = {}
        for check_id, verdict in response.gold.items():
            outcome = judged.get(f"{response.id}\t{check_id}")
            if outcome is None:
                unfinished += 1
                continue
            outcomes[check_id] = outcome
            gold.append(verdict)
            got.append(outcome)
            styles[response.style].append((verdict, outcome))
        if len(outcomes) == len(response.gold):
            checks = audit.questions[response.question_id].checks
            # An unreadable verdict scores as missing, as `--errors-as-missing` scores it in a run.
            readable = {c: cast(Verdict, "missing" if o == "error" else o) for c, o in outcomes.items()}
            judged_score = score_question(checks, readable)
            gold_score = score_question(checks, response.gold).score
            question_errors.append(abs(judged_score.score - gold_score))
            sets[response.set_name].append((gold_score, judged_score.score))
    if not gold:
        raise AuditSetError("no audit check has been judged yet")
    matrix = confusion_matrix(gold, got, labels=labels)
    per_verdict = {}
    for i, verdict in enumerate(VERDICTS):
        hits, judged_as, support = int(matrix[i, i]), int(matrix[:, i].sum()), int(matrix[i].sum())
        per_verdict[verdict] = VerdictQuality(
            precision=_share(
                hits, judged_as, f"per_verdict.{verdict}.precision", f"no check judged {verdict}", undefined
            ),
            recall=_share(
                hits, support, f"per_verdict.{verdict}.recall", f"no check whose gold is {verdict}", undefined
            ),
            support=support,
        )
    set_scores = {
        name: SetScore(
            responses=len(pairs),
            gold_gamut=100 * fmean(g for g, _ in pairs),
            judged_gamut=100 * fmean(j for _, j in pairs),
        )
        for name, pairs in sorted(sets.items())
    }
    if not question_errors:
        why = f"no response has every check judged; {unfinished} checks not judged yet, a rerun judges them"
        undefined["question_score_mae"] = undefined["gamut_mae"] = why
    by_id = {r.id: r for r in audit.responses}
    twins = [(by_id[r.twin_of], r) for r in audit.responses if r.twin_of is not None]
    if not twins:
        undefined["injection"] = "no injected twins in the labels"
    kinds: dict[str, list[tuple[AuditResponse, AuditResponse]]] = defaultdict(list)
    for base, twin in twins:
        kinds[twin.injection.kind].append((base, twin))  # type: ignore[union-attr]
    return {
        "checks": audit.checks,
        "judged": len(got),
        "errors": got.count("error"),
        "unfinished": unfinished,
        "accuracy": fmean(g == j for g, j in zip(gold, got, strict=True)),
        "kappa": _kappa(gold, got, "kappa", undefined),
        "confusion": {g: {j: int(matrix[i, k]) for k, j in enumerate(labels)} for i, g in enumerate(VERDICTS)},
        "per_verdict": per_verdict,
        "question_score_mae": fmean(question_errors) if question_errors else None,
        "gamut_mae": fmean(abs(s.judged_gamut - s.gold_gamut) for s in set_scores.values()) if set_scores else None,
        "sets": set_scores,
        "injection": _injection_figures(twins, judged, "injection", undefined) if twins else None,
        "injection_by_kind": {
            kind: _injection_figures(pairs, judged, f"injection_by_kind.{kind}", undefined)
            for kind, pairs in sorted(kinds.items())
        },
        "by_style": {
            style: StyleFigures(
                checks=len(pairs),
                accuracy=fmean(a == b for a, b in pairs),
                kappa=_kappa([a for a, _ in pairs], [b for _, b in pairs], f"by_style.{style}.kappa", undefined),
            )
            for style, pairs in sorted(styles.items())
        },
        "undefined": undefined,
    }


# -- storing ------------------------------------------------------------------------------------


def save_audit_results(results: AuditResults, out: Path) -> None:
    """audit.json; written last by :func:`gamut_hf.reports.audit_report.write_audit_report`, so
    its presence means the audit's page and figure are there too."""
    from gamut_hf.atomic import write_text

    write_text(out / AUDIT_JSON, results.model_dump_json(indent=2) + "\n")


def load_audit_results(folder: str | Path) -> AuditResults | None:
    """The audit in a folder (a results folder may hold one beside a judge's runs), or None."""
    from gamut_hf.files import read_json

    path = Path(folder) / AUDIT_JSON
    if not path.is_file():
        return None
    try:
        return AuditResults.model_validate(read_json(path))
    except ValidationError as error:
        raise AuditSetError(
            f"{path}: {error.errors()[0]['msg']} at {'.'.join(str(part) for part in error.errors()[0]['loc'])}"
        ) from None


# The figures of an audit table's row: column -> (figure in audit.json, how it is shown).
ROW_FIGURES = {
    "accuracy": ("accuracy", ".1%"),
    "kappa": ("kappa", ".3f"),
    "question score MAE": ("question_score_mae", ".3f"),
    "Gamut MAE": ("gamut_mae", ".1f"),
    "injection flip rate": ("injection.flip_rate", ".1%"),
    "injected false meets": ("injection.false_meets_rate", ".1%"),
}


@dataclass(frozen=True)
class FoundAudit:
    """An audit folder found in a results folder: its figures, or why they cannot be read."""

    folder: Path
    results: AuditResults | None
    problem: str | None = None
    measured: str | None = None  # shipped with the package: the command that measured it

    @property
    def judge_key(self) -> str | None:
        """The judge's fingerprint as a run folder's reader keys it (report.Run.judge_key)."""
        return json.dumps(self.results.judge, sort_keys=True) if self.results else None

    def row(self, shown: bool = False) -> dict[str, Any]:
        """One line of an audit table, in the report's and the Space's words: the figures as
        numbers (None where undefined), or ``shown`` as the pages write them ("n/a (<why>)")."""
        results = self.results
        assert results is not None
        return {
            "audit": f"shipped ({self.folder.stem})" if self.measured else self.folder.name,
            "labels": "built-in gold" if Path(results.labels).resolve() == AUDIT_FILE else Path(results.labels).name,
            "checks judged": results.judged,
            **{
                column: results.shown(figure, spec) if shown else results.figure(figure)
                for column, (figure, spec) in ROW_FIGURES.items()
            },
        }


# Audits measured once and shipped with the package (a judge whose audit takes too long to run in a
# demo: the default judge's took 23 minutes here): one JSON file each, the audit.json with how it was made.
MEASURED_FOLDER = AUDIT_FOLDER / "measured"
# Below this Cohen's kappa a judge's verdicts agree with the gold barely more than chance would.
LOW_KAPPA = 0.2


class MeasuredAudit(BaseModel):
    """An audit shipped with the package: its figures and how they were produced."""

    model_config = STRICT

    command: str
    machine: str
    date: str
    audit: AuditResults


def measured_audits() -> list[FoundAudit]:
    """The audits shipped with the package (built-in gold), each as found in a results folder."""
    found = []
    for path in sorted(MEASURED_FOLDER.glob("*.json")):
        measured = MeasuredAudit.model_validate_json(path.read_bytes())
        # Measured on the built-in audit set: its labels are this installation's copy of it.
        audit = measured.audit.model_copy(update={"labels": str(AUDIT_FILE)})
        found.append(FoundAudit(path, audit, measured=measured.command))
    return found


def audit_of(judge: dict[str, Any], prompt_version: str, roots: Sequence[str | Path] = ()) -> FoundAudit | None:
    """The audit of the judge with fingerprint ``judge`` under the judge prompt ``prompt_version``:
    one in a results folder of ``roots`` first, else one shipped with the package; None if none is known."""
    key = json.dumps(judge, sort_keys=True)
    for found in [*find_audits(roots), *measured_audits()]:
        if found.results is not None and found.judge_key == key and found.results.prompt_version == prompt_version:
            return found
    return None


def judge_warning(results: AuditResults) -> str | None:
    """A plain warning where the audit shows the judge's verdicts are close to chance (kappa < 0.2)."""
    kappa = results.kappa
    if kappa is not None and kappa >= LOW_KAPPA:
        return None
    measured = "not measurable" if kappa is None else f"{kappa:.3f}"
    return (
        f"this judge's verdicts agree with known right verdicts barely above chance (audit kappa {measured}, "
        f"below {LOW_KAPPA}): its scores are noise, not a measure of the model"
    )


def audit_line(found: FoundAudit) -> str:
    """The audit in one line, as shown beside a score."""
    results = found.results
    assert results is not None
    where = f"shipped with gamut-hf, measured with `{found.measured}`" if found.measured else str(found.folder)
    return (
        f"judge audit ({where}): kappa {results.shown('kappa', '.3f')}, accuracy "
        f"{results.shown('accuracy', '.1%')} on {results.judged:,} checks"
    )


def find_audits(roots: Sequence[str | Path]) -> list[FoundAudit]:
    """The audit folders directly inside each of ``roots`` (results folders), by path; one
    that cannot be read is returned with its problem, never raised, so it cannot take a
    report or the Space down."""
    found = []
    for path in sorted({p for root in roots for p in Path(root).glob(f"*/{AUDIT_JSON}")}):
        try:
            found.append(FoundAudit(path.parent, load_audit_results(path.parent)))
        except GamutError as error:
            found.append(FoundAudit(path.parent, None, str(error).replace(f"{path.parent}{os.sep}", "")))
    return found


def run_audit(
    judge: Any,
    out: str | Path,
    *,
    labels: str | Path | None = None,
    rationale: bool = False,
    judge_retries: int = 2,
    judge_batch_size: int | None = None,
    limit: int | None = None,
    retry_errors: bool = False,
    echo: Any = print,
    shared: Any = None,
) -> AuditResults:
    """Judge the audit set (or the --labels file) with ``judge`` into the store in ``out`` and
    measure it; :func:`gamut_hf.reports.audit_report.write_audit_report` writes the results.
    ``shared``: the judge already started for a run (``gamut run --audit``), used and left open.

    ``judge`` a list: a panel. Each of its judges judges the set into the one store (keyed by
    judge, so a judge added later is the only one asked), then the panel's majority verdicts
    (:func:`~gamut_hf.evaluation.panel.panel_verdict`) are measured, each judge's own figures beside."""
    from gamut_hf.core.scorer import Outcome
    from gamut_hf.evaluation.judge import JUDGE_PROMPT_VERSION
    from gamut_hf.evaluation.panel import panel_fingerprint, panel_verdict

    judges = list(judge) if isinstance(judge, list | tuple) else [judge]
    audit = load_audit_set(labels if labels is not None else AUDIT_FILE)
    if limit is not None:
        audit = audit.first_questions(limit)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    each, members, stage = [], [], None
    for position, member in enumerate(judges, 1):
        if len(judges) > 1:
            echo(f"judge audit: panel member {position} of {len(judges)}, {member.name} ({member.backend})")
        config = audit_config(
            member,
            audit,
            rationale=rationale,
            judge_retries=judge_retries,
            judge_batch_size=judge_batch_size,
            retry_errors=retry_errors,
        )
        judged, stage = judge_audit_set(config, audit, folder, echo, shared)
        each.append(judged)
        if len(judges) > 1:
            figures = measure(audit, judged)
            members.append(
                MemberAudit(
                    judge=member.fingerprint(),
                    judged=figures["judged"],
                    errors=figures["errors"],
                    accuracy=figures["accuracy"],
                    kappa=figures["kappa"],
                )
            )
    outcomes = each[0]
    if len(judges) > 1:
        outcomes = {
            key: panel_verdict(cast(list[Outcome], [judged[key] for judged in each]))
            for key in each[0]
            if all(key in judged for judged in each)
        }
    return AuditResults(
        judge=judges[0].fingerprint() if len(judges) == 1 else panel_fingerprint([j.fingerprint() for j in judges]),
        labels=str(audit.path),
        labels_fingerprint=audit.fingerprint(),
        prompt_version=JUDGE_PROMPT_VERSION,
        rationale=rationale,
        responses=len(audit.responses),
        stage=stage.model_dump() if stage is not None and len(judges) == 1 else None,
        members=members,
        **measure(audit, outcomes),
    )
