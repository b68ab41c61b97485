"""``gamut build``: an annotation folder into a hub-layout dataset folder.

The output mirrors a Hugging Face dataset repository exactly::

    OUT/README.md                      card, with configs: and dataset_info: in its YAML
    OUT/multimodal/test-00000-of-0000N.parquet   image bytes embedded
    OUT/text_only/test-00000-of-00001.parquet

so ``load_dataset(OUT)`` and ``load_dataset(OUT, "text_only")`` work offline, and
``gamut push`` uploads the folder as it is. Everything is validated before anything is
written, and the folder appears only when complete (built beside OUT, then renamed).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from datasets import Dataset, Features
from datasets.utils.logging import disable_progress_bar, enable_progress_bar

from gamut_hf.annotations import AnnotatedQuestion, read_annotations
from gamut_hf.card import render_card
from gamut_hf.compiler import CompileParams
from gamut_hf.features import RUBRIC_VERSION, VARIANTS, Variant, gamut_features, meta_rubric_to_rows
from gamut_hf.files import InputError
from gamut_hf.stats import RubricRecord, rubric_stats

# Parquet files of at most about this many image bytes; the hub's own uploads use similar sizes.
SHARD_BYTES = 256 * 1024 * 1024
# Rows per parquet row group for image data: small groups keep random access and the viewer fast.
IMAGE_ROW_GROUP = 100


def question_row(question: AnnotatedQuestion, variant: Variant, compile_params: CompileParams) -> dict[str, Any]:
    row: dict[str, Any] = {"id": question.id, "domain": question.domain}
    if variant == "multimodal":
        # Bytes, not a path: a parquet file that stores paths breaks as soon as it is moved.
        row["image"] = {"bytes": question.image_path.read_bytes(), "path": question.image_path.name}
    row.update(
        question=question.question,
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
    questions: list[AnnotatedQuestion], variant: Variant, features: Features, folder: Path,
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
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise InputError(f"{out}: folder is not empty (use --overwrite to replace it)")
    questions = read_annotations(source, compile_params=compile_params, extra_domains=extra_domains)

    domains = sorted({q.domain for q in questions})
    features = {variant: gamut_features(domains, variant) for variant in VARIANTS}
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would survive the rename
    disable_progress_bar()  # datasets' per-shard bars would drown the build's own output
    try:
        sizes = {
            variant: _write_variant(questions, variant, features[variant], staging, compile_params)
            for variant in VARIANTS
        }
        stats = rubric_stats(RubricRecord(q.domain, q.meta_rubric, q.checks) for q in questions)
        card = render_card(
            questions, stats, features=features, sizes=sizes, compile_params=compile_params,
            pretty_name=pretty_name, license=license, repo_hint=repo_id or str(out),
        )
        (staging / "README.md").write_text(card, encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        enable_progress_bar()
    return questions
