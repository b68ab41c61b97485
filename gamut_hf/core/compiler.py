"""Meta-rubric -> binary rubric, by the fixed rules of SPEC section 2.

``compile_rubric`` is a pure, deterministic function: the same meta-rubric and parameters
give the same checks, byte for byte, in item order. Check texts are self-contained English
instructions, so a judge can grade one without ever seeing the meta-rubric.

Check ids are ``<item id>.<kind>`` when an item emits one check of that kind and
``<item id>.<kind>.<n>`` (n from 1, in emission order) when it emits several.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from gamut_hf.core.rubric import (
    Check,
    CheckKind,
    FlexibleListItem,
    Item,
    KnowledgeItem,
    MetaRubric,
    ProcessItem,
    RelationshipItem,
    StrictListItem,
    Tier,
    demote,
)


class CompileParams(BaseModel):
    """The constants of the compile rules. They are stored with every built dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    small_pool_max: int = Field(6, ge=1, description="a flexible list with at most this many options is a small pool")
    higher_thresholds: int = Field(2, ge=0, description="how many higher coverage thresholds a long pool gets")
    threshold_divisions: int = Field(3, ge=1, description="t_j = k + ceil(j*(n-k)/divisions)")


DEFAULT_COMPILE_PARAMS = CompileParams()


def higher_thresholds(options: int, threshold: int, params: CompileParams = DEFAULT_COMPILE_PARAMS) -> list[int]:
    """The extra coverage thresholds of a long pool: distinct t_j with k < t_j <= n."""
    # t_j = k + m with m = ceil(j * (n - k) / d) growing with j: walk the distinct m (at most n - k of
    # them) and take each one whose first j is within the count, so a huge parameter costs nothing.
    found: list[int] = []
    span, divisions = options - threshold, params.threshold_divisions
    for m in range(1, span + 1):
        first_j = (m - 1) * divisions // span + 1  # the smallest j with j * span > (m - 1) * divisions
        if first_j > params.higher_thresholds:
            break
        if first_j * span <= m * divisions:  # ceil(first_j * span / d) is m itself, not past it
            found.append(threshold + m)
    return found


def _quoted_list(values: list[str]) -> str:
    return "; ".join(f'"{value}"' for value in values)


def _sequence(values: list[str]) -> str:
    return " -> ".join(f'"{value}"' for value in values)


def _item_checks(item: Item, params: CompileParams) -> list[tuple[CheckKind, Tier, str]]:
    """The (kind, tier, text) of each check an item compiles to, in SPEC order."""
    tier = item.tier
    label = item.label
    out: list[tuple[CheckKind, Tier, str]] = []
    if isinstance(item, KnowledgeItem):
        out.append(("fact", tier, f'The response states this fact ({label}): "{item.statement}"'))
    elif isinstance(item, StrictListItem):
        n = len(item.elements)
        for element in item.elements:
            out.append(
                (
                    "element",
                    tier,
                    f'The response mentions "{element}" as one of the {n} required parts of "{label}".',
                )
            )
    elif isinstance(item, FlexibleListItem):
        n, k = len(item.options), item.threshold
        out.append(
            (
                "coverage",
                tier,
                f'For "{label}", the response mentions at least {k} of these {n} options: {_quoted_list(item.options)}.',
            )
        )
        if n <= params.small_pool_max:
            for option in item.options:
                out.append(("option", demote(tier), f'For "{label}", the response mentions "{option}".'))
        else:
            for t in higher_thresholds(n, k, params):
                out.append(
                    (
                        "coverage",
                        demote(tier),
                        f'For "{label}", the response mentions at least {t} of these {n} options: '
                        f"{_quoted_list(item.options)}.",
                    )
                )
    elif isinstance(item, ProcessItem):
        for step in item.steps:
            status = "a required" if step.required else "an optional"
            out.append(
                (
                    "step",
                    tier if step.required else demote(tier),
                    f'The response includes "{step.text}", {status} step of "{label}".',
                )
            )
        required = [step.text for step in item.required_steps]
        if len(required) >= 2:
            out.append(
                (
                    "order",
                    tier,
                    f'The response presents the required steps of "{label}" in this order: {_sequence(required)}.',
                )
            )
        if item.has_optional_steps and item.grade_full_order:
            out.append(
                (
                    "full_order",
                    demote(tier),
                    f'The response presents the steps of "{label}" it includes in this full order: '
                    f"{_sequence([step.text for step in item.steps])}.",
                )
            )
    elif isinstance(item, RelationshipItem):
        out.append(
            (
                "relationship",
                tier,
                f"The response states this relationship ({label}): {item.subject} {item.relation} {item.object}.",
            )
        )
    insight = getattr(item, "meta_insight", None)
    if insight:
        out.append(("insight", tier, f'The response conveys this overall insight about "{label}": "{insight}"'))
    return out


def compile_rubric(rubric: MetaRubric, params: CompileParams = DEFAULT_COMPILE_PARAMS) -> list[Check]:
    """Compile a validated meta-rubric into its binary rubric (SPEC section 2)."""
    checks: list[Check] = []
    for item in rubric.items:
        emitted = _item_checks(item, params)
        totals = Counter(kind for kind, _, _ in emitted)
        seen: Counter[str] = Counter()
        for kind, tier, text in emitted:
            seen[kind] += 1
            suffix = f".{seen[kind]}" if totals[kind] > 1 else ""
            checks.append(Check(id=f"{item.id}.{kind}{suffix}", item_id=item.id, kind=kind, tier=tier, text=text))
    return checks
