"""The statistics behind the reports: numbers in, numbers out, no I/O.

A run is analysed through its *question table*: one row per question with the question score,
the tier scores and the verdict counts, computed from details.parquet with the scorer's own
formula. Every interval resamples questions (the unit the benchmark samples) with
``scipy.stats.bootstrap`` (percentile method, a fixed seed, so a report is reproducible);
two runs are compared on the questions they share, resampled together (paired).
Agreement between judges uses scikit-learn's Cohen's kappa; rank agreement scipy's Kendall tau
and Spearman rho.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from gamut_hf.core.rubric import KIND_ITEM_TYPE, TIERS, VERDICTS
from gamut_hf.core.scorer import DEFAULT_SCORE_PARAMS, ScoreParams, verdict_ratio
from gamut_hf.reports.defaults import DEFAULT_RESAMPLES, DEFAULT_SEED

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A statistic with its 95% bootstrap interval (NaN bounds when it cannot be resampled)."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "n/a"
        if math.isnan(self.low):
            return shown_number(self.value)
        return f"{shown_number(self.value)} [{shown_number(self.low)}, {shown_number(self.high)}]"

    def signed(self) -> str:
        """As :meth:`__str__`, the value with its sign (a difference)."""
        if math.isnan(self.value) or math.isnan(self.low):
            return shown_number(self.value, signed=True)
        return f"{shown_number(self.value, signed=True)} [{shown_number(self.low)}, {shown_number(self.high)}]"


def shown_number(value: float | None, digits: int = 1, signed: bool = False) -> str:
    """A number as the reports write it: ``digits`` decimals always (a column reads evenly), "n/a"
    where undefined, and a value that rounds to zero written 0.0, never -0.0 (or +0.0)."""
    if value is None or math.isnan(value):
        return "n/a"
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return f"{0:.{digits}f}" if float(text) == 0 else text


def shown_p_value(p_value: float | None, smallest: float = 0.001) -> str:
    """A p-value for a table cell: three decimals, or "<smallest" below what can be told apart (a
    bootstrap's 1/resamples: no resample on the far side of zero)."""
    if p_value is None or math.isnan(p_value):
        return "n/a"
    return f"<{smallest:.2g}" if p_value < smallest else f"{p_value:.3f}"


def p_clause(p_value: float | None, smallest: float = 0.001) -> str:
    """A p-value in a sentence: "p=0.004", "p<0.0005"."""
    shown = shown_p_value(p_value, smallest)
    return f"p{shown}" if shown.startswith("<") else f"p={shown}"


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn: resamples of the questions, and the seed that makes them repeatable."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    def intervals(self, samples: Sequence[np.ndarray], statistic: Callable[..., np.ndarray]) -> list[Interval]:
        """``statistic(*samples, axis=-1)``, a vector of statistics, each with its interval.

        The samples are paired (one entry per question) and resampled together, once for all
        the statistics: the intervals of one run come from the same resamples.
        """
        values = np.atleast_1d(statistic(*samples, axis=-1)).astype(float)
        if len(samples[0]) < 2:
            return [Interval(v, math.nan, math.nan) for v in values]
        result = self._run(samples, statistic)
        lows, highs = np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high)
        return [
            Interval(v, math.nan, math.nan) if math.isnan(v) else Interval(v, float(lo), float(hi))
            for v, lo, hi in zip(values, lows, highs, strict=False)
        ]

    def _run(self, samples: Sequence[np.ndarray], statistic: Callable[..., np.ndarray]):
        with warnings.catch_warnings():
            # A resample can miss every question with a context check: nanmean warns, yields NaN,
            # and the percentile interval ignores it (scipy says so in its own warning).
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            return stats.bootstrap(
                tuple(samples),
                statistic,
                n_resamples=self.resamples,
                paired=True,
                vectorized=True,
                method="percentile",
                confidence_level=CONFIDENCE,
                rng=np.random.default_rng(self.seed),
            )

    def paired_difference(self, a: np.ndarray, b: np.ndarray) -> PairedTest:
        """Mean of a - b (x 100) over the same questions, its interval and a two-sided bootstrap p-value.

        The p-value inverts the percentile interval: twice the share of resampled differences on
        the far side of zero, so p < 0.05 exactly when the 95% interval excludes zero.
        """
        difference = float(_mean_difference(a, b))
        if len(a) < 2:
            return PairedTest(Interval(difference, math.nan, math.nan), math.nan, len(a))
        result = self._run((a, b), _mean_difference)
        spread = result.bootstrap_distribution
        p_value = min(1.0, 2 * min(np.mean(spread <= 0), np.mean(spread >= 0)))
        interval = Interval(difference, float(result.confidence_interval.low), float(result.confidence_interval.high))
        return PairedTest(interval, float(p_value), len(a))


def _mean_difference(x, y, axis=-1):
    return 100 * np.mean(x - y, axis=axis)


@dataclass(frozen=True)
class PairedTest:
    difference: Interval
    p_value: float
    questions: int


# -- one run ---------------------------------------------------------------------------------


def with_item_types(details: pd.DataFrame) -> pd.Series:
    """The item type of each check row: from its kind, or for an insight from the rest of its item."""
    by_kind = details["kind"].map(KIND_ITEM_TYPE)
    item = details["question_id"] + "\x00" + details["item_id"]
    return item.map(by_kind.groupby(item).first()).fillna("unknown")


def question_scores(
    questions: np.ndarray,
    tiers: np.ndarray,
    verdicts: np.ndarray,
    count: int,
    params: ScoreParams = DEFAULT_SCORE_PARAMS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every question's verdict counts per tier, tier scores and score, from one row per check.

    The arguments are per-check indices: question (0..count-1), tier (into TIERS) and verdict
    (into VERDICTS). Returns counts (count x tiers x verdicts), tier scores (count x tiers, NaN
    where a question has no check of the tier) and question scores (count), all as the scorer
    defines them: absent tiers left out and the weights of the others renormalised.
    """
    cells = (questions * len(TIERS) + tiers) * len(VERDICTS) + verdicts
    counts = np.bincount(cells, minlength=count * len(TIERS) * len(VERDICTS))
    counts = counts.reshape(count, len(TIERS), len(VERDICTS)).astype(float)
    with np.errstate(invalid="ignore"):  # 0/0 for a tier the question does not have
        meets, partial, missing, contradicts = np.moveaxis(counts, 2, 0)
        tier_scores = verdict_ratio(meets, partial, missing, contradicts, params)
    weights = np.array([params.tier_weights[t] for t in TIERS])
    present = ~np.isnan(tier_scores)
    score = np.where(present, tier_scores * weights, 0.0).sum(axis=1) / (present * weights).sum(axis=1)
    return counts, tier_scores, score


def question_table(details: pd.DataFrame, params: ScoreParams = DEFAULT_SCORE_PARAMS) -> pd.DataFrame:
    """One row per question (index question_id, in first-seen order): domain, checks, verdict counts,
    the tier scores and the question score, all in [-1, 1] as the scorer defines them.

    ``details`` needs question_id, domain, tier and verdict (one of the four verdicts) per check.
    """
    question_codes, order = pd.factorize(details["question_id"])
    tier_codes = pd.Categorical(details["tier"], categories=TIERS).codes
    verdict_codes = pd.Categorical(details["verdict"], categories=VERDICTS).codes
    if (tier_codes < 0).any() or (verdict_codes < 0).any():
        raise ValueError("question_table needs a known tier and one of the four verdicts on every check")
    counts, tiers, score = question_scores(question_codes, tier_codes, verdict_codes, len(order), params)
    table = pd.DataFrame(
        counts.sum(axis=1).astype(int), index=pd.Index(order, name="question_id"), columns=list(VERDICTS)
    )
    table["checks"] = table[list(VERDICTS)].sum(axis=1)
    table[list(TIERS)] = tiers
    table["score"] = score
    table.insert(0, "domain", details.drop_duplicates("question_id").set_index("question_id")["domain"].reindex(order))
    return table


SUMMARY_STATISTICS = ("gamut", *TIERS, *VERDICTS)


def _summary_statistics(score, *rest, axis=-1):
    """Gamut (mean question score), tier scores (over the questions with the tier) and verdict shares, x 100."""
    tiers, counts, checks = rest[: len(TIERS)], rest[len(TIERS) : -1], rest[-1]
    total = np.sum(checks, axis=axis)
    return 100 * np.stack(
        [
            np.mean(score, axis=axis),
            *(np.nanmean(t, axis=axis) for t in tiers),
            *(np.sum(c, axis=axis) / total for c in counts),
        ]
    )


def run_summary(questions: pd.DataFrame, bootstrap: Bootstrap) -> dict[str, Interval]:
    """The Table 1 row of a run: Gamut and tier scores (0-100) and verdict shares (%), with intervals."""
    columns = ["score", *TIERS, *VERDICTS, "checks"]
    samples = [questions[c].to_numpy(float) for c in columns]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a tier no question has: NaN, shown as n/a
        intervals = bootstrap.intervals(samples, _summary_statistics)
    return dict(zip(SUMMARY_STATISTICS, intervals, strict=False))


def pooled_scores(
    details: pd.DataFrame, by: str | list[str], params: ScoreParams = DEFAULT_SCORE_PARAMS
) -> pd.DataFrame:
    """Checks grouped by ``by``: count, verdict shares (%) and the pooled score (0-100) of the group.

    The pooled score applies the tier formula to all of a group's checks at once: a check-kind
    or item-type breakdown has no per-question weighting to follow.
    """
    counts = details.groupby(by)["verdict"].value_counts().unstack(fill_value=0)
    counts = counts.reindex(columns=list(VERDICTS), fill_value=0)
    total = counts.sum(axis=1)
    out = pd.DataFrame({"checks": total})
    for verdict in VERDICTS:
        out[verdict] = 100 * counts[verdict] / total
    out["score"] = 100 * verdict_ratio(
        counts["meets"], counts["partially_meets"], counts["missing"], counts["contradicts"], params
    )
    return out


# -- several runs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RankAgreement:
    """How two orderings of the same models agree; None where undefined (fewer than 3 models, or ties everywhere)."""

    models: int
    kendall_tau: float | None
    spearman_rho: float | None


def _defined(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def rank_agreement(first: Sequence[float], second: Sequence[float]) -> RankAgreement:
    a, b = np.asarray(first, float), np.asarray(second, float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return RankAgreement(len(a), None, None)
    return RankAgreement(len(a), _defined(stats.kendalltau(a, b).statistic), _defined(stats.spearmanr(a, b).statistic))


def correlation(first: Sequence[float], second: Sequence[float]) -> tuple[float | None, float | None]:
    """Pearson r and its p-value; None where undefined."""
    a, b = np.asarray(first, float), np.asarray(second, float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, None
    result = stats.pearsonr(a, b)
    return _defined(result.statistic), _defined(result.pvalue)


@dataclass(frozen=True)
class VerdictAgreement:
    """Per-check agreement of two judges over the same responses."""

    checks: int
    agreement: float  # share of checks with the same verdict
    kappa: float | None
    confusion: pd.DataFrame  # rows: first judge, columns: second judge


def verdict_agreement(first: Sequence[str], second: Sequence[str]) -> VerdictAgreement:
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    labels = list(VERDICTS)
    matrix = confusion_matrix(list(first), list(second), labels=labels) if len(first) else np.zeros((4, 4), int)
    confusion = pd.DataFrame(matrix, index=labels, columns=labels)
    total = int(matrix.sum())
    if total == 0:
        return VerdictAgreement(0, math.nan, None, confusion)
    with warnings.catch_warnings():
        # One verdict everywhere: kappa is 0/0, reported as undefined.
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        kappa = _defined(cohen_kappa_score(list(first), list(second), labels=labels))
    return VerdictAgreement(total, float(np.trace(matrix)) / total, kappa, confusion)


def expected_offsets(levels: np.ndarray, offsets: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Offsets at ``at`` predicted by a least-squares line through (level, offset); the mean offset
    when fewer than 3 points or no spread in level make a line meaningless."""
    if len(levels) < 3 or np.ptp(levels) == 0:
        return np.full(len(at), float(np.mean(offsets)))
    fit = stats.linregress(levels, offsets)
    return fit.intercept + fit.slope * np.asarray(at, float)


# Judge and candidate "from one family" (the self-preference check): the maker's model line.
_FAMILIES = (
    "gemini",
    "gemma",
    "claude",
    "gpt",
    "llama",
    "qwen",
    "mistral",
    "mixtral",
    "phi",
    "deepseek",
    "smollm",
    "grok",
    "command",
    "olmo",
)


def model_family(name: str) -> str:
    """'Qwen/Qwen3-VL-8B-Instruct' -> 'qwen', 'GPT-5.4' -> 'gpt', 'o3' -> 'gpt'; else the name's first word."""
    base = name.rsplit("/", 1)[-1].lower()
    for family in _FAMILIES:
        if base.startswith(family):
            return family
    if re.match(r"o\d", base):
        return "gpt"
    return re.split(r"[^a-z]+", base)[0] or base
