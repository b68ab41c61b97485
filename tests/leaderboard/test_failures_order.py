"""The failure browser lists a model's questions by how unsure its judge was, where the judge gave
verdict probabilities: through the Space's /questions endpoint, as a scripted client calls it.

The runs come from the real CLI against the scripted endpoint, whose judge answers as a vLLM
server does under the verdict grammar (the bare word, with its first token's logprobs) when asked
for logprobs (``structured=vllm``), and with JSON and no logprobs otherwise.
"""

from __future__ import annotations

import json
import math
import re

import pyarrow.parquet as pq
import pytest
from gradio_client import Client
from scripted_api import api_run
from space_support import launch

from gamut_hf.leaderboard.failures import SURE_COLUMN, UNSURE_FIRST, WORST_FIRST
from gamut_hf.leaderboard.space import SpaceConfig

QUESTIONS = 6


@pytest.fixture(scope="module")
def client(tmp_path_factory, scripted_endpoint):
    from conftest import run_gamut

    results = tmp_path_factory.mktemp("unsure") / "results"
    api_run(
        run_gamut, results / "sure-of-some", scripted_endpoint.url, "good-model", "strict-judge", "multimodal",
        QUESTIONS, "--judge-option", "structured=vllm",
    )  # fmt: skip
    api_run(
        run_gamut,
        results / "no-probabilities",
        scripted_endpoint.url,
        "poor-model",
        "strict-judge",
        "multimodal",
        QUESTIONS,
    )
    app, url = launch(
        SpaceConfig(results=results, requests=results.parent / "requests", dataset="gamut-sample", login=False)
    )
    yield Client(url, verbose=False), results
    app.close()


def listed(client: Client, key: str, order: str | None = None) -> list[dict]:
    args = [[key], "any", "any", "any", "any"] + ([order] if order else [])
    table, _ = client.predict(*args, api_name="/questions")
    return [dict(zip(table["headers"], row, strict=False)) for row in table["data"]]


def test_the_questions_are_listed_least_sure_first_with_the_judges_least_sure_verdict(client):
    client, results = client
    rows = pq.read_table(results / "sure-of-some" / "details.parquet").to_pylist()
    least = {}
    for row in rows:
        probabilities = row["verdict_probabilities"]
        sure = max(probabilities.values()) / sum(probabilities.values())
        least[row["question_id"]] = min(least.get(row["question_id"], 1.0), sure)
    unsure = listed(client, "sure-of-some", UNSURE_FIRST)
    assert {row["question"] for row in unsure} == set(least)
    sureness = [row[SURE_COLUMN] for row in unsure]
    assert sureness == sorted(sureness) and len(set(sureness)) > 1  # least sure first (ties: worse score first)
    for row in unsure:
        assert row[SURE_COLUMN] == pytest.approx(round(100 * least[row["question"]], 1))
    # The default order is still the worst score first, the sureness beside it; a call without
    # the order (an older client's) gets the same.
    worst = listed(client, "sure-of-some", WORST_FIRST)
    assert listed(client, "sure-of-some") == worst
    scores = [row["good-model score"] for row in worst]
    assert scores == sorted(scores) and {row["question"] for row in worst} == set(least)


def test_a_judge_without_probabilities_is_listed_by_score_and_says_so(client):
    client, _ = client
    rows = listed(client, "no-probabilities", UNSURE_FIRST)
    assert rows and all(SURE_COLUMN not in row for row in rows)
    scores = [row["poor-model score"] for row in rows]
    assert scores == sorted(scores) and not any(math.isnan(s) for s in scores)
    _, line = client.predict(["no-probabilities"], "any", "any", "any", "any", UNSURE_FIRST, api_name="/questions")
    assert "gave no verdict probabilities" in line


def test_the_report_shows_the_expected_score_beside_the_score(client, gamut, tmp_path):
    _, results = client

    expected = json.loads((results / "sure-of-some" / "results.json").read_text())["expected_gamut"]
    assert expected is not None
    reported = gamut("report", results / "sure-of-some", "--out", tmp_path / "report")
    assert reported.code == 0, reported.err
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert re.search(r"\|\s+expected\s+\|", markdown)  # the leaderboard table's column
    assert f"{expected:.1f}" in markdown
