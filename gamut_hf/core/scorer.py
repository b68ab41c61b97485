"""Verdicts -> scores, by the formula of SPEC section 4.

    s_tier = (M + lambda*P + mu*C) / (M + P + S + |mu|*C)

The question score is the weighted mean of its tier scores (tiers without checks left out,
the remaining weights renormalised); the Gamut score of a run is 100 x the mean question score.
Pure functions only: the pipeline, the reports and the Space all score through here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from statistics import fmean
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gamut_hf.core.rubric import TIERS, VERDICTS, Check, Tier, Verdict
from gamut_hf.errors import GamutError

# What a judge can leave behind: one of the four verdicts, or an unparseable answer.
Outcome = Verdict | Literal["error"]
OUTCOMES: tuple[str, ...] = (*VERDICTS, "error")


# A tier weight: any finite non-negative number (the weights present are renormalised; their sum
# must be finite too).
TierWeight = Annotated[float, Field(ge=0, allow_inf_nan=False)]
# |mu| times a tier's contradictions must stay finite: a bound far beyond any meaningful penalty
# (at -1e6 one contradiction outweighs a million met checks) that keeps it so for any count.
MAX_PENALTY = 1e6


class ScoreParams(BaseModel):
    """The scoring constants; defaults are the paper's.

    The ranges keep every tier score in [-1, 1] (SPEC section 4) and every quotient defined:
    partial credit lies between a missing check (0) and a met one (1); the contradiction
    penalty is strictly negative (at 0 a tier of contradictions alone would be 0/0) and at most
    :data:`MAX_PENALTY` in size; the tier weights are non-negative, not all 0, with a finite sum.
    Nothing may be NaN or infinite, and no score computed with them overflows.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    partial_credit: float = Field(
        0.5, ge=0, le=1, allow_inf_nan=False, description="lambda: credit for partially_meets, from 0 to 1"
    )
    contradiction_penalty: float = Field(
        -2.0,
        lt=0,
        ge=-MAX_PENALTY,
        allow_inf_nan=False,
        description="mu: weight of contradicts, below 0 and at least -1e6",
    )
    tier_weights: dict[Tier, TierWeight] = Field(
        default_factory=lambda: dict[Tier, float]({"answer_critical": 0.6, "valuable": 0.3, "context": 0.1})
    )

    @model_validator(mode="after")
    def _weights_cover_tiers(self) -> ScoreParams:
        if set(self.tier_weights) != set(TIERS):
            raise ValueError("needs a weight for each of " + ", ".join(TIERS))
        if not any(self.tier_weights.values()):
            raise ValueError("at least one tier weight must be above 0")
        if not math.isfinite(sum(self.tier_weights.values())):
            raise ValueError("the tier weights add up to more than a float holds; scale them down (only ratios matter)")
        return self


DEFAULT_SCORE_PARAMS = ScoreParams()


class VerdictCounts(BaseModel):
    """How many checks got each verdict."""

    model_config = ConfigDict(extra="forbid")

    meets: int = 0
    partially_meets: int = 0
    missing: int = 0
    contradicts: int = 0

    @classmethod
    def of(cls, verdicts: Iterable[Verdict]) -> VerdictCounts:
        return cls(**{str(verdict): n for verdict, n in Counter(verdicts).items()})

    @property
    def total(self) -> int:
        return self.meets + self.partially_meets + self.missing + self.contradicts


def verdict_ratio(
    meets: Any, partially_meets: Any, missing: Any, contradicts: Any, params: ScoreParams = DEFAULT_SCORE_PARAMS
) -> Any:
    """(M + lambda*P + mu*C) / (M + P + S + |mu|*C) for counts of checks.

    Plain arithmetic, so it works elementwise on numpy arrays as well: the reports compute
    every tier of every question of a run in one call through here.
    """
    mu = params.contradiction_penalty
    numerator = meets + params.partial_credit * partially_meets + mu * contradicts
    return numerator / (meets + partially_meets + missing + abs(mu) * contradicts)


def tier_score(counts: VerdictCounts, params: ScoreParams = DEFAULT_SCORE_PARAMS) -> float | None:
    """The score of one tier of one question, in [-1, 1]; None when the tier has no checks."""
    if counts.total == 0:
        return None
    return float(verdict_ratio(counts.meets, counts.partially_meets, counts.missing, counts.contradicts, params))


class QuestionScore(BaseModel):
    score: float
    tiers: dict[Tier, float | None]
    counts: VerdictCounts
    tier_counts: dict[Tier, VerdictCounts]


class ScoringError(GamutError, ValueError):
    """Verdicts that do not fit the checks they claim to grade."""


def score_question(
    checks: list[Check], verdicts: Mapping[str, Verdict], params: ScoreParams = DEFAULT_SCORE_PARAMS
) -> QuestionScore:
    """Score one response: every check needs exactly one of the four verdicts."""
    known = {check.id for check in checks}
    unknown = sorted(set(verdicts) - known)
    if unknown:
        raise ScoringError(f"verdict for unknown check id {unknown[0]!r}")
    for check_id, verdict in verdicts.items():
        if verdict not in VERDICTS:
            raise ScoringError(f"check {check_id}: unknown verdict {verdict!r}; expected one of {', '.join(VERDICTS)}")
    unjudged = [check.id for check in checks if check.id not in verdicts]
    if unjudged:
        raise ScoringError(f"check {unjudged[0]} has no verdict ({len(unjudged)} unjudged in all)")
    if not checks:
        raise ScoringError("a question needs at least one check to be scored")

    tier_counts = {
        tier: VerdictCounts.of(verdicts[check.id] for check in checks if check.tier == tier) for tier in TIERS
    }
    tiers = {tier: tier_score(tier_counts[tier], params) for tier in TIERS}
    return QuestionScore(
        score=_weighted_tiers({tier: s for tier, s in tiers.items() if s is not None}, params),
        tiers=tiers,
        counts=VerdictCounts.of(verdicts[check.id] for check in checks),
        tier_counts=tier_counts,
    )


def _weighted_tiers(tiers: Mapping[Tier, float], params: ScoreParams) -> float:
    """A question's score: the weighted mean of the scores of the tiers it has (weights renormalised)."""
    weight = sum(params.tier_weights[tier] for tier in tiers)
    if weight == 0:
        raise ScoringError("the tiers present in this question all have weight 0")
    return sum(params.tier_weights[tier] * value for tier, value in tiers.items()) / weight


def expected_question_score(
    checks: list[Check], probabilities: Mapping[str, Mapping[str, float]], params: ScoreParams = DEFAULT_SCORE_PARAMS
) -> float:
    """A question's score with each tier's verdict counts replaced by their expectations under the
    judge's verdict probabilities (each check's four, renormalised to sum to 1): the score of a
    judge that is unsure of its verdicts, beside the argmax score (a plug-in estimate of the
    expected score, the tier formula being a ratio). Every check needs its probabilities."""
    missing = [check.id for check in checks if check.id not in probabilities]
    if missing:
        raise ScoringError(f"check {missing[0]} has no verdict probabilities ({len(missing)} in all)")
    tiers: dict[Tier, float] = {}
    for tier in TIERS:
        expected = dict.fromkeys(VERDICTS, 0.0)
        for check in (c for c in checks if c.tier == tier):
            given = probabilities[check.id]
            total = sum(given.get(v, 0.0) for v in VERDICTS)
            if not total > 0:
                raise ScoringError(f"check {check.id}: its verdict probabilities add up to {total}")
            for verdict in VERDICTS:
                expected[verdict] += given.get(verdict, 0.0) / total
        if any(expected.values()):
            tiers[tier] = float(verdict_ratio(**expected, params=params))
    return _weighted_tiers(tiers, params)


def top_verdict_share(probabilities: Mapping[str, float]) -> float | None:
    """How sure a judge was of a verdict: its most probable verdict's share of the probabilities
    (which need not sum to 1); None where they add up to nothing."""
    total = sum(probabilities.values())
    return max(probabilities.values()) / total if probabilities and total > 0 else None


class RunScore(BaseModel):
    """A run's aggregate (SPEC section 4): the figures of a leaderboard row.

    ``gamut`` and the tier scores are on a 0-100 scale; they are None when the run still
    has judge errors and the caller did not ask to count them as ``missing``.
    """

    gamut: float | None
    tiers: dict[Tier, float | None]
    verdict_shares: dict[str, float]
    elements_met_rate: float
    questions: int
    checks: int
    errors: int
    errors_counted_as_missing: bool


def score_run(
    questions: Iterable[tuple[list[Check], Mapping[str, Outcome]]],
    params: ScoreParams = DEFAULT_SCORE_PARAMS,
    *,
    errors_as_missing: bool = False,
) -> RunScore:
    """Aggregate a run: each entry is one question's checks and the outcomes judged so far.

    A check without an outcome (an unanswered question, say) counts as ``missing``. An
    ``error`` outcome blocks the score unless ``errors_as_missing`` is set; its count is
    reported either way.
    """
    question_scores: list[QuestionScore] = []
    outcome_counts: Counter[str] = Counter()
    for checks, outcomes in questions:
        resolved: dict[str, Verdict] = {}
        for check in checks:
            outcome = outcomes.get(check.id, "missing")
            if outcome not in OUTCOMES:
                raise ScoringError(f"check {check.id}: unknown outcome {outcome!r}")
            outcome_counts[outcome] += 1
            resolved[check.id] = "missing" if outcome == "error" else outcome
        extra = set(outcomes) - {check.id for check in checks}
        if extra:
            raise ScoringError(f"outcome for unknown check id {sorted(extra)[0]!r}")
        question_scores.append(score_question(checks, resolved, params))

    total = sum(outcome_counts.values())
    errors = outcome_counts["error"]
    shares = {name: (outcome_counts[name] / total if total else 0.0) for name in OUTCOMES}
    blocked = errors > 0 and not errors_as_missing
    if question_scores and not blocked:
        gamut = 100 * fmean(q.score for q in question_scores)
        tiers = {}
        for tier in TIERS:
            values = [value for q in question_scores if (value := q.tiers[tier]) is not None]
            tiers[tier] = 100 * fmean(values) if values else None
    else:
        gamut, tiers = None, {tier: None for tier in TIERS}
    return RunScore(
        gamut=gamut,
        tiers=tiers,
        verdict_shares=shares,
        elements_met_rate=shares["meets"],
        questions=len(question_scores),
        checks=total,
        errors=errors,
        errors_counted_as_missing=errors_as_missing and errors > 0,
    )
