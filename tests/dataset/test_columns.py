"""What each configuration's columns say to a user: text_only carries no question about a photo it
lacks, the card says which meta-rubric fields belong to which item type and names no local path as
a hub id, and builds made before text_only lost `question` still load and run."""

from __future__ import annotations

import shutil
from pathlib import Path

import datasets
import pytest
from conftest import DATA
from fake_endpoint import FakeEndpoint, user_text

from gamut_hf.core.rubric import ITEM_TYPES
from gamut_hf.dataset.annotations import read_annotations
from gamut_hf.dataset.card import card_metadata
from gamut_hf.dataset.features import COMMON_ITEM_FIELDS, OPTIONAL_PAYLOAD_FIELDS, PAYLOAD_FIELDS
from gamut_hf.dataset.loader import iter_questions, load_gamut
from gamut_hf.evaluation.judge import SYSTEM_PROMPT

VALID = DATA / "annotations" / "valid_small"
SAMPLE = Path(__file__).resolve().parents[2] / "gamut_hf" / "data" / "gamut-sample"


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GAMUT_CACHE", str(tmp_path_factory.getbasetemp() / "gamut-cache"))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The sample (every item type) built the way a user builds it, with no --repo-id."""
    from conftest import run_gamut

    out = tmp_path_factory.mktemp("columns") / "my-local-build"
    done = run_gamut("build", SAMPLE, out)
    assert done.code == 0, done.err
    return out


def card_body(folder: Path) -> str:
    return (folder / "README.md").read_text(encoding="utf-8").split("\n---\n", 1)[1]


def test_text_only_has_no_question_column_and_no_image(built):
    text_only = datasets.load_dataset(str(built), "text_only", split="test")
    multimodal = datasets.load_dataset(str(built), "multimodal", split="test")
    assert "question" not in text_only.column_names and "image" not in text_only.column_names
    assert {"image", "question", "text_question"} <= set(multimodal.column_names)
    expected = {q.id: q.text_question for q in read_annotations(SAMPLE)}
    assert {row["id"]: row["text_question"] for row in text_only} == expected


def card_item_fields(body: str) -> dict[str, set[str]]:
    """The card's table of which payload fields apply to which item type."""
    table = body.split("| item `type` |", 1)[1].split("\n\n", 1)[0]
    fields: dict[str, set[str]] = {}
    for line in table.splitlines()[2:]:
        kind, described = line.strip("|").split("|", 1)
        fields[kind.strip().strip("`")] = {part.split("`")[1] for part in described.split(";")}
    return fields


def test_card_documents_the_fields_each_item_type_fills(built):
    body = card_body(built)
    documented = card_item_fields(body)
    assert set(documented) == set(ITEM_TYPES)
    assert all(f"`{name}`" in body.split("### Meta-rubric items", 1)[1] for name in COMMON_ITEM_FIELDS)
    # What the card says is what the rows hold: an item's non-null payload fields are exactly its
    # type's, less an optional one it leaves out.
    rows = datasets.load_dataset(str(built), "text_only", split="test")
    seen = set()
    for row in rows:
        for item in row["meta_rubric"]:
            filled = {name for name in PAYLOAD_FIELDS if item[name] is not None}
            applies = documented[item["type"]]
            assert applies - set(OPTIONAL_PAYLOAD_FIELDS) <= filled <= applies, (row["id"], item["id"])
            seen.add(item["type"])
    assert seen == set(ITEM_TYPES)


def test_card_of_a_build_without_repo_id_names_no_local_path_as_a_hub_id(built):
    body = card_body(built)
    assert str(built) not in body and "my-local-build" not in body
    assert 'load_dataset("<your-user>/<dataset>", "text_only", split="test")' in body
    assert "--dataset <your-user>/<dataset>" in body
    assert "`gamut push OUT REPO_ID` writes the hub id in place of `<your-user>/<dataset>`" in body


def test_card_of_a_build_with_repo_id_loads_it(gamut, tmp_path):
    done = gamut("build", VALID, tmp_path / "out", "--repo-id", "me/gamut")
    assert done.code == 0, done.err
    body = card_body(tmp_path / "out")
    assert 'load_dataset("me/gamut", "text_only", split="test")' in body
    assert "--dataset me/gamut" in body and "<your-user>" not in body


def layout_1_copy(built: Path, old: Path) -> Path:
    """``built`` as gamut-hf wrote it before text_only lost `question`: the text_only rows are the
    multimodal ones without the image, and the card's dataset_info says so."""
    shutil.copytree(built, old)
    multimodal = datasets.load_dataset(str(built), "multimodal", split="test")
    text_only = multimodal.remove_columns("image")
    (old / "text_only" / "test-00000-of-00001.parquet").unlink()
    text_only.to_parquet(old / "text_only" / "test-00000-of-00001.parquet")
    sizes = {
        variant: sum(p.stat().st_size for p in (old / variant).iterdir()) for variant in ("multimodal", "text_only")
    }
    metadata = card_metadata(
        "GAMUT",
        {"multimodal": multimodal.features, "text_only": text_only.features},
        dict.fromkeys(("multimodal", "text_only"), len(text_only)),
        sizes,
        "cc0-1.0",
    )
    body = card_body(built)
    (old / "README.md").write_text(f"---\n{metadata}\n---\n{body}", encoding="utf-8")
    assert "question" in datasets.load_dataset(str(old), "text_only", split="test").column_names
    return old


@pytest.fixture
def endpoint():
    server = FakeEndpoint(responder=lambda body: f"An answer to: {user_text(body)[:80]}")
    yield server
    server.stop()


def asked(endpoint: FakeEndpoint) -> list[str]:
    """What the candidate was asked (every request but the judge's)."""
    judging = SYSTEM_PROMPT.splitlines()[0]
    return [user_text(b) for b in endpoint.bodies if not b["messages"][0]["content"].startswith(judging)]


@pytest.mark.parametrize("layout", ["current", "before text_only lost question"])
def test_text_only_run_asks_text_question(gamut, built, tmp_path, endpoint, layout):
    dataset = built if layout == "current" else layout_1_copy(built, tmp_path / "old-build")
    done = gamut(
        "run",
        "--dataset",
        dataset,
        "--variant",
        "text_only",
        "--limit",
        "3",
        "--out",
        tmp_path / "run",
        "--model",
        "cand",
        "--backend",
        "openai",
        "--base-url",
        endpoint.url,
        "--judge",
        "fake-judge",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        endpoint.url,
    )
    assert done.code == 0, done.err
    first = list(iter_questions(load_gamut(dataset, "multimodal"), "text_only"))[:3]
    prompts = asked(endpoint)
    assert len(prompts) == 3
    for question in first:
        assert any(question.text_question in prompt for prompt in prompts), question.id
        assert not any(question.question in prompt for prompt in prompts), question.id
    stats = gamut("stats", dataset)
    assert stats.code == 0 and f"| Questions | {len(read_annotations(SAMPLE))} |" in stats.out


def test_a_multimodal_split_without_question_is_refused_in_one_line(gamut, built, tmp_path):
    """A hand-made release whose multimodal split has no `question` column: the run names the
    question and the column instead of asking the model something else."""
    folder = tmp_path / "hand-made"
    (folder / "data").mkdir(parents=True)
    text_only = datasets.load_dataset(str(built), "text_only", split="test")
    text_only.to_parquet(folder / "data" / "test-00000-of-00001.parquet")
    text_only.to_parquet(folder / "data" / "test_text_only-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*.parquet\n"
        "  - split: test_text_only\n    path: data/test_text_only-*.parquet\n---\n"
    )
    images = tmp_path / "images"
    images.mkdir()
    done = gamut(
        "run",
        "--dataset",
        folder,
        "--variant",
        "multimodal",
        "--images",
        images,
        "--out",
        tmp_path / "run",
        "--model",
        "cand",
        "--backend",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
    )
    first = text_only[0]["id"]
    assert done.code == 2, done.err
    assert "Traceback" not in done.err
    assert done.err.strip().splitlines()[-1] == (
        f"gamut: question {first}: the dataset has no `question` column, which the multimodal variant asks "
        "beside the image"
    )
