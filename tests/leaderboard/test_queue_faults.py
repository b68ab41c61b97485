"""The submission queue never stuck: a damaged requests folder leaves every good request judged,
and a judge outage leaves every submission waiting for the judge, not failed for good (issue 23).

The judge is the scripted one behind the fake OpenAI endpoint (tests/scripted_api.py); an outage
is that endpoint stopped (connection refused). Waits between tries are passed as ``now``, never slept.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from fake_endpoint import FakeEndpoint
from scripted_api import worker_args
from space_support import sample_ids

from gamut_hf.evaluation.config import ModelSpec
from gamut_hf.leaderboard.queue import KEPT, RETRY_WAITS, RequestQueue, RequestRecord
from gamut_hf.leaderboard.submission import parse_submission
from gamut_hf.leaderboard.worker import process_next


def submit(queue: RequestQueue, user: str, name: str, answers: int = 1) -> RequestRecord:
    ids = sample_ids()
    data = "".join(json.dumps({"question_id": q, "response": "Answer by good-model"}) + "\n" for q in ids[:answers])
    card = {"name": name, "access": "open", "variant": "text_only"}
    return queue.submit(parse_submission(data.encode(), card, ids, partial=True), user)


def worker(gamut, root: Path, url: str, *options: str):
    """`gamut worker` over ROOT/requests into ROOT/results, judged by the scripted judge at ``url``."""
    return gamut(*worker_args(root / "requests", root / "results", url, *options))


def assert_finished_with_results(queue: RequestQueue, root: Path, key: str) -> None:
    record = queue.get(key)
    assert record is not None and record.status == "FINISHED", record
    folder = root / "results" / key
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert results["score"]["gamut"] is not None and results["score"]["questions"] >= 1
    assert json.loads((folder / "model.json").read_text(encoding="utf-8"))["request"] == key
    assert len(pd.read_parquet(folder / "details.parquet")) > 0


# -- a requests folder holding every kind of damage -------------------------------------------------


def test_a_damaged_requests_folder_leaves_both_good_requests_judged(scripted_endpoint, gamut, tmp_path):
    """Issue 23, the worker half of the fault-injection test: beside two good requests, one of each
    damaged entry. `gamut worker --once` judges both good ones, logs each bad one in one line, exits 0."""
    requests = tmp_path / "requests"
    queue = RequestQueue(requests)
    good = [submit(queue, "ann", "good-one"), submit(queue, "ben", "good-two")]
    no_upload = submit(queue, "cal", "no-upload")
    (requests / f"{no_upload.key}.jsonl").unlink()
    text = (requests / f"{good[0].key}.json").read_text(encoding="utf-8")

    (requests / '{"hello":1}.json').write_text('{"hello":1}', encoding="utf-8")
    (requests / "truncated.json").write_text(text[: len(text) // 2], encoding="utf-8")
    (requests / "latin1.json").write_bytes(text.replace('"ann"', '"\xe9"').encode("latin-1"))
    os.mkfifo(requests / "x.json")  # a worker that opened it for reading would wait forever
    (requests / "y.json").mkdir()
    # A valid PENDING request, but outside the folder: a link to it is no request of the queue's.
    outside = tmp_path / "elsewhere" / "linked.json"
    outside.parent.mkdir()
    outside.write_text(text.replace(good[0].key, "linked"), encoding="utf-8")
    (requests / "linked.json").symlink_to(outside)
    (requests / "surrogate.json").write_text(
        text.replace(good[0].key, "surrogate").replace('"ann"', '"half a pair \\ud800"'), encoding="utf-8"
    )
    bad = ['{"hello":1}.json', "truncated.json", "latin1.json", "x.json", "y.json", "linked.json", "surrogate.json"]
    if os.geteuid() != 0:  # root reads a file whatever its mode
        (requests / "unreadable.json").write_text(text.replace(good[0].key, "unreadable"), encoding="utf-8")
        (requests / "unreadable.json").chmod(0)
        bad.append("unreadable.json")

    done = worker(gamut, tmp_path, scripted_endpoint.url, "--once")

    assert done.code == 0, done.err
    assert "handled 3 submission(s)" in done.out
    for record in good:
        assert_finished_with_results(queue, tmp_path, record.key)
    failed = queue.get(no_upload.key)
    assert failed.status == "FAILED" and failed.fault == "submission"
    assert failed.reason == f"RequestFileError: {no_upload.key}.jsonl: no such file"
    assert not (tmp_path / "results" / no_upload.key).exists() and not (tmp_path / "results" / "linked").exists()

    lines = done.err.splitlines()
    reasons = {
        '{"hello":1}.json': "key: Field required",
        "truncated.json": "Invalid JSON",
        "latin1.json": "not UTF-8",
        "x.json": "is not a regular file",
        "y.json": "is a directory",
        "linked.json": "is a symbolic link",
        "surrogate.json": "Invalid JSON",
        "unreadable.json": "permission denied",
    }
    for name in bad:
        [line] = [line for line in lines if name in line]  # logged once, in one line
        assert line.startswith(f"skipping {name}: {reasons[name]}"), line
    [line] = [line for line in lines if no_upload.key in line and "FAILED" in line]
    assert line == f"FAILED {no_upload.key}: RequestFileError: {no_upload.key}.jsonl: no such file"
    assert not any("Traceback" in line or "internal error" in line for line in lines)
    assert str(tmp_path) not in done.err  # the public reasons name files, never the worker's paths
    assert outside.read_text(encoding="utf-8").count('"PENDING"') == 1  # the file behind the link untouched


# -- a judge outage ---------------------------------------------------------------------------------


@pytest.fixture
def judge_down():
    """A judge endpoint that is gone: its port refuses connections (no retries inside the client)."""
    endpoint = FakeEndpoint()
    endpoint.stop()
    return ModelSpec(name="strict-judge", backend="openai", options={"base_url": endpoint.url, "max_retries": 0})


def test_a_judge_outage_is_tried_again_after_growing_waits_then_failed_with_the_count(
    judge_down, scripted_endpoint, gamut, tmp_path
):
    """Issue 23.14: a judge outage failed submissions for good ("can be judged again", but nothing
    could). Now each try the judge fails is tried again after 1, 5 and 30 minutes; after the last,
    FAILED naming the count and the command, which then judges it once the judge is back."""
    queue = RequestQueue(tmp_path / "requests")
    record = submit(queue, "dora", "patient")
    lines: list[str] = []

    def attempt(now: datetime) -> RequestRecord | None:
        return process_next(
            queue, tmp_path / "results", tmp_path / "work", "gamut-sample", judge_down, lines.append, now=now
        )

    now = datetime.now(UTC)
    for tried, wait in enumerate(RETRY_WAITS, start=1):
        waiting = attempt(now)
        assert waiting is not None and waiting.key == record.key
        assert waiting.status == "PENDING" and waiting.attempts == tried and waiting.retry_after == now + wait
        assert waiting.reason.startswith(f"try {tried} of 4 failed: JudgeIncomplete: the judge left 0 checks")
        assert f"tried again after {now + wait:%Y-%m-%d %H:%M:%S} UTC" in waiting.reason
        assert lines[-1] == f"PENDING {record.key}: {waiting.reason}"
        assert attempt(now + wait - timedelta(seconds=1)) is None  # not due yet: nobody claims it
        assert queue.get(record.key) == waiting
        now += wait

    failed = attempt(now)
    assert failed.status == "FAILED" and failed.attempts == 4 and failed.fault == "judge"
    assert failed.reason.startswith("failed after 4 tries: JudgeIncomplete: the judge left 0 checks")
    assert failed.reason.endswith(f"; {KEPT}") and "`gamut worker --retry-failed`" in failed.reason
    assert attempt(now + timedelta(days=1)) is None  # FAILED stays FAILED until the maintainer says
    assert not (tmp_path / "results" / record.key).exists()

    # The judge is back: the maintainer puts it back, and the same worker run judges it.
    done = worker(gamut, tmp_path, scripted_endpoint.url, "--retry-failed", "--once")
    assert done.code == 0, done.err
    assert f"put back 1 request as PENDING: {record.key} (patient, text_only)" in done.err.splitlines()
    assert "handled 1 submission(s)" in done.out
    assert_finished_with_results(queue, tmp_path, record.key)
    assert queue.get(record.key).submitted_at == record.submitted_at  # not a new submission for the limit


def test_an_outage_shorter_than_the_waits_costs_the_submission_nothing(judge_down, scripted_endpoint, tmp_path):
    """One failed try, then the judge answers: the next try (once due) finishes it."""
    queue = RequestQueue(tmp_path / "requests")
    record = submit(queue, "eve", "lucky", answers=2)
    now = datetime.now(UTC)
    args = (queue, tmp_path / "results", tmp_path / "work", "gamut-sample")
    assert process_next(*args, judge_down, lambda _: None, now=now).status == "PENDING"
    healthy = ModelSpec(name="strict-judge", backend="openai", options={"base_url": scripted_endpoint.url})
    done = process_next(*args, healthy, lambda _: None, now=now + RETRY_WAITS[0])
    assert done.status == "FINISHED" and done.attempts == 1 and done.reason is None and done.retry_after is None
    assert_finished_with_results(queue, tmp_path, record.key)


def test_the_judge_failing_under_the_cli_waits_and_no_retries_fails_at_once(judge_down, gamut, tmp_path):
    """`gamut worker --once` leaves a request the judge failed waiting (and says when it is tried
    again); `--retry-waits ''` fails it at once, after its one try."""
    queue = RequestQueue(tmp_path / "requests")
    record = submit(queue, "finn", "waiting")
    url = judge_down.options["base_url"]
    done = worker(gamut, tmp_path, url, "--once", "--judge-option", "max_retries=0")
    assert done.code == 0, done.err
    waiting = queue.get(record.key)
    assert waiting.status == "PENDING" and waiting.attempts == 1 and waiting.retry_after is not None
    assert "1 request wait to be tried again, the first after " in done.err

    done = worker(gamut, tmp_path, url, "--once", "--judge-option", "max_retries=0", "--retry-waits", "")
    assert done.code == 0, done.err
    assert "handled 0 submission(s)" in done.out  # not due yet
    done = worker(gamut, tmp_path, url, "--requeue", record.key, "--once", "--judge-option", "max_retries=0")
    assert done.code == 0, done.err
    assert f"put back 1 request as PENDING: {record.key} (waiting, text_only)" in done.err
    failed = queue.get(record.key)  # put back with its tries counted afresh, then tried with the default waits
    assert failed.status == "PENDING" and failed.attempts == 1

    done = worker(
        gamut, tmp_path, url, "--requeue", record.key, "--once", "--judge-option", "max_retries=0", "--retry-waits", ""
    )
    failed = queue.get(record.key)
    assert done.code == 0 and failed.status == "FAILED" and failed.reason.startswith("failed after 1 try: ")


@pytest.mark.parametrize("waits", ["1,x", "-1", "nan", "1,,5"])
def test_a_bad_retry_waits_value_is_refused_in_one_line(gamut, tmp_path, waits):
    done = gamut("worker", "--requests", tmp_path / "q", "--results", tmp_path / "r", "--once", "--retry-waits", waits)
    assert done.code == 2 and done.err.startswith("gamut: Invalid value for '--retry-waits'")
    assert len(done.err.strip().splitlines()) == 1


# -- what --retry-failed and --requeue put back -------------------------------------------------------


def test_a_validation_failure_is_failed_at_once_and_not_put_back(scripted_endpoint, gamut, tmp_path):
    """An upload that fails validation is the submission's fault: FAILED on the first try and left
    alone by --retry-failed, which puts back a request FAILED before faults were recorded (an old
    record file without the new fields) and judges it."""
    requests = tmp_path / "requests"
    queue = RequestQueue(requests)
    invalid = submit(queue, "gus", "invalid")
    upload = requests / f"{invalid.key}.jsonl"
    upload.write_text(upload.read_text(encoding="utf-8") + '{"question_id": "no-such-question", "response": "x"}\n')
    old = submit(queue, "hal", "old-record")
    record = json.loads((requests / f"{old.key}.json").read_text(encoding="utf-8"))
    for field in ("attempts", "retry_after", "fault"):  # as a worker before this release wrote it
        del record[field]
    record |= {
        "status": "FAILED",
        "reason": "RuntimeError: the judge left 0 checks unreadable and 21 unjudged; "
        "the submission is kept and can be judged again",
    }
    (requests / f"{old.key}.json").write_text(json.dumps(record), encoding="utf-8")
    assert queue.get(old.key).status == "FAILED" and queue.get(old.key).fault is None  # it still loads

    done = worker(gamut, tmp_path, scripted_endpoint.url, "--once")
    assert done.code == 0, done.err
    failed = queue.get(invalid.key)
    assert failed.status == "FAILED" and failed.fault == "submission" and failed.attempts == 0
    assert failed.reason == f"RequestFileError: {invalid.key}.jsonl: line 2: unknown question_id 'no-such-question'"

    done = worker(gamut, tmp_path, scripted_endpoint.url, "--retry-failed", "--once")
    assert done.code == 0, done.err
    assert f"put back 1 request as PENDING: {old.key} (old-record, text_only)" in done.err.splitlines()
    assert queue.get(invalid.key) == failed
    assert_finished_with_results(queue, tmp_path, old.key)

    done = worker(gamut, tmp_path, scripted_endpoint.url, "--retry-failed", "--once")
    assert "put back 0 requests as PENDING" in done.err.splitlines() and "handled 0 submission(s)" in done.out


def test_requeue_refuses_what_it_cannot_put_back_in_one_line(scripted_endpoint, gamut, tmp_path):
    queue = RequestQueue(tmp_path / "requests")
    record = submit(queue, "ida", "done")
    assert worker(gamut, tmp_path, scripted_endpoint.url, "--once").code == 0
    done = worker(gamut, tmp_path, scripted_endpoint.url, "--requeue", record.key, "--once")
    assert done.code == 2 and done.err.strip() == (
        f"gamut: {record.key} is FINISHED; only a FAILED or PENDING request can be put back"
    )
    done = worker(gamut, tmp_path, scripted_endpoint.url, "--requeue", "no-such-key", "--once")
    assert done.code == 2 and done.err.strip().splitlines() == [
        f"gamut: no request no-such-key in {tmp_path / 'requests'}"
    ]
    assert queue.get(record.key).status == "FINISHED"


def test_requests_put_back_are_pushed_to_the_requests_repo(tmp_path):
    from test_space import RecordingHub

    from gamut_hf.dataset.hub import HubFolder
    from gamut_hf.leaderboard.worker import put_back

    api = RecordingHub()
    queue = RequestQueue(tmp_path / "requests")
    hub = HubFolder("org/requests", queue.folder, api=api)
    record = submit(queue, "jo", "on-the-hub")
    claimed = queue.claim("w1")
    queue.fail(claimed, "JudgeIncomplete: the judge left 0 checks unreadable and 21 unjudged", "judge", waits=())
    hub.push(queue.files(record.key), "as the worker left it")
    lines: list[str] = []
    [back] = put_back(queue, every_failed=True, requests_hub=hub, echo=lines.append)
    assert back.status == "PENDING" and api.record("org/requests", record.key)["status"] == "PENDING"
    assert api.commits[-1][1:] == ([f"{record.key}.json"], f"put back {record.key}")
    assert lines == [f"put back 1 request as PENDING: {record.key} (on-the-hub, text_only)"]


def test_the_spaces_queue_shows_a_request_waiting_for_the_judge(judge_down, tmp_path):
    """The submitter sees why the request still waits, and when it is tried again."""
    from gradio_client import Client
    from space_support import launch

    from gamut_hf.leaderboard.space import SpaceConfig

    queue = RequestQueue(tmp_path / "requests")
    record = submit(queue, "kim", "patient")
    waiting = process_next(queue, tmp_path / "results", tmp_path / "work", "gamut-sample", judge_down, lambda _: None)
    config = SpaceConfig(
        results=tmp_path / "results", requests=tmp_path / "requests", dataset="gamut-sample", login=False
    )
    app, url = launch(config)
    try:
        frame = Client(url, verbose=False).predict(api_name="/queue")
    finally:
        app.close()
    [row] = [dict(zip(frame["headers"], values, strict=True)) for values in frame["data"]]
    assert (row["model"], row["status"], row["by"]) == ("patient", "PENDING", "kim")
    assert row["reason"] == waiting.reason and row["reason"].startswith("try 1 of 4 failed: JudgeIncomplete: ")
    assert f"tried again after {waiting.retry_after:%Y-%m-%d %H:%M:%S} UTC" in row["reason"]
    assert queue.get(record.key).attempts == 1
