"""One loader for the rest of the project: the sample, an annotation folder, a built folder,
a hub id, or the official release layout.

``load_gamut`` returns a ``datasets.Dataset`` of one variant; ``iter_questions`` turns its
rows into :class:`GamutQuestion` objects with a validated meta-rubric, the binary checks and,
in the multimodal variant, a PIL image. Images that are referenced instead of embedded (the
official release points into CRAG-MM) are resolved by a pluggable :class:`ImageResolver`.
"""

from __future__ import annotations

import hashlib
import importlib.resources
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import datasets
from datasets.exceptions import DatasetNotFoundError
from PIL import Image as PILImage

from gamut_hf.core.names import VARIANTS, Variant
from gamut_hf.core.rubric import Check, MetaRubric
from gamut_hf.dataset.annotations import QUESTIONS_FILE
from gamut_hf.dataset.features import DATASET_LAYOUT, checks_from_rows, meta_rubric_from_rows
from gamut_hf.errors import GamutError
from gamut_hf.files import InputError, cache_root, open_image

SAMPLE_NAME = "gamut-sample"
# Package data (pyproject.toml), so an installed gamut-hf has it too.
SAMPLE_SOURCE = Path(str(importlib.resources.files("gamut_hf") / "data" / SAMPLE_NAME))
OFFICIAL_REPO = "facebook/GAMUT"
CRAG_MM_REPO = "crag-mm-2025/crag-mm-single-turn-public"
# The official release has one configuration with a split per variant.
OFFICIAL_SPLITS: dict[Variant, str] = {"multimodal": "test", "text_only": "test_text_only"}


class ImageNotFound(GamutError, LookupError):
    """A question whose referenced image cannot be found; the message names the question."""


class ImageResolver(Protocol):
    """Finds the image of a row whose image is referenced rather than embedded."""

    def __call__(self, row: Mapping[str, Any]) -> PILImage.Image: ...


class FolderImageResolver:
    """Images in a local folder, named by a row field (``<folder>/<row[key]>.<ext>``)."""

    EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")

    def __init__(self, folder: str | Path, key: str = "id"):
        self.folder = Path(folder)
        self.key = key

    def __call__(self, row: Mapping[str, Any]) -> PILImage.Image:
        name = str(row.get(self.key) or "")
        if name and "/" not in name and "\\" not in name and name not in (".", ".."):
            for extension in ("", *self.EXTENSIONS):
                path = self.folder / f"{name}{extension}"
                if path.is_file():
                    return open_image(path)
        raise ImageNotFound(f"question {row.get('id', '?')}: no image named {name!r} in {self.folder}")


class CragMMImageResolver:
    """Images from CRAG-MM, looked up by session id (the official release's references).

    ``source`` is the CRAG-MM hub id or a local copy of it; it is loaded on first use and
    indexed once, so a full pass costs one lookup per row.
    """

    def __init__(
        self,
        source: str | Path = CRAG_MM_REPO,
        split: str = "validation",
        key: str = "session_id",
        revision: str | None = None,
    ):
        self.source, self.split, self.key, self.revision = str(source), split, key, revision
        self._data: datasets.Dataset | None = None
        self._index: dict[str, int] = {}

    def _load(self) -> datasets.Dataset:
        if self._data is None:
            self._data = datasets.load_dataset(self.source, split=self.split, revision=self.revision)
            self._index = {sid: i for i, sid in enumerate(self._data[self.key])}
        return self._data

    def __call__(self, row: Mapping[str, Any]) -> PILImage.Image:
        data = self._load()
        reference = row.get(self.key)
        if reference not in self._index:
            raise ImageNotFound(
                f"question {row.get('id', '?')}: {self.key} {reference!r} not found in CRAG-MM ({self.source})"
            )
        return data[self._index[reference]]["image"]


def image_resolver(spec: str) -> ImageResolver:
    """A resolver from its command-line form: ``crag-mm`` (the hub dataset), ``crag-mm=PATH``
    (a local copy of it) or a folder of images named by question id."""
    name, _, where = spec.partition("=")
    if name == "crag-mm":
        return CragMMImageResolver(where or CRAG_MM_REPO)
    if Path(spec).is_dir():
        return FolderImageResolver(spec)
    raise InputError(f"--images: expected crag-mm, crag-mm=PATH or a folder of images, got {spec!r}")


@dataclass
class GamutQuestion:
    """One benchmark question as the pipeline sees it.

    ``question`` (the generic "this cat", asked beside the photo) is None where the rows do not
    carry it: the text_only configuration, whose model reads ``text_question``."""

    id: str
    domain: str
    question: str | None
    text_question: str
    entity: str
    meta_rubric: MetaRubric
    checks: list[Check]
    image: PILImage.Image | None

    def prompt(self, variant: Variant) -> str:
        """What the candidate is asked: the generic question with the image, or the named one."""
        if variant == "text_only":
            return self.text_question
        if self.question is None:
            raise InputError(
                f"question {self.id}: the dataset has no `question` column, which the multimodal variant asks "
                "beside the image"
            )
        return self.question


def _folder_fingerprint(folder: Path) -> str:
    # The layout too: a cached build made by an older gamut-hf has other columns.
    digest = hashlib.sha256(DATASET_LAYOUT.encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def built_folder(annotations: str | Path) -> Path:
    """Build an annotation folder into the cache once (keyed by its contents) and return the result."""
    from gamut_hf.dataset.build import build_dataset

    folder = Path(annotations)
    target = cache_root() / "built" / f"{folder.name}-{_folder_fingerprint(folder)}"
    if not (target / "README.md").is_file():
        build_dataset(folder, target, overwrite=True)
    return target


def resolve_source(source: str | Path) -> str:
    """Where ``load_dataset`` should look: the sample and annotation folders are built first."""
    if str(source) == SAMPLE_NAME:
        return str(built_folder(SAMPLE_SOURCE))
    path = Path(source)
    if path.is_dir() and (path / QUESTIONS_FILE).is_file():
        return str(built_folder(path))
    if path.exists() and not path.is_dir():
        raise InputError(f"{source}: expected a dataset folder, an annotation folder or a hub id")
    if not path.exists() and (str(source).startswith((".", "/")) or str(source).count("/") != 1):
        raise InputError(f"{source}: no such folder, and not a hub id of the form owner/name")
    return str(source)


def load_gamut(
    source: str | Path = SAMPLE_NAME, variant: Variant = "multimodal", *, revision: str | None = None
) -> datasets.Dataset:
    """Load one variant of a GAMUT dataset: our hub layout or the official one."""
    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    where = resolve_source(source)
    try:
        configs = datasets.get_dataset_config_names(where, revision=revision)
        if set(VARIANTS) <= set(configs):
            return datasets.load_dataset(where, variant, split="test", revision=revision)
        # The official layout: one configuration, a split per variant.
        return datasets.load_dataset(where, split=OFFICIAL_SPLITS[variant], revision=revision)
    except (ConnectionError, FileNotFoundError, DatasetNotFoundError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{source}: cannot load the {variant} variant ({reason})") from None


def _domain_name(dataset: datasets.Dataset, value: Any) -> str:
    feature = dataset.features.get("domain")
    if isinstance(feature, datasets.ClassLabel) and isinstance(value, int):
        return feature.int2str(value)
    return str(value)


def iter_questions(
    dataset: datasets.Dataset, variant: Variant = "multimodal", *, image_resolver: ImageResolver | None = None
) -> Iterator[GamutQuestion]:
    """Rows as GamutQuestion objects; images decoded (or resolved) in the multimodal variant.

    ``variant`` decides only whether images are fetched: "text_only" fetches none, so a multimodal
    configuration's questions can be listed without decoding a photo (their ``question`` is there)."""
    has_image = "image" in dataset.features and isinstance(dataset.features["image"], datasets.Image)
    for row in dataset:
        image = None
        if variant == "multimodal":
            if has_image and row["image"] is not None:
                image = row["image"]
            elif image_resolver is not None:
                image = image_resolver(row)
            else:
                raise ImageNotFound(
                    f"question {row.get('id', '?')}: the dataset has no embedded image; pass an image resolver "
                    "(a local folder or CRAG-MM) to load the multimodal variant"
                )
        qid = row["id"]
        yield GamutQuestion(
            id=qid,
            domain=_domain_name(dataset, row["domain"]),
            # Absent from text_only rows; builds before DATASET_LAYOUT 2 carry it there too (unread).
            question=row.get("question"),
            text_question=row["text_question"],
            entity=row.get("entity") or "",
            meta_rubric=meta_rubric_from_rows(qid, row["meta_rubric"]),
            checks=checks_from_rows(qid, row["binary_rubric"]),
            image=image,
        )
