"""The dataset on the Hugging Face stack: build, card, load offline, round trip, resolvers, push."""

from __future__ import annotations

import json
import os
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import DATA
from PIL import Image

from gamut_hf.dataset.annotations import read_annotations
from gamut_hf.dataset.build import build_dataset
from gamut_hf.dataset.loader import (
    CragMMImageResolver,
    FolderImageResolver,
    ImageNotFound,
    iter_questions,
    load_gamut,
)
from gamut_hf.dataset.stats import RubricRecord, rubric_stats, stats_markdown
from gamut_hf.files import InputError

ANNOTATIONS = DATA / "annotations"
VALID = ANNOTATIONS / "valid_small"
INVALID = ANNOTATIONS / "invalid_many"


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GAMUT_CACHE", str(tmp_path_factory.getbasetemp() / "gamut-cache"))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "small"
    build_dataset(VALID, out)
    return out


def card_yaml(folder: Path) -> dict:
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_build_writes_the_hub_layout(built):
    assert sorted(str(p.relative_to(built)) for p in built.rglob("*") if p.is_file()) == [
        "README.md",
        "multimodal/test-00000-of-00001.parquet",
        "text_only/test-00000-of-00001.parquet",
    ]


def test_parquet_holds_image_bytes_not_paths(built):
    table = pq.read_table(built / "multimodal" / "test-00000-of-00001.parquet")
    images = table.column("image").to_pylist()
    assert all(image["bytes"] and len(image["bytes"]) > 1000 for image in images)
    assert all("/" not in image["path"] for image in images)  # a bare name, never a local path
    assert "image" not in pq.read_schema(built / "text_only" / "test-00000-of-00001.parquet").names


def test_load_dataset_offline_both_configurations(built):
    multimodal = datasets.load_dataset(str(built), split="test")  # the default configuration
    text_only = datasets.load_dataset(str(built), "text_only", split="test")
    assert len(multimodal) == len(text_only) == 3
    assert isinstance(multimodal[0]["image"], Image.Image)
    features = multimodal.features
    assert isinstance(features["domain"], datasets.ClassLabel)
    assert features["domain"].names == ["Animal", "Food"]
    assert isinstance(features["meta_rubric"], datasets.List)
    assert isinstance(features["meta_rubric"].feature, dict) and "options" in features["meta_rubric"].feature
    assert isinstance(features["binary_rubric"].feature["text"], datasets.Value)
    assert isinstance(features["image"], datasets.Image)
    row = text_only[0]
    assert row["compile_params"] == {"small_pool_max": 6, "higher_thresholds": 2, "threshold_divisions": 3}
    assert row["image_license"] == "CC0-1.0" and row["rubric_version"].startswith("gamut-rubric-")


def test_rows_round_trip_to_the_annotations(built):
    source = {q.id: q for q in read_annotations(VALID)}
    for question in iter_questions(load_gamut(built, "multimodal"), "multimodal"):
        original = source[question.id]
        assert question.meta_rubric == original.meta_rubric
        assert question.checks == original.checks
        assert question.domain == original.domain
        assert question.image.size == Image.open(original.image_path).size


def test_human_edited_binary_rubric_replaces_the_compiled_one(built):
    rows = {r["id"]: r for r in datasets.load_dataset(str(built), "text_only", split="test")}
    edited, plain = rows["animal-2"], rows["animal-1"]
    assert edited["binary_rubric_edited"] and not plain["binary_rubric_edited"]
    assert [c["id"] for c in edited["binary_rubric"]] == ["i1.fact", "i2.coverage"]
    assert len(plain["binary_rubric"]) == 6  # 1 fact + coverage + 4 options


def test_card_has_metadata_and_a_body_rendered_from_the_data(built):
    meta = card_yaml(built)
    assert meta["license"] == "cc-by-nc-4.0" and meta["pretty_name"] == "GAMUT"
    assert meta["size_categories"] == "n<1K"
    assert {c["config_name"] for c in meta["configs"]} == {"multimodal", "text_only"}
    assert {c["config_name"] for c in meta["dataset_info"]} == {"multimodal", "text_only"}
    assert all(c["splits"][0]["num_examples"] == 3 for c in meta["dataset_info"])
    body = (built / "README.md").read_text()
    questions = read_annotations(VALID)
    table = stats_markdown(rubric_stats(RubricRecord(q.domain, q.meta_rubric, q.checks) for q in questions))
    assert table in body
    assert "scikit-image skimage.data.chelsea" in body and "CC0-1.0" in body
    assert "s_tier = (M + 0.5 P - 2 C) / (M + P + S + 2 C)" in body
    assert "1 of 3 rows carry a human-edited binary rubric" in " ".join(body.split())


def test_invalid_folder_lists_every_problem_and_writes_nothing(tmp_path, gamut):
    out = tmp_path / "out"
    result = gamut("build", INVALID, out)
    assert result.code == 2
    expected = (INVALID / "expected_problems.txt").read_text().splitlines()
    lines = result.err.strip().splitlines()
    assert len(lines) == len(expected) + 1
    for line, want in zip(lines, expected, strict=False):
        assert want in line
    assert lines[-1] == f"gamut build: {len(expected)} problem(s); nothing written"
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_build_refuses_to_overwrite_unless_asked(tmp_path, gamut):
    out = tmp_path / "out"
    assert gamut("build", VALID, out).code == 0
    result = gamut("build", VALID, out)
    assert result.code == 2 and "folder is not empty (use --overwrite" in result.err
    before = (out / "README.md").stat().st_ino
    assert gamut("build", VALID, out, "--overwrite").code == 0
    assert (out / "README.md").stat().st_ino != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left aside


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def copy_annotations(folder: Path) -> Path:
    import shutil

    shutil.copytree(VALID, folder)
    return folder


def refused(result, *words: str) -> None:
    assert result.code == 2, result.err
    assert len(result.err.strip().splitlines()) == 1 and all(word in result.err for word in words), result.err


def test_build_overwrite_never_deletes_the_annotation_folder_or_what_holds_it(tmp_path, gamut):
    """Issue 12 item 1: `gamut build proj/ann proj --overwrite` used to delete proj, annotations included."""
    project = tmp_path / "proj"
    ann = copy_annotations(project / "ann")
    (project / "notes.txt").write_text("mine")
    before = tree(project)
    refused(gamut("build", ann, project, "--overwrite"), "holds the annotation folder")
    refused(gamut("build", ann, ann, "--overwrite"), "is the annotation folder itself")
    refused(gamut("build", ann, ann / "built", "--overwrite"), "is inside the annotation folder")
    (tmp_path / "link").symlink_to(project, target_is_directory=True)
    refused(gamut("build", ann, tmp_path / "link", "--overwrite"), "holds the annotation folder")
    assert tree(project) == before


def test_build_overwrite_never_deletes_the_current_folder(tmp_path, gamut):
    """`gamut build ann . --overwrite` used to wipe the current folder."""
    here = tmp_path / "work"
    here.mkdir()
    (here / "thesis.tex").write_text("years of it")
    ann = copy_annotations(tmp_path / "ann")
    refused(gamut("build", ann, ".", "--overwrite", cwd=here), "is the current folder or one above it")
    empty = here / "sub"
    empty.mkdir()
    refused(gamut("build", ann, "..", "--overwrite", cwd=empty), "is the current folder or one above it")
    assert (here / "thesis.tex").read_text() == "years of it" and empty.is_dir()


@pytest.mark.parametrize("change", ["extra file", "foreign card", "no card", "stray shard"])
def test_build_overwrite_replaces_only_a_previous_build(tmp_path, gamut, change):
    out = tmp_path / "out"
    assert gamut("build", VALID, out).code == 0
    if change == "extra file":
        (out / "keep.txt").write_text("precious")
    elif change == "foreign card":
        (out / "README.md").write_text("# My own dataset\n")
    elif change == "no card":
        (out / "README.md").unlink()
    else:
        (out / "text_only" / "notes.md").write_text("mine")
    before = tree(out)
    refused(gamut("build", VALID, out, "--overwrite"), "not a previous gamut build")
    assert tree(out) == before


def test_build_overwrite_keeps_the_old_build_if_the_new_one_cannot_be_moved_in(tmp_path, monkeypatch):
    """Rename aside, rename in, then delete: a failure at the swap leaves the previous build whole."""
    out = tmp_path / "out"
    build_dataset(VALID, out)
    before = tree(out)
    rename = Path.rename

    def failing_rename(self, target):
        if self.name.endswith(".staging"):
            raise OSError("disk full")
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", failing_rename)
    with pytest.raises(OSError, match="disk full"):
        build_dataset(VALID, out, overwrite=True)
    assert tree(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_failed_build_keeps_the_previous_dataset(tmp_path, gamut):
    out = tmp_path / "out"
    assert gamut("build", VALID, out).code == 0
    before = (out / "README.md").read_text()
    assert gamut("build", INVALID, out, "--overwrite").code == 2
    assert (out / "README.md").read_text() == before


def test_build_compile_parameters_are_stored(tmp_path):
    out = tmp_path / "out"
    from gamut_hf.core.compiler import CompileParams

    build_dataset(VALID, out, compile_params=CompileParams(small_pool_max=3))
    row = datasets.load_dataset(str(out), "text_only", split="test")[0]
    assert row["compile_params"]["small_pool_max"] == 3
    assert len(row["binary_rubric"]) == 1 + 3  # the 4-option pool is now long: coverage at 2, 3, 4


def write_official_layout(folder: Path, built: Path) -> None:
    """An official-release-like folder: one configuration, splits test / test_text_only, images referenced."""
    (folder / "data").mkdir(parents=True)
    text = datasets.load_dataset(str(built), "text_only", split="test")
    photo_less = datasets.load_dataset(str(built), "multimodal", split="test").remove_columns("image")
    referenced = photo_less.add_column("session_id", [f"sess-{i}" for i in range(len(photo_less))])
    referenced.to_parquet(folder / "data" / "test-00000-of-00001.parquet")
    text.to_parquet(folder / "data" / "test_text_only-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*.parquet\n"
        "  - split: test_text_only\n    path: data/test_text_only-*.parquet\n---\n# official layout\n"
    )


def write_crag_mm(folder: Path, images: dict[str, Path]) -> None:
    folder.mkdir(parents=True)
    ds = datasets.Dataset.from_dict(
        {"session_id": list(images), "image": [str(p) for p in images.values()]},
        features=datasets.Features({"session_id": datasets.Value("string"), "image": datasets.Image()}),
    )
    ds = ds.cast_column("image", datasets.Image())
    from datasets.table import embed_table_storage

    ds = ds.with_format("arrow").map(embed_table_storage, batched=True).with_format(None)
    ds.to_parquet(folder / "validation-00000-of-00001.parquet")


def test_official_layout_with_images_resolved_from_crag_mm(tmp_path, built):
    official = tmp_path / "official"
    write_official_layout(official, built)
    crag = tmp_path / "crag"
    write_crag_mm(
        crag,
        {
            "sess-0": VALID / "images" / "cat.png",
            "sess-1": VALID / "images" / "cat.png",
            "sess-2": VALID / "images" / "coffee.png",
        },
    )
    data = load_gamut(official, "multimodal")
    questions = list(iter_questions(data, "multimodal", image_resolver=CragMMImageResolver(crag)))
    assert [q.image.size for q in questions] == [
        Image.open(VALID / "images" / n).size for n in ("cat.png", "cat.png", "coffee.png")
    ]
    assert [q.prompt("multimodal") for q in questions] == [q.question for q in read_annotations(VALID)]
    text_only = list(iter_questions(load_gamut(official, "text_only"), "text_only"))
    assert all(q.image is None for q in text_only) and len(text_only) == 3
    assert [q.prompt("text_only") for q in text_only] == [q.text_question for q in read_annotations(VALID)]
    with pytest.raises(ImageNotFound, match="question animal-1: the dataset has no embedded image"):
        next(iter_questions(data, "multimodal"))


def test_missing_crag_mm_image_names_the_question(tmp_path, built):
    official = tmp_path / "official"
    write_official_layout(official, built)
    crag = tmp_path / "crag"
    write_crag_mm(crag, {"sess-0": VALID / "images" / "cat.png"})
    resolver = CragMMImageResolver(crag)
    with pytest.raises(ImageNotFound, match="question animal-2: session_id 'sess-1' not found in CRAG-MM"):
        list(iter_questions(load_gamut(official, "multimodal"), "multimodal", image_resolver=resolver))


def test_folder_resolver_finds_images_by_id_and_refuses_paths(tmp_path):
    (tmp_path / "q1.png").write_bytes((VALID / "images" / "cat.png").read_bytes())
    resolver = FolderImageResolver(tmp_path)
    assert resolver({"id": "q1"}).size == Image.open(VALID / "images" / "cat.png").size
    with pytest.raises(ImageNotFound, match="question q2: no image named 'q2'"):
        resolver({"id": "q2"})
    with pytest.raises(ImageNotFound):
        resolver({"id": "../q1"})


def test_loader_builds_annotation_folders_and_rejects_nonsense(tmp_path):
    assert len(load_gamut(VALID, "text_only")) == 3
    with pytest.raises(InputError, match="no such folder, and not a hub id"):
        load_gamut(tmp_path / "nothing-here", "text_only")
    with pytest.raises(InputError, match="cannot load the text_only variant"):
        load_gamut("someone/not-cached", "text_only")  # offline: the hub is out of reach
    with pytest.raises(InputError, match="unknown variant"):
        load_gamut(VALID, "audio")


def test_cli_stats_prints_the_table(gamut, built):
    result = gamut("stats", built, env={**os.environ})
    assert result.code == 0, result.err
    assert "| Questions | 3 |" in result.out
    assert "| Domains | 2: Animal 2, Food 1 |" in result.out
    as_json = json.loads(gamut("stats", built, "--json").out)
    assert as_json["questions"] == 3 and as_json["checks_per_question"]["max"] == 6


class RecordingHub:
    """A stand-in for HfApi at the network boundary we cannot reach: it holds ``held`` files and
    records the calls."""

    def __init__(self, held: list[str] = ()):
        self.calls = []
        self.held = list(held)

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def list_repo_files(self, repo_id, **kwargs):
        return list(self.held)

    def create_commit(self, **kwargs):
        self.calls.append(("create_commit", kwargs["repo_id"], kwargs))

        class Commit:
            commit_url = f"https://hub.invalid/datasets/{kwargs['repo_id']}/commit/abc"

        return Commit()


def test_push_creates_the_repo_and_uploads_exactly_the_build(built):
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    from gamut_hf.dataset.card import REPO_PLACEHOLDER
    from gamut_hf.dataset.hub import push_dataset

    card_before = (built / "README.md").read_bytes()
    assert REPO_PLACEHOLDER.encode() in card_before  # built without a hub id
    # The hub holds a shard of an earlier, larger build and a file of the owner's.
    hub = RecordingHub(held=["README.md", "text_only/test-00000-of-00002.parquet", "notes.md"])
    url = push_dataset(built, "me/gamut-test", private=True, api=hub)
    assert url.endswith("/commit/abc")
    (name, repo, create), (commit_name, commit_repo, commit) = hub.calls
    assert (name, repo) == ("create_repo", "me/gamut-test")
    assert create == {"repo_type": "dataset", "private": True, "exist_ok": True}
    assert commit_name == "create_commit" and commit["repo_type"] == "dataset"
    added = {op.path_in_repo: op for op in commit["operations"] if isinstance(op, CommitOperationAdd)}
    deleted = [op.path_in_repo for op in commit["operations"] if isinstance(op, CommitOperationDelete)]
    assert sorted(added) == [
        "README.md",
        "multimodal/test-00000-of-00001.parquet",
        "text_only/test-00000-of-00001.parquet",
    ]
    assert deleted == ["text_only/test-00000-of-00002.parquet"]  # the owner's notes.md is left alone
    # The pushed card's examples load the hub id; the local card is unchanged.
    pushed_card = added["README.md"].path_or_fileobj
    pushed_card = pushed_card if isinstance(pushed_card, bytes) else pushed_card.getvalue()
    assert REPO_PLACEHOLDER.encode() not in pushed_card and b"gamut push OUT REPO_ID" not in pushed_card
    assert b'load_dataset("me/gamut-test", "text_only"' in pushed_card
    assert (built / "README.md").read_bytes() == card_before


def test_push_errors_are_one_line(gamut, built, tmp_path):
    offline = gamut("push", built, "me/gamut-test")
    assert offline.code != 0 and len(offline.err.strip().splitlines()) == 1
    assert "HF_HUB_OFFLINE" in offline.err
    refused = gamut(
        "push",
        built,
        "me/gamut-test",
        env={**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9", "HF_TOKEN": "hf_x"},
    )
    assert refused.code != 0 and len(refused.err.strip().splitlines()) == 1 and "Traceback" not in refused.err
    not_built = gamut("push", tmp_path, "me/gamut-test")
    assert not_built.code == 2 and "no README.md" in not_built.err
