"""The command line's contract for bad input: one line, exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT


@pytest.mark.parametrize("command", [["validate"], ["compile"], ["score"], []])
def test_help_is_available(gamut, command):
    result = gamut(*command, "--help")
    assert result.code == 0
    assert "Usage: gamut" in result.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compile", "does/not/exist.json"], "does/not/exist.json: no such file"),
        (["compile", "."], "is a directory"),
        (["compile"], "Missing argument 'PATH'"),
        (["validate"], "Missing argument 'PATH...'"),
        (["score", "x.json"], "x.json: expected a run folder, or a RUBRIC and a VERDICTS file"),
        (["compile", "x.json", "--small-pool-max", "zero"], "'zero' is not a valid integer"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_usage_and_file_errors_are_one_line(gamut, args, message):
    result = gamut(*args, cwd=ROOT)
    assert result.code == 2
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert "Traceback" not in result.err


def test_not_json_not_utf8_and_wrong_types(tmp_path, gamut):
    cases = {
        "trunc.json": (b'{"question_id": "q", "items": [', "not valid JSON"),
        "latin1.json": ('{"question_id": "caf\u00e9"}'.encode("latin-1"), "not UTF-8"),
        "number.json": (b"42", "a meta-rubric must be a JSON object"),
        "empty.json": (b"", "not valid JSON"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        for command in ("validate", "compile"):
            result = gamut(command, path)
            assert result.code == 2, (name, command)
            assert message in result.err and len(result.err.strip().splitlines()) == 1, (name, result.err)


def test_examples_validate_and_compile(gamut):
    paths = sorted(EXAMPLES.glob("*.json"))
    result = gamut("validate", "--release", *paths)
    assert result.code == 0, result.err
    assert f"{len(paths)} meta-rubrics valid" in result.out
    for path in paths:
        assert gamut("compile", path).code == 0


def test_piping_into_a_closed_pipe_is_not_an_error():
    path = sorted(EXAMPLES.glob("*.json"))[0]
    done = subprocess.run(f"{sys.executable} -m gamut_hf compile {path} | head -c 10", shell=True,
                          capture_output=True, text=True)
    assert "Traceback" not in done.stderr
