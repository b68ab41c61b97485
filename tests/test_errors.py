"""Exit statuses: 2 and one line for the user's mistakes (a GamutError), 1 for our own bugs.

An internal bug must never pass for bad input: before the error family, any ValueError or
LookupError raised anywhere exited 2 as if the user's file were wrong.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gamut_hf
from gamut_hf import cli
from gamut_hf.backends.models import ModelNotFound
from gamut_hf.cli import rubrics as rubric_commands
from gamut_hf.core.rubric import RubricError
from gamut_hf.core.scorer import ScoringError
from gamut_hf.errors import GamutError
from gamut_hf.files import InputError


def _example_rubric() -> str:
    return str(sorted(Path(gamut_hf.__file__).parent.glob("examples/rubrics/*.json"))[0])


@pytest.mark.parametrize("error", [ValueError("bad index"), KeyError("item"), LookupError("x"), TypeError("t")])
def test_an_internal_bug_is_an_internal_error_not_bad_input(monkeypatch, capsys, error):
    def broken(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(rubric_commands, "compile_rubric", broken)
    monkeypatch.delenv("GAMUT_DEBUG", raising=False)
    assert cli.main(["compile", _example_rubric()]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"gamut: internal error: {type(error).__name__}") and "GAMUT_DEBUG=1" in err
    assert len(err.strip().splitlines()) == 1


def test_gamut_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setattr(rubric_commands, "compile_rubric", lambda *_: (_ for _ in ()).throw(ValueError("bad index")))
    monkeypatch.setenv("GAMUT_DEBUG", "1")
    with pytest.raises(ValueError, match="bad index"):
        cli.main(["compile", _example_rubric()])


@pytest.mark.parametrize("error_type", [InputError, ScoringError, ModelNotFound, GamutError])
def test_a_user_error_exits_2_with_its_one_line(monkeypatch, capsys, error_type):
    def refuses(*_args, **_kwargs):
        raise error_type("rubric.json: item i3: no such thing\nsecond line never shown")

    monkeypatch.setattr(rubric_commands, "compile_rubric", refuses)
    assert cli.main(["compile", _example_rubric()]) == 2
    assert capsys.readouterr().err == "gamut: rubric.json: item i3: no such thing\n"


def test_every_area_error_is_a_user_error():
    for error_type in (InputError, RubricError, ScoringError, ModelNotFound):
        assert issubclass(error_type, GamutError)


def test_the_installed_entry_point_maps_a_missing_file_to_exit_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "gamut_hf", "compile", str(tmp_path / "absent.json")], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr == f"gamut: {tmp_path / 'absent.json'}: no such file\n"
