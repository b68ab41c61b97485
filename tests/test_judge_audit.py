"""The judge audit set: it loads, validates, and its gold question scores are the scorer's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gamut_hf.audit import AUDIT_FILE, AuditSetError, load_audit_set, measure, sample_questions
from gamut_hf.injections import INJECTIONS
from gamut_hf.rubric import VERDICTS
from gamut_hf.scorer import score_question

ROOT = Path(__file__).resolve().parents[1]


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
    done = subprocess.run([sys.executable, "scripts/build_judge_audit.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _lines(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r["gold"].popitem(), "no verdict for check"),
    (lambda r: r["gold"].update({"i99.fact": "meets"}), "unknown check 'i99.fact'"),
    (lambda r: r.update(gold_score=0.5), "gold_score: 0.5 but the scorer gives"),
    (lambda r: r["gold"].update({next(iter(r["gold"])): "great"}), "gold."),
    (lambda r: r.update(question_id="nope-01"), "no sample question 'nope-01'"),
])
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
