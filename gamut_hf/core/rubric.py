"""The two rubric levels as types: the meta-rubric (SPEC section 1) and the binary check (section 2).

Everything here is pure: it validates Python objects (parsed JSON) and never touches files.
Validation is strict: unknown fields, fields that belong to another item type, wrong JSON types
(no silent coercion of ``"2"`` to ``2``) and every "valid when" rule of the SPEC are rejected, and
each problem names the question id, the item id and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from gamut_hf.errors import GamutError, field_path, shown

Tier = Literal["answer_critical", "valuable", "context"]
TIERS: tuple[Tier, ...] = ("answer_critical", "valuable", "context")

ItemType = Literal["knowledge", "strict_list", "flexible_list", "process", "relationship"]
ITEM_TYPES: tuple[ItemType, ...] = ("knowledge", "strict_list", "flexible_list", "process", "relationship")

# ``unspecified``: a check whose layout does not say what produced it (the official release's
# checks, which come without their meta-rubric); never emitted by the compiler.
CheckKind = Literal[
    "fact", "element", "coverage", "option", "step", "order", "full_order", "relationship", "insight", "unspecified"
]
CHECK_KINDS: tuple[CheckKind, ...] = (
    "fact",
    "element",
    "coverage",
    "option",
    "step",
    "order",
    "full_order",
    "relationship",
    "insight",
    "unspecified",
)

# The item type each kind of check is emitted by. An ``insight`` check can come from any item
# type; it takes the type of the other checks of its item, which every item has.
KIND_ITEM_TYPE: dict[CheckKind, ItemType | None] = {
    "fact": "knowledge",
    "element": "strict_list",
    "coverage": "flexible_list",
    "option": "flexible_list",
    "step": "process",
    "order": "process",
    "full_order": "process",
    "relationship": "relationship",
    "insight": None,
    "unspecified": None,
}

Verdict = Literal["meets", "partially_meets", "missing", "contradicts"]
VERDICTS: tuple[Verdict, ...] = ("meets", "partially_meets", "missing", "contradicts")


def demote(tier: Tier) -> Tier:
    """One importance level down; context is the floor (SPEC section 2)."""
    lower: dict[Tier, Tier] = {"answer_critical": "valuable", "valuable": "context", "context": "context"}
    return lower[tier]


# Item ids become the first part of check ids (``i3.coverage.2``), so they may not contain dots.
ITEM_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"

NonEmptyText = Annotated[str, Field(strict=True, min_length=1, pattern=r"\S")]


def _rule(field: str, message: str, **values: Any) -> PydanticCustomError:
    """A rule violation that remembers which field it is about (model validators lose that)."""
    return PydanticCustomError("gamut_rule", message, {"field": field, **values})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Evidence(_Strict):
    """A cited snippet backing an item."""

    text: NonEmptyText
    url: NonEmptyText
    title: str = ""


class Step(_Strict):
    text: NonEmptyText
    required: StrictBool


class _Item(_Strict):
    id: Annotated[str, Field(strict=True, pattern=ITEM_ID_PATTERN)]
    tier: Tier
    label: NonEmptyText
    evidence: list[Evidence] = Field(default_factory=list, validate_default=True)

    @field_validator("evidence")
    @classmethod
    def _evidence_when_released(cls, evidence: list[Evidence], info: ValidationInfo) -> list[Evidence]:
        if info.context and info.context.get("require_evidence") and not evidence:
            raise _rule("evidence", "a released rubric needs at least one evidence snippet per item")
        return evidence


def _distinct(values: list[str], field: str, minimum: int) -> list[str]:
    seen: dict[str, str] = {}
    for value in values:
        key = " ".join(value.split()).casefold()
        if key in seen:
            raise _rule(field, "'{value}' appears twice; entries must be distinct", value=value)
        seen[key] = value
    if len(seen) < minimum:
        raise _rule(field, "needs at least {minimum} distinct entries, got {n}", minimum=minimum, n=len(seen))
    return values


class KnowledgeItem(_Item):
    type: Literal["knowledge"]
    statement: NonEmptyText


class StrictListItem(_Item):
    type: Literal["strict_list"]
    elements: list[NonEmptyText]
    meta_insight: NonEmptyText | None = None

    @field_validator("elements")
    @classmethod
    def _two_distinct(cls, elements: list[str]) -> list[str]:
        return _distinct(elements, "elements", 2)


class FlexibleListItem(_Item):
    type: Literal["flexible_list"]
    options: list[NonEmptyText]
    threshold: StrictInt
    meta_insight: NonEmptyText | None = None

    @field_validator("options")
    @classmethod
    def _two_distinct(cls, options: list[str]) -> list[str]:
        return _distinct(options, "options", 2)

    @model_validator(mode="after")
    def _threshold_in_range(self) -> FlexibleListItem:
        if not 1 <= self.threshold <= len(self.options):
            raise _rule(
                "threshold",
                "threshold {threshold} is outside 1..{n} (the pool has {n} options)",
                threshold=self.threshold,
                n=len(self.options),
            )
        return self


class ProcessItem(_Item):
    type: Literal["process"]
    steps: list[Step]
    grade_full_order: StrictBool = False
    meta_insight: NonEmptyText | None = None

    @field_validator("steps")
    @classmethod
    def _enough_steps(cls, steps: list[Step]) -> list[Step]:
        if len(steps) < 2:
            raise _rule("steps", "a process needs at least 2 steps, got {n}", n=len(steps))
        _distinct([step.text for step in steps], "steps", 2)
        if not any(step.required for step in steps):
            raise _rule("steps", "a process needs at least one required step")
        return steps

    @property
    def required_steps(self) -> list[Step]:
        return [step for step in self.steps if step.required]

    @property
    def has_optional_steps(self) -> bool:
        return any(not step.required for step in self.steps)


class RelationshipItem(_Item):
    type: Literal["relationship"]
    subject: NonEmptyText
    relation: NonEmptyText
    object: NonEmptyText


Item = Annotated[
    KnowledgeItem | StrictListItem | FlexibleListItem | ProcessItem | RelationshipItem,
    Field(discriminator="type"),
]


class MetaRubric(_Strict):
    """A question's meta-rubric: its items in order (SPEC section 1, "On disk")."""

    question_id: NonEmptyText
    items: list[Item] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_item_ids(self) -> MetaRubric:
        seen: set[str] = set()
        for item in self.items:
            if item.id in seen:
                raise _rule("id", "duplicate item id '{item_id}'", item_id=item.id)
            seen.add(item.id)
        return self


class Check(_Strict):
    """One binary check of the compiled (or human-edited) rubric: what the judge grades."""

    id: NonEmptyText
    item_id: NonEmptyText
    kind: CheckKind
    tier: Tier
    text: NonEmptyText


# --------------------------------------------------------------------------------------------
# Errors that name where the problem is


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a rubric, located by question, item and field."""

    question_id: str
    item_id: str | None
    field: str | None
    reason: str

    def __str__(self) -> str:
        where = [f"question {shown(self.question_id)}"]
        if self.item_id is not None:
            where.append(f"item {shown(self.item_id)}")
        if self.field is not None:
            where.append(f"field {self.field}")
        return f"{', '.join(where)}: {self.reason}"


class RubricError(GamutError, ValueError):
    """A rubric (meta or binary) failed validation; ``problems`` lists every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def _reason(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return "is not a field of this item type" if _in_item(error) else "unknown field"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        return f"unknown item type {ctx.get('tag')!r}; expected one of {', '.join(ITEM_TYPES)}"
    if kind == "union_tag_not_found":
        return f"required field is missing; expected one of {', '.join(ITEM_TYPES)}"
    if kind == "literal_error":
        return f"{error.get('input')!r} is not allowed; expected {ctx.get('expected')}"
    if kind == "string_pattern_mismatch" and error["loc"][-1] == "id":
        return f"{error.get('input')!r} is not a valid item id (letters, digits, '_' or '-', no dots)"
    if kind in ("string_pattern_mismatch", "string_too_short"):
        return "must not be empty"
    if kind == "too_short":
        return "must not be empty"
    return str(error["msg"])


def _in_item(error: ErrorDetails) -> bool:
    loc = error["loc"]
    return len(loc) >= 3 and loc[0] == "items"


def problems_from(error: ValidationError, raw: Any, *, fallback_question_id: str = "?") -> list[Problem]:
    """Translate pydantic's errors into Problems that name question, item and field."""
    question_id = fallback_question_id
    if isinstance(raw, dict) and isinstance(raw.get("question_id"), str) and raw["question_id"].strip():
        question_id = raw["question_id"]
    raw_items = raw.get("items") if isinstance(raw, dict) else None
    problems: list[Problem] = []
    for detail in error.errors(include_url=False):
        loc = list(detail["loc"])
        item_id: str | None = None
        if len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
            index = loc[1]
            item_id = f"#{index + 1}"
            if isinstance(raw_items, list) and index < len(raw_items) and isinstance(raw_items[index], dict):
                candidate = raw_items[index].get("id")
                if isinstance(candidate, str) and candidate:
                    item_id = candidate
            loc = loc[2:]
            if loc and loc[0] in ITEM_TYPES:  # pydantic puts the union tag in the location
                loc = loc[1:]
            if detail["type"] in ("union_tag_invalid", "union_tag_not_found"):
                loc = ["type"]
        ctx = detail.get("ctx") or {}
        if ctx.get("item_id"):  # duplicate ids are found at rubric level but belong to an item
            item_id = ctx["item_id"]
        field = ctx["field"] if detail["type"] == "gamut_rule" else field_path(loc)
        problems.append(Problem(question_id, item_id, field or None, _reason(detail)))
    return problems


def parse_meta_rubric(data: Any, *, require_evidence: bool = False, question_id: str = "?") -> MetaRubric:
    """Validate parsed JSON as a meta-rubric, raising :class:`RubricError` with every problem.

    ``require_evidence`` is the release rule: drafts may have items without evidence, a
    released rubric may not. ``question_id`` names the question when the data lacks one.
    """
    if not isinstance(data, dict):
        raise RubricError([Problem(question_id, None, None, "a meta-rubric must be a JSON object")])
    try:
        return MetaRubric.model_validate(data, context={"require_evidence": require_evidence})
    except ValidationError as error:
        problems = problems_from(error, data, fallback_question_id=question_id)
        # Item-level errors stop pydantic before the rubric-level duplicate check; report both.
        if not any(p.field == "id" and p.reason.startswith("duplicate") for p in problems):
            problems += _duplicate_raw_ids(data, problems[0].question_id)
        raise RubricError(problems) from None


def _duplicate_raw_ids(data: dict[str, Any], question_id: str) -> list[Problem]:
    items = data.get("items")
    ids = [item.get("id") for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    seen: set[str] = set()
    problems = []
    for item_id in ids:
        if not isinstance(item_id, str):
            continue
        if item_id in seen:
            problems.append(Problem(question_id, item_id, "id", f"duplicate item id {item_id!r}"))
        seen.add(item_id)
    return problems


def parse_checks(data: Any, *, question_id: str = "?") -> list[Check]:
    """Validate parsed JSON as a binary rubric (a list of checks with unique ids)."""
    if not isinstance(data, list):
        raise RubricError([Problem(question_id, None, None, "a binary rubric must be a JSON array of checks")])
    checks: list[Check] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, entry in enumerate(data):
        label = entry.get("id") if isinstance(entry, dict) and isinstance(entry.get("id"), str) else f"#{index + 1}"
        try:
            check = Check.model_validate(entry)
        except ValidationError as error:
            for detail in error.errors(include_url=False):
                field = field_path(detail["loc"]) or None
                problems.append(Problem(question_id, None, field, f"check {shown(label)}: {_reason(detail)}"))
            continue
        if check.id in seen:
            problems.append(Problem(question_id, None, "id", f"duplicate check id {check.id!r}"))
        seen.add(check.id)
        checks.append(check)
    if problems:
        raise RubricError(problems)
    if not checks:
        raise RubricError([Problem(question_id, None, None, "a binary rubric needs at least one check")])
    return checks
