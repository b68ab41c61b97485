"""The meta-rubric schema: valid rubrics load; every invalid one is refused with a precise message."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DATA, EXAMPLES, write_json

from gamut_hf.core.rubric import RubricError, parse_checks, parse_meta_rubric
from gamut_hf.files import InputError, read_json

INVALID = DATA / "invalid"
EXPECTED = json.loads((INVALID / "expected.json").read_text())


def test_every_invalid_file_has_an_expectation():
    files = {p.name for p in INVALID.glob("*.json")} - {"expected.json"}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_invalid_rubric_is_rejected_with_its_message(name):
    path = INVALID / name
    with pytest.raises((RubricError, InputError)) as caught:
        parse_meta_rubric(read_json(path))
    assert EXPECTED[name] in str(caught.value)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cli_validate_names_file_and_problem_in_one_line(name, gamut):
    result = gamut("validate", INVALID / name)
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) >= 1 and all(str(INVALID / name) in line for line in lines)
    assert any(EXPECTED[name] in line for line in lines)
    assert "Traceback" not in result.err


def test_all_problems_of_a_rubric_are_reported_together():
    data = {
        "question_id": "q9",
        "items": [
            {"id": "i1", "tier": "nope", "type": "knowledge", "label": "a", "statement": "S."},
            {
                "id": "i2",
                "tier": "context",
                "type": "flexible_list",
                "label": "b",
                "options": ["x", "y"],
                "threshold": 9,
            },
            {"id": "i1", "tier": "context", "type": "knowledge", "label": "c", "statement": ""},
        ],
    }
    with pytest.raises(RubricError) as caught:
        parse_meta_rubric(data)
    where = {(p.item_id, p.field) for p in caught.value.problems}
    assert {("i1", "tier"), ("i2", "threshold"), ("i1", "statement"), ("i1", "id")} <= where
    assert all(p.question_id == "q9" for p in caught.value.problems)


def test_release_rubrics_need_evidence_on_every_item():
    data = {
        "question_id": "q",
        "items": [{"id": "i1", "tier": "context", "type": "knowledge", "label": "a", "statement": "S."}],
    }
    parse_meta_rubric(data)  # a draft may lack evidence
    with pytest.raises(RubricError, match="item i1, field evidence: a released rubric needs at least one"):
        parse_meta_rubric(data, require_evidence=True)


def test_examples_are_valid_release_rubrics_covering_every_item_type():
    paths = sorted(EXAMPLES.glob("*.json"))
    assert len(paths) >= 3
    rubrics = [parse_meta_rubric(read_json(p), require_evidence=True) for p in paths]
    items = [item for r in rubrics for item in r.items]
    assert {item.type for item in items} == {"knowledge", "strict_list", "flexible_list", "process", "relationship"}
    assert any(getattr(item, "meta_insight", None) for item in items)
    flexible = [len(item.options) for item in items if item.type == "flexible_list"]
    assert min(flexible) <= 6 < max(flexible)
    assert any(item.type == "process" and item.has_optional_steps for item in items)


def test_checks_must_be_well_formed_and_unique():
    good = {"id": "i1.fact", "item_id": "i1", "kind": "fact", "tier": "context", "text": "The response says X."}
    assert parse_checks([good])[0].id == "i1.fact"
    with pytest.raises(RubricError, match="duplicate check id 'i1.fact'"):
        parse_checks([good, good])
    with pytest.raises(RubricError, match="check i1.fact: .*not allowed"):
        parse_checks([{**good, "kind": "vibes"}])
    with pytest.raises(RubricError, match="unknown field"):
        parse_checks([{**good, "weight": 2}])


def test_cli_validate_checks_questions_jsonl_as_build_does(tmp_path, gamut):
    # A questions file gets the rows' validation of `gamut build` (see test_input_boundaries).
    source = DATA / "annotations" / "valid_small"
    rows = [json.loads(line) for line in (source / "questions.jsonl").read_text().splitlines()]
    rows[1]["meta_rubric"]["items"][0]["statement"] = ""
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    shutil.copytree(source / "images", tmp_path / "images")
    result = gamut("validate", path)
    assert result.code == 2
    assert result.err.strip() == f"{path}:2: question {rows[1]['id']}, item i1, field statement: must not be empty"
    good = {
        "question_id": "a",
        "items": [{"id": "i1", "tier": "context", "type": "knowledge", "label": "a", "statement": "S."}],
    }
    ok = write_json(tmp_path / "ok.json", good)
    assert gamut("validate", ok).code == 0
