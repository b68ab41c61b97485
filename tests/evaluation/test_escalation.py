"""Escalation (`--escalate-below P --escalate-judge J2`): the checks the first judge was unsure of
are asked again of a second judge, whose verdict replaces the first; the run says how many, and
what they cost.

The first judge is the embedded SmolLM2 on the transformers backend (verdict probabilities from
its logits); the second is a scripted API judge behind the fake endpoint (the hosted-API
boundary), which answers in JSON.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from conftest import error_lines

BELOW = 0.8  # SmolLM2 puts 0.76-0.83 on its top verdict for the first question: some under, most over
RUN = ("--limit", "1", "--max-tokens", "32")


@pytest.fixture
def endpoint(scripted_endpoint):
    return scripted_endpoint


def escalation(url: str, *extra: str) -> list[str]:
    return [
        "--escalate-below", str(BELOW), "--escalate-judge", "api-judge", "--escalate-judge-backend", "openai",
        "--escalate-judge-base-url", url, *extra,
    ]  # fmt: skip


def details(folder) -> list[dict]:
    return pq.read_table(folder / "details.parquet").to_pylist()


def test_a_finished_run_escalates_only_its_unsure_checks_and_their_verdicts_replace_the_first(
    gamut, endpoint, tmp_path
):
    out = tmp_path / "run"
    first = gamut("run", "--out", out, *RUN)
    assert first.code == 0, first.err
    before = details(out)
    unsure = {
        row["check_id"]
        for row in before
        if max(row["verdict_probabilities"].values()) < BELOW * sum(row["verdict_probabilities"].values())
    }
    assert 0 < len(unsure) < len(before), "the sample should have sure and unsure checks for SmolLM2"

    escalated = gamut("run", "--out", out, *escalation(endpoint.url, "--escalate-judge-price", "10/30"))
    assert escalated.code == 0, escalated.err
    # Nothing generated or judged again by the first judge; the second judge asked the unsure only.
    assert len(endpoint.bodies) == len(unsure)
    after = {row["check_id"]: row for row in details(out)}
    for row in before:
        now = after[row["check_id"]]
        if row["check_id"] in unsure:
            assert now["escalated"] and now["raw"].startswith("{") and now["verdict"] in now["raw"]
        else:
            assert not now["escalated"] and (now["verdict"], now["raw"]) == (row["verdict"], row["raw"])
    results = json.loads((out / "results.json").read_text())
    assert results["escalation"]["escalated"] == results["escalation"]["answered"] == len(unsure)
    assert results["escalation"]["below"] == BELOW and results["escalation"]["judge"]["model"] == "api-judge"
    assert results["usage"]["escalation"]["calls"] == len(unsure)
    assert results["cost"]["escalation"]["price"]["source"] == "--escalate-judge-price"
    assert f"escalated {len(unsure)} of {len(before)} checks" in escalated.out
    # The API judge gives no probabilities: no expected score for a run of mixed verdicts.
    assert results["expected_gamut"] is None

    # Kept with the run: a plain rerun asks no one anything and scores the same.
    again = gamut("run", "--out", out)
    assert again.code == 0, again.err
    assert len(endpoint.bodies) == len(unsure)
    assert json.loads((out / "results.json").read_text())["score"] == results["score"]


def test_a_cheap_api_judge_with_logprobs_escalates_to_a_dear_one(gamut, endpoint, tmp_path):
    """The paper's setting: API judges. The first asked for its verdict token's logprobs
    (logprobs=true, read inside its JSON answer), the unsure checks sent to the second."""
    out = tmp_path / "run"
    first = ["--judge", "cheap-judge", "--judge-backend", "openai", "--judge-base-url", endpoint.url]
    api = ["--model", "good-model", "--backend", "openai", "--base-url", endpoint.url, "--variant", "text_only"]
    endpoint.bodies.clear()
    done = gamut(
        "run", "--out", out, *api, *first, "--judge-option", "logprobs=true", *RUN,
        "--escalate-below", "0.7", "--escalate-judge", "dear-judge", "--escalate-judge-backend", "openai",
        "--escalate-judge-base-url", endpoint.url,
    )  # fmt: skip
    assert done.code == 0, done.err
    asked = [body for body in endpoint.bodies if body["model"] == "cheap-judge"]
    assert asked and all(body["logprobs"] and body["top_logprobs"] == 20 for body in asked)
    results = json.loads((out / "results.json").read_text())
    rows = details(out)
    escalated = [row for row in rows if row["escalated"]]
    dear = [body for body in endpoint.bodies if body["model"] == "dear-judge"]
    assert 0 < len(escalated) == len(dear) == results["escalation"]["escalated"] < len(rows)
    for row in rows:
        if not row["escalated"]:  # the first judge's verdict, its probabilities read from the JSON's token
            probabilities = row["verdict_probabilities"]
            assert sum(probabilities.values()) == pytest.approx(1.0)
            assert max(probabilities.values()) >= 0.7 and max(probabilities, key=probabilities.get) == row["verdict"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--escalate-below", "1.5", "--escalate-judge", "j2"], "--escalate-below: expected a probability above 0"),
        (["--escalate-below", "0", "--escalate-judge", "j2"], "--escalate-below: expected a probability above 0"),
        (["--escalate-below", "0.5"], "--escalate-below needs --escalate-judge J"),
        (["--escalate-judge", "j2"], "--escalate-judge goes with --escalate-below P"),
        (["--escalate-below", "0.5", "--escalate-judge", "smollm2-135m"], "--escalate-judge is the judge itself"),
        (
            ["--escalate-below", "0.5", "--escalate-judge", "j2", "--rationale"],
            "--escalate-below needs the judge's verdict probabilities",
        ),
        (
            [
                "--escalate-below", "0.5", "--escalate-judge", "j2", "--judge", "hosted", "--judge-backend", "openai",
                "--judge-base-url", "http://127.0.0.1:9/v1",
            ],
            "--escalate-below needs the judge's verdict probabilities",
        ),
        (["--escalate-below", "0.5", "--escalate-judge", "j2", "--escalate-judge-price", "x"], "--escalate-judge-price"),
    ],
)  # fmt: skip
def test_a_bad_escalation_is_one_line_before_anything_runs(gamut, tmp_path, options, message):
    out = tmp_path / "run"
    refused = gamut("run", "--out", out, *RUN, *options)
    assert refused.code == 2, refused.err
    *said, line = error_lines(refused.err)
    assert line.startswith(f"gamut: {message}"), refused.err
    assert not out.exists()
