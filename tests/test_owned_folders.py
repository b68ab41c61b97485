"""`atomic.OwnedFolder`, the rule of every command that writes a folder: it writes only into a
folder that is new, empty or carries its own manifest; a rerun replaces exactly the files it wrote
and removes the ones it no longer writes; every other file is left alone, and a failure leaves
the folder as it was. (Through the commands: tests/authoring/test_review.py, tests/reports/test_report.py.)"""

from __future__ import annotations

import json

import pytest

from gamut_hf.atomic import MANIFEST, FolderNotOwnedError, OwnedFolder
from gamut_hf.errors import GamutError


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def owned(folder, others_allowed=True):
    return OwnedFolder(folder, "report", others_allowed=others_allowed, advice="choose another folder")


def test_a_new_folder_gets_its_files_and_a_manifest(tmp_path):
    out = tmp_path / "out"
    with owned(out) as folder:
        folder.write_text("a.md", "a")
        folder.write_bytes("figures/b.png", b"b")
        folder.folder("tables")
    assert files(out).keys() == {"a.md", "figures/b.png", MANIFEST} and (out / "tables").is_dir()
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["command"] == "report" and sorted(manifest["files"]) == ["a.md", "figures/b.png"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging left beside it


def test_a_rerun_replaces_its_files_removes_its_stale_ones_and_keeps_everything_else(tmp_path):
    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "mine.png").write_bytes(b"user")
    (out / "notes.txt").write_text("user")
    with owned(out) as folder:
        folder.write_text("a.md", "one")
        folder.write_text("figures/old.png", "old")
    (out / "later.txt").write_text("user")
    with owned(out) as folder:
        folder.write_text("a.md", "two")
    assert files(out) == {
        "a.md": b"two",
        "figures/mine.png": b"user",
        "notes.txt": b"user",
        "later.txt": b"user",
        MANIFEST: (out / MANIFEST).read_bytes(),
    }
    assert list(json.loads((out / MANIFEST).read_text())["files"]) == ["a.md"]


def test_a_file_of_anothers_in_the_way_or_changed_since_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.md").write_text("user")
    with pytest.raises(FolderNotOwnedError, match=r"a\.md was not written by gamut report") as refused:
        with owned(out) as folder:
            folder.write_text("b.md", "b")
            folder.write_text("a.md", "a")
    assert isinstance(refused.value, GamutError) and "\n" not in str(refused.value)
    assert files(out) == {"a.md": b"user"}

    (out / "a.md").unlink()
    with owned(out) as folder:
        folder.write_text("a.md", "ours")
        folder.write_text("b.md", "ours")
    (out / "a.md").write_text("edited by hand")
    with pytest.raises(FolderNotOwnedError, match="or was changed since"):
        with owned(out) as folder:
            folder.write_text("a.md", "again")
    assert (out / "a.md").read_text() == "edited by hand"
    (out / "b.md").write_text("edited by hand")
    with owned(out) as folder:  # a stale file changed by hand is the user's now: kept
        folder.write_text("c.md", "c")
    assert (out / "b.md").read_text() == "edited by hand" and (out / "a.md").read_text() == "edited by hand"
    assert sorted(json.loads((out / MANIFEST).read_text())["files"]) == ["c.md"]


def test_a_folder_not_empty_is_refused_where_others_files_are_not_allowed(tmp_path):
    out = tmp_path / "annotations"
    (out / "images").mkdir(parents=True)
    (out / "questions.jsonl").write_text("{}\n")
    with pytest.raises(FolderNotOwnedError) as refused:
        with owned(out, others_allowed=False):
            raise AssertionError("must not be reached")
    assert str(refused.value) == (
        f"{out}: holds 2 file(s) or folder(s) that gamut report did not write (first: images); choose another folder"
    )
    assert files(out) == {"questions.jsonl": b"{}\n"}


def test_another_commands_folder_a_bad_manifest_and_a_failure_leave_the_folder_as_it_was(tmp_path):
    out = tmp_path / "out"
    with OwnedFolder(out, "author export", others_allowed=False, advice="x") as folder:
        folder.write_text("questions.jsonl", "")
    before = files(out)
    with pytest.raises(FolderNotOwnedError, match="holds the output of gamut author export, not of gamut report"):
        with owned(out):
            pass
    (out / MANIFEST).write_text("not json")
    with pytest.raises(FolderNotOwnedError, match="is not a manifest gamut can read"):
        with owned(out):
            pass
    (out / MANIFEST).write_bytes(before[MANIFEST])
    with pytest.raises(RuntimeError, match="boom"):
        with OwnedFolder(out, "author export", others_allowed=False, advice="x") as folder:
            folder.write_text("questions.jsonl", "new")
            raise RuntimeError("boom")
    assert files(out) == before and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_manifest_cannot_point_outside_its_folder(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("a")  # the very content the manifest names
    with owned(out) as folder:
        folder.write_text("a.md", "a")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"]["../victim.txt"] = manifest["files"]["a.md"]
    manifest["files"][str(victim)] = manifest["files"]["a.md"]
    (out / MANIFEST).write_text(json.dumps(manifest))
    with owned(out) as folder:
        folder.write_text("b.md", "b")
    assert victim.read_text() == "a"
    with pytest.raises(ValueError):
        with owned(out) as folder:
            folder.path("../escape.md")


def test_synthetic_and_simulate_never_write_into_a_folder_of_anothers(tmp_path):
    from gamut_hf.dataset.synthetic import SyntheticParams, write_synthetic
    from gamut_hf.reports.simulate import PAPER_TABLE1, SimulatedJudge, SimulationParams, simulate_runs

    mine = tmp_path / "my-annotations"
    (mine / "images").mkdir(parents=True)
    (mine / "questions.jsonl").write_text('{"id": "hand-made"}\n')
    small = SyntheticParams(questions=10, image_width=96, image_height=128)
    with pytest.raises(FolderNotOwnedError, match="that gamut synthetic did not write"):
        write_synthetic(mine, small)
    assert files(mine) == {"questions.jsonl": b'{"id": "hand-made"}\n'}
    out = write_synthetic(tmp_path / "syn", small)
    (out / "notes.txt").write_text("mine")
    write_synthetic(out, SyntheticParams(questions=9, image_width=96, image_height=128))  # a rerun: one image fewer
    assert len((out / "questions.jsonl").read_text().splitlines()) == 9 and len(list((out / "images").iterdir())) == 9
    assert (out / "notes.txt").read_text() == "mine"

    params = SimulationParams(questions=10, judges=[SimulatedJudge(name="Judge")], text_only_easing=None)
    with pytest.raises(FolderNotOwnedError, match="that gamut simulate did not write"):
        simulate_runs(mine, params, PAPER_TABLE1[:1])
    assert files(mine) == {"questions.jsonl": b'{"id": "hand-made"}\n'}
    (folder,) = simulate_runs(tmp_path / "runs", params, PAPER_TABLE1[:1])
    assert sorted(p.name for p in folder.iterdir()) == [
        "details.parquet",
        "model.json",
        "responses.parquet",
        "results.json",
    ]
    (folder,) = simulate_runs(tmp_path / "runs", params, PAPER_TABLE1[:1])  # a rerun replaces its own
    assert (tmp_path / "runs" / ".gamut-manifest.json").is_file()
