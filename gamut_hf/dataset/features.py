"""The dataset's columns, declared once as ``datasets.Features`` and used everywhere.

The two configurations differ in what a model reads, and carry nothing it could read by mistake:

- ``multimodal``: ``image`` and ``question`` (the entity named only generically, "this cat");
  ``text_question`` is kept beside them for comparing the variants, never for the model.
- ``text_only``: ``text_question`` (the entity named); no ``image`` and no ``question``, whose
  "this cat" refers to a photo this configuration does not have.

Both rubric levels are typed structs, not JSON strings. A meta-rubric is a list of item structs,
and one struct type holds every item type's payload fields, so each item fills only its own type's
fields (``PAYLOAD_FIELDS_BY_TYPE``) and the others are null:

=================  ==================================================
item ``type``      payload fields that apply
=================  ==================================================
``knowledge``      ``statement``
``strict_list``    ``elements``, ``meta_insight`` (optional)
``flexible_list``  ``options``, ``threshold``, ``meta_insight`` (optional)
``process``        ``steps``, ``grade_full_order``, ``meta_insight`` (optional)
``relationship``   ``subject``, ``relation``, ``object``
=================  ==================================================

``id``, ``tier``, ``type``, ``label`` and ``evidence`` apply to every item. The binary rubric is a
list of check structs. ``item_to_row`` and ``meta_rubric_from_rows`` convert between the pydantic
models and these rows, losslessly. ``COLUMN_DESCRIPTIONS`` and ``PAYLOAD_FIELD_DESCRIPTIONS`` say
what each column and field means; the dataset card renders its tables from them.
"""

from __future__ import annotations

from typing import Any

from datasets import ClassLabel, Features, Image, List, Value

from gamut_hf.core.compiler import CompileParams
from gamut_hf.core.names import Variant
from gamut_hf.core.rubric import (
    VERDICTS,
    Check,
    FlexibleListItem,
    Item,
    ItemType,
    KnowledgeItem,
    MetaRubric,
    ProcessItem,
    RelationshipItem,
    StrictListItem,
    parse_checks,
    parse_meta_rubric,
)
from gamut_hf.dataset.release import CitedSnippet

# Bumped whenever the rubric schema or compile rules change meaning.
RUBRIC_VERSION = "gamut-rubric-1"
# Bumped whenever a configuration's columns change, so a cached build of an annotation folder
# made by an older gamut-hf is rebuilt (2: text_only lost its `question` column).
DATASET_LAYOUT = "gamut-layout-2"

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
# A converted release's evidence (gamut convert): the snippets each check cites, one entry per
# citation; text null where the citation names no snippet of the question.
CITED_SNIPPET = {
    "check_id": Value("string"),
    "citation": Value("string"),
    "title": Value("string"),
    "text": Value("string"),
}
COMPILE_PARAMS = {name: Value("int32") for name in CompileParams.model_fields}
COMMON_ITEM_FIELDS = ("id", "tier", "type", "label", "evidence")
PAYLOAD_FIELDS = [name for name in META_ITEM if name not in COMMON_ITEM_FIELDS]

_ITEM_MODELS: dict[ItemType, type[Item]] = {
    "knowledge": KnowledgeItem,
    "strict_list": StrictListItem,
    "flexible_list": FlexibleListItem,
    "process": ProcessItem,
    "relationship": RelationshipItem,
}
# The payload fields each item type fills, read off the pydantic models so that they cannot drift
# apart; every other payload field of its META_ITEM struct is null.
PAYLOAD_FIELDS_BY_TYPE: dict[ItemType, tuple[str, ...]] = {
    kind: tuple(name for name in PAYLOAD_FIELDS if name in model.model_fields) for kind, model in _ITEM_MODELS.items()
}
# Fields an item of the type may leave null even though they apply to it.
OPTIONAL_PAYLOAD_FIELDS = ("meta_insight",)

PAYLOAD_FIELD_DESCRIPTIONS = {
    "statement": "the one discrete fact",
    "elements": "every element, all required",
    "options": "the pool of acceptable options",
    "threshold": "how many options an answer must mention",
    "steps": "the ordered steps, each `{text, required}`",
    "grade_full_order": "whether the order of all steps, optional ones included, is checked too",
    "subject": "the first entity of the relationship",
    "relation": "what links subject and object",
    "object": "the second entity of the relationship",
    "meta_insight": "one sentence of synthesis across the members that no single member states",
}

# What each column means, in the order the configurations hold them (a configuration lacks some).
COLUMN_DESCRIPTIONS = {
    "id": "question id, unique and stable",
    "domain": "one of the dataset's domains (a class label)",
    "image": "the photograph, embedded as bytes",
    "question": 'the question as asked beside the photo, the entity named only generically ("this cat")',
    "text_question": "the same question with the entity named, for a model that sees no photo",
    "entity": "what the photo shows",
    "meta_rubric": "the upper rubric level: items with a tier, a type and their type's payload fields",
    "binary_rubric": "the lower level, what a judge grades: checks `{id, item_id, kind, tier, text}`",
    "image_source": "where the photo comes from",
    "image_license": "the photo's licence",
    "rubric_version": "version of the rubric schema and compile rules",
    "compile_params": "the compile parameters the binary rubric was compiled with",
    "binary_rubric_edited": "whether annotators edited the binary rubric after compilation",
    "check_evidence": "a converted release only: the snippets each check cites `{check_id, citation, title, text}`",
}


def gamut_features(domains: list[str], variant: Variant = "multimodal", *, check_evidence: bool = False) -> Features:
    """The columns of one configuration. ``domains`` are the data's own domain names.
    ``check_evidence``: a converted release's, whose evidence is cited per check (no meta-rubric)."""
    columns: dict[str, Any] = {
        "id": Value("string"),
        "domain": ClassLabel(names=sorted(domains)),
    }
    if variant == "multimodal":
        # The generic question only beside the photo: without it, "this cat" is the wrong thing
        # to ask a model, so the text_only configuration does not carry it at all.
        columns["image"] = Image()
        columns["question"] = Value("string")
    columns.update(
        {
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
    if check_evidence:
        columns["check_evidence"] = List(CITED_SNIPPET)
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


def evidence_to_rows(evidence: dict[str, tuple[CitedSnippet, ...]]) -> list[dict[str, Any]]:
    return [
        {"check_id": check_id, "citation": s.citation, "title": s.title, "text": s.text}
        for check_id, snippets in evidence.items()
        for s in snippets
    ]


def evidence_from_rows(rows: list[dict[str, Any]] | None) -> dict[str, tuple[CitedSnippet, ...]]:
    """The inverse of :func:`evidence_to_rows`; a layout without the column has no per-check evidence."""
    evidence: dict[str, list[CitedSnippet]] = {}
    for row in rows or []:
        evidence.setdefault(row["check_id"], []).append(CitedSnippet(row["citation"], row["title"], row["text"]))
    return {check_id: tuple(snippets) for check_id, snippets in evidence.items()}


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
        # Each verdict's probability at the verdict's position, where the judge's backend gives
        # them (null otherwise, and absent from folders written before they were kept).
        "verdict_probabilities": {verdict: Value("float64") for verdict in VERDICTS},
        # The verdict is the escalation judge's (--escalate-below): the first judge was unsure.
        "escalated": Value("bool"),
        # A panel run's members' verdicts, in the order the judges were given (null with one judge).
        "panel_verdicts": List(Value("string")),
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
