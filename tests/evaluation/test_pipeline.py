"""The pipeline end to end through the real command line.

Most tests drive the OpenAI-compatible backend against a scripted endpoint on 127.0.0.1
(fast, and able to misbehave on cue); the crash test runs the embedded default with the real
SmolLM2 on the CPU and kills it with SIGKILL mid-judging.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest
from conftest import assert_verdict_probabilities, error_lines
from fake_endpoint import FakeEndpoint, user_text

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.core.scorer import DEFAULT_SCORE_PARAMS, ScoreParams, score_run
from gamut_hf.dataset.loader import iter_questions, load_gamut
from gamut_hf.evaluation.judge import SYSTEM_PROMPT

JUDGE_MARK = SYSTEM_PROMPT.splitlines()[0][:40]


def scripted_verdict(check_text: str) -> str:
    return VERDICTS[int(hashlib.sha256(check_text.encode()).hexdigest(), 16) % 4]


def is_judging(body: dict) -> bool:
    first = body["messages"][0]
    return first["role"] == "system" and first["content"].startswith(JUDGE_MARK)


def scripted(body: dict) -> str:
    """The candidate echoes the question; the judge's verdict is a fixed function of the check."""
    text = user_text(body)
    if is_judging(body):
        check = text.split("\n\nCheck: ", 1)[1].split("\n\n", 1)[0]
        return json.dumps({"rationale": f"Checked: {check[:40]}", "verdict": scripted_verdict(check)})
    return f"An answer to: {text}"


def garbled(body: dict) -> str:
    if is_judging(body):
        return "Hmm, hard to say."
    return "An answer."


@pytest.fixture
def endpoint():
    server = FakeEndpoint(responder=scripted)
    yield server
    server.stop()


def judged(server: FakeEndpoint) -> int:
    return sum(1 for b in server.bodies if is_judging(b))


def api_run(gamut, command: str, out: Path, url: str, *extra: str):
    return gamut(
        command,
        "--out",
        out,
        "--model",
        "cand",
        "--backend",
        "openai",
        "--base-url",
        url,
        "--judge",
        "fake-judge",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        url,
        *extra,
    )


def expected_gamut(
    limit: int | None = None, ids: list[str] | None = None, params: ScoreParams = DEFAULT_SCORE_PARAMS
) -> float:
    questions = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))
    questions = [q for q in questions if ids is None or q.id in ids][:limit]
    run = score_run([(q.checks, {c.id: scripted_verdict(c.text) for c in q.checks}) for q in questions], params)
    return run.gamut


def test_run_writes_results_and_details_and_resumes_with_no_new_work(gamut, endpoint, tmp_path):
    done = api_run(gamut, "run", tmp_path / "run", endpoint.url, "--limit", "3")
    assert done.code == 0, done.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["score"]["gamut"] == pytest.approx(expected_gamut(limit=3), abs=1e-9)
    assert results["model"] == {"backend": "openai", "model": "cand"}
    # A model other than the embedded default runs the paper's main setting: photo + question.
    assert results["dataset"]["source"] == "gamut-sample" and results["variant"] == "multimodal"
    answers = [b for b in endpoint.bodies if not is_judging(b)]
    judgings = [b for b in endpoint.bodies if is_judging(b)]
    for body in (answers[0], judgings[0]):
        assert body["messages"][-1]["content"][0]["image_url"]["url"].startswith("data:image/")
    assert results["judge_errors"] == 0 and results["unfinished_checks"] == 0
    assert results["usage"]["judge"]["calls"] == results["score"]["checks"] == judged(endpoint)
    assert f"Gamut score {results['score']['gamut']:.1f}" in done.out

    details = datasets.load_dataset("parquet", data_files=str(tmp_path / "run" / "details.parquet"), split="train")
    assert len(details) == results["score"]["checks"]
    assert {"question_id", "domain", "check_id", "tier", "kind", "item_id", "verdict", "rationale", "raw"} <= set(
        details.column_names
    )
    assert all(row["verdict"] == scripted_verdict(row["check_text"]) for row in details)

    requests = endpoint.requests
    again = api_run(gamut, "run", tmp_path / "run", endpoint.url)
    assert again.code == 0, again.err
    assert endpoint.requests == requests  # everything was stored: no model is asked anything
    assert json.loads((tmp_path / "run" / "results.json").read_text())["score"] == results["score"]


def test_a_new_judge_reuses_the_stored_answers(gamut, endpoint, tmp_path):
    assert api_run(gamut, "run", tmp_path / "run", endpoint.url, "--limit", "2").code == 0
    generated = endpoint.requests - judged(endpoint)
    rejudged = gamut("judge", "--out", tmp_path / "run", "--judge", "second-judge", "--judge-base-url", endpoint.url)
    assert rejudged.code == 0, rejudged.err
    assert endpoint.requests - judged(endpoint) == generated  # no new answers
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["judge"]["model"] == "second-judge"
    assert judged(endpoint) == 2 * results["score"]["checks"]


def test_unreadable_verdicts_are_stored_as_errors_and_block_the_score(gamut, tmp_path):
    server = FakeEndpoint(responder=garbled)
    try:
        done = api_run(gamut, "run", tmp_path / "run", server.url, "--limit", "1", "--judge-retries", "1")
        checks = json.loads((tmp_path / "run" / "results.json").read_text())["score"]["checks"]
        assert judged(server) == 2 * checks  # one retry each, then given up
        assert gamut("run", "--out", tmp_path / "run").code == 0
        assert judged(server) == 2 * checks  # errors are results: a plain rerun keeps them
        # ... until asked: --retry-errors judges them again (here the judge has recovered).
        server.responder = scripted
        retried = gamut("run", "--out", tmp_path / "run", "--retry-errors", "--judge-base-url", server.url)
        assert retried.code == 0, retried.err
        assert json.loads((tmp_path / "run" / "results.json").read_text())["score"]["gamut"] == pytest.approx(
            expected_gamut(limit=1), abs=1e-9
        )
        server.responder = garbled
        shutil.rmtree(tmp_path / "run")
        done = api_run(gamut, "run", tmp_path / "run", server.url, "--limit", "1", "--judge-retries", "1")
    finally:
        server.stop()
    assert done.code == 0, done.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["score"]["gamut"] is None and results["judge_errors"] == checks
    assert "no Gamut score" in done.out
    details = datasets.load_dataset("parquet", data_files=str(tmp_path / "run" / "details.parquet"), split="train")
    assert set(details["verdict"]) == {"error"} and set(details["raw"]) == {"Hmm, hard to say."}

    counted = gamut("score", tmp_path / "run", "--errors-as-missing")
    assert counted.code == 0, counted.err
    assert "Gamut score 0.0" in counted.out and f"{checks} errors and unjudged checks counted as missing" in counted.out


def test_rationale_mode_asks_for_and_keeps_a_rationale(gamut, endpoint, tmp_path):
    done = api_run(gamut, "run", tmp_path / "run", endpoint.url, "--limit", "1", "--rationale")
    assert done.code == 0, done.err
    judging = next(b for b in endpoint.bodies if is_judging(b))
    schema = judging["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["rationale", "verdict"] and "rationale" in judging["messages"][0]["content"]
    details = datasets.Dataset.from_parquet(str(tmp_path / "run" / "details.parquet"))
    assert all(row["rationale"] == f"Checked: {row['check_text'][:40]}" for row in details)


def test_score_needs_only_the_store(gamut, endpoint, tmp_path):
    assert api_run(gamut, "run", tmp_path / "run", endpoint.url, "--limit", "2").code == 0
    before = json.loads((tmp_path / "run" / "results.json").read_text())["score"]
    (tmp_path / "run" / "results.json").unlink()
    (tmp_path / "run" / "details.parquet").unlink()
    endpoint.stop()
    rescored = gamut("score", tmp_path / "run")
    assert rescored.code == 0, rescored.err
    assert json.loads((tmp_path / "run" / "results.json").read_text())["score"] == before
    assert gamut("score", tmp_path).code == 2  # not a run folder: one line, exit 2


def test_rescoring_keeps_the_stages_and_refuses_parameters_that_overflow(gamut, endpoint, tmp_path):
    """Issue 23.11: `gamut score RUN_DIR` dropped the stages block (timings, tokens) from results.json.
    Issue 23.10: `--weights 1e308,1e308,1e308` printed "Gamut score nan", wrote null and exited 0."""
    run = tmp_path / "run"
    assert api_run(gamut, "run", run, endpoint.url, "--limit", "2").code == 0
    before = results_of(run)
    assert [stage["stage"] for stage in before["stages"]] == ["generate", "judge"]
    assert before["stages"][1]["done_now"] > 0 and before["stages"][1]["prompt_tokens"] > 0
    rescored = gamut("score", run, "--partial-credit", "1")
    assert rescored.code == 0, rescored.err
    after = results_of(run)
    assert after["stages"] == before["stages"] and after["score_params"]["partial_credit"] == 1
    for option in (["--weights", "1e308,1e308,1e308"], ["--contradiction-penalty", "-1e308"]):
        refused = gamut("score", run, *option)
        assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1, refused.err
        assert refused.err.startswith(f"gamut: {option[0]}: ") and "nan" not in refused.out
        assert results_of(run) == after  # nothing written


def test_failed_answers_are_retried_by_the_next_run(gamut, endpoint, tmp_path):
    question = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))[0]
    endpoint.faults[question.text_question] = ["400", "ok"]
    first = api_run(gamut, "run", tmp_path / "run", endpoint.url, "--limit", "2", "--variant", "text_only")
    assert first.code == 0, first.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["score"]["gamut"] is None and results["unfinished_checks"] == len(question.checks)
    second = api_run(gamut, "run", tmp_path / "run", endpoint.url)
    assert second.code == 0, second.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["score"]["gamut"] == pytest.approx(expected_gamut(limit=2), abs=1e-9)


def test_a_thinking_candidates_reasoning_is_stored_apart_and_never_shown_to_the_judge(gamut, tmp_path):
    questions = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))[:3]
    tagged, parsed, cut = (q.text_question for q in questions)

    def secret(text: str) -> str:
        return f"SECRET-REASONING about {text.split()[3]}"

    def thinking(body: dict) -> str | dict:
        text = user_text(body)
        if is_judging(body):
            return scripted(body)
        reasoning = secret(text)
        if text == tagged:  # a server without a reasoning parser: the tags are in the content
            return {"content": f"<think>\n{reasoning}\n</think>\n\nAn answer to: {text}"}
        if text == parsed:  # vllm serve --reasoning-parser
            return {"reasoning_content": reasoning, "content": f"An answer to: {text}"}
        assert text == cut  # cut by max_tokens while thinking
        return {"reasoning_content": reasoning, "content": None, "finish_reason": "length"}

    server = FakeEndpoint(responder=thinking)
    try:
        out = tmp_path / "run"
        generated = api_run(gamut, "generate", out, server.url, "--limit", "3", "--variant", "text_only")
        assert generated.code == 0, generated.err
        assert "generate: 1 answer empty: reasoning cut by max_tokens (raise --max-tokens)" in generated.err
        done = api_run(gamut, "run", out, server.url)
        assert done.code == 0, done.err
    finally:
        server.stop()

    rows = sqlite3.connect(out / "store.sqlite").execute(
        "SELECT question_id, response, reasoning, reasoning_unclosed FROM generations"
    )
    stored = {qid: (response, reasoning, unclosed) for qid, response, reasoning, unclosed in rows}
    first, second, third = (stored[q.id] for q in questions)
    assert first == (f"An answer to: {tagged}", secret(tagged), 0)
    assert second == (f"An answer to: {parsed}", secret(parsed), 0)
    assert third == ("", secret(cut), 1)

    # The judge saw every check of the three answers, the empty one too, and never a reasoning.
    judgings = [b for b in server.bodies if is_judging(b)]
    assert len(judgings) == sum(len(q.checks) for q in questions)
    assert not any("SECRET" in json.dumps(b) for b in judgings)
    empty = [b for b in judgings if user_text(b).startswith(f"Question: {cut}\n")]
    assert len(empty) == len(questions[2].checks) and all("An answer to" not in user_text(b) for b in empty)

    results = json.loads((out / "results.json").read_text())
    assert results["unclosed_reasoning"] == 1
    assert results["score"]["gamut"] == pytest.approx(expected_gamut(limit=3), abs=1e-9)
    assert "1 answer empty: reasoning cut by max_tokens (raise --max-tokens); judged as empty answers" in done.out
    responses = datasets.Dataset.from_parquet(str(out / "responses.parquet")).to_list()
    by_id = {row["question_id"]: row for row in responses}
    assert [(by_id[q.id]["response"], by_id[q.id]["reasoning"]) for q in questions] == [
        (response, reasoning) for response, reasoning, _ in (first, second, third)
    ]


def test_a_store_from_before_reasoning_was_kept_is_read_and_scored(gamut, endpoint, tmp_path):
    assert api_run(gamut, "run", tmp_path / "run", endpoint.url, "--limit", "2", "--variant", "text_only").code == 0
    before = json.loads((tmp_path / "run" / "results.json").read_text())["score"]
    db = sqlite3.connect(tmp_path / "run" / "store.sqlite")
    db.execute("ALTER TABLE generations DROP COLUMN reasoning")
    db.execute("ALTER TABLE generations DROP COLUMN reasoning_unclosed")
    db.commit()
    db.close()
    endpoint.stop()
    rescored = gamut("score", tmp_path / "run")
    assert rescored.code == 0, rescored.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["score"] == before and results["unclosed_reasoning"] == 0
    columns = [
        row[1] for row in sqlite3.connect(tmp_path / "run" / "store.sqlite").execute("PRAGMA table_info(generations)")
    ]
    assert columns[-2:] == ["reasoning", "reasoning_unclosed"]


def test_shards_merge_into_one_run_and_conflicts_are_refused(gamut, endpoint, tmp_path):
    for index in (0, 1):
        shard = api_run(gamut, "run", tmp_path / f"shard{index}", endpoint.url, "--limit", "5", "--shard", f"{index}/2")
        assert shard.code == 0, shard.err
    merged = gamut("merge", tmp_path / "all", tmp_path / "shard0", tmp_path / "shard1")
    assert merged.code == 0, merged.err
    results = json.loads((tmp_path / "all" / "results.json").read_text())
    assert results["score"]["questions"] == 5
    assert results["score"]["gamut"] == pytest.approx(expected_gamut(limit=5), abs=1e-9)

    # A store that disagrees about an entry the merged run already holds: refused, nothing lost.
    shutil.copytree(tmp_path / "shard1", tmp_path / "tampered")
    db = sqlite3.connect(tmp_path / "tampered" / "store.sqlite")
    db.execute("UPDATE verdicts SET verdict = CASE verdict WHEN 'meets' THEN 'missing' ELSE 'meets' END")
    db.commit()
    db.close()
    refused = gamut("merge", tmp_path / "all", tmp_path / "tampered")
    assert refused.code == 2 and "differs" in refused.err and "Traceback" not in refused.err
    assert json.loads((tmp_path / "all" / "results.json").read_text())["score"] == results["score"]
    assert gamut("score", tmp_path / "all").code == 0
    assert json.loads((tmp_path / "all" / "results.json").read_text())["score"] == results["score"]


def test_bad_options_are_one_line_errors(gamut, tmp_path):
    for args, message in [
        (["--shard", "2/2"], "--shard: expected i/n"),
        (["--model-option", "nonsense"], "--model-option: expected KEY=VALUE"),
        (["--dataset", str(tmp_path / "nowhere")], "no such folder"),
        (["--backend", "openai", "--model", "m", "--base-url", "https://api.example.invalid/v1"], "OPENAI_API_KEY"),
    ]:
        done = gamut("run", "--out", tmp_path / "run", *args, env={**os.environ, "OPENAI_API_KEY": ""})
        assert done.code in (1, 2) and message in done.err and "Traceback" not in done.err, (args, done.err)
        assert len(done.err.strip().splitlines()[-1]) < 400


def results_of(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


def test_rescoring_with_other_parameters_is_recorded_and_every_reader_uses_them(gamut, endpoint, tmp_path):
    """Issue 12 item 8: `gamut score RUN_DIR --weights 1,0,0 --partial-credit 1` rewrote results.json,
    but the report and the leaderboard rescored details.parquet with the defaults."""
    from gamut_hf.leaderboard.entries import leaderboard_row, load_entries
    from gamut_hf.reports.statistics import Bootstrap, run_summary

    run = tmp_path / "runs" / "run"
    assert api_run(gamut, "run", run, endpoint.url, "--limit", "4").code == 0
    default = results_of(run)["score"]["gamut"]
    done = gamut("score", run, "--weights", "1,0,0", "--partial-credit", "1")
    assert done.code == 0, done.err
    assert "scored with --partial-credit 1 --contradiction-penalty -2 --weights 1,0,0" in done.out
    params = ScoreParams(partial_credit=1, tier_weights={"answer_critical": 1, "valuable": 0, "context": 0})
    results = results_of(run)
    assert results["score_params"] == params.model_dump()
    gamut_score = results["score"]["gamut"]
    assert gamut_score == pytest.approx(expected_gamut(limit=4, params=params), abs=1e-9)
    assert gamut_score != pytest.approx(default, abs=0.5)

    report = gamut("report", run, "--out", tmp_path / "report", "--resamples", "1000")
    assert report.code == 0, report.err
    [table] = (tmp_path / "report" / "tables").glob("leaderboard-*.csv")
    [row] = csv.DictReader(table.open(encoding="utf-8"))
    assert float(row["gamut"]) == pytest.approx(gamut_score, abs=1e-9)

    [entry] = load_entries(tmp_path / "runs")
    summary = run_summary(entry.run.questions, Bootstrap(resamples=1000))
    assert summary["gamut"].value == pytest.approx(gamut_score, abs=1e-9)
    assert leaderboard_row(entry, summary)["Gamut"] == round(gamut_score, 1)


def inherited_line(done) -> str:
    [line] = [line for line in done.err.splitlines() if line.startswith("from the run in ")]
    return line


def test_a_stored_selection_is_named_at_start_and_can_be_cleared(gamut, endpoint, tmp_path):
    """Issue 12 item 9: a stored --limit or --question-id could never be cleared, and later runs in the
    folder took it silently."""
    run = tmp_path / "run"
    assert api_run(gamut, "run", run, endpoint.url, "--limit", "2", "--variant", "text_only").code == 0
    again = gamut("run", "--out", run)
    assert again.code == 0, again.err
    line = inherited_line(again)
    assert line.startswith(f"from the run in {run}: ") and "--limit 2" in line and "--all for every question" in line
    assert "--model cand (openai; options base_url)" in line and "--judge fake-judge (openai" in line
    assert endpoint.url not in line  # option values are not shown: they can be keys
    assert results_of(run)["score"]["questions"] == 2

    every = gamut("run", "--out", run, "--limit", "0")
    assert every.code == 0, every.err
    assert "--limit" not in inherited_line(every) and results_of(run)["score"]["questions"] == 25
    assert results_of(run)["score"]["gamut"] == pytest.approx(expected_gamut(), abs=1e-9)

    assert gamut("run", "--out", run, "--question-id", "food-01", "--question-id", "animal-02").code == 0
    again = gamut("run", "--out", run)
    assert "--question-id food-01 animal-02" in inherited_line(again)
    assert results_of(run)["score"]["questions"] == 2
    every = gamut("run", "--out", run, "--all")
    assert every.code == 0, every.err
    assert "--question-id" not in inherited_line(every) and results_of(run)["score"]["questions"] == 25

    refused = gamut("run", "--out", run, "--all", "--limit", "3")
    assert refused.code == 2 and refused.err.strip() == "gamut: --all: every question, so not with --limit"
    fresh = api_run(gamut, "run", tmp_path / "fresh", endpoint.url, "--limit", "1")
    assert fresh.code == 0 and "from the run in" not in fresh.err  # nothing stored, nothing inherited


def test_a_shard_judged_again_with_retry_errors_merges_over_its_errors(gamut, tmp_path):
    """Issue 12 item 10: merge refused a stored error meeting the real verdict of a shard re-judged
    with --retry-errors."""
    server = FakeEndpoint(responder=garbled)
    try:
        shard0 = api_run(
            gamut, "run", tmp_path / "shard0", server.url, "--limit", "5", "--shard", "0/2", "--judge-retries", "0"
        )
        assert shard0.code == 0 and results_of(tmp_path / "shard0")["judge_errors"] > 0
        shutil.copytree(tmp_path / "shard0", tmp_path / "shard0-errors")
        server.responder = scripted
        assert api_run(gamut, "run", tmp_path / "shard1", server.url, "--limit", "5", "--shard", "1/2").code == 0
        retried = gamut("run", "--out", tmp_path / "shard0", "--retry-errors")
        assert retried.code == 0 and results_of(tmp_path / "shard0")["judge_errors"] == 0, retried.err
    finally:
        server.stop()
    expected = expected_gamut(limit=5)
    # The errors first, then the re-judged shard: the real verdicts replace the errors.
    first = gamut("merge", tmp_path / "all", tmp_path / "shard0-errors", tmp_path / "shard1")
    assert first.code == 0 and results_of(tmp_path / "all")["score"]["gamut"] is None, first.err
    merged = gamut("merge", tmp_path / "all", tmp_path / "shard0")
    assert merged.code == 0, merged.err
    assert results_of(tmp_path / "all")["judge_errors"] == 0
    assert results_of(tmp_path / "all")["score"]["gamut"] == pytest.approx(expected, abs=1e-9)
    # The other way round: the errors arriving last leave the real verdicts in place.
    merged = gamut("merge", tmp_path / "other", tmp_path / "shard0", tmp_path / "shard1", tmp_path / "shard0-errors")
    assert merged.code == 0, merged.err
    assert results_of(tmp_path / "other")["score"]["gamut"] == pytest.approx(expected, abs=1e-9)


def test_recorded_run_settings_this_version_cannot_read_are_a_one_line_error(gamut, endpoint, tmp_path):
    """Issue 12 item 15 on run/score/merge: a stored config failing RunConfig was an internal error."""
    run = tmp_path / "run"
    assert api_run(gamut, "run", run, endpoint.url, "--limit", "1").code == 0
    db = sqlite3.connect(run / "store.sqlite")
    config = json.loads(db.execute("SELECT value FROM run_info WHERE name = 'config'").fetchone()[0])
    db.execute("UPDATE run_info SET value = ? WHERE name = 'config'", (json.dumps({**config, "temperature": 0.7}),))
    db.commit()
    db.close()
    for args in (["run", "--out", run], ["judge", "--out", run], ["score", run], ["merge", tmp_path / "all", run]):
        done = gamut(*args)
        assert done.code == 2, (args, done.err)
        assert done.err.strip() == (
            f"gamut: {run / 'store.sqlite'}: the recorded run settings are not usable "
            "(temperature: unknown field); start the run in a new folder"
        ), args


def test_a_write_killed_between_the_tables_and_results_json_is_refused_by_readers(
    gamut, endpoint, tmp_path, monkeypatch, capsys
):
    """Issue 12 item 19: details.parquet was swapped in before results.json, so a kill in between left
    new tables beside the old results.json, and readers took the mix for a run."""
    from gamut_hf import atomic, cli
    from gamut_hf.evaluation.run_folder import RunFolderError
    from gamut_hf.leaderboard.entries import load_entries

    runs = tmp_path / "runs"
    run = runs / "run"
    assert api_run(gamut, "run", run, endpoint.url, "--limit", "2").code == 0
    old_results = (run / "results.json").read_bytes()
    old_details = (run / "details.parquet").read_bytes()

    write_text = atomic.write_text

    def killed_before_results(path, text):
        if Path(path).name == "results.json":
            raise KeyboardInterrupt  # the process dies here, after both tables are in place
        write_text(path, text)

    monkeypatch.setattr(atomic, "write_text", killed_before_results)
    assert cli.main(["run", "--out", str(run), "--limit", "3"]) == 130
    monkeypatch.undo()
    capsys.readouterr()
    assert (run / "results.json").read_bytes() == old_results
    assert (run / "details.parquet").read_bytes() != old_details  # the mix a reader must not take for a run

    refusal = (
        f"{run}: details.parquet is not the one results.json was written with (an interrupted write, or a "
        f"file changed by hand); rewrite the folder with `gamut score {run}`"
    )
    report = gamut("report", runs, "--out", tmp_path / "report")
    assert report.code == 2 and error_lines(report.err) == [f"gamut: {refusal}"]
    with pytest.raises(RunFolderError) as error:
        load_entries(runs)
    assert str(error.value) == refusal

    assert gamut("score", run).code == 0
    assert gamut("report", runs, "--out", tmp_path / "report").code == 0
    [entry] = load_entries(runs)
    assert len(entry.run.questions) == 3 and results_of(run)["score"]["questions"] == 3

    # A results.json without the digests (an older writer's) is refused the same way, not trusted.
    results = results_of(run)
    del results["files"]
    (run / "results.json").write_text(json.dumps(results))
    report = gamut("report", run, "--out", tmp_path / "report")
    assert report.code == 2 and "records no digest of details.parquet" in report.err and report.err.count("\n") == 1


# -- the embedded default, killed and resumed ------------------------------------------------

DEFAULT_RUN = ("--limit", "3", "--max-tokens", "48", "--judge-batch-size", "8")


def verdict_rows(folder: Path) -> list[tuple[str, str, str]]:
    if not (folder / "store.sqlite").is_file():
        return []
    db = sqlite3.connect(f"file:{folder / 'store.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT key, verdict, session FROM verdicts").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        db.close()


def test_the_default_run_killed_mid_judging_resumes_to_the_same_results(gamut, tmp_path):
    whole = gamut("run", "--out", tmp_path / "whole", *DEFAULT_RUN)
    assert whole.code == 0, whole.err
    expected = json.loads((tmp_path / "whole" / "results.json").read_text())
    # The transformers judge's verdict probabilities, from its logits, with the expected score.
    assert_verdict_probabilities(tmp_path / "whole")
    assert expected["expected_gamut"] is not None and "expected score" in whole.out
    total = expected["score"]["checks"]

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [sys.executable, "-m", "gamut_hf", "run", "--out", str(killed), *DEFAULT_RUN],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 900
    while len(verdict_rows(killed)) < 8 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before_kill = verdict_rows(killed)
    assert 0 < len(before_kill) < total, "the kill should land mid-judging"

    resumed = gamut("run", "--out", killed, *DEFAULT_RUN)
    assert resumed.code == 0, resumed.err
    after = verdict_rows(killed)
    assert len(after) == total
    # The rows stored before the kill are untouched; the second session judged only the rest.
    assert set(before_kill) <= set(after)
    results = json.loads((killed / "results.json").read_text())
    judge_stage = next(s for s in results["stages"] if s["stage"] == "judge")
    assert judge_stage["done_before"] == len(before_kill) and judge_stage["done_now"] == total - len(before_kill)
    assert results["score"] == expected["score"]
    assert pq_rows(killed) == pq_rows(tmp_path / "whole")


def pq_rows(folder: Path) -> list[dict]:
    return datasets.Dataset.from_parquet(str(folder / "details.parquet")).to_list()


def test_referenced_images_are_resolved_with_images_option(gamut, endpoint, tmp_path):
    from test_dataset import VALID, write_crag_mm, write_official_layout

    from gamut_hf.dataset.build import build_dataset

    build_dataset(VALID, tmp_path / "built")
    write_official_layout(tmp_path / "official", tmp_path / "built")
    write_crag_mm(tmp_path / "crag", {f"sess-{i}": VALID / "images" / "coffee.png" for i in range(3)})
    refused = api_run(gamut, "run", tmp_path / "run", endpoint.url, "--dataset", tmp_path / "official")
    assert refused.code == 2 and "--images" in refused.err
    done = api_run(
        gamut,
        "run",
        tmp_path / "run",
        endpoint.url,
        "--dataset",
        tmp_path / "official",
        "--images",
        f"crag-mm={tmp_path / 'crag'}",
    )
    assert done.code == 0, done.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["variant"] == "multimodal" and results["score"]["questions"] == 3
    answers = [b for b in endpoint.bodies if not is_judging(b)]
    assert len(answers) == 3 and all(b["messages"][-1]["content"][0]["type"] == "image_url" for b in answers)
