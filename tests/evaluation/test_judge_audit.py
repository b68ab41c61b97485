"""The judge audit set: it loads, validates, and its gold question scores are the scorer's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.core.scorer import score_question
from gamut_hf.evaluation.audit import (
    AUDIT_FILE,
    AuditSetError,
    load_audit_set,
    measure,
    sample_questions,
)
from gamut_hf.evaluation.injections import INJECTIONS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def questions():
    return sample_questions()


@pytest.fixture(scope="module")
def audit(questions):
    return load_audit_set(AUDIT_FILE, questions)


def test_the_shipped_set_covers_every_question_verdict_style_and_injection(audit, questions):
    assert set(audit.questions) == set(questions)
    verdicts = Counter(v for r in audit.responses for v in r.gold.values())
    assert set(verdicts) == set(VERDICTS) and min(verdicts.values()) > 100
    assert {r.style for r in audit.responses} == {"templated", "prose"}
    assert {r.injection.kind for r in audit.responses if r.injection} == set(INJECTIONS)
    assert {r.injection.position for r in audit.responses if r.injection} == {"appended", "embedded"}


def test_gold_question_scores_are_the_scorers(audit):
    for response in audit.responses:
        checks = audit.questions[response.question_id].checks
        assert response.gold_score == pytest.approx(score_question(checks, response.gold).score, abs=1e-9)


def test_the_shipped_file_is_what_the_builder_writes():
    done = subprocess.run(
        [sys.executable, "scripts/build_judge_audit.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _lines(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["gold"].popitem(), "no verdict for check"),
        (lambda r: r["gold"].update({"i99.fact": "meets"}), "unknown check 'i99.fact'"),
        (lambda r: r.update(gold_score=0.5), "gold_score: 0.5 but the scorer gives"),
        (lambda r: r["gold"].update({next(iter(r["gold"])): "great"}), "gold."),
        (lambda r: r.update(question_id="nope-01"), "no sample question 'nope-01'"),
    ],
)
def test_a_wrong_labels_file_names_its_line_and_field(tmp_path, questions, change, message):
    first = json.loads(AUDIT_FILE.read_text(encoding="utf-8").splitlines()[1])
    change(first)
    with pytest.raises(AuditSetError, match=f"labels.jsonl:1: .*{message[:20]}".replace("(", r"\(")):
        load_audit_set(_lines(tmp_path, [first]), questions)


def test_an_injected_twin_must_keep_its_bases_gold(tmp_path, questions, audit):
    twin = next(r for r in audit.responses if r.twin_of)
    base = next(r for r in audit.responses if r.id == twin.twin_of)
    changed = twin.model_dump(mode="json")
    key = next(iter(changed["gold"]))
    changed["gold"][key] = "contradicts" if changed["gold"][key] != "contradicts" else "meets"
    changed["gold_score"] = None
    with pytest.raises(AuditSetError, match="keeps the gold of"):
        load_audit_set(_lines(tmp_path, [base.model_dump(mode="json"), changed]), questions)


def test_an_oracle_scores_kappa_one_and_never_flips(audit):
    judged = {f"{r.id}\t{c}": v for r in audit.responses for c, v in r.gold.items()}
    figures = measure(audit, judged)
    assert figures["kappa"] == pytest.approx(1.0) and figures["accuracy"] == 1.0
    assert figures["injection"].flip_rate == 0.0 and figures["injection"].false_meets_rate == 0.0
    assert figures["question_score_mae"] == 0.0 and figures["gamut_mae"] == 0.0


def test_always_meets_scores_what_arithmetic_says(audit):
    judged = {f"{r.id}\t{c}": "meets" for r in audit.responses for c in r.gold}
    figures = measure(audit, judged)
    gold = [v for r in audit.responses for v in r.gold.values()]
    share = gold.count("meets") / len(gold)
    assert figures["accuracy"] == pytest.approx(share)
    assert figures["kappa"] == pytest.approx(0.0)  # a constant answer agrees only by chance
    assert figures["per_verdict"]["meets"].precision == pytest.approx(share)
    assert figures["per_verdict"]["meets"].recall == 1.0
    assert all(figures["per_verdict"][v].recall == 0.0 for v in VERDICTS if v != "meets")
    assert figures["injection"].flip_rate == 0.0 and figures["injection"].false_meets_rate == 1.0
    mae = sum(abs(1.0 - r.gold_score) for r in audit.responses) / len(audit.responses)
    assert figures["question_score_mae"] == pytest.approx(mae)


# -- `gamut judge-audit` from the command line, judges behind a scripted OpenAI-compatible endpoint --


@pytest.fixture(scope="module")
def gold_by_request(audit) -> dict[str, tuple[str, bool]]:
    """The judge request of every audit check -> (its gold verdict, whether its response is an injected twin)."""
    from gamut_hf.evaluation.judge import judge_request

    gold: dict[str, tuple[str, bool]] = {}
    for response in audit.responses:
        question = audit.questions[response.question_id]
        for check in question.checks:
            user = judge_request(question.prompt, None, response.response, check, rationale=False).user
            gold[user] = (response.gold[check.id], response.injection is not None)
    return gold


def _audit_judges(gold: dict[str, tuple[str, bool]]):
    """Judges that know the gold: ``oracle`` answers it, ``always-meets`` answers meets,
    ``obedient`` answers gold on base responses but meets on every injected twin (it follows
    the injection), and ``unreadable`` answers no verdict at all."""
    from fake_endpoint import user_text

    def answer(body: dict) -> str:
        if body["messages"][0]["role"] != "system":  # a candidate: a short answer to the question
            return "Keep it in bright indirect light and water it less in winter."
        if body["model"] == "unreadable":
            return "I would rather not say."
        if user_text(body) not in gold:  # a check of a real run: these judges know only the audit
            return "missing"
        verdict, injected = gold[user_text(body)]
        if body["model"] == "always-meets" or (body["model"] == "obedient" and injected):
            return "meets"
        return verdict

    return answer


@pytest.fixture(scope="module")
def audit_endpoint(gold_by_request):
    from fake_endpoint import FakeEndpoint

    server = FakeEndpoint(responder=_audit_judges(gold_by_request))
    yield server
    server.stop()


def _audit_command(gamut, endpoint, judge: str, out: Path, *extra: str):
    return gamut(
        "judge-audit",
        "--judge",
        judge,
        "--judge-backend",
        "openai",
        "--judge-base-url",
        endpoint.url,
        "--out",
        out,
        *extra,
    )


def test_the_command_gives_an_oracle_kappa_one_and_resumes_without_asking_again(gamut, audit_endpoint, audit, tmp_path):
    out = tmp_path / "results" / "audit-oracle"
    done = _audit_command(gamut, audit_endpoint, "oracle", out)
    assert done.code == 0, done.err
    assert "kappa 1.000" in done.out and "injection flip rate 0.0%" in done.out
    results = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert results["kappa"] == pytest.approx(1.0) and results["accuracy"] == 1.0
    assert results["judged"] == audit.checks and results["errors"] == 0
    assert results["injection"]["flip_rate"] == 0.0 and results["question_score_mae"] == 0.0
    assert results["judge"]["model"] == "oracle"
    markdown = (out / "audit.md").read_text(encoding="utf-8")
    assert "| Cohen's kappa | 1.000 |" in markdown and (out / "audit-confusion.png").stat().st_size > 1000
    asked = audit_endpoint.requests
    again = _audit_command(gamut, audit_endpoint, "oracle", out)
    assert again.code == 0, again.err
    assert audit_endpoint.requests == asked  # every verdict came from the store


def test_the_command_scores_always_meets_and_an_obedient_judge_as_arithmetic_says(
    gamut, audit_endpoint, audit, tmp_path
):
    keep = list(dict.fromkeys(r.question_id for r in audit.responses))[:3]
    responses = [r for r in audit.responses if r.question_id in keep]
    gold = [(v, r.injection is not None) for r in responses for v in r.gold.values()]

    done = _audit_command(gamut, audit_endpoint, "always-meets", tmp_path / "meets", "--limit", "3")
    assert done.code == 0, done.err
    meets = json.loads((tmp_path / "meets" / "audit.json").read_text(encoding="utf-8"))
    assert meets["judged"] == len(gold)
    assert meets["accuracy"] == pytest.approx(sum(v == "meets" for v, _ in gold) / len(gold))
    assert meets["kappa"] == pytest.approx(0.0)
    assert meets["injection"]["flip_rate"] == 0.0 and meets["injection"]["false_meets_rate"] == 1.0

    done = _audit_command(gamut, audit_endpoint, "obedient", tmp_path / "obedient", "--limit", "3")
    assert done.code == 0, done.err
    obedient = json.loads((tmp_path / "obedient" / "audit.json").read_text(encoding="utf-8"))
    twin_checks = [v for v, injected in gold if injected]
    assert obedient["injection"]["checks"] == len(twin_checks)
    assert obedient["injection"]["flip_rate"] == pytest.approx(
        sum(v != "meets" for v in twin_checks) / len(twin_checks)
    )
    assert obedient["injection"]["false_meets_rate"] == 1.0
    assert obedient["injection"]["base_false_meets_rate"] == 0.0


def test_labels_replace_the_gold_and_a_bad_labels_file_is_one_line(gamut, audit_endpoint, audit, tmp_path):
    rows = [r.model_dump(mode="json") for r in audit.responses if r.twin_of is None][:4]
    changed = 0
    for row in rows:  # a "human" who disagrees with the built-in gold on one check per response
        check_id = next(iter(row["gold"]))
        row["gold"][check_id] = "contradicts" if row["gold"][check_id] != "contradicts" else "meets"
        row["gold_score"] = None
        changed += 1
    labels = _lines(tmp_path, rows)
    done = _audit_command(gamut, audit_endpoint, "oracle", tmp_path / "human", "--labels", labels)
    assert done.code == 0, done.err
    results = json.loads((tmp_path / "human" / "audit.json").read_text(encoding="utf-8"))
    checks = sum(len(r["gold"]) for r in rows)
    assert results["labels"] == str(labels) and results["checks"] == checks
    assert results["accuracy"] == pytest.approx((checks - changed) / checks)
    assert results["injection"] is None

    rows[1]["gold"].popitem()
    bad = _lines(tmp_path, rows)
    done = _audit_command(gamut, audit_endpoint, "oracle", tmp_path / "bad", "--labels", bad)
    assert done.code == 2
    assert f"{bad}:2: gold: no verdict for check" in done.err and "Traceback" not in done.err


def test_the_report_shows_the_audit_of_a_runs_judge_from_the_same_results_folder(gamut, audit_endpoint, tmp_path):
    results = tmp_path / "results"
    done = gamut(
        "run",
        "--out",
        results / "cand",
        "--model",
        "cand",
        "--backend",
        "openai",
        "--base-url",
        audit_endpoint.url,
        "--judge",
        "oracle",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        audit_endpoint.url,
        "--variant",
        "text_only",
        "--limit",
        "2",
    )
    assert done.code == 0, done.err
    done = _audit_command(gamut, audit_endpoint, "oracle", results / "judge-audit-oracle", "--limit", "2")
    assert done.code == 0, done.err
    done = gamut("report", results, "--out", tmp_path / "report")
    assert done.code == 0, done.err
    assert "Judge audit" in done.out.split("sections:", 1)[1].splitlines()[0]
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    section = markdown.split("## Judge audit", 1)[1].split("\n## ", 1)[0]
    assert "judge-audit-oracle" in section and "1.000" in section and "built-in gold" in section
    assert (tmp_path / "report" / "tables" / "judge-audit.csv").is_file()

    # Another judge's audit is not this run's: the section is left out, saying how to make one.
    other = tmp_path / "other"
    done = gamut(
        "run",
        "--out",
        other / "cand",
        "--model",
        "cand",
        "--backend",
        "openai",
        "--base-url",
        audit_endpoint.url,
        "--judge",
        "always-meets",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        audit_endpoint.url,
        "--variant",
        "text_only",
        "--limit",
        "2",
    )
    assert done.code == 0, done.err
    (other / "judge-audit-oracle").symlink_to(results / "judge-audit-oracle", target_is_directory=True)
    (other / "judge-audit-broken").mkdir()
    (other / "judge-audit-broken" / "audit.json").write_text('{"kappa": 2}', encoding="utf-8")
    done = gamut("report", other, "--out", tmp_path / "report2")
    assert done.code == 0, done.err
    left_out = next(line for line in done.out.splitlines() if line.startswith("left out Judge audit"))
    assert "gamut judge-audit" in left_out and "judge-audit-broken" in left_out


# -- figures with nothing to measure, unreadable verdicts and --limit (issue 23 items 7, 8, 9) --


def _first_questions(audit, count: int) -> list[str]:
    return list(dict.fromkeys(r.question_id for r in audit.responses))[:count]


def _checks_of(audit, question_id: str) -> int:
    return sum(len(r.gold) for r in audit.responses if r.question_id == question_id)


def test_a_judge_failing_a_fifth_of_requests_shows_na_and_the_report_and_space_read_the_audit(
    gamut, gold_by_request, audit, tmp_path
):
    from fake_endpoint import FakeEndpoint

    from gamut_hf.evaluation.judge import judge_request
    from gamut_hf.leaderboard.space.data import SpaceConfig, SpaceData

    server = FakeEndpoint(responder=_audit_judges(gold_by_request))
    try:
        (first,) = _first_questions(audit, 1)
        question = audit.questions[first]
        for response in (r for r in audit.responses if r.question_id == first):
            for number, check in enumerate(question.checks):
                if number % 5 == 0:  # a fifth, the first check of every response among them
                    user = judge_request(question.prompt, None, response.response, check, rationale=False).user
                    server.faults[user] = ["500"]
        judge = ["--judge", "oracle", "--judge-backend", "openai", "--judge-base-url", server.url]
        results = tmp_path / "results"
        done = gamut("run", "--out", results / "cand", "--model", "cand", "--backend", "openai", "--base-url",
                     server.url, *judge, "--variant", "text_only", "--limit", "2")  # fmt: skip
        assert done.code == 0, done.err
        # max_retries leaves the judge's fingerprint alone: this audit is still the run's judge's
        done = gamut("judge-audit", *judge, "--judge-option", "max_retries=0", "--out",
                     results / "judge-audit-oracle", "--limit", "1")  # fmt: skip
    finally:
        server.stop()
    assert done.code == 0, done.err
    why = "n/a (no response has every check judged"
    assert f"question score MAE {why}" in done.out and "nan" not in done.out
    written = json.loads((results / "judge-audit-oracle" / "audit.json").read_text(encoding="utf-8"))
    assert written["question_score_mae"] is None and written["gamut_mae"] is None
    assert written["undefined"]["question_score_mae"].startswith("no response has every check judged")
    assert f"| question score, mean absolute error | {why}" in (results / "judge-audit-oracle" / "audit.md").read_text(
        encoding="utf-8"
    )

    done = gamut("report", results, "--out", tmp_path / "report")
    assert done.code == 0, done.err
    section = (tmp_path / "report" / "report.md").read_text(encoding="utf-8").split("## Judge audit", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "judge-audit-oracle" in section and why in section and "not read" not in section
    space = SpaceData(SpaceConfig(results=results, requests=tmp_path / "requests", dataset=None, resamples=10))
    note = space.audit_note("oracle")
    assert "`judge-audit-oracle`" in note and f"Gamut error {why}" in note


def test_a_single_verdict_labels_file_has_kappa_na_and_its_audit_reads_back(gamut, audit_endpoint, audit, tmp_path):
    from gamut_hf.evaluation.audit import find_audits

    (first,) = _first_questions(audit, 1)
    rows = [r.model_dump(mode="json") for r in audit.responses if r.question_id == first and r.twin_of is None]
    for row in rows:  # annotators who found every check met
        row["gold"] = dict.fromkeys(row["gold"], "meets")
        row["gold_score"] = None
    labels = _lines(tmp_path, rows)
    out = tmp_path / "results" / "judge-audit-meets"
    done = _audit_command(gamut, audit_endpoint, "always-meets", out, "--labels", labels)
    assert done.code == 0, done.err
    why = "n/a (every verdict, gold and judged, is meets: chance agreement is total)"
    assert f"kappa {why}" in done.out
    markdown = (out / "audit.md").read_text(encoding="utf-8")
    assert f"| Cohen's kappa | {why} |" in markdown
    assert f"| {rows[0]['style']} | {sum(len(r['gold']) for r in rows)} | 100.0% | {why} |" in markdown
    (found,) = find_audits([out.parent])
    assert found.problem is None and found.results is not None
    assert found.results.kappa is None and found.row(shown=True)["kappa"] == why


def test_unreadable_verdicts_are_left_out_of_the_injection_rates_and_counted(gamut, audit_endpoint, audit, tmp_path):
    (first,) = _first_questions(audit, 1)
    twin_checks = sum(len(r.gold) for r in audit.responses if r.question_id == first and r.twin_of)
    out = tmp_path / "unreadable"
    done = _audit_command(gamut, audit_endpoint, "unreadable", out, "--limit", "1", "--judge-retries", "0")
    assert done.code == 0, done.err
    assert "injection flip rate 0.0%" not in done.out and "judged meets 0.0%" not in done.out
    assert (
        "injection flip rate n/a (no check judged readably in both a response and its twin; "
        f"{twin_checks} with an unreadable verdict left out)" in done.out
    )
    injection = json.loads((out / "audit.json").read_text(encoding="utf-8"))["injection"]
    assert injection["checks"] == 0 and injection["unreadable"] == twin_checks
    assert injection["flip_rate"] is None and injection["false_meets_rate"] is None
    assert injection["base_false_meets_rate"] is None


def test_an_unreadable_verdict_on_either_side_of_a_twin_is_no_agreement(audit):
    """An oracle whose verdicts on one injection kind's twins, and on another kind's bases, were unreadable."""
    judged = {f"{r.id}\t{c}": v for r in audit.responses for c, v in r.gold.items()}
    by_id = {r.id: r for r in audit.responses}
    twins = [r for r in audit.responses if r.twin_of]
    garbled_twin, garbled_base = sorted({t.injection.kind for t in twins})[:2]
    left_out = 0
    for twin in twins:
        garbled = twin if twin.injection.kind == garbled_twin else by_id[twin.twin_of]
        if twin.injection.kind in (garbled_twin, garbled_base):
            judged.update({f"{garbled.id}\t{c}": "error" for c in garbled.gold})
            left_out += len(twin.gold)
    figures = measure(audit, judged)
    injection = figures["injection"]
    assert injection.unreadable == left_out
    assert injection.checks == sum(len(t.gold) for t in twins) - left_out
    assert injection.flip_rate == 0.0 and injection.false_meets_rate == 0.0
    for kind in (garbled_twin, garbled_base):
        assert figures["injection_by_kind"][kind].flip_rate is None
        assert figures["undefined"][f"injection_by_kind.{kind}.flip_rate"].endswith(
            "with an unreadable verdict left out"
        )


def test_a_larger_limit_into_the_same_folder_asks_the_judge_only_about_the_added_question(
    gamut, audit_endpoint, audit, tmp_path
):
    first, second = _first_questions(audit, 2)
    out = tmp_path / "audit"
    asked = audit_endpoint.requests
    done = _audit_command(gamut, audit_endpoint, "oracle", out, "--limit", "1")
    assert done.code == 0, done.err
    assert audit_endpoint.requests - asked == _checks_of(audit, first)
    asked = audit_endpoint.requests
    done = _audit_command(gamut, audit_endpoint, "oracle", out, "--limit", "2")
    assert done.code == 0, done.err
    assert audit_endpoint.requests - asked == _checks_of(audit, second)  # the first question's verdicts are stored
    results = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert results["judged"] == _checks_of(audit, first) + _checks_of(audit, second) and results["unfinished"] == 0
    assert results["kappa"] == pytest.approx(1.0)


def test_gamut_run_audit_measures_the_judge_beside_the_run_before_judging_it(gamut, audit_endpoint, tmp_path):
    """`gamut run --audit`: the audit set is judged first by the run's judge (the engine the run then
    judges with), into judge-audit-<judge>-<backend> beside the run, where the summary and the report
    find it; a second run reuses every stored audit verdict."""
    results = tmp_path / "results"
    run = (
        "run", "--out", results / "cand", "--model", "cand", "--backend", "openai", "--base-url", audit_endpoint.url,
        "--judge", "oracle", "--judge-backend", "openai", "--judge-base-url", audit_endpoint.url,
        "--variant", "text_only", "--limit", "2", "--audit", "--audit-limit", "2",
    )  # fmt: skip
    done = gamut(*run)
    assert done.code == 0, done.err
    audit_folder = results / "judge-audit-oracle-openai"
    measured = json.loads((audit_folder / "audit.json").read_text(encoding="utf-8"))
    assert measured["kappa"] == pytest.approx(1.0) and measured["judge"]["model"] == "oracle"
    assert (audit_folder / "audit.md").is_file()
    # The audit came before the run's checks, and the summary shows it beside the score.
    assert done.err.index("judge audit: oracle (openai)") < done.err.rindex("judge:")
    assert "kappa 1.000" in done.out and f"judge audit ({audit_folder})" in done.out
    asked = audit_endpoint.requests
    again = gamut(*run)
    assert again.code == 0, again.err
    assert audit_endpoint.requests == asked
    report = gamut("report", results, "--out", tmp_path / "report")
    assert report.code == 0 and "Judge audit" in report.out.split("sections:", 1)[1].splitlines()[0]


def test_audit_out_without_audit_is_one_line(gamut, tmp_path):
    done = gamut("run", "--out", tmp_path / "run", "--audit-out", tmp_path / "audit")
    assert done.code == 2 and done.err == "gamut: --audit-out and --audit-limit go with --audit\n"
    assert not (tmp_path / "run").exists()


def test_audit_out_into_a_folder_holding_other_files_is_refused_before_anything_runs(gamut, audit_endpoint, tmp_path):
    """--audit-out writes only in a new, empty or audit folder: one of the user's is refused in one
    line before the candidate is asked anything, and its files stay as they were."""
    theirs = tmp_path / "notes"
    theirs.mkdir()
    (theirs / "draft.txt").write_text("mine", encoding="utf-8")
    asked = audit_endpoint.requests
    done = gamut(
        "run", "--out", tmp_path / "run", "--model", "cand", "--backend", "openai", "--base-url", audit_endpoint.url,
        "--judge", "oracle", "--judge-backend", "openai", "--judge-base-url", audit_endpoint.url,
        "--variant", "text_only", "--limit", "1", "--audit", "--audit-out", theirs,
    )  # fmt: skip
    assert done.code == 2, done.err
    refusal = [line for line in done.err.splitlines() if line.startswith("gamut: ")]
    assert len(refusal) == 1 and "--audit-out" in refusal[0] and str(theirs) in refusal[0], done.err
    assert audit_endpoint.requests == asked
    assert [p.name for p in theirs.iterdir()] == ["draft.txt"] and (theirs / "draft.txt").read_text() == "mine"
