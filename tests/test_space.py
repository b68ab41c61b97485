"""The Space through gradio_client against a local launch, and the submission queue with the real worker.

Result folders come from the real CLI with candidates and judges behind a scripted endpoint
(the hosted-API boundary); one worker test judges with the real SmolLM2 on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_endpoint import FakeEndpoint
from scripted_api import api_run, is_judging
from space_support import HOSTILE, launch, sample_ids, write_jsonl

from gamut_hf.space import SpaceConfig


@pytest.fixture(scope="module")
def space(tmp_path_factory, scripted_endpoint):
    """Two scripted models on both variants under one judge, served with an empty queue."""
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("space")
    results, requests = root / "results", root / "requests"
    for model in ("good-model", "poor-model"):
        for variant in ("multimodal", "text_only"):
            api_run(run_gamut, results / f"{model}-{variant}", scripted_endpoint.url, model, "strict-judge", variant, limit=8)
    config = SpaceConfig(results=results, requests=requests, dataset="gamut-sample", login=False)
    app, url = launch(config)
    from gradio_client import Client

    yield Client(url, verbose=False), config
    app.close()


def rows(frame: dict) -> list[dict]:
    return [dict(zip(frame["headers"], row)) for row in frame["data"]]


def test_the_leaderboard_filters_and_orders_models(space):
    client, _ = space
    every = (["open", "proprietary", "unknown"], ["multimodal", "text_only"], ["strict-judge"],
             ["under 10B", "10B to 100B", "over 100B", "unknown"], ["Gamut", "Gamut 95% CI", "AC", "variant"])
    table, _, _ = client.predict(*every, api_name="/refresh")
    board = rows(table)
    assert len(board) == 4 and set(board[0]) == {"model", "variant", "Gamut", "Gamut 95% CI", "AC"}
    assert [r["Gamut"] for r in board] == sorted((r["Gamut"] for r in board), reverse=True)
    assert board[0]["model"] == "good-model" and board[0]["Gamut 95% CI"].startswith("[")
    table, _, _ = client.predict(every[0], ["multimodal"], *every[2:], api_name="/refresh")
    assert {r["variant"] for r in rows(table)} == {"multimodal"} and len(rows(table)) == 2
    table, _, _ = client.predict(["proprietary"], *every[1:], api_name="/refresh")
    assert rows(table) == []


def test_the_failure_browser_lists_and_shows_questions(space):
    client, _ = space
    table, count = client.predict(["poor-model-multimodal"], "any", "any", "contradicts", "any", api_name="/questions")
    found = rows(table)
    assert found and "questions match" in count
    assert all(r["matching checks"] >= 1 for r in found)
    scores = [r["poor-model score"] for r in found]
    assert scores == sorted(scores)
    image, header, left, right = client.predict(found[0]["question"], ["poor-model-multimodal", "good-model-multimodal"],
                                                api_name="/question")
    assert image and Path(image).is_file()
    assert "Text-only question:" in header
    assert "Answer by poor-model" in left and "Answer by good-model" in right
    assert "verdict-contradicts" in left and left.count("<li class='check") >= 5


def test_the_analysis_tab_builds_the_report(space):
    client, _ = space
    result = client.predict(api_name="/analysis")
    assert result[0].startswith("Analysis of the runs")
    assert "Judge robustness: needs two judges" in result[0]
    assert any(isinstance(v, str) and "Text-only against multimodal" in v for v in result[1:])


def submit(client, path, name="acme/tiny-vl", variant="multimodal", partial=False, link="https://example.org/m"):
    from gradio_client import handle_file

    return client.predict(handle_file(str(path)), name, link, "open", 7, variant, partial, api_name="/submit")


def test_bad_and_hostile_uploads_are_refused_with_nothing_stored(space, tmp_path):
    client, config = space
    ids = sample_ids()
    before = sorted(config.requests.glob("*")) if config.requests.exists() else []
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question_id": "nope", "response": "x"},
                                              {"question_id": ids[0], "response": 3}])
    status, _ = submit(client, bad)
    assert status.startswith("Refused:") and "line 1: unknown question_id 'nope'" in status
    assert "line 2: response must be a string" in status
    good = write_jsonl(tmp_path / "good.jsonl", [{"question_id": q, "response": "x"} for q in ids])
    status, _ = submit(client, good, name=HOSTILE)
    assert status.startswith("Refused:") and "model name:" in status
    status, _ = submit(client, good, link="javascript:alert(1)")
    assert status.startswith("Refused:") and "model link:" in status
    scored = write_jsonl(tmp_path / "scored.jsonl", [{"question_id": q, "response": "x", "score": 100} for q in ids])
    status, _ = submit(client, scored)
    assert "scores are computed here" in status
    pickled = tmp_path / "evil.jsonl"
    pickled.write_bytes(b"\x80\x04\x95\x00cos\nsystem\n")
    status, _ = submit(client, pickled)
    assert status.startswith("Refused:") and "not UTF-8" in status
    assert (sorted(config.requests.glob("*")) if config.requests.exists() else []) == before


def test_a_submission_goes_from_pending_to_finished_and_joins_the_board(space, scripted_endpoint, gamut, tmp_path):
    client, config = space
    ids = sample_ids()
    upload = write_jsonl(tmp_path / "submission.jsonl",
                         [{"question_id": q, "response": f"Answer by good-model: about {q}"} for q in ids[:3]])
    status, queue = submit(client, upload, name="acme/tiny-vl", partial=False)
    assert "2" in status and "questions have no response" in status  # 22 of 25 missing, not partial
    status, queue = submit(client, upload, name="acme/tiny-vl", partial=True)
    assert status.startswith("Accepted: acme/tiny-vl (multimodal), 3 answers")
    assert rows(queue)[0]["status"] == "PENDING"
    status, _ = submit(client, upload, name="acme/other", partial=True)
    assert "you already have a submission waiting" in status

    done = gamut("worker", "--requests", config.requests, "--results", config.results, "--once",
                 "--judge", "strict-judge", "--judge-backend", "openai", "--judge-base-url", scripted_endpoint.url)
    assert done.code == 0, done.err
    assert "judging acme/tiny-vl" in done.err and "FINISHED" in done.err
    [record] = [json.loads(p.read_text()) for p in config.requests.glob("*.json")]
    assert record["status"] == "FINISHED" and record["submitted_by"] == "local"
    card = json.loads((config.results / record["key"] / "model.json").read_text())
    assert card["name"] == "acme/tiny-vl" and card["partial"] is True
    results = json.loads((config.results / record["key"] / "results.json").read_text())
    assert results["score"]["questions"] == 3 and results["score"]["gamut"] is not None

    queue = client.predict(api_name="/queue")
    assert rows(queue)[0]["status"] == "FINISHED"
    every = (["open", "proprietary", "unknown"], ["multimodal", "text_only"], ["strict-judge"],
             ["under 10B", "10B to 100B", "over 100B", "unknown"], ["type", "size (B)", "questions", "Gamut"])
    table, _, _ = client.predict(*every, api_name="/refresh")
    mine = [r for r in rows(table) if r["model"].startswith("acme/tiny-vl")]
    assert mine and mine[0]["model"] == "acme/tiny-vl (partial)" and mine[0]["type"] == "open"
    assert mine[0]["size (B)"] == 7 and mine[0]["questions"] == 3


def test_the_worker_fails_a_submission_the_judge_cannot_read(gamut, tmp_path):
    from gamut_hf.request_files import RequestQueue
    from gamut_hf.submission import parse_submission

    garbled = FakeEndpoint(responder=lambda body: "Hmm, hard to say." if is_judging(body) else "x")
    try:
        ids = sample_ids()
        queue = RequestQueue(tmp_path / "requests")
        data = "".join(json.dumps({"question_id": q, "response": "an answer"}) + "\n" for q in ids[:1]).encode()
        queue.submit(parse_submission(data, {"name": "m", "access": "open", "variant": "text_only"}, ids, partial=True),
                     "alice")
        done = gamut("worker", "--requests", tmp_path / "requests", "--results", tmp_path / "results", "--once",
                     "--judge", "j", "--judge-backend", "openai", "--judge-base-url", garbled.url)
        assert done.code == 0, done.err
        [record] = queue.records()
        assert record.status == "FAILED" and "unreadable" in record.reason
        assert not (tmp_path / "results" / record.key).exists()
    finally:
        garbled.stop()


def test_the_worker_judges_with_a_real_model(gamut, tmp_path):
    """SmolLM2 (transformers, CPU) as the leaderboard's judge for a two-answer partial submission."""
    from gamut_hf.request_files import RequestQueue
    from gamut_hf.submission import parse_submission

    ids = sample_ids()
    queue = RequestQueue(tmp_path / "requests")
    data = "".join(json.dumps({"question_id": q, "response": "Brush its teeth daily and see a vet yearly."}) + "\n"
                   for q in ids[:2]).encode()
    queue.submit(parse_submission(data, {"name": "vet-bot", "access": "proprietary", "variant": "text_only"}, ids,
                                  partial=True), "bob")
    done = gamut("worker", "--requests", tmp_path / "requests", "--results", tmp_path / "results", "--once")
    assert done.code == 0, done.err
    [record] = queue.records()
    assert record.status == "FINISHED", record.reason
    results = json.loads((tmp_path / "results" / record.key / "results.json").read_text())
    assert results["judge"]["model"] == "smollm2-135m" and results["score"]["questions"] == 2


def test_queue_limits_and_claims(tmp_path):
    from datetime import UTC, datetime, timedelta

    from gamut_hf.request_files import MAX_PER_DAY, RequestQueue
    from gamut_hf.submission import SubmissionError, parse_submission

    ids = ["q1", "q2"]
    queue = RequestQueue(tmp_path)
    data = b'{"question_id": "q1", "response": "a"}\n{"question_id": "q2", "response": "b"}\n'
    start = datetime(2026, 12, 1, tzinfo=UTC)
    for n in range(MAX_PER_DAY):
        sub = parse_submission(data, {"name": f"m{n}", "access": "open", "variant": "text_only"}, ids)
        record = queue.submit(sub, "carol", now=start + timedelta(hours=n))
        claimed = queue.claim()
        assert claimed.key == record.key and claimed.status == "RUNNING"
        assert queue.claim() is None  # the only request is taken
        queue.finish(claimed, "FINISHED")
    with pytest.raises(SubmissionError, match="in the last 24 hours"):
        queue.submit(parse_submission(data, {"name": "late", "access": "open", "variant": "text_only"}, ids), "carol",
                     now=start + timedelta(hours=5))
    with pytest.raises(SubmissionError, match="already on the board"):
        queue.submit(parse_submission(data, {"name": "m0", "access": "open", "variant": "text_only"}, ids), "dave")
    assert queue.responses(record.key) == {"q1": "a", "q2": "b"}


class RecordingHub:
    """The hub's API as seen by HubFolder: the one boundary faked here (the hub cannot be reached)."""

    def __init__(self):
        self.commits: list[tuple[str, list[str], str]] = []
        self.pulls: list[str] = []

    def snapshot_download(self, repo_id, repo_type, local_dir):
        self.pulls.append(repo_id)
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        return str(local_dir)

    def create_commit(self, repo_id, repo_type, operations, commit_message):
        assert repo_type == "dataset"
        self.commits.append((repo_id, sorted(op.path_in_repo for op in operations), commit_message))


def test_hub_mirrors_carry_requests_and_results(scripted_endpoint, tmp_path):
    from gamut_hf.hub import HubFolder
    from gamut_hf.pipeline import ModelSpec
    from gamut_hf.request_files import RequestQueue
    from gamut_hf.submission import parse_submission
    from gamut_hf.worker import process_next

    api = RecordingHub()
    requests_hub = HubFolder("org/requests", tmp_path / "requests", api=api)
    results_hub = HubFolder("org/results", tmp_path / "results", api=api)
    ids = sample_ids()
    queue = RequestQueue(tmp_path / "requests")
    data = json.dumps({"question_id": ids[0], "response": "Answer by good-model"}).encode()
    record = queue.submit(parse_submission(data, {"name": "m", "access": "open", "variant": "text_only"}, ids,
                                           partial=True), "erin")
    requests_hub.push(queue.files(record.key), "submit")
    judge = ModelSpec(name="strict-judge", backend="openai", options={"base_url": scripted_endpoint.url})
    done = process_next(queue, tmp_path / "results", tmp_path / "work", "gamut-sample", judge, echo=lambda _: None,
                        requests_hub=requests_hub, results_hub=results_hub)
    assert done.status == "FINISHED"
    assert api.pulls == ["org/requests"]
    assert [(repo, message) for repo, _, message in api.commits] == [
        ("org/requests", "submit"), ("org/requests", f"{record.key}: RUNNING"),
        ("org/results", f"results of {record.key}"), ("org/requests", f"{record.key}: FINISHED")]
    assert api.commits[0][1] == [f"{record.key}.json", f"{record.key}.jsonl"]
    assert api.commits[2][1] == sorted(f"{record.key}/{name}" for name in
                                       ("details.parquet", "model.json", "responses.parquet", "results.json"))


def test_gamut_space_serves_the_sample_runs(space, tmp_path):
    """The command a user runs: `gamut space` in its own process, over the same result folders."""
    import subprocess
    import sys
    import time
    import urllib.request

    from gradio_client import Client
    from space_support import free_port

    _, config = space
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "gamut_hf", "space", "--results", str(config.results),
                               "--requests", str(tmp_path / "requests"), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(240):
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                time.sleep(0.5)
        client = Client(url, verbose=False)
        assert client.predict(api_name="/queue")["data"] == []
        table, _ = client.predict(keys_of(config), "any", "any", "any", "any", api_name="/questions")
        assert table["data"]
        page = urllib.request.urlopen(url, timeout=5).read().decode()
        assert "GAMUT" in page
    finally:
        server.terminate()
        server.wait(timeout=30)


def keys_of(config) -> list[str]:
    return sorted(p.parent.name for p in config.results.glob("*/results.json"))[:1]
