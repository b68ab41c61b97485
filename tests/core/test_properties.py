"""Property-based tests over generated valid meta-rubrics (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gamut_hf.core.compiler import compile_rubric
from gamut_hf.core.rubric import TIERS, VERDICTS, parse_meta_rubric
from gamut_hf.core.scorer import score_question

TIER = st.sampled_from(TIERS)
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=1, max_size=12).map(str.strip).filter(bool)


def distinct_words(min_size, max_size):
    return st.lists(WORD, min_size=min_size, max_size=max_size, unique_by=lambda w: " ".join(w.split()).casefold())


@st.composite
def items(draw, item_id):
    kind = draw(st.sampled_from(["knowledge", "strict_list", "flexible_list", "process", "relationship"]))
    item = {"id": item_id, "tier": draw(TIER), "type": kind, "label": draw(WORD)}
    if kind == "knowledge":
        item["statement"] = draw(WORD)
    elif kind == "strict_list":
        item["elements"] = draw(distinct_words(2, 6))
    elif kind == "flexible_list":
        item["options"] = draw(distinct_words(2, 14))
        item["threshold"] = draw(st.integers(1, len(item["options"])))
    elif kind == "process":
        texts = draw(distinct_words(2, 7))
        required = draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts)).filter(any))
        item["steps"] = [{"text": t, "required": r} for t, r in zip(texts, required, strict=False)]
        item["grade_full_order"] = draw(st.booleans())
    else:
        item.update(subject=draw(WORD), relation=draw(WORD), object=draw(WORD))
    if kind in ("strict_list", "flexible_list", "process") and draw(st.booleans()):
        item["meta_insight"] = draw(WORD)
    return item


@st.composite
def meta_rubrics(draw):
    n = draw(st.integers(1, 6))
    return {"question_id": "q", "items": [draw(items(f"i{k}")) for k in range(1, n + 1)]}


def expected_count(item):
    kind = item["type"]
    extra = 1 if item.get("meta_insight") else 0
    if kind in ("knowledge", "relationship"):
        return 1 + extra
    if kind == "strict_list":
        return len(item["elements"]) + extra
    if kind == "flexible_list":
        n, k = len(item["options"]), item["threshold"]
        if n <= 6:
            return 1 + n + extra
        higher = {k + math.ceil(j * (n - k) / 3) for j in (1, 2)}
        return 1 + len({t for t in higher if k < t <= n}) + extra
    steps = item["steps"]
    required = sum(s["required"] for s in steps)
    optional = len(steps) - required
    return len(steps) + (required >= 2) + (optional > 0 and item["grade_full_order"]) + extra


@settings(max_examples=300, deadline=None)
@given(meta_rubrics())
def test_compilation_is_deterministic_unique_and_follows_the_counts(data):
    rubric = parse_meta_rubric(data)
    first = compile_rubric(rubric)
    again = compile_rubric(parse_meta_rubric(data))
    assert [c.model_dump_json() for c in first] == [c.model_dump_json() for c in again]
    assert len({c.id for c in first}) == len(first)
    for item in data["items"]:
        mine = [c for c in first if c.item_id == item["id"]]
        assert len(mine) >= 1
        assert len(mine) == expected_count(item)
        # demotion never raises a tier: a check is never more important than its item
        assert all(TIERS.index(c.tier) >= TIERS.index(item["tier"]) for c in mine)
        assert all(c.id.startswith(item["id"] + ".") for c in mine)
    assert [c.item_id for c in first] == sorted((c.item_id for c in first), key=lambda i: int(i[1:]))


@st.composite
def judged(draw):
    checks = compile_rubric(parse_meta_rubric(draw(meta_rubrics())))
    verdicts = {c.id: draw(st.sampled_from(VERDICTS)) for c in checks}
    return checks, verdicts


@settings(max_examples=300, deadline=None)
@given(judged(), st.data())
def test_scores_are_bounded_and_monotone(case, data):
    checks, verdicts = case
    base = score_question(checks, verdicts)
    assert -1.0 - 1e-12 <= base.score <= 1.0 + 1e-12
    for tier_score in base.tiers.values():
        assert tier_score is None or -1.0 - 1e-12 <= tier_score <= 1.0 + 1e-12
    changed = data.draw(st.sampled_from([c.id for c in checks]))
    better = score_question(checks, {**verdicts, changed: "meets"})
    assert better.score >= base.score - 1e-12
    as_missing = score_question(checks, {**verdicts, changed: "missing"})
    as_contradicts = score_question(checks, {**verdicts, changed: "contradicts"})
    assert as_contradicts.score < as_missing.score


@settings(max_examples=200, deadline=None)
@given(meta_rubrics())
def test_empty_tiers_renormalise(data):
    checks = compile_rubric(parse_meta_rubric(data))
    assert abs(score_question(checks, {c.id: "meets" for c in checks}).score - 1.0) < 1e-12
    assert abs(score_question(checks, {c.id: "contradicts" for c in checks}).score + 1.0) < 1e-12
