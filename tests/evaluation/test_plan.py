"""`gamut run --dry-run` (issue 24 item 11): what a run would send, before a user commits GPU hours
or an API budget; it loads no model and writes nothing. Checked against what the run then sends
to the fake OpenAI-compatible endpoint (the hosted-API boundary)."""

from __future__ import annotations

import re

import pytest
from fake_endpoint import FakeEndpoint, user_text
from scripted_api import is_judging, scripted

from gamut_hf.evaluation.plan import CHARS_PER_TOKEN

LIMIT = 2


@pytest.fixture
def endpoint():
    server = FakeEndpoint(responder=scripted)
    yield server
    server.stop()


def api(url: str, *extra: str, judge: str = "fake-judge") -> list[str]:
    return [
        "--model", "cand", "--backend", "openai", "--base-url", url,
        "--judge", judge, "--judge-backend", "openai", "--judge-base-url", url,
        "--limit", str(LIMIT), "--max-tokens", "64", *extra,
    ]  # fmt: skip


def table(out: str) -> dict[str, list[str]]:
    """The plan's table: stage -> [requests, stored, prompt tokens, output tokens, cost]."""
    rows = [line.split() for line in out.splitlines() if re.match(r"^(generate|judge) ", line)]
    return {row[0]: [cell.replace(",", "") for cell in row[1:]] for row in rows}


def chars_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def test_a_dry_run_counts_the_requests_writes_nothing_and_prices_them(gamut, endpoint, tmp_path):
    out = tmp_path / "run"
    planned = gamut("run", "--out", out, *api(endpoint.url), "--dry-run", "--judge-price", "1.25/10")
    assert planned.code == 0, planned.err
    assert not out.exists() and endpoint.requests == 0
    assert f"dry run (nothing loaded, nothing written): {LIMIT} questions" in planned.out
    checks = int(re.search(r"(\d+) checks", planned.out)[1])
    rows = table(planned.out)
    assert rows["generate"][:2] == [str(LIMIT), "0"] and rows["generate"][3] == str(LIMIT * 64)
    assert rows["judge"][:2] == [str(checks), "0"] and rows["generate"][4] == "-"
    judge_prompt, judge_output = int(rows["judge"][2]), int(rows["judge"][3])
    assert rows["judge"][4] == f"${(judge_prompt * 1.25 + judge_output * 10) / 1e6:,.2f}"
    assert "cand: 4 characters per token" in planned.out and "at --max-tokens (64)" in planned.out

    done = gamut("run", "--out", out, *api(endpoint.url))
    assert done.code == 0, done.err
    sent = [b for b in endpoint.bodies if is_judging(b)]
    assert len(sent) == checks and len(endpoint.bodies) - len(sent) == LIMIT
    again = table(gamut("run", "--out", out, *api(endpoint.url), "--dry-run").out)
    assert again == {"generate": ["0", str(LIMIT), "0", "0", "-"], "judge": ["0", str(checks), "0", "0", "-"]}


def test_a_dry_run_of_the_judge_counts_the_stored_answers_as_the_judge_then_receives_them(gamut, endpoint, tmp_path):
    out = tmp_path / "run"
    assert gamut("generate", "--out", out, *api(endpoint.url)).code == 0
    before = snapshot(out)
    planned = gamut("judge", "--out", out, *api(endpoint.url, judge="other-judge"), "--dry-run")
    assert planned.code == 0, planned.err
    assert snapshot(out) == before  # not even the manifest or a journal
    rows = table(planned.out)
    assert list(rows) == ["judge"]
    endpoint.bodies.clear()
    assert gamut("judge", "--out", out, *api(endpoint.url, judge="other-judge")).code == 0
    sent = [b for b in endpoint.bodies if is_judging(b)]
    assert int(rows["judge"][0]) == len(sent)
    actual = sum(chars_tokens(b["messages"][0]["content"]) + chars_tokens(user_text(b)) for b in sent)
    # Counted in parts, each rounded up: within a few tokens a prompt of the whole.
    assert abs(int(rows["judge"][2]) - actual) <= 3 * len(sent)


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_local_model_is_counted_with_its_tokenizer_and_bad_prices_are_one_line(gamut, tmp_path):
    planned = gamut("run", "--out", tmp_path / "run", "--limit", "1", "--dry-run")
    assert planned.code == 0, planned.err
    assert "smollm2-135m: its tokenizer" in planned.out and not (tmp_path / "run").exists()
    for price in ("1.25", "a/b", "-1/2", "nan/1", "1/inf"):
        refused = gamut("run", "--out", tmp_path / "run", "--dry-run", "--judge-price", price)
        assert refused.code == 2 and refused.err.count("\n") == 1 and "--judge-price: expected IN/OUT" in refused.err
    # A real run takes prices too (its cost): a bad one is refused before anything is written.
    refused = gamut("run", "--out", tmp_path / "run", "--model-price", "1/x")
    assert refused.code == 2 and "--model-price: expected IN/OUT" in refused.err and not (tmp_path / "run").exists()


def test_each_pipeline_command_shows_a_dry_run_example_in_its_help(gamut):
    for command in ("run", "generate", "judge"):
        shown = gamut(command, "--help").out
        assert "Examples:" in shown and f"gamut {command} --out" in shown and "--dry-run" in shown.split("Examples:")[1]
