"""SPEC section 2, row by row, through the library and through `gamut compile`."""

from __future__ import annotations

import pytest
from conftest import write_json

from gamut_hf.core.compiler import CompileParams, compile_rubric, higher_thresholds
from gamut_hf.core.rubric import demote, parse_meta_rubric

EV = [{"text": "A snippet.", "url": "https://example.org/page", "title": "Page"}]


def rubric(*items):
    return parse_meta_rubric({"question_id": "q", "items": list(items)})


def shape(checks):
    return [(c.id, c.kind, c.tier) for c in checks]


def test_demote_is_one_level_down_with_context_as_floor():
    assert demote("answer_critical") == "valuable"
    assert demote("valuable") == "context"
    assert demote("context") == "context"


def test_knowledge_gives_one_fact_check_at_its_tier():
    checks = compile_rubric(
        rubric(
            {
                "id": "i1",
                "tier": "valuable",
                "type": "knowledge",
                "label": "hardiness",
                "statement": "Dahlia tubers are killed by frost.",
            }
        )
    )
    assert shape(checks) == [("i1.fact", "fact", "valuable")]
    assert "Dahlia tubers are killed by frost." in checks[0].text


def test_strict_list_gives_one_element_check_per_element():
    checks = compile_rubric(
        rubric(
            {
                "id": "i2",
                "tier": "answer_critical",
                "type": "strict_list",
                "label": "needs",
                "elements": ["light", "water", "warmth"],
            }
        )
    )
    assert shape(checks) == [(f"i2.element.{n}", "element", "answer_critical") for n in (1, 2, 3)]
    assert ["light" in checks[0].text, "water" in checks[1].text, "warmth" in checks[2].text] == [True] * 3


def test_small_flexible_list_gives_coverage_then_demoted_option_checks():
    options = ["aphids", "slugs", "earwigs", "thrips"]
    checks = compile_rubric(
        rubric(
            {
                "id": "i3",
                "tier": "answer_critical",
                "type": "flexible_list",
                "label": "pests",
                "options": options,
                "threshold": 2,
            }
        )
    )
    assert shape(checks) == [("i3.coverage", "coverage", "answer_critical")] + [
        (f"i3.option.{n}", "option", "valuable") for n in range(1, 5)
    ]
    coverage = checks[0].text
    assert "at least 2" in coverage and all(f'"{o}"' in coverage for o in options)
    assert [o in c.text for o, c in zip(options, checks[1:], strict=False)] == [True] * 4


def test_pool_of_exactly_six_is_still_small():
    checks = compile_rubric(
        rubric(
            {
                "id": "i1",
                "tier": "context",
                "type": "flexible_list",
                "label": "x",
                "options": list("abcdef"),
                "threshold": 1,
            }
        )
    )
    assert [c.kind for c in checks] == ["coverage"] + ["option"] * 6
    assert {c.tier for c in checks} == {"context"}  # demote(context) = context


@pytest.mark.parametrize(
    ("n", "k", "expected"),
    [
        (10, 3, [6, 8]),  # 3 + ceil(7/3) = 6, 3 + ceil(14/3) = 8
        (7, 2, [4, 6]),  # 2 + ceil(5/3) = 4, 2 + ceil(10/3) = 6
        (7, 6, [7]),  # 6 + ceil(1/3) = 7 twice: kept once
        (8, 8, []),  # no t with k < t <= n
        (9, 1, [4, 7]),
    ],
)
def test_higher_thresholds_of_long_pools(n, k, expected):
    assert higher_thresholds(n, k) == expected


def test_long_flexible_list_gives_coverage_at_higher_thresholds_demoted():
    options = [f"option {n}" for n in range(10)]
    checks = compile_rubric(
        rubric(
            {
                "id": "i4",
                "tier": "valuable",
                "type": "flexible_list",
                "label": "uses",
                "options": options,
                "threshold": 3,
            }
        )
    )
    assert shape(checks) == [
        ("i4.coverage.1", "coverage", "valuable"),
        ("i4.coverage.2", "coverage", "context"),
        ("i4.coverage.3", "coverage", "context"),
    ]
    assert [
        "at least 3 of these 10" in checks[0].text,
        "at least 6 of these 10" in checks[1].text,
        "at least 8 of these 10" in checks[2].text,
    ] == [True] * 3


def test_long_pool_at_full_threshold_has_only_the_baseline():
    checks = compile_rubric(
        rubric(
            {
                "id": "i4",
                "tier": "valuable",
                "type": "flexible_list",
                "label": "uses",
                "options": list("abcdefg"),
                "threshold": 7,
            }
        )
    )
    assert shape(checks) == [("i4.coverage", "coverage", "valuable")]


def test_process_steps_order_and_full_order():
    steps = [
        {"text": "cut stems", "required": True},
        {"text": "wash tubers", "required": False},
        {"text": "dry tubers", "required": True},
        {"text": "store cool", "required": True},
    ]
    checks = compile_rubric(
        rubric(
            {
                "id": "i5",
                "tier": "answer_critical",
                "type": "process",
                "label": "lifting",
                "steps": steps,
                "grade_full_order": True,
            }
        )
    )
    assert shape(checks) == [
        ("i5.step.1", "step", "answer_critical"),
        ("i5.step.2", "step", "valuable"),
        ("i5.step.3", "step", "answer_critical"),
        ("i5.step.4", "step", "answer_critical"),
        ("i5.order", "order", "answer_critical"),
        ("i5.full_order", "full_order", "valuable"),
    ]
    assert '"cut stems" -> "dry tubers" -> "store cool"' in checks[4].text
    assert '"cut stems" -> "wash tubers" -> "dry tubers" -> "store cool"' in checks[5].text


def test_process_without_full_order_flag_or_optional_steps_has_no_full_order_check():
    steps = [{"text": "a", "required": True}, {"text": "b", "required": False}, {"text": "c", "required": True}]
    no_flag = compile_rubric(rubric({"id": "i1", "tier": "valuable", "type": "process", "label": "p", "steps": steps}))
    assert [c.kind for c in no_flag] == ["step", "step", "step", "order"]
    all_required = [{"text": "a", "required": True}, {"text": "b", "required": True}]
    flagged = compile_rubric(
        rubric(
            {
                "id": "i1",
                "tier": "valuable",
                "type": "process",
                "label": "p",
                "steps": all_required,
                "grade_full_order": True,
            }
        )
    )
    assert [c.kind for c in flagged] == ["step", "step", "order"]


def test_process_with_one_required_step_has_no_order_check():
    steps = [{"text": "a", "required": True}, {"text": "b", "required": False}]
    checks = compile_rubric(
        rubric(
            {"id": "i1", "tier": "context", "type": "process", "label": "p", "steps": steps, "grade_full_order": True}
        )
    )
    assert shape(checks) == [
        ("i1.step.1", "step", "context"),
        ("i1.step.2", "step", "context"),
        ("i1.full_order", "full_order", "context"),
    ]


def test_relationship_gives_one_check_naming_all_three_parts():
    checks = compile_rubric(
        rubric(
            {
                "id": "i6",
                "tier": "context",
                "type": "relationship",
                "label": "pollination",
                "subject": "Figs",
                "relation": "are pollinated by",
                "object": "fig wasps",
            }
        )
    )
    assert shape(checks) == [("i6.relationship", "relationship", "context")]
    assert "Figs are pollinated by fig wasps" in checks[0].text


@pytest.mark.parametrize("tier", ["answer_critical", "valuable", "context"])
def test_meta_insight_comes_last_at_the_items_tier(tier):
    checks = compile_rubric(
        rubric(
            {
                "id": "i7",
                "tier": tier,
                "type": "strict_list",
                "label": "signs",
                "elements": ["a", "b"],
                "meta_insight": "Both point to overwatering.",
            }
        )
    )
    assert shape(checks)[-1] == ("i7.insight", "insight", tier)
    assert "Both point to overwatering." in checks[-1].text


def test_checks_follow_item_order():
    checks = compile_rubric(
        rubric(
            {"id": "b", "tier": "context", "type": "knowledge", "label": "x", "statement": "X."},
            {"id": "a", "tier": "context", "type": "knowledge", "label": "y", "statement": "Y."},
        )
    )
    assert [c.item_id for c in checks] == ["b", "a"]


def test_parameters_change_the_small_pool_size_and_thresholds():
    item = {
        "id": "i1",
        "tier": "valuable",
        "type": "flexible_list",
        "label": "x",
        "options": list("abcdefg"),
        "threshold": 1,
    }
    default = compile_rubric(rubric(item))
    assert [c.kind for c in default] == ["coverage"] * 3  # 7 > 6: long pool
    wider = compile_rubric(rubric(item), CompileParams(small_pool_max=7))
    assert [c.kind for c in wider] == ["coverage"] + ["option"] * 7
    one_more = compile_rubric(rubric(item), CompileParams(higher_thresholds=1))
    assert len(one_more) == 2


def test_check_texts_are_self_contained():
    checks = compile_rubric(
        rubric(
            {
                "id": "i1",
                "tier": "valuable",
                "type": "flexible_list",
                "label": "pests",
                "options": ["aphids", "slugs"],
                "threshold": 1,
            }
        )
    )
    for check in checks:
        assert check.text.startswith(("The response", 'For "pests"'))
        assert "pests" in check.text  # names what it is about without the meta-rubric


def test_cli_compile_prints_checks_in_compile_order(tmp_path, gamut):
    path = write_json(
        tmp_path / "r.json",
        {
            "question_id": "q",
            "items": [
                {
                    "id": "i1",
                    "tier": "answer_critical",
                    "type": "knowledge",
                    "label": "x",
                    "statement": "X.",
                    "evidence": EV,
                },
                {"id": "i2", "tier": "valuable", "type": "strict_list", "label": "y", "elements": ["a", "b"]},
            ],
        },
    )
    result = gamut("compile", path)
    assert result.code == 0, result.err
    assert [(c["id"], c["item_id"], c["kind"], c["tier"]) for c in result.json()] == [
        ("i1.fact", "i1", "fact", "answer_critical"),
        ("i2.element.1", "i2", "element", "valuable"),
        ("i2.element.2", "i2", "element", "valuable"),
    ]
    assert all(set(c) == {"id", "item_id", "kind", "tier", "text"} for c in result.json())


def test_cli_compile_takes_the_parameters(tmp_path, gamut):
    path = write_json(
        tmp_path / "r.json",
        {
            "question_id": "q",
            "items": [
                {
                    "id": "i1",
                    "tier": "valuable",
                    "type": "flexible_list",
                    "label": "x",
                    "options": list("abcdefg"),
                    "threshold": 1,
                }
            ],
        },
    )
    assert len(gamut("compile", path).json()) == 3
    assert len(gamut("compile", path, "--small-pool-max", "7").json()) == 8


def test_huge_threshold_parameters_compile_at_once():
    """`--higher-thresholds 1000000000` looped for minutes: the thresholds stop where the pool does."""
    from gamut_hf.core.compiler import CompileParams, higher_thresholds

    huge = CompileParams(higher_thresholds=10**9, threshold_divisions=10**9)
    assert higher_thresholds(12, 3, huge) == list(range(4, 13))
    assert higher_thresholds(12, 3, CompileParams(higher_thresholds=10**9)) == [6, 9, 12]
    assert higher_thresholds(12, 3) == [6, 9]
