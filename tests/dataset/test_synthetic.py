"""The full-size synthetic generator reproduces the paper's rubric statistics."""

from __future__ import annotations

import pytest

from gamut_hf.core.compiler import compile_rubric
from gamut_hf.core.rubric import parse_meta_rubric
from gamut_hf.dataset.build import build_dataset
from gamut_hf.dataset.loader import iter_questions, load_gamut
from gamut_hf.dataset.stats import RubricRecord, rubric_stats
from gamut_hf.dataset.synthetic import (
    SyntheticParams,
    synthetic_questions,
    write_synthetic,
)


def test_full_size_statistics_match_the_generator_parameters():
    params = SyntheticParams()
    records = []
    for q in synthetic_questions(params):
        rubric = parse_meta_rubric(q["meta_rubric"], require_evidence=True)
        records.append(RubricRecord(q["domain"], rubric, compile_rubric(rubric)))
    stats = rubric_stats(records)
    assert stats.questions == 1813 and stats.domains == dict(
        sorted(params.domains.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    assert stats.checks_per_question.mean == pytest.approx(15.2, abs=0.05)
    assert stats.checks_per_question.median == 15 and stats.checks_per_question.max == 41
    for tier, target in params.tier_checks.items():
        assert stats.checks_per_tier[tier] == pytest.approx(target, abs=0.1)
    shares = stats.share_with_item_type
    assert shares["flexible_list"] == pytest.approx(0.86, abs=0.005)
    assert shares["strict_list"] == pytest.approx(0.49, abs=0.005)
    assert shares["process"] == pytest.approx(0.17, abs=0.005)
    assert shares["relationship"] == pytest.approx(0.06, abs=0.005)
    assert stats.share_with_structured_item == pytest.approx(0.98, abs=0.005)
    assert stats.share_with_meta_insight == pytest.approx(0.13, abs=0.005) and stats.meta_insights == 295
    assert stats.flexible_list_median_options == 4 and stats.strict_list_median_elements == 2
    assert stats.process_median_steps == 4
    assert stats.evidence_per_rubric == pytest.approx(10.5, abs=0.01) and stats.distinct_cited_pages == 9400


def test_a_small_synthetic_set_builds_and_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = write_synthetic(tmp_path / "syn", SyntheticParams(questions=40, image_width=96, image_height=128))
    build_dataset(source, tmp_path / "built")
    questions = list(iter_questions(load_gamut(tmp_path / "built", "multimodal"), "multimodal"))
    assert len(questions) == 40 and questions[0].image.size == (96, 128)


@pytest.mark.parametrize("questions", [1, 2, 3])
def test_a_synthetic_set_of_a_few_questions_finishes_and_validates(gamut, tmp_path, questions):
    """`gamut synthetic OUT --questions 1` used to spin for ever: one question pinned at the paper's
    largest rubric (41 checks) could never average down to the mean (issue 23, item 13)."""
    out = tmp_path / "synthetic"
    made = gamut("synthetic", out, "--questions", str(questions), timeout=300)
    assert made.code == 0, made.err
    checked = gamut("validate", out)
    assert checked.code == 0, checked.err
    assert f"{questions} meta-rubric" in checked.out
