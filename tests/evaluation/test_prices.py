"""What a run cost: prices given or listed, the cost of each stage in results.json and beside the
score, kept with the run for a rescore, and only for the model it was given for."""

from __future__ import annotations

import json

import pytest

from gamut_hf.evaluation.config import ModelSpec, RunConfig
from gamut_hf.evaluation.prices import Price, listed_price, price_table, run_prices


@pytest.fixture
def endpoint(scripted_endpoint):
    return scripted_endpoint


def expected_usd(price: dict, tokens: dict) -> float:
    cached = tokens["cached_tokens"] if price.get("cached_prompt") is not None else 0
    return (
        (tokens["prompt_tokens"] - cached) * price["prompt"]
        + cached * (price.get("cached_prompt") or 0)
        + tokens["completion_tokens"] * price["output"]
    ) / 1e6


def test_an_api_run_is_priced_from_the_list_and_the_flag_and_a_rescore_keeps_it(gamut, endpoint, tmp_path):
    out = tmp_path / "run"
    models = ["--model", "gpt-4o", "--backend", "openai", "--base-url", endpoint.url]
    judge = ["--judge", "fake-judge", "--judge-backend", "openai", "--judge-base-url", endpoint.url]
    done = gamut("run", "--out", out, *models, *judge, "--judge-price", "2/8", "--limit", "2")
    assert done.code == 0, done.err
    results = json.loads((out / "results.json").read_text())
    cost, usage = results["cost"], results["usage"]
    assert cost["generation"]["price"] == {
        "prompt": 2.5,
        "output": 10.0,
        "cached_prompt": 1.25,
        "batch": 0.5,
        "source": f"list price of {price_table()[0]}",
    }
    assert cost["judge"]["price"]["source"] == "--judge-price" and cost["judge"]["price"]["prompt"] == 2
    assert usage["judge"]["cached_tokens"] > 0  # the fake reports cached tokens; no cached price given: full rate
    for stage in ("generation", "judge"):
        assert cost[stage]["usd"] == pytest.approx(expected_usd(cost[stage]["price"], usage[stage]), abs=1e-6)
    total = cost["generation"]["usd"] + cost["judge"]["usd"]
    [line] = [line for line in done.out.splitlines() if "cost $" in line]
    assert f"cost ${total:,.4f}" in line and "list price of" in line and "--judge-price" in line

    # The report's leaderboard says what the run cost.
    reported = gamut("report", out, "--out", tmp_path / "report")
    assert reported.code == 0, reported.err
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "cost (US$)" in markdown and f"{total:.4f}" in markdown

    # The price was kept with the run: a rescore prices it the same, without the flag.
    rescored = gamut("score", out)
    assert rescored.code == 0, rescored.err
    assert json.loads((out / "results.json").read_text())["cost"] == cost
    # ... for that judge only: another judge of the same run has no price until one is given.
    rejudged = gamut("judge", "--out", out, "--judge", "second-judge", "--judge-base-url", endpoint.url)
    assert rejudged.code == 0, rejudged.err
    again = json.loads((out / "results.json").read_text())
    assert set(again["cost"]) == {"generation"}
    assert "judge not priced" in rejudged.out


def test_a_dry_run_prices_an_api_model_from_the_list(gamut, endpoint, tmp_path):
    planned = gamut(
        "run", "--out", tmp_path / "run", "--model", "gpt-5", "--backend", "openai", "--base-url", endpoint.url,
        "--limit", "1", "--dry-run",
    )  # fmt: skip
    assert planned.code == 0, planned.err
    generate = next(line for line in planned.out.splitlines() if line.startswith("generate"))
    assert generate.split()[-1].startswith("$")  # priced, though no --model-price was given
    judge = next(line for line in planned.out.splitlines() if line.startswith("judge"))
    assert judge.split()[-1] == "-"  # the local judge has no list price


@pytest.mark.parametrize(
    ("model", "listed"),
    [
        ("gpt-4o", "gpt-4o"),
        ("openai/gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("GPT-5", "gpt-5"),
        ("gpt-5.4", None),  # a later model is not priced as an earlier one it starts like
        ("gemini-3.1-pro", None),
        ("gpt-4o-audio-preview", None),
    ],
)
def test_the_list_prices_a_model_by_its_name_and_dated_releases_only(model, listed):
    _, prices = price_table()
    assert listed_price(model) == (prices[listed] if listed else None)


def test_a_local_model_has_no_list_price_and_a_given_price_wins():
    local = RunConfig(candidate=ModelSpec(name="gpt-4o", backend="vllm"))  # a local folder named like an API model
    assert run_prices(local, {}) == {"candidate": None, "judge": None, "escalation": None}
    given = Price(prompt=1, output=2)
    priced = run_prices(local, {"judge": given})
    assert priced["judge"] == given.model_copy(update={"source": "--judge-price"})
    assert Price(prompt=2, output=10, cached_prompt=0.5).cost(1_000_000, 100_000, 400_000) == pytest.approx(
        1.2 + 0.2 + 1.0
    )
