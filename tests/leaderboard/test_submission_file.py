"""`gamut submission RUN_DIR OUT.jsonl` (issue 24 item 14): a `gamut generate` run's answers as the
leaderboard's upload, accepted by the Space's own reader, the reasoning left out. The candidate is
scripted behind the fake OpenAI-compatible endpoint (the hosted-API boundary)."""

from __future__ import annotations

import json

import pytest
from fake_endpoint import FakeEndpoint, user_text

from gamut_hf.dataset.loader import iter_questions, load_gamut
from gamut_hf.leaderboard.submission import parse_submission


@pytest.fixture
def thinking_endpoint():
    # A thinking model: its reasoning between tags, then the answer (the openai backend splits them).
    server = FakeEndpoint(responder=lambda body: f"<think>secret plan</think>Answer to: {user_text(body)[:40]}")
    yield server
    server.stop()


def generate(gamut, out, url, *extra):
    return gamut(
        "generate", "--out", out, "--model", "thinker", "--backend", "openai", "--base-url", url,
        "--variant", "text_only", *extra,
    )  # fmt: skip


def test_a_generate_run_becomes_the_upload_the_space_accepts(gamut, thinking_endpoint, tmp_path):
    run, upload = tmp_path / "run", tmp_path / "responses.jsonl"
    assert generate(gamut, run, thinking_endpoint.url, "--limit", "3").code == 0
    before = sorted(p.name for p in run.iterdir())
    done = gamut("submission", run, upload)
    assert done.code == 0, done.err
    assert sorted(p.name for p in run.iterdir()) == before  # read only
    lines = [json.loads(line) for line in upload.read_text().splitlines()]
    questions = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))
    assert [line["question_id"] for line in lines] == [q.id for q in questions[:3]]
    assert all(line["response"].startswith("Answer to: ") and "secret" not in line["response"] for line in lines)
    assert "3 of 3 answers of thinker (text_only)" in done.out and "choose the variant text_only." in done.out

    ids = [q.id for q in questions]
    accepted = parse_submission(
        upload.read_bytes(), {"name": "thinker", "access": "open", "variant": "text_only"}, ids, partial=True
    )
    assert len(accepted.responses) == 3

    refused = gamut("submission", run, upload)  # never overwritten
    assert refused.code == 2 and "exists; remove it or choose another file name" in refused.err


def test_a_partial_run_says_so_and_failed_generations_are_named(gamut, thinking_endpoint, tmp_path):
    run = tmp_path / "run"
    questions = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))
    thinking_endpoint.faults[questions[1].prompt("text_only")] = ["400"]
    generate(gamut, run, thinking_endpoint.url, "--limit", "3")
    done = gamut("submission", run, tmp_path / "up.jsonl")
    assert done.code == 0, done.err
    assert "2 of 3 answers" in done.out and "tick 'Partial submission'" in done.out
    assert "1 generation(s) failed and are left out" in done.err


def test_no_store_or_no_answer_is_one_line(gamut, thinking_endpoint, tmp_path):
    refused = gamut("submission", tmp_path, tmp_path / "up.jsonl")
    assert refused.code == 2 and "no run store here" in refused.err and not (tmp_path / "up.jsonl").exists()
    thinking_endpoint.faults = {
        q.prompt("text_only"): ["400"] for q in iter_questions(load_gamut("gamut-sample", "text_only"), "text_only")
    }
    generate(gamut, tmp_path / "run", thinking_endpoint.url, "--limit", "1")
    refused = gamut("submission", tmp_path / "run", tmp_path / "up.jsonl")
    assert refused.code == 2 and "no answer stored yet" in refused.err
