"""The dataset's columns, declared once as ``datasets.Features`` and used everywhere.

Both rubric levels are typed structs, not JSON strings: a meta-rubric is a list of item
structs that carry every item type's payload fields (null where a field does not belong to
the item's type), and the binary rubric is a list of check structs. ``item_to_row`` and
``meta_rubric_from_rows`` convert between the pydantic models and these rows, losslessly.
"""

from __future__ import annotations

from typing import Any

from datasets import ClassLabel, Features, Image, List, Value

from gamut_hf.core.compiler import CompileParams
from gamut_hf.core.names import Variant
from gamut_hf.core.rubric import (
    Check,
    Item,
    MetaRubric,
    parse_checks,
    parse_meta_rubric,
)

# Bumped whenever the rubric schema or compile rules change meaning.
RUBRIC_VERSION = "gamut-rubric-1"

EVIDENCE = {"text": Value("string"), "url": Value("string"), "title": Value("string")}
STEP = {"text": Value("string"), "required": Value("bool")}
META_ITEM = {
    "id": Value("string"),
    "tier": Value("string"),
    "type": Value("string"),
    "label": Value("string"),
    "statement": Value("string"),
    "elements": List(Value("string")),
    "options": List(Value("string")),
    "threshold": Value("int32"),
    "steps": List(STEP),
    "grade_full_order": Value("bool"),
    "subject": Value("string"),
    "relation": Value("string"),
    "object": Value("string"),
    "meta_insight": Value("string"),
    "evidence": List(EVIDENCE),
}
CHECK = {
    "id": Value("string"),
    "item_id": Value("string"),
    "kind": Value("string"),
    "tier": Value("string"),
    "text": Value("string"),
}
COMPILE_PARAMS = {name: Value("int32") for name in CompileParams.model_fields}
PAYLOAD_FIELDS = [name for name in META_ITEM if name not in ("id", "tier", "type", "label", "evidence")]


def gamut_features(domains: list[str], variant: Variant = "multimodal") -> Features:
    """The columns of one configuration. ``domains`` are the data's own domain names."""
    columns: dict[str, Any] = {
        "id": Value("string"),
        "domain": ClassLabel(names=sorted(domains)),
    }
    if variant == "multimodal":
        columns["image"] = Image()
    columns.update(
        {
            "question": Value("string"),
            "text_question": Value("string"),
            "entity": Value("string"),
            "meta_rubric": List(META_ITEM),
            "binary_rubric": List(CHECK),
            # Provenance a maintainer needs to audit or rebuild a row.
            "image_source": Value("string"),
            "image_license": Value("string"),
            "rubric_version": Value("string"),
            "compile_params": COMPILE_PARAMS,
            "binary_rubric_edited": Value("bool"),
        }
    )
    return Features(columns)


def item_to_row(item: Item) -> dict[str, Any]:
    """One meta-rubric item as a META_ITEM struct: absent payload fields are null."""
    data = item.model_dump(mode="json")
    return {name: data.get(name) for name in META_ITEM}


def meta_rubric_to_rows(rubric: MetaRubric) -> list[dict[str, Any]]:
    return [item_to_row(item) for item in rubric.items]


def meta_rubric_from_rows(question_id: str, rows: list[dict[str, Any]]) -> MetaRubric:
    """Rebuild the pydantic meta-rubric from stored item structs (the inverse of the above)."""
    items = []
    for row in rows:
        item = {k: v for k, v in row.items() if k not in PAYLOAD_FIELDS or v is not None}
        items.append(item)
    return parse_meta_rubric({"question_id": question_id, "items": items}, question_id=question_id)


def checks_from_rows(question_id: str, rows: list[dict[str, Any]]) -> list[Check]:
    return parse_checks(list(rows), question_id=question_id)


# details.parquet of a run: one row per check. verdict is one of the four, "error" (the
# judge's answer was unreadable; raw keeps it) or null (not judged yet).
DETAILS_FEATURES = Features(
    {
        "question_id": Value("string"),
        "domain": Value("string"),
        "check_id": Value("string"),
        "tier": Value("string"),
        "kind": Value("string"),
        "item_id": Value("string"),
        "check_text": Value("string"),
        "verdict": Value("string"),
        "rationale": Value("string"),
        "raw": Value("string"),
    }
)

# responses.parquet: the candidate's answer to each question of a run (what the judge read),
# and a thinking candidate's reasoning beside it (never shown to the judge; null without one;
# absent from folders written before it was kept).
RESPONSES_FEATURES = Features(
    {
        "question_id": Value("string"),
        "response": Value("string"),
        "error": Value("string"),
        "reasoning": Value("string"),
    }
)
