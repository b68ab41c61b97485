"""GAMUT through inspect_ai: `inspect eval gamut_hf/gamut` from the command line against the fake
OpenAI-compatible endpoint (candidate and grader scripted), and `gamut import-inspect` on its log.

The proof that the two harnesses judge alike: `gamut run`, and `inspect eval` followed by `gamut
import-inspect`, against one scripted endpoint give identical details.parquet rows (verdict and raw
judge output per check) and the same Gamut score.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_gamut
from fake_endpoint import FakeEndpoint
from scripted_api import api_run, is_judging, scripted

pytest.importorskip("inspect_ai")

INSPECT = str(Path(sys.executable).with_name("inspect"))
DETAIL_COLUMNS = ["question_id", "check_id", "tier", "check_text", "verdict", "raw"]


def inspect_eval(
    url: str,
    log_dir: Path,
    *task_args: str,
    model: str = "good-model",
    grader: str | None = "strict-judge",
    grader_url: str | None = None,
    extra: Sequence[str] = (),
):
    """`inspect eval gamut_hf/gamut` as a user types it, candidate and grader behind ``url`` (the
    grader behind ``grader_url`` where given)."""
    command = [INSPECT, "eval", "gamut_hf/gamut", "--model", f"openai-api/fake/{model}", "--model-base-url", url]
    if grader is not None:
        where = grader_url or url
        command += ["--model-role", f"grader={{model: openai-api/fake/{grader}, model_args: {{base_url: '{where}'}}}}"]
    for arg in task_args:
        command += ["-T", arg]
    command += ["--log-dir", str(log_dir), "--display", "plain", "--log-format", "eval", *extra]
    env = {**os.environ, "FAKE_API_KEY": "EMPTY", "INSPECT_LOG_LEVEL": "warning", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    logs = sorted(log_dir.glob("*.eval"))
    return done, logs[-1] if logs else None


def details(folder: Path) -> list[dict]:
    return pq.read_table(folder / "details.parquet", columns=DETAIL_COLUMNS).to_pylist()


def answer_tokens(folder: Path) -> dict[str, tuple[int, int]]:
    from gamut_hf.evaluation.store import RunStore

    with RunStore.reading(folder) as store:
        rows = store.rows("generations")
        return {row["question_id"]: (row["prompt_tokens"], row["completion_tokens"]) for row in rows}


def results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


@pytest.fixture(scope="module")
def endpoint():
    server = FakeEndpoint(responder=scripted)
    yield server
    server.stop()


@pytest.mark.parametrize("variant", ["text_only", "multimodal"])
def test_inspect_eval_then_import_gives_gamut_runs_rows_and_score(endpoint, tmp_path, variant):
    done, log = inspect_eval(endpoint.url, tmp_path / "logs", "limit=2", f"variant={variant}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "gamut" in done.stdout and "answer_critical" in done.stdout, done.stdout  # the metrics, shown

    imported = run_gamut("import-inspect", log, "--out", tmp_path / "imported")
    assert imported.code == 0, imported.err
    assert "Gamut score" in imported.out
    direct = api_run(run_gamut, tmp_path / "direct", endpoint.url, "good-model", "strict-judge", variant, limit=2)

    assert details(tmp_path / "imported") == details(direct)
    assert results(tmp_path / "imported")["score"] == results(direct)["score"]
    assert answer_tokens(tmp_path / "imported") == answer_tokens(direct)  # the candidate's, not the grader's
    # The same model specs: the Space groups the judges, and a rerun finds every key stored.
    assert results(tmp_path / "imported")["judge"] == results(direct)["judge"]
    assert results(tmp_path / "imported")["model"] == results(direct)["model"]

    # inspect's own metric agrees with the run folder's score.
    from inspect_ai.log import read_eval_log

    metrics = read_eval_log(str(log)).results.scores[0].metrics
    assert metrics["gamut"].value == pytest.approx(results(direct)["score"]["gamut"])
    assert metrics["low"].value < metrics["gamut"].value < metrics["high"].value

    # The imported folder is a run folder like any other: rescored, and judged again by another judge
    # from its stored answers (no candidate request).
    assert run_gamut("score", tmp_path / "imported").code == 0
    before = endpoint.requests
    rejudged = run_gamut(
        "judge",
        "--out",
        tmp_path / "imported",
        "--judge",
        "lenient-judge",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        endpoint.url,
    )
    assert rejudged.code == 0, rejudged.err
    assert all(is_judging(body) for body in endpoint.bodies[before:])


def test_an_imported_run_reaches_the_report_the_space_and_the_leaderboard_upload(endpoint, tmp_path):
    _, log = inspect_eval(endpoint.url, tmp_path / "logs", "limit=2")
    assert run_gamut("import-inspect", log, "--out", tmp_path / "run").code == 0
    report = run_gamut("report", tmp_path / "run", "--out", tmp_path / "report", "--resamples", "1000")
    assert report.code == 0, report.err
    assert "openai-api/fake/good-model" not in (tmp_path / "report" / "report.md").read_text()  # the project's names
    assert "good-model" in (tmp_path / "report" / "report.md").read_text()
    upload = run_gamut("submission", tmp_path / "run", tmp_path / "responses.jsonl")
    assert upload.code == 0, upload.err
    lines = [json.loads(line) for line in (tmp_path / "responses.jsonl").read_text().splitlines()]
    assert [line["question_id"] for line in lines] == ["animal-01", "animal-02"]

    # The Space over a results folder holding the imported run: on the board, by the project's names.
    import shutil

    from gamut_hf.leaderboard.space import SpaceConfig, SpaceData

    shutil.copytree(tmp_path / "run", tmp_path / "results" / "inspect-run")
    config = SpaceConfig(results=tmp_path / "results", requests=tmp_path / "requests", dataset=None, login=False)
    [row] = SpaceData(config).board.to_dict("records")
    assert (row["model"], row["judge"], row["variant"], row["questions"]) == (
        "good-model", "strict-judge", "text_only", 2
    )  # fmt: skip
    assert row["Gamut"] == round(results(tmp_path / "run")["score"]["gamut"], 1)


def test_the_grader_sees_the_answer_never_the_reasoning(tmp_path):
    def responder(body: dict) -> str:
        if is_judging(body):
            return scripted(body)
        return "<think>SECRET-PLAN weigh the options</think>Dogs need daily walks."

    server = FakeEndpoint(responder=responder)
    try:
        done, log = inspect_eval(server.url, tmp_path / "logs", "limit=1")
        assert done.returncode == 0, done.stderr[-2000:]
        judged = [json.dumps(body) for body in server.bodies if is_judging(body)]
        assert judged and all("SECRET-PLAN" not in body for body in judged)
        assert all("Dogs need daily walks." in body for body in judged)
        # Greedy like `gamut judge`, the verdict constrained as the openai backend constrains it.
        assert all(body["temperature"] == 0 for body in server.bodies)
        imported = run_gamut("import-inspect", log, "--out", tmp_path / "run")
        assert imported.code == 0, imported.err
        responses = pq.read_table(tmp_path / "run" / "responses.parquet").to_pylist()
        assert responses[0]["response"] == "Dogs need daily walks."
        assert "SECRET-PLAN" in responses[0]["reasoning"]
    finally:
        server.stop()


def test_unreadable_verdicts_are_retried_then_block_the_gamut_score(tmp_path):
    from gamut_hf.dataset.loader import iter_questions, load_gamut

    question = next(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))
    unreadable_check = f"\n\nCheck: {question.checks[0].text}\n\n"

    def responder(body: dict) -> str:
        if is_judging(body) and unreadable_check in body["messages"][-1]["content"]:
            return "I think it mostly meets it."
        return scripted(body)

    server = FakeEndpoint(responder=responder)
    try:
        done, log = inspect_eval(server.url, tmp_path / "logs", "limit=1")
        assert done.returncode == 0, done.stderr[-2000:]
        unreadable = [b for b in server.bodies if is_judging(b) and unreadable_check in b["messages"][-1]["content"]]
        assert len(unreadable) == 3  # the first attempt and judge_retries=2 more, as `gamut judge`

        from inspect_ai.log import read_eval_log

        metrics = read_eval_log(str(log)).results.scores[0].metrics
        assert math.isnan(metrics["gamut"].value)  # no Gamut score while a verdict is unresolved
        assert metrics["error"].value > 0

        imported = run_gamut("import-inspect", log, "--out", tmp_path / "run")
        assert imported.code == 0, imported.err
        assert results(tmp_path / "run")["score"]["gamut"] is None
        assert results(tmp_path / "run")["judge_errors"] == 1
        rows = [row for row in details(tmp_path / "run") if row["check_id"] == question.checks[0].id]
        assert rows[0]["verdict"] == "error" and rows[0]["raw"] == "I think it mostly meets it."
        counted = run_gamut("score", tmp_path / "run", "--errors-as-missing")
        assert counted.code == 0 and results(tmp_path / "run")["score"]["gamut"] is not None
    finally:
        server.stop()


def test_a_question_the_model_did_not_answer_stays_in_the_run(tmp_path):
    from gamut_hf.dataset.loader import iter_questions, load_gamut

    second = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))[1]
    server = FakeEndpoint(responder=scripted)
    server.faults[second.prompt("text_only")] = ["400"]
    try:
        done, log = inspect_eval(server.url, tmp_path / "logs", "limit=2")
        from inspect_ai.log import read_eval_log

        metrics = read_eval_log(str(log)).results.scores[0].metrics
        assert math.isnan(metrics["gamut"].value), metrics  # inspect would drop the sample and score the rest
        counted_log = inspect_eval(server.url, tmp_path / "counted", "limit=2", "errors_as_missing=true")[1]
        counted = read_eval_log(str(counted_log))
        assert not math.isnan(counted.results.scores[0].metrics["gamut"].value)
        unanswered = next(s for s in counted.samples if s.id == second.id)
        assert unanswered.scores["gamut_grader"].metadata["answered"] is False

        imported = run_gamut("import-inspect", log, "--out", tmp_path / "run")
        assert imported.code == 0, imported.err
        assert results(tmp_path / "run")["score"]["gamut"] is None
        assert results(tmp_path / "run")["unfinished_checks"] == len(second.checks)
    finally:
        server.stop()


def test_a_grader_that_cannot_be_reached_leaves_checks_unjudged_and_gamut_judge_finishes_them(endpoint, tmp_path):
    from vllm_support import free_port

    port = free_port()  # nothing listens there yet
    grader_url = f"http://127.0.0.1:{port}/v1"
    done, log = inspect_eval(
        endpoint.url,
        tmp_path / "logs",
        "limit=1",
        "judge_retries=0",
        grader_url=grader_url,
        extra=["--max-retries", "1"],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    from inspect_ai.log import read_eval_log

    eval_log = read_eval_log(str(log))
    assert math.isnan(eval_log.results.scores[0].metrics["gamut"].value)  # no score from a grader never heard
    verdicts = eval_log.samples[0].scores["gamut_grader"].metadata["verdicts"]
    assert {v["verdict"] for v in verdicts} == {"unjudged"}
    assert all("Connection" in v["failure"] for v in verdicts), verdicts[0]["failure"]

    imported = run_gamut("import-inspect", log, "--out", tmp_path / "run")
    assert imported.code == 0, imported.err
    assert results(tmp_path / "run")["score"]["gamut"] is None
    assert results(tmp_path / "run")["unfinished_checks"] == len(verdicts)

    # The grader is back: `gamut judge` with the same judge judges exactly the unjudged checks.
    grader = FakeEndpoint(responder=scripted, port=port)
    try:
        finished = run_gamut(
            "judge", "--out", tmp_path / "run", "--judge", "strict-judge",
            "--judge-backend", "openai", "--judge-base-url", grader_url,
        )  # fmt: skip
        assert finished.code == 0, finished.err
        assert grader.requests == len(verdicts) and all(is_judging(body) for body in grader.bodies)
    finally:
        grader.stop()
    assert results(tmp_path / "run")["score"]["gamut"] is not None
    direct = api_run(run_gamut, tmp_path / "direct", endpoint.url, "good-model", "strict-judge", "text_only", 1)
    assert [row["verdict"] for row in details(tmp_path / "run")] == [row["verdict"] for row in details(direct)]


def test_without_a_grader_the_task_refuses_rather_than_grading_with_the_candidate(endpoint, tmp_path):
    before = endpoint.requests
    done, log = inspect_eval(endpoint.url, tmp_path / "logs", "limit=1", grader=None)
    from inspect_ai.log import read_eval_log

    sample = read_eval_log(str(log)).samples[0]
    assert "no grader: name one with --model-role grader=MODEL" in sample.error.message
    assert endpoint.requests == before  # nothing asked of the candidate, nothing graded by it


def test_import_inspect_refuses_what_is_not_a_gamut_log_in_one_line(tmp_path):
    not_a_log = tmp_path / "notes.eval"
    not_a_log.write_text("hello")
    done = run_gamut("import-inspect", not_a_log, "--out", tmp_path / "run")
    assert done.code == 2, done.err
    assert done.err.count("\n") == 1 and "notes.eval: not an inspect log" in done.err
    missing = run_gamut("import-inspect", tmp_path / "absent.eval", "--out", tmp_path / "run")
    assert missing.code == 2 and "absent.eval: no such inspect log" in missing.err


def test_an_eval_retry_log_completes_the_imported_run(endpoint, tmp_path):
    from gamut_hf.dataset.loader import iter_questions, load_gamut

    second = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))[1]
    server = FakeEndpoint(responder=scripted)
    server.faults[second.prompt("text_only")] = ["400", "ok"]  # fails in the eval, answers in its retry
    try:
        _, first_log = inspect_eval(server.url, tmp_path / "logs", "limit=2")
        env = {**os.environ, "FAKE_API_KEY": "EMPTY", "OMP_NUM_THREADS": "1"}
        retried = subprocess.run(
            [INSPECT, "eval-retry", str(first_log), "--log-dir", str(tmp_path / "retry"), "--display", "plain"],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
        assert retried.returncode == 0, retried.stderr[-2000:]
        (retry_log,) = (tmp_path / "retry").glob("*.eval")

        alone = run_gamut("import-inspect", first_log, "--out", tmp_path / "first")
        assert alone.code == 0 and results(tmp_path / "first")["score"]["gamut"] is None
        both = run_gamut("import-inspect", first_log, retry_log, "--out", tmp_path / "both")
        assert both.code == 0, both.err
        direct = api_run(run_gamut, tmp_path / "direct", endpoint.url, "good-model", "strict-judge", "text_only", 2)
        assert details(tmp_path / "both") == details(direct)
        assert results(tmp_path / "both")["score"] == results(direct)["score"]
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("task_arg", "said"),
    [
        ("dataset=/nonexistent/gamut", "gamut_hf/gamut: /nonexistent/gamut: no such folder"),
        ("limit=0", "gamut_hf/gamut: -T limit: Input should be greater than or equal to 1"),
        ("variant=audio", "gamut_hf/gamut: -T variant: expected one of multimodal, text_only, got 'audio'"),
    ],
)
def test_a_bad_task_option_is_refused_in_one_line(endpoint, tmp_path, task_arg, said):
    done, log = inspect_eval(endpoint.url, tmp_path / "logs", task_arg)
    shown = " ".join((done.stdout + done.stderr).split())  # inspect wraps long lines
    assert said in shown, shown[-2000:]
    assert "Traceback" not in shown and log is None


def test_inspect_eval_on_the_official_release_layout_gives_gamut_runs_rows_and_score(endpoint, tmp_path):
    """Issue 32: the release's layout (written straight with pyarrow), photos joined from CRAG-MM."""
    from release_fixture import write_crag_mm, write_release

    folder, crag = write_release(tmp_path / "GAMUT"), write_crag_mm(tmp_path / "crag.parquet")
    task = [f"dataset={folder}", "variant=multimodal", f"images=crag-mm={crag}", "limit=2"]
    done, log = inspect_eval(endpoint.url, tmp_path / "logs", *task)
    assert done.returncode == 0 and log is not None, (done.stdout + done.stderr)[-3000:]
    imported = run_gamut("import-inspect", log, "--out", tmp_path / "inspect-run")
    assert imported.code == 0, imported.err
    ran = run_gamut("run", "--out", tmp_path / "run", "--dataset", folder, "--variant", "multimodal",
                    "--images", f"crag-mm={crag}", "--limit", "2", "--model", "good-model", "--backend", "openai",
                    "--base-url", endpoint.url, "--judge", "strict-judge", "--judge-backend", "openai",
                    "--judge-base-url", endpoint.url)  # fmt: skip
    assert ran.code == 0, ran.err
    assert results(tmp_path / "inspect-run")["score"] == results(tmp_path / "run")["score"]
    assert details(tmp_path / "inspect-run") == details(tmp_path / "run")
