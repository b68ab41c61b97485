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
def audit_endpoint(audit):
    """Judges that know the gold: ``oracle`` answers it, ``always-meets`` answers meets, and
    ``obedient`` answers gold on base responses but meets on every injected twin (it follows
    the injection)."""
    from fake_endpoint import FakeEndpoint, user_text

    from gamut_hf.evaluation.judge import judge_request

    gold: dict[str, tuple[str, bool]] = {}
    for response in audit.responses:
        question = audit.questions[response.question_id]
        for check in question.checks:
            user = judge_request(question.prompt, None, response.response, check, rationale=False).user
            gold[user] = (response.gold[check.id], response.injection is not None)

    def answer(body: dict) -> str:
        if body["messages"][0]["role"] != "system":  # a candidate: a short answer to the question
            return "Keep it in bright indirect light and water it less in winter."
        if user_text(body) not in gold:  # a check of a real run: these judges know only the audit
            return "missing"
        verdict, injected = gold[user_text(body)]
        if body["model"] == "always-meets" or (body["model"] == "obedient" and injected):
            return "meets"
        return verdict

    server = FakeEndpoint(responder=answer)
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
