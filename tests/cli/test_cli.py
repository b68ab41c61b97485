"""The command line's contract for bad input: one line, exit 2, never a traceback."""

from __future__ import annotations

import json
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
    done = subprocess.run(
        f"{sys.executable} -m gamut_hf compile {path} | head -c 10", shell=True, capture_output=True, text=True
    )
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--partial-credit", "nan"], "--partial-credit: Input should be a finite number"),
        (["--partial-credit", "7"], "--partial-credit: Input should be less than or equal to 1"),
        (["--contradiction-penalty", "0"], "--contradiction-penalty: Input should be less than 0"),
        (["--contradiction-penalty", "-inf"], "--contradiction-penalty: Input should be a finite number"),
        (["--weights", "-1,0.3,0.1"], "--weights (answer_critical): Input should be greater than or equal to 0"),
        (["--weights", "0,0,0"], "--weights: at least one tier weight must be above 0"),
        (["--weights", "0.6,0.3"], "--weights: expected three numbers"),
        # Issue 23.10: finite parameters whose sums overflow scored NaN ("Gamut score nan", exit 0).
        (["--weights", "1e308,1e308,1e308"], "--weights: the tier weights add up to more than a float holds"),
        (["--contradiction-penalty", "-1e308"], "--contradiction-penalty: Input should be greater than or equal to"),
    ],
)
def test_score_parameters_outside_their_ranges_are_one_line_errors(tmp_path, capsys, option, message):
    """Issue 12 item 8: nan scored as NaN (not JSON), mu = 0 divided by zero, lambda = 7 gave tier
    scores outside [-1, 1], a negative weight printed a bare pydantic message."""
    from gamut_hf.cli import main

    rubric = EXAMPLES / "bike_chain.json"
    assert main(["compile", str(rubric)]) == 0
    checks = json.loads(capsys.readouterr().out)
    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text(
        json.dumps({c["id"]: "contradicts" if i % 2 else "partially_meets" for i, c in enumerate(checks)})
    )
    assert main(["score", str(rubric), str(verdicts), *option]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1 and message in captured.err
    # The same parameters within their ranges score, as JSON, inside [-1, 1].
    assert (
        main(
            [
                "score",
                str(rubric),
                str(verdicts),
                "--partial-credit",
                "1",
                "--contradiction-penalty",
                "-0.5",
                "--weights",
                "1,0,0",
            ]
        )
        == 0
    )
    assert -1 <= json.loads(capsys.readouterr().out)["score"] <= 1


def test_help_marks_optional_arguments_and_names_both_forms_of_score(gamut):
    """Issue 24.10: `gamut stats --help` showed DATASET without the brackets of an optional argument."""
    assert "Usage: gamut stats [OPTIONS] [DATASET]" in gamut("stats", "--help").out
    shown = gamut("score", "--help").out
    assert "RUBRIC|RUN_DIR [VERDICTS]" in shown and "RUBRIC VERDICTS:" in shown and "RUN_DIR:" in shown
