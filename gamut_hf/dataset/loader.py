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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import datasets
from datasets.exceptions import DatasetNotFoundError
from PIL import Image as PILImage

from gamut_hf.core.names import VARIANTS, Variant
from gamut_hf.core.rubric import Check, MetaRubric
from gamut_hf.dataset.annotations import QUESTIONS_FILE
from gamut_hf.dataset.features import DATASET_LAYOUT, checks_from_rows, evidence_from_rows, meta_rubric_from_rows
from gamut_hf.dataset.release import RELEASE_COLUMNS, UNKNOWN_DOMAIN, CitedSnippet, released_rubric
from gamut_hf.errors import GamutError
from gamut_hf.files import MAX_IMAGE_BYTES, InputError, cache_root, decode_image, open_image

SAMPLE_NAME = "gamut-sample"
# Package data (pyproject.toml), so an installed gamut-hf has it too.
SAMPLE_SOURCE = Path(str(importlib.resources.files("gamut_hf") / "data" / SAMPLE_NAME))
OFFICIAL_REPO = "facebook/GAMUT"
CRAG_MM_REPO = "crag-mm-2025/crag-mm-single-turn-public"
CRAG_MM_REVISION = "v0.1.2"  # the single-turn set the release's session ids point into
# The official release has one configuration with a split per variant.
OFFICIAL_SPLITS: dict[Variant, str] = {"multimodal": "test", "text_only": "test_text_only"}


T = TypeVar("T")


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
        name = str(row.get(self.key) or row_id(row))
        if name and "/" not in name and "\\" not in name and name not in (".", ".."):
            for extension in ("", *self.EXTENSIONS):
                path = self.folder / f"{name}{extension}"
                if path.is_file():
                    return open_image(path)
        raise ImageNotFound(f"question {row_id(row)}: no image named {name!r} in {self.folder}")


class CragMMImageResolver:
    """Photos from CRAG-MM, looked up by session id (the official release's references).

    ``source`` is the CRAG-MM hub id, a local copy of it (a dataset folder, or one parquet file);
    it is loaded on first use and indexed once, so a full pass costs one lookup per row. A row's
    ``image`` is used where it holds one (embedded, or the bytes of a parquet struct); else its
    ``image_url`` is downloaded, only with ``fetch_urls`` (the user's say-so: it leaves the machine),
    and decoded under the same limits as every other image.
    """

    def __init__(
        self,
        source: str | Path = CRAG_MM_REPO,
        split: str = "validation",
        key: str = "session_id",
        revision: str | None = None,
        *,
        fetch_urls: bool = False,
    ):
        self.source, self.split, self.key = str(source), split, key
        self.revision = (
            revision if revision is not None else (CRAG_MM_REVISION if self.source == CRAG_MM_REPO else None)
        )
        self.fetch_urls = fetch_urls
        self._data: datasets.Dataset | None = None
        self._index: dict[str, int] = {}

    def _load(self) -> datasets.Dataset:
        if self._data is None:
            data = _load_crag_mm(self.source, self.split, self.revision)
            if self.key not in data.column_names:
                raise InputError(
                    f"{self.source}: CRAG-MM has no {self.key!r} column to find photos by "
                    f"(columns: {', '.join(data.column_names)})"
                )
            self._index = {str(sid): i for i, sid in enumerate(data[self.key])}
            self._data = data
        return self._data

    def __call__(self, row: Mapping[str, Any]) -> PILImage.Image:
        data = self._load()
        reference = row.get(self.key)
        question = row_id(row)
        if reference is None or str(reference) not in self._index:
            raise ImageNotFound(f"question {question}: {self.key} {reference!r} not found in CRAG-MM ({self.source})")
        entry = data[self._index[str(reference)]]
        where = f"question {question}: the CRAG-MM image of {self.key} {reference}"
        image = entry.get("image")
        if isinstance(image, PILImage.Image):
            return image
        if isinstance(image, Mapping) and image.get("bytes"):
            return decode_image(image["bytes"], where)
        if isinstance(image, bytes) and image:
            return decode_image(image, where)
        url = entry.get("image_url")
        if not url:
            raise ImageNotFound(
                f"question {question}: CRAG-MM has no image and no image_url for {self.key} {reference}"
            )
        if not self.fetch_urls:
            raise ImageNotFound(
                f"question {question}: CRAG-MM holds only a URL for {self.key} {reference} ({url}); "
                "add --fetch-image-urls to download it"
            )
        return decode_image(_download(str(url), where), where)


def _load_crag_mm(source: str, split: str, revision: str | None) -> datasets.Dataset:
    """CRAG-MM's split from the hub, a local dataset folder (the split, or its only one) or a parquet file."""
    path = Path(source)
    try:
        if path.is_file():
            return datasets.load_dataset("parquet", data_files=str(path), split="train")
        found = datasets.load_dataset(source, revision=revision)
    except (ConnectionError, FileNotFoundError, DatasetNotFoundError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{source}: cannot load CRAG-MM ({reason})") from None
    if split in found:
        return found[split]
    if len(found) == 1:
        return next(iter(found.values()))
    raise InputError(f"{source}: CRAG-MM has no {split!r} split (splits: {', '.join(found)})")


# A photo's download: long enough for a slow host, short enough that a dead one is named soon.
DOWNLOAD_TIMEOUT_S = 30.0


def _download(url: str, where: str) -> bytes:
    """An image URL's bytes, stopped past the image size limit; an InputError naming ``where`` else."""
    import httpx

    if not url.startswith(("https://", "http://")):
        raise InputError(f"{where}: {url!r} is not an http(s) URL")
    try:
        with httpx.stream("GET", url, timeout=DOWNLOAD_TIMEOUT_S, follow_redirects=True) as response:
            if response.status_code != 200:
                raise InputError(f"{where}: {url} answered HTTP {response.status_code}")
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > MAX_IMAGE_BYTES:
                    raise InputError(f"{where}: {url} sends more than the {MAX_IMAGE_BYTES // 2**20} MiB image limit")
            return bytes(data)
    except httpx.HTTPError as error:
        raise InputError(f"{where}: cannot download {url} ({type(error).__name__}: {error})") from None


@dataclass(frozen=True)
class NoPhoto:
    """Why a row has no usable photo (the message names the question)."""

    reason: str


def try_images(
    rows: Iterable[Mapping[str, Any]], resolver: ImageResolver, use: Callable[[PILImage.Image], T]
) -> list[T | NoPhoto]:
    """``use`` of every row's referenced photo (a hash, an encoding: one photo in memory at a time),
    or for a row without a usable one why not."""
    found: list[T | NoPhoto] = []
    for row in rows:
        try:
            found.append(use(resolver(row)))
        except (ImageNotFound, InputError) as error:
            found.append(NoPhoto(str(error)))
    return found


def resolve_images(
    rows: Iterable[Mapping[str, Any]],
    resolver: ImageResolver,
    where: str,
    use: Callable[[PILImage.Image], T],
    advice: str = "leave them out with --question-id, or use the text_only variant",
) -> list[T]:
    """:func:`try_images`, where the rows without a usable photo are named together in one line
    (the multimodal variant cannot ask them), so a user fixes them all at once."""
    found = try_images(rows, resolver, use)
    missing = [value.reason for value in found if isinstance(value, NoPhoto)]
    if missing:
        shown = "; ".join(missing[:3]) + (f"; and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise InputError(
            f"{where}: {len(missing)} of {len(found)} questions have no usable photo for the "
            f"multimodal variant ({shown}); {advice}"
        )
    return [value for value in found if not isinstance(value, NoPhoto)]


def image_resolver(spec: str, *, fetch_urls: bool = False) -> ImageResolver:
    """A resolver from its command-line form: ``crag-mm`` (the hub dataset), ``crag-mm=PATH``
    (a local copy of it) or a folder of images named by question id. ``fetch_urls``: CRAG-MM rows
    with only an ``image_url`` are downloaded."""
    name, _, where = spec.partition("=")
    if name == "crag-mm":
        return CragMMImageResolver(where or CRAG_MM_REPO, fetch_urls=fetch_urls)
    if Path(spec).is_dir():
        return FolderImageResolver(spec)
    raise InputError(f"--images: expected crag-mm, crag-mm=PATH or a folder of images, got {spec!r}")


@dataclass
class GamutQuestion:
    """One benchmark question as the pipeline sees it.

    ``question`` (the generic "this cat", asked beside the photo) is None where the rows do not
    carry it: the text_only configuration, whose model reads ``text_question``. ``meta_rubric`` is
    None where the layout has none (the official release: its checks come already compiled).
    ``evidence``: the snippets each check cites, by check id, where the layout keeps them per check."""

    id: str
    domain: str
    question: str | None
    text_question: str
    entity: str
    meta_rubric: MetaRubric | None
    checks: list[Check]
    image: PILImage.Image | None
    evidence: dict[str, tuple[CitedSnippet, ...]] = field(default_factory=dict)

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

    def typed_meta_rubric(self, needed_by: str) -> MetaRubric:
        """The meta-rubric, or one line saying that ``needed_by`` needs one this layout lacks."""
        if self.meta_rubric is None:
            raise NoMetaRubric(f"question {self.id}: {needed_by} needs a typed meta-rubric, {NO_META_RUBRIC}")
        return self.meta_rubric


class NoMetaRubric(GamutError, LookupError):
    """A command that needs a typed meta-rubric, given a question whose layout has none."""


NO_META_RUBRIC = (
    "and this dataset has none (the official release publishes its checks already compiled); "
    "everything else (run, judge, score, report, the Space) works on its checks"
)

# The columns each layout needs; which one a table is in is read off its columns, never its name.
Layout = Literal["project", "release"]
PROJECT_COLUMNS = ("id", "domain", "text_question", "meta_rubric", "binary_rubric")
LAYOUT_COLUMNS: dict[Layout, tuple[str, ...]] = {"project": PROJECT_COLUMNS, "release": RELEASE_COLUMNS}
LAYOUT_NAMES: dict[Layout, str] = {"project": "gamut-hf's", "release": "the official release's"}


class UnknownLayout(GamutError, ValueError):
    """A table whose columns are neither layout's; the message lists what is there and what is missing."""


def dataset_layout(columns: list[str] | tuple[str, ...], where: str) -> Layout:
    """Which layout a table with these columns is in, or one line naming what each lacks."""
    present = set(columns)
    for layout, needed in LAYOUT_COLUMNS.items():
        if present >= set(needed):
            return layout
    missing = "; ".join(
        f"{LAYOUT_NAMES[layout]} ({', '.join(needed)}) lacks {', '.join(c for c in needed if c not in present)}"
        for layout, needed in LAYOUT_COLUMNS.items()
    )
    found = ", ".join(columns) or "none"
    raise UnknownLayout(f"{where}: columns {found} match no layout gamut-hf reads: {missing}")


def dataset_question_ids(dataset: datasets.Dataset) -> list[str]:
    """Every question id of a table in either layout (only that column is read)."""
    column = "session_id" if dataset_layout(dataset.column_names, "the dataset") == "release" else "id"
    return [str(qid) for qid in dataset[column]]


def row_id(row: Mapping[str, Any]) -> str:
    """A row's question id in either layout (for messages about the row)."""
    return str(row.get("id") if row.get("id") is not None else row.get("session_id", "?"))


def _folder_fingerprint(folder: Path) -> str:
    """The files of ``folder`` (or the one file it is) by name, size and modification time."""
    # The layout too: a cached build made by an older gamut-hf has other columns.
    digest = hashlib.sha256(DATASET_LAYOUT.encode())
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        stat = path.stat()
        digest.update(f"{path.relative_to(folder.parent)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _local_cache_dir(where: str) -> str | None:
    """Where ``datasets`` keeps its Arrow copy of a local folder or file: a place of its own per
    content. Its default cache is keyed by the folder's name and its card's file patterns, not by
    the files: a folder rewritten in place (or another of the same name) was read stale."""
    path = Path(where)
    if not path.exists():
        return None  # a hub id: the hub's revision keys the default cache
    return str(cache_root() / "datasets" / f"{path.name}-{_folder_fingerprint(path.resolve())}")


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
    if path.is_file() and path.suffix == ".parquet":
        return str(path)  # one split's file, as downloaded from the hub (e.g. data/test_text_only-*.parquet)
    if path.exists() and not path.is_dir():
        raise InputError(f"{source}: expected a dataset folder, a parquet file, an annotation folder or a hub id")
    if not path.exists() and (str(source).startswith((".", "/")) or str(source).count("/") != 1):
        raise InputError(f"{source}: no such folder, and not a hub id of the form owner/name")
    return str(source)


def load_gamut(
    source: str | Path = SAMPLE_NAME, variant: Variant = "multimodal", *, revision: str | None = None
) -> datasets.Dataset:
    """Load one variant of a GAMUT dataset: gamut-hf's configurations, the official release's splits, or
    one parquet file (a split as downloaded); its layout is checked by its columns before any row is read."""
    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    where = resolve_source(source)
    cache_dir = _local_cache_dir(where)
    try:
        if where.endswith(".parquet") and Path(where).is_file():
            # One file is one split: the variant is the user's to choose (--variant).
            data = datasets.load_dataset("parquet", data_files=where, split="train", cache_dir=cache_dir)
        elif set(VARIANTS) <= set(datasets.get_dataset_config_names(where, revision=revision)):
            data = datasets.load_dataset(where, variant, split="test", revision=revision, cache_dir=cache_dir)
        else:
            # The official release: one configuration, a split per variant.
            data = datasets.load_dataset(where, split=OFFICIAL_SPLITS[variant], revision=revision, cache_dir=cache_dir)
    except (ConnectionError, FileNotFoundError, DatasetNotFoundError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{source}: cannot load the {variant} variant ({reason})") from None
    dataset_layout(data.column_names, f"{source} ({variant})")  # before anything reads a row
    return data


def _domain_name(dataset: datasets.Dataset, value: Any) -> str:
    feature = dataset.features.get("domain")
    if isinstance(feature, datasets.ClassLabel) and isinstance(value, int):
        return feature.int2str(value)
    return str(value)


def iter_questions(
    dataset: datasets.Dataset, variant: Variant = "multimodal", *, image_resolver: ImageResolver | None = None
) -> Iterator[GamutQuestion]:
    """Rows as GamutQuestion objects, in either layout; images decoded (or resolved) in the multimodal variant.

    ``variant`` decides only whether images are fetched: "text_only" fetches none, so a multimodal
    configuration's questions can be listed without decoding a photo (their ``question`` is there)."""
    layout = dataset_layout(dataset.column_names, "the dataset")
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
                    f"question {row_id(row)}: the dataset has no embedded image; pass an image resolver "
                    "(a local folder or CRAG-MM) to load the multimodal variant"
                )
        yield (_release_question if layout == "release" else _project_question)(dataset, row, image)


def _project_question(dataset: datasets.Dataset, row: Mapping[str, Any], image: Any) -> GamutQuestion:
    qid = row["id"]
    # A converted release (gamut convert) has no items: no typed meta-rubric, as in the release.
    items = row["meta_rubric"]
    return GamutQuestion(
        id=qid,
        domain=_domain_name(dataset, row["domain"]),
        # Absent from text_only rows; builds before DATASET_LAYOUT 2 carry it there too (unread).
        question=row.get("question"),
        text_question=row["text_question"],
        entity=row.get("entity") or "",
        meta_rubric=meta_rubric_from_rows(qid, items) if items else None,
        checks=checks_from_rows(qid, row["binary_rubric"]),
        image=image,
        evidence=evidence_from_rows(row.get("check_evidence")),
    )


def _release_question(dataset: datasets.Dataset, row: Mapping[str, Any], image: Any) -> GamutQuestion:
    qid = row["session_id"]
    if not isinstance(qid, str) or not qid.strip():
        raise InputError(f"a row's session_id is {qid!r}, expected the question's id (a non-empty string)")
    question = row["question"]
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"question {qid}: field question is empty")
    rubric = released_rubric(qid, row["rubrics"])
    domain = row.get("domain")
    return GamutQuestion(
        id=qid,
        domain=UNKNOWN_DOMAIN if domain is None else _domain_name(dataset, domain),
        # The release asks its `question` as it is, in either split (the text-only split's names the entity).
        question=question,
        text_question=question,
        entity=row.get("entity") or "",
        meta_rubric=None,
        checks=rubric.checks,
        image=image,
        evidence=rubric.evidence,
    )
