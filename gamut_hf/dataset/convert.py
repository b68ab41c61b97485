"""``gamut convert``: the official release's layout into gamut-hf's own, for users who want the
typed columns and the dataset viewer's nested features.

Both splits of the release become the two configurations (``multimodal`` from ``test`` with its
photos from CRAG-MM embedded, ``text_only`` from ``test_text_only``), joined by ``session_id``: a
multimodal row's ``text_question`` is the text-only split's question for the same session. The
checks are the released ones (:mod:`.release`), the meta-rubric is left empty (the release has
none, and the card says so) and the cited snippets go into ``check_evidence``. Every row is read
and every photo found before anything is written; the folder is written as its own
(:class:`~gamut_hf.atomic.OwnedFolder`), so a rerun replaces only what it wrote.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Dataset, Features

from gamut_hf.atomic import OwnedFolder
from gamut_hf.core.names import VARIANTS, Variant
from gamut_hf.dataset.card import CARD_FILE, card_metadata
from gamut_hf.dataset.features import evidence_to_rows, gamut_features
from gamut_hf.dataset.loader import (
    GamutQuestion,
    ImageResolver,
    NoPhoto,
    iter_questions,
    load_gamut,
    resolve_images,
    try_images,
)
from gamut_hf.dataset.stats import RubricRecord, rubric_stats, stats_markdown
from gamut_hf.files import InputError

# What a converted row records in place of a build's compile provenance.
RELEASE_RUBRIC_VERSION = "facebook/GAMUT release (checks as published; no meta-rubric)"
IMAGE_SOURCE = "CRAG-MM (crag-mm-2025/crag-mm-single-turn-public), by session_id"


@dataclass(frozen=True)
class Converted:
    rows: dict[Variant, int]  # per configuration
    left_out: list[str]  # why each question left out of the multimodal configuration is


def _png_bytes(image: Any) -> dict[str, Any]:
    """The photo as PNG: lossless, so the model sees the very pixels the release's photo decodes to."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def _row(question: GamutQuestion, variant: Variant, text_question: str, photo: Any = None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": question.id, "domain": question.domain}
    if variant == "multimodal":
        row["image"] = photo
        row["question"] = question.question
    row.update(
        text_question=text_question,
        entity=question.entity,
        meta_rubric=[],
        binary_rubric=[check.model_dump() for check in question.checks],
        image_source=IMAGE_SOURCE if variant == "multimodal" else None,
        image_license=None,
        rubric_version=RELEASE_RUBRIC_VERSION,
        compile_params=None,
        binary_rubric_edited=None,
        check_evidence=evidence_to_rows(question.evidence),
    )
    return row


def convert_release(
    source: str | Path,
    out: str | Path,
    *,
    images: ImageResolver,
    revision: str | None = None,
    pretty_name: str = "GAMUT (converted from the official release)",
    license: str = "cc-by-nc-4.0",
    skip_missing_photos: bool = False,
) -> Converted:
    """Write SOURCE (the release's layout) into OUT in gamut-hf's layout. A question without a usable
    photo refuses the whole conversion, naming each, unless ``skip_missing_photos`` leaves it out of
    the multimodal configuration (the text_only one keeps every question)."""
    splits = {variant: load_gamut(source, variant, revision=revision) for variant in VARIANTS}
    for variant, data in splits.items():
        if "rubrics" not in data.column_names:
            raise InputError(f"{source}: the {variant} split is not in the official release's layout (no rubrics)")
    text = list(iter_questions(splits["text_only"], "text_only"))
    named = {q.id: q.text_question for q in text}
    photographed = list(iter_questions(splits["multimodal"], "text_only"))  # photos below, all missing ones named
    left_out: list[str] = []
    if skip_missing_photos:
        found = try_images(splits["multimodal"], images, _png_bytes)
        left_out = [value.reason for value in found if isinstance(value, NoPhoto)]
        kept = [(q, photo) for q, photo in zip(photographed, found, strict=True) if not isinstance(photo, NoPhoto)]
        photographed, photos = [q for q, _ in kept], [photo for _, photo in kept]
    else:
        photos = resolve_images(
            splits["multimodal"], images, str(source), _png_bytes, advice="or --skip-missing-photos leaves them out"
        )
    questions: dict[Variant, list[tuple[GamutQuestion, str]]] = {
        "multimodal": [(q, named.get(q.id, q.text_question)) for q in photographed],
        "text_only": [(q, q.text_question) for q in text],
    }
    domains = sorted({q.domain for pairs in questions.values() for q, _ in pairs})
    features = {variant: gamut_features(domains, variant, check_evidence=True) for variant in VARIANTS}
    rows: dict[Variant, list[dict[str, Any]]] = {
        "multimodal": [
            _row(q, "multimodal", t, photo) for (q, t), photo in zip(questions["multimodal"], photos, strict=True)
        ],
        "text_only": [_row(q, "text_only", t) for q, t in questions["text_only"]],
    }
    tables = {variant: Dataset.from_list(rows[variant], features=features[variant]) for variant in VARIANTS}
    with OwnedFolder(out, "convert", others_allowed=False, advice="convert into a new or empty folder") as owned:
        sizes = {}
        for variant, table in tables.items():
            path = owned.path(f"{variant}/test-00000-of-00001.parquet")
            table.to_parquet(path)
            sizes[variant] = path.stat().st_size
        stats = rubric_stats(RubricRecord(q.domain, None, q.checks) for q, _ in questions["text_only"])
        owned.write_text(
            CARD_FILE, _card(pretty_name, license, features, tables, sizes, stats, str(source), len(left_out))
        )
    return Converted({variant: len(table) for variant, table in tables.items()}, left_out)


def _card(
    pretty_name: str,
    license: str,
    features: Mapping[Variant, Features],
    tables: Mapping[Variant, Dataset],
    sizes: Mapping[Variant, int],
    stats: Any,
    source: str,
    left_out: int,
) -> str:
    metadata = card_metadata(pretty_name, features, {v: len(t) for v, t in tables.items()}, sizes, license)
    return f"""---
{metadata}
---

# {pretty_name}

Converted by `gamut convert` (gamut-hf) from `{source}`, a dataset in the official GAMUT release's layout,
into gamut-hf's layout: configurations `multimodal` ({len(tables["multimodal"])} rows, photos from CRAG-MM
embedded) and `text_only` ({len(tables["text_only"])} rows), split `test`.{
        f" {left_out} questions without a usable photo are in `text_only` only." if left_out else ""
    }

**The meta-rubric is empty.** The release publishes its binary checks already compiled and no typed
meta-rubric, so `meta_rubric` is an empty list in every row, `compile_params` is null, and `binary_rubric`
holds the released checks as published (the release's `Handle` as the check id, its `Ingredient` as the
text, its tier key as the tier; the kind is `order` for a process's order check and `unspecified`
otherwise). `check_evidence` keeps the snippets each check cites (`text` null where a citation names no
snippet of its question). Commands that need a typed meta-rubric (`gamut compile`, the structure rows of
`gamut stats`, the failure browser's item view) say so; everything else works on the checks.

## Statistics

{stats_markdown(stats)}"""
