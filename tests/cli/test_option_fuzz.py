"""Fuzzing the options a user types (hypothesis): `--model-option/--judge-option KEY=VALUE`,
`--shard` and the parameters of `gamut score`. Whatever the text, the command accepts it or
exits 2 with exactly one line naming the option; never an internal error (exit 1), never a
traceback.

The parsing layer is fuzzed as the commands call it, before any model loads (run_options, then
resolve_run_config with the backend's option check; score_params); a smaller sample goes through
the whole command line. No model is loaded: a run's options are checked before its dataset is,
and the dataset here is an empty folder, refused in one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from pathlib import Path

from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gamut_hf.backends import BACKENDS
from gamut_hf.backends.options import BACKEND_OPTIONS
from gamut_hf.cli import main
from gamut_hf.cli.options import parse_shard, run_options, score_params
from gamut_hf.core.compiler import CompileParams
from gamut_hf.errors import GamutError
from gamut_hf.evaluation.config import RunConfig, resolve_run_config


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )


# Text that has broken parsers: other scripts' digits (str.isdigit takes '²'), JSON Python reads
# and JSON does not (NaN), numbers past a float or an int's digit limit, deep nesting, separators
# str.splitlines splits at, a lone surrogate (undecodable bytes in argv), control characters.
FRAGMENTS = [
    "²",
    "٣",
    "１",
    "0",
    "1",
    "-1",
    "/",
    ",",
    "=",
    "-",
    ".",
    "e",
    "1e999",
    "-1e308",
    "NaN",
    "Infinity",
    "nan",
    "inf",
    "true",
    "null",
    "9" * 5000,
    "[" * 3000,
    '{"a": 1, "a": 2}',
    '["x", "y"]',
    "1_0",
    " ",
    "\n",
    "\r",
    "\u2028",
    "\x85",
    "\x00",
    "\udcff",
    "\ufeff",
]
TEXT = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=4).map("".join)
# A whole fragment as the value as often as not: a parser is most often broken by one whole token.
VALUES = st.sampled_from(FRAGMENTS) | TEXT
OPTION_NAMES = sorted({name for options in BACKEND_OPTIONS.values() for name in options.model_fields})
KEY_VALUES = st.builds("{}={}".format, st.sampled_from(OPTION_NAMES) | TEXT, VALUES) | TEXT
NUMBERS = st.sampled_from(["²", "٣", "１", "-1", "+1", " 1", "1 ", "1.0", "1e3", "9" * 30, "9" * 5000]) | st.integers(
    0, 12
).map(str)
SHARDS = st.none() | st.builds("{}/{}".format, NUMBERS | TEXT, NUMBERS | TEXT) | TEXT


def assert_one_line(error: BaseException) -> None:
    text = str(error.format_message() if hasattr(error, "format_message") else error)
    assert text and len(text.splitlines()) == 1, text


def run_gamut(*args: object) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in args])
    return code, err.getvalue().splitlines()


def assert_clean(code: int, lines: list[str], *, banner: bool = False) -> None:
    """Accepted, or exit 2 with one line starting "gamut:" (after the run's banner, when it got that far)."""
    assert code in (0, 2), (code, lines)
    assert not any("internal error" in line or "Traceback" in line for line in lines), lines
    if code == 2:
        said = [line for line in lines if line.startswith("gamut:")]
        assert len(said) == 1 and lines[-1] == said[0], lines
        assert banner or lines == said, lines


def pipeline_options(model_options: list[str], judge_options: list[str], shard: str | None, **given) -> dict:
    """The options dict click gives the run command (every option at its default: None, or () for
    a repeatable one), with these set."""
    from gamut_hf.cli.evaluation import run_command

    with run_command.make_context("run", ["--out", "unused"], resilient_parsing=True) as context:
        options = dict(context.params)
    options.update(
        model_options=tuple(model_options),
        judge_options=tuple(judge_options),
        shard=shard,
        all_questions=False,
        **given,
    )
    return options


@fuzz(100)
@given(
    model_options=st.lists(KEY_VALUES, max_size=2),
    judge_options=st.lists(KEY_VALUES, max_size=2),
    shard=SHARDS,
    backend=st.sampled_from(sorted(BACKENDS)),
    judge_backend=st.sampled_from(sorted(BACKENDS)),
)
def test_run_options_are_a_config_or_one_line(model_options, judge_options, shard, backend, judge_backend):
    options = pipeline_options(model_options, judge_options, shard, backend=backend, judge_backend=judge_backend)
    try:
        config = resolve_run_config(run_options(options), None)
    except GamutError as error:  # files.InputError, backends.options.OptionError, ...
        assert_one_line(error)
    except Exception as error:  # the CLI's BadInput (a click exception): exit 2, its one line
        assert type(error).__name__ == "BadInput", repr(error)
        assert_one_line(error)
    else:
        assert isinstance(config, RunConfig)
        assert config.shard is None or 0 <= config.shard[0] < config.shard[1]


@fuzz(100)
@given(SHARDS)
def test_a_shard_is_two_ascii_numbers_or_refused(shard):
    try:
        parsed = parse_shard(shard)
    except Exception as error:
        assert type(error).__name__ == "BadInput", repr(error)
        assert error.format_message().startswith("--shard: expected i/n")
    else:
        if shard is None:
            assert parsed is None
        else:
            assert f"{parsed[0]}/{parsed[1]}" == shard and 0 <= parsed[0] < parsed[1]


FLOATS = st.floats() | st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 1e308, -1e308, 5e-324])


@fuzz(100)
@given(
    partial_credit=FLOATS,
    contradiction_penalty=FLOATS,
    weights=TEXT | st.lists(FLOATS, max_size=4).map(lambda values: ",".join(map(repr, values))),
)
def test_score_parameters_are_params_or_one_line(partial_credit, contradiction_penalty, weights):
    try:
        params = score_params(partial_credit, contradiction_penalty, weights)
    except Exception as error:
        assert type(error).__name__ == "BadInput", repr(error)
        assert_one_line(error)
        assert error.format_message().startswith(("--partial-credit", "--contradiction-penalty", "--weights"))
    else:
        assert 0 <= params.partial_credit <= 1 and params.contradiction_penalty < 0
        assert math.isfinite(sum(params.tier_weights.values())) and any(params.tier_weights.values())


# -- the whole command line -------------------------------------------------------------------


@fuzz(40)
@given(
    model_option=KEY_VALUES,
    judge_option=KEY_VALUES,
    shard=st.builds("{}/{}".format, NUMBERS | TEXT, NUMBERS | TEXT) | TEXT,
    judge_backend=st.sampled_from(sorted(BACKENDS)),
)
def test_gamut_run_refuses_options_in_one_line(model_option, judge_option, shard, judge_backend):
    with tempfile.TemporaryDirectory(prefix="gamut-fuzz-") as scratch:
        empty = Path(scratch) / "no-questions"
        empty.mkdir()
        args = ["run", "--out", Path(scratch) / "run", "--dataset", empty, "--judge-backend", judge_backend]
        code, lines = run_gamut(*args, "--model-option", model_option, "--judge-option", judge_option, "--shard", shard)
        # Every option accepted, the empty dataset is refused: the run never gets to a model.
        assert code == 2
        assert_clean(code, lines, banner=True)
        assert not (Path(scratch) / "run" / "store.sqlite").exists()


RUBRIC = EXAMPLES / "bike_chain.json"
COMPILE_FLAGS = [f"--{name.replace('_', '-')}" for name in CompileParams.model_fields]
SCORE_FLAGS = ["--partial-credit", "--contradiction-penalty", "--weights", *COMPILE_FLAGS]
SMALL_NUMBERS = st.integers(-3, 50).map(str) | st.floats(-3, 3).map(repr)


@fuzz(100)
@given(st.lists(st.tuples(st.sampled_from(SCORE_FLAGS), TEXT | SMALL_NUMBERS), max_size=4))
def test_gamut_score_parameters_are_accepted_or_one_line(parameters):
    from gamut_hf.core.compiler import compile_rubric
    from gamut_hf.core.rubric import parse_meta_rubric

    checks = compile_rubric(parse_meta_rubric(json.loads(RUBRIC.read_text())))
    with tempfile.TemporaryDirectory(prefix="gamut-fuzz-") as scratch:
        verdicts = Path(scratch) / "verdicts.json"
        verdicts.write_text(json.dumps({check.id: "partially_meets" for check in checks}))
        # --flag=VALUE: a value starting with "-" is the option's, not another option.
        code, lines = run_gamut("score", RUBRIC, verdicts, *(f"{flag}={value}" for flag, value in parameters))
        assert_clean(code, lines)
