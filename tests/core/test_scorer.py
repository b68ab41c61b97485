"""SPEC section 4: the tier formula, the question score, the run aggregate, the worked examples."""

from __future__ import annotations

import pytest
from conftest import write_json

from gamut_hf.core.rubric import Check
from gamut_hf.core.scorer import (
    ScoreParams,
    ScoringError,
    VerdictCounts,
    score_question,
    score_run,
    tier_score,
)


def checks_of(spec):
    """spec: list of (check id, tier)."""
    return [
        Check(id=cid, item_id=cid.split(".")[0], kind="fact", tier=tier, text=f"Check {cid}.") for cid, tier in spec
    ]


WORKED = checks_of(
    [
        ("a1.fact", "answer_critical"),
        ("a2.fact", "answer_critical"),
        ("a3.fact", "answer_critical"),
        ("v1.fact", "valuable"),
        ("v2.fact", "valuable"),
    ]
)
WORKED_VERDICTS = {
    "a1.fact": "meets",
    "a2.fact": "meets",
    "a3.fact": "missing",
    "v1.fact": "partially_meets",
    "v2.fact": "contradicts",
}


def test_worked_example_of_the_spec():
    result = score_question(WORKED, WORKED_VERDICTS)
    assert result.tiers["answer_critical"] == pytest.approx(2 / 3, abs=1e-12)
    assert result.tiers["valuable"] == pytest.approx(-0.5, abs=1e-12)
    assert result.tiers["context"] is None
    assert result.score == pytest.approx(5 / 18, abs=1e-9)
    assert abs(result.score - 0.27778) < 1e-5


def test_all_meets_is_one_and_all_contradicts_is_minus_one():
    checks = checks_of([("a.fact", "answer_critical"), ("v.fact", "valuable"), ("c.fact", "context")])
    assert score_question(checks, {c.id: "meets" for c in checks}).score == pytest.approx(1.0)
    assert score_question(checks, {c.id: "contradicts" for c in checks}).score == pytest.approx(-1.0)
    assert score_question(checks, {c.id: "missing" for c in checks}).score == 0.0


def test_tier_formula_with_custom_constants():
    counts = VerdictCounts(meets=1, partially_meets=2, missing=1, contradicts=1)
    assert tier_score(counts) == pytest.approx((1 + 1 - 2) / (1 + 2 + 1 + 2))
    params = ScoreParams(partial_credit=0.25, contradiction_penalty=-1.0)
    assert tier_score(counts, params) == pytest.approx((1 + 0.5 - 1) / (1 + 2 + 1 + 1))
    assert tier_score(VerdictCounts()) is None


def test_empty_tiers_renormalise_the_weights():
    only_context = checks_of([("c.fact", "context")])
    assert score_question(only_context, {"c.fact": "meets"}).score == pytest.approx(1.0)
    ac_and_ctx = checks_of([("a.fact", "answer_critical"), ("c.fact", "context")])
    result = score_question(ac_and_ctx, {"a.fact": "meets", "c.fact": "missing"})
    assert result.score == pytest.approx(0.6 / 0.7)


def test_weights_are_parameters():
    checks = checks_of([("a.fact", "answer_critical"), ("v.fact", "valuable")])
    params = ScoreParams(tier_weights={"answer_critical": 0.5, "valuable": 0.5, "context": 0.0})
    assert score_question(checks, {"a.fact": "meets", "v.fact": "missing"}, params).score == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("verdicts", "message"),
    [
        ({**WORKED_VERDICTS, "zz.fact": "meets"}, "unknown check id 'zz.fact'"),
        ({**WORKED_VERDICTS, "a1.fact": "yes"}, "unknown verdict 'yes'"),
        ({k: v for k, v in WORKED_VERDICTS.items() if k != "v2.fact"}, "check v2.fact has no verdict"),
    ],
)
def test_bad_verdicts_are_refused(verdicts, message):
    with pytest.raises(ScoringError, match=message):
        score_question(WORKED, verdicts)


def test_run_aggregate_over_questions():
    q1 = checks_of([("a.fact", "answer_critical"), ("v.fact", "valuable")])
    q2 = checks_of([("b.fact", "answer_critical"), ("c.fact", "context")])
    run = score_run(
        [(q1, {"a.fact": "meets", "v.fact": "missing"}), (q2, {"b.fact": "contradicts", "c.fact": "meets"})]
    )
    s1 = 0.6 / 0.9
    s2 = (0.6 * -1 + 0.1 * 1) / 0.7
    assert run.gamut == pytest.approx(100 * (s1 + s2) / 2)
    assert run.tiers == pytest.approx({"answer_critical": 0.0, "valuable": 0.0, "context": 100.0})
    assert run.verdict_shares["meets"] == 0.5 and run.elements_met_rate == 0.5
    assert run.verdict_shares["contradicts"] == 0.25 and run.verdict_shares["missing"] == 0.25
    assert run.questions == 2 and run.checks == 4 and run.errors == 0


def test_unanswered_question_scores_as_all_missing():
    q1 = checks_of([("a.fact", "answer_critical")])
    q2 = checks_of([("b.fact", "answer_critical")])
    run = score_run([(q1, {"a.fact": "meets"}), (q2, {})])
    assert run.gamut == pytest.approx(50.0)
    assert run.verdict_shares["missing"] == 0.5


def test_judge_errors_block_the_score_unless_counted_as_missing():
    q = checks_of([("a.fact", "answer_critical"), ("b.fact", "answer_critical")])
    blocked = score_run([(q, {"a.fact": "meets", "b.fact": "error"})])
    assert blocked.gamut is None and blocked.errors == 1
    assert blocked.verdict_shares["error"] == 0.5
    counted = score_run([(q, {"a.fact": "meets", "b.fact": "error"})], errors_as_missing=True)
    assert counted.gamut == pytest.approx(50.0) and counted.errors == 1 and counted.errors_counted_as_missing


def test_cli_score_reproduces_the_worked_example(tmp_path, gamut):
    rubric = write_json(tmp_path / "checks.json", [c.model_dump() for c in WORKED])
    verdicts = write_json(tmp_path / "verdicts.json", WORKED_VERDICTS)
    result = gamut("score", rubric, verdicts)
    assert result.code == 0, result.err
    out = result.json()
    assert abs(out["score"] - 5 / 18) < 1e-9
    assert out["tiers"]["context"] is None
    assert abs(out["tiers"]["valuable"] + 0.5) < 1e-12
    assert out["counts"] == {"meets": 2, "partially_meets": 1, "missing": 1, "contradicts": 1}


def test_cli_score_compiles_a_meta_rubric_first(tmp_path, gamut):
    meta = write_json(
        tmp_path / "meta.json",
        {
            "question_id": "q",
            "items": [
                {
                    "id": "i1",
                    "tier": "answer_critical",
                    "type": "strict_list",
                    "label": "parts",
                    "elements": ["a", "b"],
                },
                {"id": "i2", "tier": "valuable", "type": "knowledge", "label": "fact", "statement": "X."},
            ],
        },
    )
    verdicts = write_json(
        tmp_path / "v.json", {"i1.element.1": "meets", "i1.element.2": "missing", "i2.fact": "contradicts"}
    )
    out = gamut("score", meta, verdicts).json()
    assert out["score"] == pytest.approx(0.6 / 0.9 * 0.5 + 0.3 / 0.9 * -1)


@pytest.mark.parametrize(
    ("verdicts", "message"),
    [
        ({"i1.fact": "meets", "nope": "meets"}, "unknown check id 'nope'"),
        ({"i1.fact": "great"}, "unknown verdict 'great'"),
        ({}, "check i1.fact has no verdict"),
        (["meets"], "expected a JSON object"),
        ({"i1.fact": 1}, "expected a JSON object mapping check ids to verdict strings"),
    ],
)
def test_cli_score_refuses_bad_verdicts_in_one_line(tmp_path, gamut, verdicts, message):
    meta = write_json(
        tmp_path / "meta.json",
        {
            "question_id": "q",
            "items": [{"id": "i1", "tier": "context", "type": "knowledge", "label": "f", "statement": "X."}],
        },
    )
    result = gamut("score", meta, write_json(tmp_path / "v.json", verdicts))
    assert result.code == 2
    assert message in result.err and len(result.err.strip().splitlines()) == 1
    assert "Traceback" not in result.err and result.out == ""


def test_the_expected_score_of_sure_verdicts_is_the_score_and_unsure_ones_count_by_their_share():
    from gamut_hf.core.rubric import VERDICTS
    from gamut_hf.core.scorer import expected_question_score

    sure = {cid: {v: float(v == verdict) for v in VERDICTS} for cid, verdict in WORKED_VERDICTS.items()}
    assert expected_question_score(WORKED, sure) == pytest.approx(score_question(WORKED, WORKED_VERDICTS).score)
    # Probabilities need not sum to 1: each check's are renormalised.
    halved = {cid: {v: p / 2 for v, p in given.items()} for cid, given in sure.items()}
    assert expected_question_score(WORKED, halved) == pytest.approx(expected_question_score(WORKED, sure))
    # One answer-critical check half meets, half missing: the tier counts 2.5 met of 3 checks.
    unsure = {**sure, "a3.fact": {"meets": 0.5, "partially_meets": 0.0, "missing": 0.5, "contradicts": 0.0}}
    valuable = (0.5 - 2) / (1 + 2)  # one partial (0.5), one contradiction (-2, counted |mu| = 2 times)
    assert expected_question_score(WORKED, unsure) == pytest.approx(0.6 * 2.5 / 3 / 0.9 + 0.3 * valuable / 0.9)
    with pytest.raises(ScoringError, match="check a1.fact has no verdict probabilities"):
        expected_question_score(WORKED, {k: v for k, v in sure.items() if k != "a1.fact"})
    with pytest.raises(ScoringError, match="add up to 0"):
        expected_question_score(WORKED, {**sure, "a1.fact": dict.fromkeys(VERDICTS, 0.0)})
