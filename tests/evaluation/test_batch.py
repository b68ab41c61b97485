"""`gamut run --batch`: provider batch APIs, with nothing paid twice.

The hosted batch APIs are the boundary: local fakes of OpenAI's Batch API and Anthropic's Message
Batches (tests/fake_batch_api.py) count every submission of every request, and misbehave on cue.
The request file itself is checked against a real engine: `vllm run-batch` on SmolLM2 answers it.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from conftest import error_lines
from fake_batch_api import FakeAnthropicBatches, FakeOpenAIBatches
from fake_endpoint import user_text
from scripted_api import is_judging, scripted

ANTHROPIC = ["--model-option", "batch_api=anthropic", "--judge-option", "batch_api=anthropic"]
PROVIDERS = {"openai": (FakeOpenAIBatches, []), "anthropic": (FakeAnthropicBatches, ANTHROPIC)}
CHECKS_OF_TWO = 42  # the checks of the sample's first two questions


def run_args(out, url: str, *extra: str) -> list[str]:
    return [
        "run", "--out", str(out), "--model", "good-model", "--backend", "openai", "--base-url", url,
        "--judge", "strict-judge", "--judge-backend", "openai", "--judge-base-url", url,
        "--limit", "2", "--variant", "text_only", *extra,
    ]  # fmt: skip


BATCH = ["--batch", "--batch-poll", "0.05"]


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request):
    kind, extra = PROVIDERS[request.param]
    fake = kind(scripted)
    yield fake, extra
    fake.stop()


def stored_batches(out) -> list[tuple]:
    with sqlite3.connect(f"file:{out}/store.sqlite?mode=ro", uri=True) as db:
        return db.execute("SELECT stage, batch_id, state FROM batches ORDER BY created_at").fetchall()


def test_a_batch_run_scores_as_a_synchronous_one_with_one_submission_per_request(
    gamut, tmp_path, provider, scripted_endpoint
):
    fake, extra = provider
    sync = gamut(*run_args(tmp_path / "sync", scripted_endpoint.url))
    batched = gamut(*run_args(tmp_path / "batch", fake.url, *BATCH, *extra))
    assert sync.code == 0 and batched.code == 0, batched.err
    scores = [
        json.loads((tmp_path / name / "results.json").read_text())["score"]["gamut"] for name in ("sync", "batch")
    ]
    assert scores[0] == scores[1]
    assert len(fake.submissions) == 2 + CHECKS_OF_TWO and set(fake.submissions.values()) == {1}
    assert [(stage, state) for stage, _, state in stored_batches(tmp_path / "batch")] == [
        ("generate", "collected"),
        ("judge", "collected"),
    ]
    # A rerun asks nothing: every answer and verdict is stored.
    again = gamut(*run_args(tmp_path / "batch", fake.url, *BATCH, *extra))
    assert again.code == 0 and fake.created() == 2 and set(fake.submissions.values()) == {1}


def test_a_killed_batch_run_waits_on_its_batch_again_instead_of_sending_it_again(tmp_path, provider, gamut):
    fake, extra = provider
    out = tmp_path / "run"
    fake.held.set()  # the batch stays in progress while the client is killed
    killed_while_waiting(out, run_args(out, fake.url, *BATCH, *extra), batches=1)
    assert [(stage, state) for stage, _, state in stored_batches(out)] == [("generate", "running")]
    fake.held.clear()
    again = gamut(*run_args(out, fake.url, *BATCH, *extra))
    assert again.code == 0, again.err
    assert "generate: waiting on 1 batches sent earlier (2 requests)" in again.err
    assert len(fake.submissions) == 2 + CHECKS_OF_TWO and set(fake.submissions.values()) == {1}
    assert json.loads((out / "results.json").read_text())["unfinished_checks"] == 0


def _batches_or_none(out) -> list[tuple]:
    try:
        return stored_batches(out)
    except sqlite3.Error:  # the store is not there yet, or being made
        return []


def killed_while_waiting(out, args: list, batches: int) -> None:
    """`gamut ARGS`, SIGKILLed once its store holds ``batches`` batches with a provider id (mid-poll)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gamut_hf", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len([b for b in _batches_or_none(out) if b[1]]) < batches:
            assert process.poll() is None and time.monotonic() < deadline, "the batch was never stored"
            time.sleep(0.1)
        time.sleep(0.3)  # polling now
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_narrower_rerun_keeps_a_wider_batchs_other_answers_for_the_run_that_asks_them(
    gamut, tmp_path, openai_batches, scripted_endpoint
):
    fake = openai_batches
    out = tmp_path / "run"
    fake.held.set()
    killed_while_waiting(out, run_args(out, fake.url, *BATCH), batches=1)  # both questions' answers in flight
    fake.held.clear()
    narrower = gamut(*run_args(out, fake.url, *BATCH, "--limit", "1"))  # the last --limit given wins
    assert narrower.code == 0, narrower.err
    assert "1 answers to questions this run does not ask kept for the run that does" in narrower.err
    assert len(pq.read_table(out / "responses.parquet")) == 1
    wider = gamut(*run_args(out, fake.url, *BATCH))
    assert wider.code == 0, wider.err
    assert "generate: 1 answers stored from a batch collected earlier (for another selection)" in wider.err
    assert len(fake.submissions) == 2 + CHECKS_OF_TWO and set(fake.submissions.values()) == {1}
    sync = gamut(*run_args(tmp_path / "sync", scripted_endpoint.url))
    assert sync.code == 0, sync.err
    scores = [json.loads((tmp_path / name / "results.json").read_text())["score"] for name in ("sync", "run")]
    assert scores[0]["gamut"] == scores[1]["gamut"]


@pytest.fixture
def openai_batches():
    fake = FakeOpenAIBatches(scripted)
    yield fake
    fake.stop()


def test_a_failed_batch_is_sent_once_more_and_an_expired_ones_unanswered_half_likewise(gamut, tmp_path, openai_batches):
    fake = openai_batches
    fake.behaviours = ["fail", "complete", "expire"]  # generation fails, then the judge's batch expires half-answered
    done = gamut(*run_args(tmp_path / "run", fake.url, *BATCH))
    assert done.code == 0, done.err
    assert "failed (the batch failed) with 2 requests unanswered: sent once more" in done.err
    assert f"expired with {CHECKS_OF_TWO - CHECKS_OF_TWO // 2} requests unanswered: sent once more" in done.err
    counts = sorted(fake.submissions.values())
    # Failed and expired batches are not billed for what they left unanswered: only those went again.
    assert counts.count(2) == 2 + CHECKS_OF_TWO - CHECKS_OF_TWO // 2 and counts.count(1) == CHECKS_OF_TWO // 2
    assert json.loads((tmp_path / "run" / "results.json").read_text())["unfinished_checks"] == 0


def test_with_fallback_sync_a_failed_batchs_requests_are_asked_synchronously(gamut, tmp_path, openai_batches):
    fake = openai_batches
    fake.behaviours = ["fail"]
    done = gamut(*run_args(tmp_path / "run", fake.url, *BATCH, "--batch-fallback", "sync"))
    assert done.code == 0, done.err
    assert "with 2 requests unanswered: asked synchronously" in done.err
    assert fake.sync_calls == 2 and fake.created() == 2  # the failed generation batch, then the judge's


def test_answers_out_of_order_a_duplicated_line_an_error_line_and_an_upload_500(gamut, tmp_path, openai_batches):
    fake = openai_batches
    fake.reverse = fake.duplicate = True
    fake.upload_faults = [500]  # the client's retry uploads again
    first = None

    def refuse(line):  # the first question's answer is refused by the provider
        nonlocal first
        if is_judging(line["body"]):
            return False
        first = first or user_text(line["body"])
        return user_text(line["body"]) == first

    fake.refuse = refuse
    out = tmp_path / "run"
    done = gamut(*run_args(out, fake.url, *BATCH))
    assert done.code == 0, done.err
    responses = pq.read_table(out / "responses.parquet").to_pylist()
    refused = [r for r in responses if r["error"]]
    assert len(refused) == 1 and "HTTP 400: the request was refused" in refused[0]["error"]
    details = pq.read_table(out / "details.parquet").to_pylist()
    answered = [d for d in details if d["question_id"] != refused[0]["question_id"]]
    assert answered and all(d["verdict"] is not None for d in answered)
    assert set(fake.submissions.values()) == {1}


def test_an_unreadable_output_line_is_asked_once_more_and_every_other_request_once(gamut, tmp_path, openai_batches):
    fake = openai_batches
    garbled: list[str] = []

    def garble(line):  # one check's output line is cut short, the first time only
        if is_judging(line["body"]) and not garbled:
            garbled.append(line["custom_id"])
            return True
        return False

    fake.garble = garble
    out = tmp_path / "run"
    done = gamut(*run_args(out, fake.url, *BATCH))
    assert done.code == 0, done.err
    assert "1 requests unanswered: sent once more" in done.err
    details = pq.read_table(out / "details.parquet").to_pylist()
    assert len(details) == CHECKS_OF_TWO and all(d["verdict"] is not None for d in details)
    assert fake.submissions[garbled[0]] == 2
    assert {n for key, n in fake.submissions.items() if key != garbled[0]} == {1}


def test_a_batch_the_provider_no_longer_knows_is_one_line_and_loses_nothing(gamut, tmp_path, openai_batches):
    fake = openai_batches
    out = tmp_path / "run"
    assert gamut(*run_args(out, fake.url, "--batch-poll", "0.05", "--batch")).code == 0
    before = (out / "results.json").read_bytes()
    # A judge run of another judge is cut off with its batch in flight; the provider then forgets it.
    fake.held.set()
    killed_while_waiting(out, run_args(out, fake.url, *BATCH, "--judge", "lenient-judge"), batches=3)
    lost = stored_batches(out)[-1][1]
    del fake.batches[lost]
    fake.held.clear()
    refused = gamut(*run_args(out, fake.url, *BATCH, "--judge", "lenient-judge"))
    assert refused.code == 2, refused.err
    line = error_lines(refused.err)[-1]
    assert line.startswith("gamut: ") and f"batch {lost} is unknown to {fake.url}" in line, line
    assert "--batch-forget-unknown" in line
    assert (out / "results.json").read_bytes() == before and len(stored_batches(out)) == 3
    forgotten = gamut(*run_args(out, fake.url, *BATCH, "--judge", "lenient-judge", "--batch-forget-unknown"))
    assert forgotten.code == 0, forgotten.err
    assert [state for _, _, state in stored_batches(out)] == ["collected", "collected", "forgotten", "collected"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--batch: --model smollm2-135m runs on the transformers backend, which has no batch API"),
        (["--batch-fallback", "sync"], None),
    ],
)
def test_batch_without_a_batch_api_or_its_settings_without_batch_are_one_line(gamut, tmp_path, extra, message):
    out = tmp_path / "run"
    args = ["run", "--out", out, "--limit", "1", *(["--batch", *extra] if message else extra)]
    refused = gamut(*args)
    assert refused.code == 2, refused.err
    line = error_lines(refused.err)[-1]
    assert line.startswith("gamut: ") and (message or "--batch-fallback goes with --batch") in line, line
    assert not out.exists()


def test_the_python_api_refuses_batch_without_a_batch_api_before_touching_the_folder(tmp_path):
    from gamut_hf.evaluation import BatchMode, RunConfig, run
    from gamut_hf.files import InputError

    out = tmp_path / "run"
    with pytest.raises(InputError, match="--model smollm2-135m runs on the transformers backend, which has no batch"):
        run(RunConfig(limit=1, batch=BatchMode()), out)
    assert not out.exists()


def test_vllm_run_batch_answers_the_projects_request_file_and_its_output_is_stored(gamut, tmp_path, scripted_endpoint):
    """`vllm run-batch` on SmolLM2 reads the judge stage's request file (what the fake's upload
    holds) and its output file is read back into the store by the same code as OpenAI's."""
    from vllm_support import SERVED_MODEL_NAME, require_vllm, vllm_run_batch

    require_vllm()
    fake = FakeOpenAIBatches(scripted, runner=vllm_run_batch, folder=tmp_path)
    try:
        out = tmp_path / "run"
        answers = ["--model", "good-model", "--backend", "openai", "--base-url", scripted_endpoint.url]
        assert gamut("generate", "--out", out, *answers, "--limit", "1", "--variant", "text_only").code == 0
        judged = gamut(
            "judge", "--out", out, "--judge", SERVED_MODEL_NAME, "--judge-backend", "openai",
            "--judge-base-url", fake.url, *BATCH, timeout=1200,
        )  # fmt: skip
        assert judged.code == 0, judged.err
    finally:
        fake.stop()
    request_file = next(tmp_path.glob("batch_*-in.jsonl"))
    lines = [json.loads(raw) for raw in request_file.read_text().splitlines()]
    assert lines and all(line["url"] == "/v1/chat/completions" and line["body"]["response_format"] for line in lines)
    details = pq.read_table(out / "details.parquet").to_pylist()
    assert len(details) == len(lines) and all(d["verdict"] for d in details)
    assert sum(d["verdict"] != "error" for d in details) >= len(details) // 2  # the schema held SmolLM2 to a verdict
    assert [(stage, state) for stage, _, state in stored_batches(out)] == [("judge", "collected")]


def test_a_batch_run_costs_the_batch_rate_and_its_dry_run_says_so(gamut, tmp_path, openai_batches, scripted_endpoint):
    prices = ["--model-price", "2/8", "--judge-price", "1/4"]
    sync, batch = tmp_path / "sync", tmp_path / "batch"
    assert gamut(*run_args(sync, scripted_endpoint.url, *prices)).code == 0
    done = gamut(*run_args(batch, openai_batches.url, *BATCH, *prices))
    assert done.code == 0, done.err
    results = json.loads((batch / "results.json").read_text())
    for stage, (prompt, output) in {"generation": (2, 8), "judge": (1, 4)}.items():
        usage = results["usage"][stage]
        assert usage["batched_calls"] == usage["calls"]
        full = (usage["prompt_tokens"] * prompt + usage["completion_tokens"] * output) / 1e6
        assert results["cost"][stage]["usd"] == pytest.approx(full / 2, abs=1e-6)
    assert "calls in provider batches at x0.5" in done.out
    assert "batched_calls" not in json.loads((sync / "results.json").read_text())["usage"]["judge"]
    # The dry run of a new run prices it at the batch rate: half the synchronous estimate (dear
    # prices, so that the printed cents tell the two apart).
    prices = ["--model-price", "2000/8000", "--judge-price", "1000/4000"]
    plans = [
        gamut(*run_args(tmp_path / "new", openai_batches.url, *extra, *prices, "--dry-run")) for extra in ([], BATCH)
    ]
    totals = [
        float(next(line for line in p.out.splitlines() if line.startswith("total cost")).split("$")[1].split()[0])
        for p in plans
    ]
    assert totals[0] > 10 and totals[1] == pytest.approx(totals[0] / 2, abs=0.011)
    assert "at the provider's batch rate" in plans[1].out
