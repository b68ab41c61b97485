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

from gamut_hf.rubric import KIND_ITEM_TYPE, TIERS, VERDICTS
from gamut_hf.scorer import DEFAULT_SCORE_PARAMS, ScoreParams, verdict_ratio

CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0


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
            return f"{self.value:.1f}"
        return f"{self.value:.1f} [{self.low:.1f}, {self.high:.1f}]"


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn: resamples of the questions, and the seed that makes them repeatable."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    def interval(self, samples: Sequence[np.ndarray], statistic: Callable[..., np.ndarray]) -> Interval:
        """``statistic(*samples, axis=-1)`` with its interval; samples are paired (one entry per question)."""
        value = float(statistic(*samples, axis=-1))
        if len(samples[0]) < 2 or math.isnan(value):
            return Interval(value, math.nan, math.nan)
        result = self._run(samples, statistic)
        return Interval(value, float(result.confidence_interval.low), float(result.confidence_interval.high))

    def _run(self, samples: Sequence[np.ndarray], statistic: Callable[..., np.ndarray]):
        with warnings.catch_warnings():
            # A resample can miss every question with a context check: nanmean warns, yields NaN,
            # and the percentile interval ignores it (scipy says so in its own warning).
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            return stats.bootstrap(tuple(samples), statistic, n_resamples=self.resamples, paired=True,
                                   vectorized=True, method="percentile", confidence_level=CONFIDENCE,
                                   rng=np.random.default_rng(self.seed))

    def paired_difference(self, a: np.ndarray, b: np.ndarray) -> PairedTest:
        """Mean of a - b (x 100) over the same questions, its interval and a two-sided bootstrap p-value.

        The p-value inverts the percentile interval: twice the share of resampled differences on
        the far side of zero, so p < 0.05 exactly when the 95% interval excludes zero.
        """
        def mean_difference(x, y, axis=-1):
            return 100 * np.mean(x - y, axis=axis)

        difference = float(mean_difference(a, b))
        if len(a) < 2:
            return PairedTest(Interval(difference, math.nan, math.nan), math.nan, len(a))
        result = self._run((a, b), mean_difference)
        spread = result.bootstrap_distribution
        p_value = min(1.0, 2 * min(np.mean(spread <= 0), np.mean(spread >= 0)))
        interval = Interval(difference, float(result.confidence_interval.low), float(result.confidence_interval.high))
        return PairedTest(interval, float(p_value), len(a))


@dataclass(frozen=True)
class PairedTest:
    difference: Interval
    p_value: float
    questions: int


# -- one run ---------------------------------------------------------------------------------


def with_item_types(details: pd.DataFrame) -> pd.Series:
    """The item type of each check row: from its kind, or for an insight from the rest of its item."""
    by_kind = details["kind"].map(KIND_ITEM_TYPE)
    known = pd.DataFrame({"question_id": details["question_id"], "item_id": details["item_id"], "type": by_kind})
    per_item = known.dropna().drop_duplicates(["question_id", "item_id"]).set_index(["question_id", "item_id"])["type"]
    looked_up = pd.MultiIndex.from_frame(details[["question_id", "item_id"]]).map(per_item.to_dict().get)
    return by_kind.fillna(pd.Series(looked_up, index=details.index)).fillna("unknown")


def question_table(details: pd.DataFrame, params: ScoreParams = DEFAULT_SCORE_PARAMS) -> pd.DataFrame:
    """One row per question (index question_id, in first-seen order): domain, checks, verdict counts,
    the tier scores and the question score, all in [-1, 1] as the scorer defines them.

    ``details`` needs question_id, domain, tier and verdict (one of the four verdicts) per check.
    """
    order = pd.unique(details["question_id"])
    counts = pd.crosstab([details["question_id"], details["tier"]], details["verdict"])
    counts = counts.reindex(columns=list(VERDICTS), fill_value=0)
    ratio = verdict_ratio(*(counts[v].to_numpy(float) for v in VERDICTS), params)
    tiers = pd.Series(ratio, index=counts.index).unstack("tier").reindex(index=order, columns=list(TIERS))
    weights = np.array([params.tier_weights[t] for t in TIERS])
    present = tiers.notna().to_numpy()
    weighted = np.where(present, tiers.to_numpy() * weights, 0.0).sum(axis=1)
    score = weighted / (present * weights).sum(axis=1)
    table = counts.groupby(level="question_id").sum().reindex(order)
    table["checks"] = table[list(VERDICTS)].sum(axis=1)
    table[list(TIERS)] = tiers
    table["score"] = score
    table.insert(0, "domain", details.drop_duplicates("question_id").set_index("question_id")["domain"].reindex(order))
    return table


def _nanmean(x, axis=-1):
    return 100 * np.nanmean(x, axis=axis)


def _mean(x, axis=-1):
    return 100 * np.mean(x, axis=axis)


def _share(part, whole, axis=-1):
    return 100 * np.sum(part, axis=axis) / np.sum(whole, axis=axis)


def run_summary(questions: pd.DataFrame, bootstrap: Bootstrap) -> dict[str, Interval]:
    """The Table 1 row of a run: Gamut and tier scores (0-100) and verdict shares (%), with intervals."""
    row = {"gamut": bootstrap.interval((questions["score"].to_numpy(),), _mean)}
    for tier in TIERS:
        values = questions[tier].dropna().to_numpy()
        row[tier] = bootstrap.interval((values,), _nanmean) if len(values) else Interval(math.nan, math.nan, math.nan)
    checks = questions["checks"].to_numpy(float)
    for verdict in VERDICTS:
        row[verdict] = bootstrap.interval((questions[verdict].to_numpy(float), checks), _share)
    return row


def pooled_scores(details: pd.DataFrame, by: str | list[str], params: ScoreParams = DEFAULT_SCORE_PARAMS) -> pd.DataFrame:
    """Checks grouped by ``by``: count, verdict shares (%) and the pooled score (0-100) of the group.

    The pooled score applies the tier formula to all of a group's checks at once: a check-kind
    or item-type breakdown has no per-question weighting to follow.
    """
    counts = pd.crosstab([details[c] for c in ([by] if isinstance(by, str) else by)], details["verdict"])
    counts = counts.reindex(columns=list(VERDICTS), fill_value=0)
    total = counts.sum(axis=1)
    out = pd.DataFrame({"checks": total})
    for verdict in VERDICTS:
        out[verdict] = 100 * counts[verdict] / total
    out["score"] = 100 * verdict_ratio(*(counts[v] for v in VERDICTS), params)
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


def rank_agreement(a: Sequence[float], b: Sequence[float]) -> RankAgreement:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return RankAgreement(len(a), None, None)
    return RankAgreement(len(a), _defined(stats.kendalltau(a, b).statistic), _defined(stats.spearmanr(a, b).statistic))


def correlation(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float | None]:
    """Pearson r and its p-value; None where undefined."""
    a, b = np.asarray(a, float), np.asarray(b, float)
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
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    labels = list(VERDICTS)
    matrix = confusion_matrix(list(first), list(second), labels=labels) if len(first) else np.zeros((4, 4), int)
    confusion = pd.DataFrame(matrix, index=labels, columns=labels)
    total = int(matrix.sum())
    if total == 0:
        return VerdictAgreement(0, math.nan, None, confusion)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one verdict everywhere: kappa is 0/0
        kappa = _defined(cohen_kappa_score(list(first), list(second), labels=labels))
    return VerdictAgreement(total, float(np.trace(matrix)) / total, kappa, confusion)


# Judge and candidate "from one family" (the self-preference check): the maker's model line.
_FAMILIES = ("gemini", "gemma", "claude", "gpt", "llama", "qwen", "mistral", "mixtral", "phi", "deepseek",
             "smollm", "grok", "command", "olmo")


def model_family(name: str) -> str:
    """'Qwen/Qwen3-VL-8B-Instruct' -> 'qwen', 'GPT-5.4' -> 'gpt', 'o3' -> 'gpt'; else the name's first word."""
    base = name.rsplit("/", 1)[-1].lower()
    for family in _FAMILIES:
        if base.startswith(family):
            return family
    if re.match(r"o\d", base):
        return "gpt"
    return re.split(r"[^a-z]+", base)[0] or base
