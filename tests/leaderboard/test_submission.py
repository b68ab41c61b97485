"""Uploads of responses for the leaderboard: every way a file or a model card can be wrong."""

from __future__ import annotations

import json

import pytest

from gamut_hf.leaderboard.submission import (
    MAX_RESPONSE_CHARS,
    SubmissionError,
    parse_model_info,
    parse_responses,
    parse_submission,
    storage_key,
)

IDS = ["q1", "q2", "q3"]
CARD = {
    "name": "acme/Tiny-VL 7B",
    "link": "https://example.org/tiny",
    "access": "open",
    "parameters_billions": 7,
    "variant": "multimodal",
}


def jsonl(*records) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records).encode()


def problems(data: bytes, **kwargs) -> list[str]:
    with pytest.raises(SubmissionError) as caught:
        parse_responses(data, IDS, **kwargs)
    return caught.value.problems


def test_a_complete_upload_is_accepted():
    data = jsonl(*({"question_id": q, "response": f"answer {q} — ünïcode"} for q in IDS), "")
    submission = parse_submission(data, CARD, IDS)
    assert submission.responses["q2"] == "answer q2 — ünïcode"
    assert submission.model.name == "acme/Tiny-VL 7B" and not submission.partial


def test_every_line_problem_is_reported_with_its_line():
    data = jsonl(
        {"question_id": "q1", "response": "a"},
        "{not json",
        [1, 2],
        {"question_id": "q9", "response": "b"},
        {"question_id": "q1", "response": "c"},
        {"question_id": "q2", "response": 5},
        {"question_id": "q3", "response": "d", "score": 99},
    )
    assert problems(data) == [
        "line 2: not valid JSON (Expecting property name enclosed in double quotes at column 2)",
        "line 3: expected a JSON object, got list",
        "line 4: unknown question_id 'q9'",
        "line 5: question_id 'q1' again (first on line 1)",
        "line 6: response must be a string",
        "line 7: unexpected key 'score' (only question_id and response; scores are computed here)",
    ]


def test_coverage_size_and_encoding():
    assert problems(jsonl({"question_id": "q1", "response": "a"})) == [
        "2 of 3 questions have no response (first: 'q2'); answer every question, or submit as partial"
    ]
    assert parse_responses(jsonl({"question_id": "q1", "response": "a"}), IDS, partial=True) == {"q1": "a"}
    assert problems(b"") == [
        'the file has no responses (one JSON object per line: {"question_id": ..., "response": ...})'
    ]
    assert problems(b"x" * 101, max_bytes=100) == ["the file is 101 bytes; the limit is 100"]
    assert problems(b'{"question_id": "q1", "response": "ok"}\n{"question_id": "q2", "response": "\xff"}') == [
        "line 2: not UTF-8 (byte 36 of the line)"
    ]
    long = jsonl({"question_id": "q1", "response": "x" * (MAX_RESPONSE_CHARS + 1)})
    assert problems(long, partial=True) == [
        f"line 1: response is {MAX_RESPONSE_CHARS + 1:,} characters; the limit is {MAX_RESPONSE_CHARS:,}"
    ]


@pytest.mark.parametrize(
    "name",
    [
        "<img src=x onerror=alert(1)>",
        "../../etc/passwd",
        "a/b/c",
        "/abs",
        "name\nnext",
        "x" * 200,
        "",
        "-lead",
        "a..b",
        "model\x00",
    ],
)
def test_unsafe_model_names_are_refused(name):
    with pytest.raises(SubmissionError) as caught:
        parse_model_info({**CARD, "name": name})
    assert caught.value.problems[0].startswith("model name: ")


def test_card_problems_come_with_file_problems():
    card = {**CARD, "link": "http://example.org", "access": "closed", "parameters_billions": -1, "extra": 1}
    with pytest.raises(SubmissionError) as caught:
        parse_submission(jsonl({"question_id": "zz", "response": "a"}), card, IDS)
    found = caught.value.problems
    assert any(p.startswith("model link:") and "https" in p for p in found)
    assert any(p.startswith("model access:") for p in found)
    assert any(p.startswith("model parameters_billions:") for p in found)
    assert any(p.startswith("model extra:") for p in found)
    assert "line 1: unknown question_id 'zz'" in found


def test_a_card_field_named_with_a_newline_is_named_on_one_line():
    with pytest.raises(SubmissionError) as caught:
        parse_model_info({**CARD, "\n": None})
    assert caught.value.problems == ["model '\\n': Extra inputs are not permitted"]


def test_storage_keys_are_safe_and_distinct():
    a = parse_model_info(CARD)
    b = parse_model_info({**CARD, "name": "acme/tiny-vl-7b"})
    assert storage_key(a) != storage_key(b)
    assert storage_key(a).startswith("acme-tiny-vl-7b-multimodal-")
    assert "/" not in storage_key(a) and ".." not in storage_key(a)


def test_a_lone_surrogate_in_a_response_is_refused_with_its_question_id():
    """Issue 23.16: JSON's `"\\ud800"` is a string Python takes, but no UTF-8 file can hold it."""
    data = jsonl(
        {"question_id": "q2", "response": "half a pair: \ud800"}, {"question_id": "q1", "response": "\U0001f600"}
    )
    assert b"\\ud800" in data and b"\\ud83d\\ude00" in data  # escaped, as json.dumps writes them
    assert problems(data, partial=True) == [
        "line 1: the response to 'q2' holds a lone surrogate ('\\ud800' at character 14), not text; pair it or remove it"
    ]


def test_a_line_without_its_response_or_question_id_says_which_key_is_missing():
    """Issue 24.14: a missing "response" key was reported as "response must be a string"."""
    data = jsonl({"question_id": "q1"}, {"response": "a"}, {"question_id": "q2", "response": None})
    assert problems(data, partial=True) == [
        'line 1: no "response" (each line is {"question_id": ..., "response": ...})',
        'line 2: no "question_id" (each line is {"question_id": ..., "response": ...})',
        "line 3: response must be a string",
    ]


def test_zero_parameters_is_refused_not_taken_as_unknown():
    """Issue 24.14: "Parameters (billions)" 0 was accepted."""
    with pytest.raises(SubmissionError, match="parameters_billions: Input should be greater than 0"):
        parse_submission(
            jsonl({"question_id": "q1", "response": "a"}), {**CARD, "parameters_billions": 0}, IDS, partial=True
        )
