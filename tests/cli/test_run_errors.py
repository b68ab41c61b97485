"""What the run commands say when the run cannot go on (issue 23 items 17 and 18): a shard in
other digits, a store that is not a database, a folder the user cannot write, and an endpoint
that fails every request. Each is one line naming what and where, never an internal error; a run
whose every request failed exits 3, not 0, and the same command finishes it once the cause is gone.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

import pytest
from fake_endpoint import FakeEndpoint
from scripted_api import scripted

from gamut_hf.cli import main
from gamut_hf.evaluation.store import STORE_FILE


def gamut(*args: object) -> tuple[int, str, list[str]]:
    """``gamut ARGS`` as the console entry point runs it: exit status, stdout, stderr lines."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue().splitlines()


def refusal(lines: list[str]) -> str:
    """The command's one line of refusal: the last, and the only one that starts with "gamut:"
    (the lines before it are the run's progress)."""
    said = [line for line in lines if line.startswith("gamut:")]
    assert len(said) == 1 and said[0] == lines[-1], lines
    assert not any("internal error" in line or "Traceback" in line for line in lines), lines
    return said[0]


class EveryText(dict):
    """FakeEndpoint faults: the same plan for whatever is asked."""

    def __init__(self, plan: list[str]):
        super().__init__()
        self.plan = plan

    def get(self, key, default=None):
        return self.plan


def api_options(candidate_url: str, judge_url: str) -> list[str]:
    return [
        "--model",
        "cand",
        "--backend",
        "openai",
        "--base-url",
        candidate_url,
        "--judge",
        "fake-judge",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        judge_url,
        "--limit",
        "1",
    ]


@pytest.fixture(scope="module")
def endpoint():
    server = FakeEndpoint(responder=scripted)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def finished_run(endpoint, tmp_path_factory) -> Path:
    """A run folder with a store, results.json and details.parquet, to be copied by a test."""
    folder = tmp_path_factory.mktemp("finished") / "run"
    code, out, lines = gamut("run", "--out", folder, *api_options(endpoint.url, endpoint.url))
    assert code == 0, lines
    return folder


# -- item 17: --shard -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "shard", ["²/3", "0/³", "٣/5", "0/٣", "１/2", "1/1", "-1/3", "+0/2", " 0/2", "0/2\n", "0/0", "a/b"]
)
def test_a_shard_not_in_ascii_digits_is_refused_in_one_line(tmp_path, shard):
    """'²'.isdigit() is True and int('²') raised: "internal error: ValueError" (exit 1)."""
    code, out, lines = gamut("run", "--out", tmp_path / "run", "--shard", shard)
    assert code == 2 and out == ""
    assert lines == [f"gamut: --shard: expected i/n in digits 0-9 with 0 <= i < n (like 0/4), got {shard!r}"]
    assert not (tmp_path / "run").exists()


# -- item 18: the store and the folder --------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "problem"),
    [("random bytes", "is not a run store SQLite can read (file is not a database)"), ("pages", "is damaged")],
)
@pytest.mark.parametrize("command", ["score", "run", "judge", "generate"])
def test_a_store_that_is_not_a_database_is_named_with_what_to_do(finished_run, tmp_path, damage, problem, command):
    """A store.sqlite of random bytes was "internal error: DatabaseError: file is not a database",
    naming no file."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    store = run / STORE_FILE
    data = store.read_bytes()
    # Random bytes lose SQLite's header; damaged pages keep it (the database then reads as malformed).
    store.write_bytes(bytes(range(256)) * 16 if damage == "random bytes" else data[:100] + b"\xa5" * (len(data) - 100))
    damaged = store.read_bytes()
    args = [command, run] if command == "score" else [command, "--out", run]
    code, out, lines = gamut(*args)
    assert code == 2
    line = refusal(lines)
    assert line.startswith(f"gamut: {store}: {problem}") and "move it aside" in line
    assert store.read_bytes() == damaged  # nothing written over it


def permissions_enforced(tmp_path: Path) -> bool:
    """Whether this process is refused a write into a read-only folder: root (os.geteuid() == 0,
    as in most containers) is not, and then the read-only cases cannot be played."""
    probe = tmp_path / "probe"
    probe.mkdir()
    probe.chmod(0o555)
    try:
        (probe / "file").touch()
    except PermissionError:
        return True
    finally:
        probe.chmod(0o755)
    return False


@pytest.fixture
def read_only(tmp_path):
    """chmod for the test, restored after it (so tmp_path can be removed)."""
    if not permissions_enforced(tmp_path):
        pytest.skip(f"permissions are not enforced for this user (euid {os.geteuid()}: root)")
    changed: list[tuple[Path, int]] = []

    def chmod(path: Path, mode: int) -> None:
        changed.append((path, path.stat().st_mode))
        path.chmod(mode)

    yield chmod
    for path, mode in reversed(changed):
        path.chmod(mode)


@pytest.mark.parametrize("command", ["run", "judge"])
def test_a_read_only_store_is_named_in_one_line(finished_run, tmp_path, read_only, command):
    """chmod 444 store.sqlite: "internal error: OperationalError: attempt to write a readonly database"."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    read_only(run / STORE_FILE, 0o444)
    code, out, lines = gamut(command, "--out", run, "--judge", "another-judge")
    assert code == 2
    assert refusal(lines).startswith(f"gamut: {run / STORE_FILE}: cannot be written (attempt to write a readonly")


def test_a_read_only_run_folder_is_named_in_one_line(finished_run, tmp_path, read_only):
    """chmod 555 the run folder: `gamut score RUN_DIR` was "internal error: PermissionError"."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()}
    read_only(run, 0o555)
    code, out, lines = gamut("score", run, "--partial-credit", "1")
    assert code == 2
    line = refusal(lines)
    # SQLite, or the first output written, is the first to be refused, depending on the journal files present.
    assert line.startswith(f"gamut: {run}{os.sep}")
    assert line.endswith(": permission denied") or ": cannot be written (attempt to write a readonly" in line
    assert {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()} == before


@pytest.mark.parametrize("command", ["run", "generate", "judge"])
def test_an_out_folder_in_a_read_only_folder_is_named_in_one_line(endpoint, tmp_path, read_only, command):
    """--out under a folder the user cannot write: "internal error: PermissionError"."""
    parent = tmp_path / "locked"
    parent.mkdir()
    read_only(parent, 0o555)
    code, out, lines = gamut(command, "--out", parent / "run", *api_options(endpoint.url, endpoint.url))
    assert code == 2
    assert refusal(lines).startswith(f"gamut: {parent / 'run'}")
    assert not (parent / "run").exists()


# -- item 17: a run whose every request failed -------------------------------------------------


def test_a_run_whose_every_request_failed_exits_3_and_the_same_command_finishes_it(tmp_path):
    """The endpoint answered 500 to everything: "no Gamut score" and exit 0, so `gamut run && gamut
    report` went on with nothing."""
    server = FakeEndpoint(responder=scripted)
    run = tmp_path / "run"
    try:
        server.faults = EveryText(["500"])
        code, out, lines = gamut("run", "--out", run, *api_options(server.url, server.url))
        assert code == 3
        assert "no Gamut score" in out
        line = refusal(lines)
        assert line.startswith("gamut: generate: every request failed (1 of 1), the first with: ")
        assert f"{server.url}: HTTP 500: boom" in line and "the same command retries them" in line
        assert (run / STORE_FILE).is_file()

        # `gamut generate` alone too (it has no score to print, and exited 0)
        code, out, lines = gamut("generate", "--out", run, *api_options(server.url, server.url))
        assert code == 3 and refusal(lines).startswith("gamut: generate: every request failed (1 of 1)")

        server.faults = {}  # the endpoint is back: the same command, and the run is done
        code, out, lines = gamut("run", "--out", run, *api_options(server.url, server.url))
        assert code == 0, lines
        assert out.startswith("Gamut score ")
    finally:
        server.stop()


def test_a_judge_that_fails_every_request_exits_3_naming_the_judge_stage(tmp_path):
    candidate, judge = FakeEndpoint(responder=scripted), FakeEndpoint(responder=scripted)
    run = tmp_path / "run"
    try:
        judge.faults = EveryText(["400"])
        code, out, lines = gamut("run", "--out", run, *api_options(candidate.url, judge.url))
        assert code == 3
        line = refusal(lines)
        assert line.startswith("gamut: judge: every request failed (") and f"{judge.url}: HTTP 400: bad model" in line
        answered = candidate.requests

        judge.faults = {}
        code, out, lines = gamut("judge", "--out", run)
        assert code == 0, lines
        assert out.startswith("Gamut score ") and candidate.requests == answered  # the answers were kept
    finally:
        candidate.stop()
        judge.stop()


def test_the_exit_statuses_are_in_the_help():
    for command in ("run", "judge"):
        code, out, lines = gamut(command, "--help")
        assert code == 0
        assert "3 every request of a stage failed" in " ".join(out.split())
