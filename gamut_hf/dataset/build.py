"""``gamut build``: an annotation folder into a hub-layout dataset folder.

The output mirrors a Hugging Face dataset repository exactly::

    OUT/README.md                      card, with configs: and dataset_info: in its YAML
    OUT/multimodal/test-00000-of-0000N.parquet   image bytes embedded
    OUT/text_only/test-00000-of-00001.parquet

so ``load_dataset(OUT)`` and ``load_dataset(OUT, "text_only")`` work offline, and
``gamut push`` uploads the folder as it is. Everything is validated before anything is
written, and the folder appears only when complete (built beside OUT, then swapped in by
``atomic.replace_folder``). ``--overwrite`` replaces only a previous build: a folder holding
exactly a card written by gamut (``card.BUILD_MARKER``) and the two configurations' parquet
files. OUT may not overlap SOURCE, nor be the current folder or one above it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datasets import Dataset, Features
from datasets.utils.logging import disable_progress_bar, enable_progress_bar

from gamut_hf.atomic import folder_in_place
from gamut_hf.core.compiler import CompileParams
from gamut_hf.core.names import VARIANTS, Variant
from gamut_hf.dataset.annotations import AnnotatedQuestion, read_annotations
from gamut_hf.dataset.card import BUILD_MARKER, CARD_FILE, render_card
from gamut_hf.dataset.features import (
    RUBRIC_VERSION,
    gamut_features,
    meta_rubric_to_rows,
)
from gamut_hf.dataset.stats import RubricRecord, rubric_stats
from gamut_hf.files import InputError

# Parquet files of at most about this many image bytes; the hub's own uploads use similar sizes.
SHARD_BYTES = 256 * 1024 * 1024
# Rows per parquet row group for image data: small groups keep random access and the viewer fast.
IMAGE_ROW_GROUP = 100


def question_row(question: AnnotatedQuestion, variant: Variant, compile_params: CompileParams) -> dict[str, Any]:
    row: dict[str, Any] = {"id": question.id, "domain": question.domain}
    if variant == "multimodal":
        # Bytes, not a path: a parquet file that stores paths breaks as soon as it is moved.
        row["image"] = {"bytes": question.image_path.read_bytes(), "path": question.image_path.name}
        # Only beside its photo (features.gamut_features): text_only rows carry text_question alone.
        row["question"] = question.question
    row.update(
        text_question=question.text_question,
        entity=question.entity,
        meta_rubric=meta_rubric_to_rows(question.meta_rubric),
        binary_rubric=[check.model_dump() for check in question.checks],
        image_source=question.image_source,
        image_license=question.image_license,
        rubric_version=RUBRIC_VERSION,
        compile_params=compile_params.model_dump(),
        binary_rubric_edited=question.checks_edited,
    )
    return row


def _shards(questions: list[AnnotatedQuestion], variant: Variant) -> list[list[AnnotatedQuestion]]:
    if variant != "multimodal":
        return [questions]
    shards: list[list[AnnotatedQuestion]] = [[]]
    size = 0
    for question in questions:
        image_bytes = question.image_path.stat().st_size
        if shards[-1] and size + image_bytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(question)
        size += image_bytes
    return shards


def _write_variant(
    questions: list[AnnotatedQuestion],
    variant: Variant,
    features: Features,
    folder: Path,
    compile_params: CompileParams,
) -> int:
    """Write one configuration's parquet shards; returns the bytes written."""
    (folder / variant).mkdir(parents=True)
    shards = _shards(questions, variant)
    written = 0
    for index, shard in enumerate(shards):
        rows = [question_row(question, variant, compile_params) for question in shard]
        dataset = Dataset.from_list(rows, features=features)
        path = folder / variant / f"test-{index:05d}-of-{len(shards):05d}.parquet"
        dataset.to_parquet(path, batch_size=IMAGE_ROW_GROUP if variant == "multimodal" else None)
        written += path.stat().st_size
    return written


def _not_a_build(folder: Path) -> str | None:
    """What in ``folder`` shows it is not a previous build of ours (None: it is one, or empty)."""
    entries = {entry.name: entry for entry in folder.iterdir()}
    if not entries:
        return None
    for name, entry in sorted(entries.items()):
        if name not in (CARD_FILE, *VARIANTS):
            return name
        if entry.is_symlink():
            return f"{name} (a link)"
    card = entries.get(CARD_FILE)
    if card is None or not card.is_file():
        return f"no {CARD_FILE}"
    if BUILD_MARKER not in card.read_text(encoding="utf-8", errors="replace"):
        return f"{CARD_FILE} (not a card written by gamut build)"
    for variant in VARIANTS:
        configuration = entries.get(variant)
        if configuration is None or not configuration.is_dir():
            return f"no {variant}/"
        for shard in sorted(configuration.iterdir()):
            if not (
                shard.is_file()
                and not shard.is_symlink()
                and shard.name.startswith("test-")
                and shard.suffix == ".parquet"
            ):
                return f"{variant}/{shard.name}"
    return None


def check_output_folder(source: Path, out: Path, overwrite: bool) -> None:
    """Refuse, before anything is read or written, an OUT whose replacement could lose anything
    that is not a previous build: SOURCE itself, a folder holding or inside SOURCE, the current
    folder or one above it, or a folder of other files (links resolved throughout)."""
    where, annotations, here = out.resolve(), source.resolve(), Path.cwd().resolve()
    if where == annotations:
        raise InputError(f"{out}: is the annotation folder itself; build into a new folder")
    if where in annotations.parents:
        raise InputError(f"{out}: holds the annotation folder {source}; build into a new folder outside it")
    if annotations in where.parents:
        raise InputError(f"{out}: is inside the annotation folder {source}; build into a new folder outside it")
    if where == here or where in here.parents:
        raise InputError(f"{out}: is the current folder or one above it; build into a new folder")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    if not out.is_dir():
        return
    if not overwrite and any(out.iterdir()):
        raise InputError(f"{out}: folder is not empty (use --overwrite to replace a previous build)")
    stranger = _not_a_build(out)
    if stranger is not None:
        raise InputError(
            f"{out}: not a previous gamut build ({stranger}); --overwrite replaces only those, "
            "so build into a new or empty folder"
        )


def build_dataset(
    source: str | Path,
    out: str | Path,
    *,
    compile_params: CompileParams = CompileParams(),
    overwrite: bool = False,
    pretty_name: str = "GAMUT",
    license: str = "cc-by-nc-4.0",
    repo_id: str | None = None,
    extra_domains: tuple[str, ...] = (),
) -> list[AnnotatedQuestion]:
    """Validate SOURCE, then write the hub-layout folder OUT. Raises before writing anything."""
    source, out = Path(source), Path(out)
    check_output_folder(source, out, overwrite)
    questions = read_annotations(source, compile_params=compile_params, extra_domains=extra_domains)

    domains = sorted({q.domain for q in questions})
    features = {variant: gamut_features(domains, variant) for variant in VARIANTS}
    disable_progress_bar()  # datasets' per-shard bars would drown the build's own output
    try:
        with folder_in_place(out) as staging:
            sizes = {
                variant: _write_variant(questions, variant, features[variant], staging, compile_params)
                for variant in VARIANTS
            }
            stats = rubric_stats(RubricRecord(q.domain, q.meta_rubric, q.checks) for q in questions)
            card = render_card(
                questions,
                stats,
                features=features,
                sizes=sizes,
                compile_params=compile_params,
                pretty_name=pretty_name,
                license=license,
                repo_id=repo_id,
            )
            (staging / CARD_FILE).write_text(card, encoding="utf-8")
    finally:
        enable_progress_bar()
    return questions
