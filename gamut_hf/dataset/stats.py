"""The rubric statistics of the paper (paper_tables.md, "Rubric statistics") for any set of questions.

Pure: it takes validated meta-rubrics and checks, so the same numbers come out for an
annotation folder, a built dataset or the official release, and the dataset card embeds
exactly the table that ``gamut stats`` prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import fmean, median

from pydantic import BaseModel

from gamut_hf.core.rubric import TIERS, Check, MetaRubric, Tier

STRUCTURED_TYPES = ("flexible_list", "strict_list", "process", "relationship")


@dataclass(frozen=True)
class RubricRecord:
    """What the statistics need of one question."""

    domain: str
    meta_rubric: MetaRubric | None  # None: the layout has none (the official release)
    checks: list[Check]


class Distribution(BaseModel):
    mean: float
    median: float
    max: int


class RubricStats(BaseModel):
    questions: int
    domains: dict[str, int]
    checks_per_question: Distribution
    checks_per_tier: dict[Tier, float]
    # The rest describe meta-rubrics: None where no question has one (the official release's layout).
    share_with_structured_item: float | None
    share_with_item_type: dict[str, float] | None
    flexible_list_median_options: float | None
    flexible_list_share_over_7_options: float | None
    strict_list_median_elements: float | None
    process_median_steps: float | None
    process_share_mixing_required_and_optional: float | None
    share_with_meta_insight: float | None
    meta_insights: int | None
    evidence_per_rubric: float | None
    distinct_cited_pages: int | None

    @property
    def has_meta_rubrics(self) -> bool:
        return self.share_with_structured_item is not None


# The statistics of meta-rubrics (None together where there are none).
STRUCTURE_FIELDS = (
    "share_with_structured_item",
    "share_with_item_type",
    "flexible_list_median_options",
    "flexible_list_share_over_7_options",
    "strict_list_median_elements",
    "process_median_steps",
    "process_share_mixing_required_and_optional",
    "share_with_meta_insight",
    "meta_insights",
    "evidence_per_rubric",
    "distinct_cited_pages",
)
NO_STRUCTURE = "n/a: this dataset has no typed meta-rubric (the official release publishes its checks compiled)"


def _median_or_none(values: list[int]) -> float | None:
    return float(median(values)) if values else None


def rubric_stats(records: Iterable[RubricRecord]) -> RubricStats:
    records = list(records)
    if not records:
        raise ValueError("no questions to compute statistics over")
    n = len(records)
    counts = [len(r.checks) for r in records]
    common = dict(
        questions=n,
        domains=dict(sorted(Counter(r.domain for r in records).items(), key=lambda kv: (-kv[1], kv[0]))),
        checks_per_question=Distribution(mean=fmean(counts), median=float(median(counts)), max=max(counts)),
        checks_per_tier={tier: sum(c.tier == tier for r in records for c in r.checks) / n for tier in TIERS},
    )
    rubrics = [r.meta_rubric for r in records if r.meta_rubric is not None]
    if not rubrics:
        return RubricStats(**common, **dict.fromkeys(STRUCTURE_FIELDS))
    items = [item for rubric in rubrics for item in rubric.items]
    flexible = [item for item in items if item.type == "flexible_list"]
    processes = [item for item in items if item.type == "process"]

    types_of = [{item.type for item in rubric.items} for rubric in rubrics]
    return RubricStats(
        **common,
        share_with_structured_item=sum(1 for t in types_of if t & set(STRUCTURED_TYPES)) / n,
        share_with_item_type={kind: sum(1 for t in types_of if kind in t) / n for kind in STRUCTURED_TYPES},
        flexible_list_median_options=_median_or_none([len(item.options) for item in flexible]),
        flexible_list_share_over_7_options=(
            sum(len(item.options) > 7 for item in flexible) / len(flexible) if flexible else None
        ),
        strict_list_median_elements=_median_or_none(
            [len(item.elements) for item in items if item.type == "strict_list"]
        ),
        process_median_steps=_median_or_none([len(item.steps) for item in processes]),
        process_share_mixing_required_and_optional=(
            sum(1 for p in processes if p.has_optional_steps) / len(processes) if processes else None
        ),
        share_with_meta_insight=sum(1 for r in rubrics if any(getattr(i, "meta_insight", None) for i in r.items)) / n,
        meta_insights=sum(1 for item in items if getattr(item, "meta_insight", None)),
        evidence_per_rubric=sum(len(item.evidence) for item in items) / n,
        distinct_cited_pages=len({e.url for item in items for e in item.evidence}),
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def stats_markdown(stats: RubricStats) -> str:
    """The statistics as a Markdown table (what ``gamut stats`` prints and the card embeds)."""
    cpq = stats.checks_per_question
    tiers = stats.checks_per_tier
    rows = [
        ("Questions", f"{stats.questions:,}"),
        ("Domains", f"{len(stats.domains)}: " + ", ".join(f"{d} {c}" for d, c in stats.domains.items())),
        ("Checks per question", f"mean {cpq.mean:.1f}, median {cpq.median:g}, max {cpq.max}"),
        (
            "Checks per question by tier",
            f"answer-critical {tiers['answer_critical']:.1f}, valuable {tiers['valuable']:.1f}, "
            f"context {tiers['context']:.1f}",
        ),
    ]
    types = stats.share_with_item_type
    if types is None:
        rows.append(("Meta-rubric structure", NO_STRUCTURE))
    else:
        rows += _structure_rows(stats, types)
    lines = ["| statistic | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def _structure_rows(stats: RubricStats, types: dict[str, float]) -> list[tuple[str, str]]:
    return [
        ("Questions with a structured item", _pct(stats.share_with_structured_item)),
        (
            "Flexible lists",
            f"{_pct(types['flexible_list'])} of questions "
            f"(median {_num(stats.flexible_list_median_options, 0)} options, "
            f"{_pct(stats.flexible_list_share_over_7_options)} over 7)",
        ),
        (
            "Strict lists",
            f"{_pct(types['strict_list'])} of questions (median {_num(stats.strict_list_median_elements, 0)} elements)",
        ),
        (
            "Processes",
            f"{_pct(types['process'])} of questions (median {_num(stats.process_median_steps, 0)} steps, "
            f"{_pct(stats.process_share_mixing_required_and_optional)} mix required and optional)",
        ),
        ("Relationships", f"{_pct(types['relationship'])} of questions"),
        ("Meta-insights", f"{_pct(stats.share_with_meta_insight)} of questions ({stats.meta_insights} in all)"),
        (
            "Evidence snippets per rubric",
            f"{_num(stats.evidence_per_rubric)} ({stats.distinct_cited_pages or 0:,} distinct pages)",
        ),
    ]
