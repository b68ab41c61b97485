"""Issue 23, the folder rule, through the installed commands: every command that writes a folder
writes only into one that is new, empty or its own (its manifest), a rerun replaces only its own
files, and a stranger's file is never deleted or rewritten: the one placed before the first run,
and the one placed between the runs. (The rule itself: tests/test_owned_folders.py; `report`:
tests/reports/test_report.py.)

The models are scripted behind the fake OpenAI-compatible endpoint (the hosted-API boundary):
the folders, stores and commands are all real.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import CliResult

from gamut_hf.atomic import LOCK, MANIFEST

STRANGER = "my-notes.txt"


def api(url: str) -> list[str]:
    return [
        "--model", "cand", "--backend", "openai", "--base-url", url,
        "--judge", "fake-judge", "--judge-backend", "openai", "--judge-base-url", url,
        "--dataset", "gamut-sample", "--variant", "text_only", "--limit", "2",
    ]  # fmt: skip


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_refusal(done: CliResult, *words: str) -> None:
    assert done.code == 2, (done.code, done.err)
    [line] = done.err.strip().splitlines()[-1:]
    assert "Traceback" not in done.err and all(word in line for word in words), done.err


@dataclass
class Writer:
    """A command as a user runs it into ``out``; ``first`` runs once, ``again`` is the rerun."""

    name: str
    first: Callable[[Path], CliResult]
    again: Callable[[Path], CliResult]
    outputs: tuple[str, ...]  # files it must have written


@pytest.fixture(scope="module")
def shard_runs(tmp_path_factory, scripted_endpoint):
    """Two shard runs, the sources of `gamut merge`."""
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("shards")
    for i in (0, 1):
        done = run_gamut("run", "--out", root / f"s{i}", *api(scripted_endpoint.url), "--shard", f"{i}/2")
        assert done.code == 0, done.err
    return root


def queue_one(requests: Path) -> str:
    from gamut_hf.dataset.loader import load_gamut
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.submission import parse_submission

    ids = [row["id"] for row in load_gamut("gamut-sample", "text_only")][:2]
    data = "".join(json.dumps({"question_id": q, "response": f"Answer by good-model: {q}"}) + "\n" for q in ids)
    queue = RequestQueue(requests)
    meta = {"name": "acme/m", "access": "open", "variant": "text_only"}
    return queue.submit(parse_submission(data.encode(), meta, ids, partial=True), "alice").key


def writers(gamut, url: str, shards: Path, tmp: Path) -> list[Writer]:
    requests = tmp / "requests"

    def worker(out: Path) -> CliResult:
        # The worker names each result folder after its request: `out` is <results>/<key>.
        key = queue_one(requests) if not (requests / f"{out.name}.json").exists() else out.name
        record = json.loads((requests / f"{key}.json").read_text())
        record["status"] = "PENDING"  # the maintainer puts the request back to be judged again
        (requests / f"{key}.json").write_text(json.dumps(record))
        done = gamut(
            "worker", "--requests", requests, "--results", out.parent, "--once",
            "--judge", "fake-judge", "--judge-backend", "openai", "--judge-base-url", url,
        )  # fmt: skip
        assert (out.parent / key).is_dir() or done.code != 0, done.err
        return done

    run_files = ("results.json", "details.parquet", "responses.parquet", "store.sqlite")
    return [
        Writer("run", (r := lambda out: gamut("run", "--out", out, *api(url))), r, run_files),
        Writer("generate", (g := lambda out: gamut("generate", "--out", out, *api(url))), g, ("store.sqlite",)),
        Writer(
            "judge",
            lambda out: gamut("run", "--out", out, *api(url)),
            lambda out: gamut("judge", "--out", out, *api(url)[:-2], "--judge", "other-judge"),
            run_files,
        ),
        Writer(
            "score",
            lambda out: gamut("run", "--out", out, *api(url)),
            lambda out: gamut("score", out, "--contradiction-penalty", "-2"),
            run_files,
        ),
        Writer("merge", (m := lambda out: gamut("merge", out, shards / "s0", shards / "s1")), m, run_files),
        Writer(
            "judge-audit",
            (
                a := lambda out: gamut(
                    "judge-audit",
                    "--out",
                    out,
                    "--limit",
                    "1",
                    "--judge",
                    "fake-judge",
                    "--judge-backend",
                    "openai",
                    "--judge-base-url",
                    url,
                )
            ),  # fmt: skip
            a,
            ("audit.json", "audit.md", "audit-confusion.png", "store.sqlite"),
        ),
        Writer("worker", worker, worker, ("results.json", "details.parquet", "responses.parquet", "model.json")),
    ]


@pytest.fixture(scope="module")
def every_writer(scripted_endpoint, shard_runs, tmp_path_factory):
    from conftest import run_gamut

    return {w.name: w for w in writers(run_gamut, scripted_endpoint.url, shard_runs, tmp_path_factory.mktemp("w"))}


@pytest.mark.parametrize("name", ["run", "generate", "judge", "score", "merge", "judge-audit", "worker"])
def test_a_command_writes_only_into_its_own_folder_and_a_rerun_keeps_a_strangers_files(every_writer, name, tmp_path):
    writer = every_writer[name]
    out = tmp_path / "results" / "out"

    # A folder of another's files, and a file where the folder should be: refused, nothing touched.
    out.mkdir(parents=True)
    (out / STRANGER).write_text("mine, before the first run")
    if name != "worker":  # the worker names its folder itself, inside --results beside the maintainer's
        one_line_refusal(writer.first(out), str(out), "did not write", STRANGER)
        assert snapshot(out) == {STRANGER: b"mine, before the first run"}
        afile = out.parent / "a-file"
        afile.write_text("mine")
        one_line_refusal(writer.first(afile), str(afile), "exists and is not a folder")
        assert afile.read_text() == "mine"
        afile.unlink()
    out = out.parent / "new"

    done = writer.first(out)
    assert done.code == 0, done.err
    if name == "worker":
        out = next(p for p in (tmp_path / "results").iterdir() if p.is_dir() and p.name != "out")
    written = snapshot(out)
    assert set(writer.outputs) <= written.keys() and MANIFEST in written

    (out / STRANGER).write_text("mine, between the runs")
    (out / "figures").mkdir()
    (out / "figures" / "mine.png").write_bytes(b"my figure")
    done = writer.again(out)
    assert done.code == 0, done.err
    after = snapshot(out)
    assert after[STRANGER] == b"mine, between the runs" and after["figures/mine.png"] == b"my figure"
    assert set(writer.outputs) <= after.keys()
    assert set(after) - {STRANGER, "figures/mine.png", LOCK} <= set(written) | {"store.sqlite-wal", "store.sqlite-shm"}
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no staging left behind
    assert (tmp_path / "results" / "out" / STRANGER).read_text() == "mine, before the first run"


def test_a_folder_of_one_command_is_refused_by_another(every_writer, gamut, scripted_endpoint, tmp_path):
    """`judge-audit --out RUN_DIR` wrote into the run's store; a report over a run folder, a run into
    an audit folder: each is another command's folder."""
    run, audit = tmp_path / "run", tmp_path / "audit"
    assert every_writer["run"].first(run).code == 0
    assert every_writer["judge-audit"].first(audit).code == 0
    before = snapshot(run), snapshot(audit)
    one_line_refusal(every_writer["judge-audit"].first(run), str(run), "holds the output of gamut run")
    one_line_refusal(every_writer["run"].first(audit), str(audit), "holds the output of gamut judge-audit")
    one_line_refusal(gamut("report", run, "--out", run), str(run), "holds the output of gamut run")
    one_line_refusal(gamut("score", audit), str(audit), "holds the output of gamut judge-audit")
    assert (snapshot(run), snapshot(audit)) == before


def test_a_run_folder_from_before_manifests_is_taken_as_it_is(every_writer, tmp_path):
    """A folder holding nothing but a run's files (written before the manifest existed) resumes."""
    run = tmp_path / "run"
    assert every_writer["run"].first(run).code == 0
    (run / MANIFEST).unlink()
    done = every_writer["score"].again(run)
    assert done.code == 0, done.err
    assert json.loads((run / MANIFEST).read_text())["command"] == "run"


def test_two_commands_into_one_folder_at_once_the_second_is_refused(every_writer, tmp_path):
    """Two audits into one --out left an audit.json that disagreed with the store: the folder is locked
    while a command writes there (the lock is the kernel's: it dies with its holder)."""
    from filelock import FileLock

    audit = tmp_path / "audit"
    assert every_writer["judge-audit"].first(audit).code == 0
    before = snapshot(audit)
    with FileLock(audit / LOCK, timeout=0):  # what a running audit holds
        one_line_refusal(every_writer["judge-audit"].again(audit), "another gamut judge-audit is writing into it")
    assert snapshot(audit) == before
    assert every_writer["judge-audit"].again(audit).code == 0


def test_a_workspace_and_a_build_refuse_a_folder_of_anothers(gamut, tmp_path):
    from conftest import DATA

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / STRANGER).write_text("mine")
    image = Path(__file__).parents[1] / "gamut_hf" / "data" / "gamut-sample" / "images" / "coffee.png"
    proposed = gamut(
        "author", "propose", image, "--out", mine, "--model", "m", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"
    )  # fmt: skip
    one_line_refusal(proposed, str(mine), "gamut author did not write", STRANGER)
    one_line_refusal(gamut("build", DATA / "annotations", mine, "--overwrite"), str(mine), STRANGER)
    assert snapshot(mine) == {STRANGER: b"mine"}


def read_only(folder: Path, on: bool) -> None:
    """Make ``folder`` read-only for this user: by its mode, or, for root (who writes past any
    mode), by the file system's immutable flag."""
    import subprocess

    if os.geteuid() != 0:
        folder.chmod(0o555 if on else 0o755)
        return
    try:
        done = subprocess.run(["chattr", "+i" if on else "-i", str(folder)], capture_output=True, text=True)
    except FileNotFoundError:  # no e2fsprogs
        pytest.skip("root, and no chattr to make a folder read-only")
    if on and done.returncode != 0:
        pytest.skip(f"root, and no immutable flag on this file system: {done.stderr.strip()}")


def test_a_run_folder_that_cannot_be_written_is_one_line(every_writer, gamut, tmp_path):
    """A read-only run folder (a colleague's, a mounted archive): one line naming it, not a PermissionError."""
    run = tmp_path / "run"
    assert every_writer["run"].first(run).code == 0
    before = snapshot(run)
    read_only(run, True)
    try:
        one_line_refusal(gamut("score", run), str(run), "writ")
        one_line_refusal(every_writer["run"].again(run), str(run), "writ")
    finally:
        read_only(run, False)
    assert snapshot(run) == before
