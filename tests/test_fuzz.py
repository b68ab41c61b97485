"""Fuzzing the input boundaries (hypothesis): whatever a user feeds a command or the upload form,
the answer is "valid", or exit 2 with one clear line per problem; never a traceback, never an
internal error, never a partial write.

Inputs start from valid documents (rubrics, questions rows, verdicts, uploads) and are then
broken structurally (any JSON value in any field) or textually (truncation, stray bytes, long
integers, deep nesting, duplicate keys, line separators, byte-order marks).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

from conftest import DATA
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_properties import meta_rubrics

from gamut_hf.cli import main
from gamut_hf.leaderboard.submission import SubmissionError, parse_submission

VALID = DATA / "annotations" / "valid_small"


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
# Fragments that have broken JSON readers: long integers, deep nesting, constants Python accepts
# and JSON does not, separators str.splitlines splits at, a BOM, control and invalid bytes.
FRAGMENTS = [
    "9" * 4301,
    "[" * 200,
    "]",
    "{",
    "}",
    ",",
    ":",
    '"',
    "\\",
    "NaN",
    "-Infinity",
    "\u2028",
    "\u2029",
    "\u0085",
    "\ufeff",
    "\x00",
    "\n",
    "\r\n",
    "\t",
    "1e999999",
    "\ud800",
]


@st.composite
def broken_text(draw, text: str) -> bytes:
    """``text`` as bytes, possibly truncated, spliced with fragments, or with a key duplicated."""
    operation = draw(st.sampled_from(["keep", "truncate", "insert", "duplicate", "bom", "bytes"]))
    if operation == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif operation == "insert":
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(FRAGMENTS) | st.text(max_size=4)) + text[at:]
    elif operation == "duplicate" and text.startswith("{") and len(text) > 2:
        first_key = text[1:].split(",")[0]
        text = "{" + first_key + ", " + text[1:]
    data = text.encode("utf-8", errors="surrogatepass")
    if operation == "bom":
        data = b"\xef\xbb\xbf" + data
    if operation == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at:]
    return data


@st.composite
def broken_value(draw, value):
    """``value`` with one field (at any depth) replaced, removed or added."""
    if not isinstance(value, (dict, list)) or not value or draw(st.integers(0, 3)) == 0:
        return draw(JSON_VALUES) if draw(st.booleans()) else value
    value = json.loads(json.dumps(value))
    if isinstance(value, list):
        index = draw(st.integers(0, len(value) - 1))
        value[index] = draw(broken_value(value[index]))
        return value
    key = draw(st.sampled_from(sorted(value)))
    action = draw(st.sampled_from(["replace", "remove", "add", "descend"]))
    if action == "replace":
        value[key] = draw(JSON_VALUES)
    elif action == "remove":
        del value[key]
    elif action == "add":
        value[draw(st.text(max_size=6))] = draw(JSON_VALUES)
    else:
        value[key] = draw(broken_value(value[key]))
    return value


def run_gamut(*args) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in args])
    return code, err.getvalue().splitlines()


def assert_clean(code: int, lines: list[str], *paths: Path) -> None:
    assert code in (0, 2), (code, lines)
    assert not any("internal error" in line or "Traceback" in line for line in lines), lines
    if code == 2:
        assert lines, "exit 2 without a word"
        starts = ("gamut:", "gamut build:", *(str(p) for p in paths))
        assert all(line.startswith(starts) for line in lines), lines


@contextlib.contextmanager
def scratch():
    folder = Path(tempfile.mkdtemp(prefix="gamut-fuzz-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def document(draw, value) -> bytes:
    return draw(broken_text(json.dumps(draw(broken_value(value)), indent=draw(st.sampled_from([None, 2])))))


@fuzz(150)
@given(st.data())
def test_rubric_documents_validate_and_compile_cleanly(data):
    raw = document(data.draw, data.draw(meta_rubrics()))
    with scratch() as folder:
        path = folder / "rubric.json"
        path.write_bytes(raw)
        for command in (["validate", "--release"], ["validate"], ["compile"]):
            assert_clean(*run_gamut(*command, path), path)


@fuzz(100)
@given(st.data())
def test_verdict_files_score_cleanly(data):
    from gamut_hf.core.compiler import compile_rubric
    from gamut_hf.core.rubric import VERDICTS, parse_meta_rubric

    rubric = data.draw(meta_rubrics())
    checks = compile_rubric(parse_meta_rubric(rubric))
    verdicts = {check.id: data.draw(st.sampled_from(VERDICTS)) for check in checks}
    raw = document(data.draw, verdicts)
    with scratch() as folder:
        rubric_path, verdicts_path = folder / "rubric.json", folder / "verdicts.json"
        rubric_path.write_text(json.dumps(rubric))
        verdicts_path.write_bytes(raw)
        assert_clean(*run_gamut("score", rubric_path, verdicts_path), rubric_path, verdicts_path)


def valid_rows() -> list[dict]:
    return [json.loads(line) for line in (VALID / "questions.jsonl").read_text().splitlines()]


@st.composite
def questions_files(draw) -> bytes:
    rows = valid_rows()
    lines = []
    for row in rows[: draw(st.integers(0, len(rows)))]:
        if draw(st.booleans()):
            row = {**row, "meta_rubric": {**draw(meta_rubrics()), "question_id": row["id"]}}
        if draw(st.booleans()):
            row["image"] = draw(
                st.sampled_from(
                    [
                        "images/cat.png",
                        "../cat.png",
                        "/etc/hostname",
                        "images/",
                        "images/missing.png",
                        "images\\cat.png",
                        "questions.jsonl",
                    ]
                )
            )
        lines.append(json.dumps(draw(broken_value(row)), ensure_ascii=draw(st.booleans())))
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))
    return draw(broken_text(text))


@fuzz(80)
@given(questions_files())
def test_questions_files_validate_cleanly(raw):
    with scratch() as folder:
        shutil.copytree(VALID / "images", folder / "images")
        path = folder / "questions.jsonl"
        path.write_bytes(raw)
        assert_clean(*run_gamut("validate", path), path)


@fuzz(25)
@given(questions_files())
def test_build_is_all_or_nothing(raw):
    with scratch() as folder:
        source, out = folder / "src", folder / "out"
        shutil.copytree(VALID / "images", source / "images")
        (source / "questions.jsonl").write_bytes(raw)
        code, lines = run_gamut("build", source, out)
        assert_clean(code, lines, source)
        if code == 2:
            assert not out.exists()
            assert sorted(p.name for p in folder.iterdir()) == ["src"]  # no staging folder left behind
        else:
            assert (out / "README.md").is_file()


IDS = ["q1", "q2", "q3"]
CARD = {
    "name": "acme/Tiny 7B",
    "link": "https://example.org",
    "access": "open",
    "parameters_billions": 7,
    "variant": "multimodal",
}
UPLOAD_PROBLEM = ("line ", "the file ", "model ", "answer every")


@fuzz(200)
@given(st.data())
def test_uploads_are_accepted_or_refused_line_by_line(data):
    records = [{"question_id": q, "response": data.draw(st.text(max_size=20))} for q in IDS]
    lines = [json.dumps(data.draw(broken_value(r)), ensure_ascii=data.draw(st.booleans())) for r in records]
    raw = data.draw(broken_text("\n".join(lines)))
    card = data.draw(broken_value(CARD))
    try:
        submission = parse_submission(
            raw, card if isinstance(card, dict) else {}, IDS, partial=data.draw(st.booleans())
        )
    except SubmissionError as error:
        assert error.problems and all(
            "\n" not in p and p.startswith(UPLOAD_PROBLEM) or "questions have no response" in p for p in error.problems
        ), error.problems
    else:
        assert set(submission.responses) <= set(IDS)


REQUEST_KEY = "acme-tiny-7b-text_only-0123456789"
REQUEST = {
    "key": REQUEST_KEY,
    "model": {**CARD, "variant": "text_only"},
    "status": "PENDING",
    "submitted_by": "erin",
    "submitted_at": "2025-01-01T00:00:00Z",
    "updated_at": "2025-01-01T00:00:00Z",
    "partial": True,
    "questions": 3,
    "reason": None,
    "worker": None,
    "heartbeat": None,
    "attempts": 0,
    "retry_after": None,
    "fault": None,
}


def one_line(text: str) -> bool:
    return len(text.splitlines()) == 1


@fuzz(200)
@given(st.data())
def test_request_files_are_read_or_skipped_with_one_line(data):
    """Whatever a request file holds (a broken request, any JSON, any bytes), the queue reads it as
    a request or skips it, logged in one line; a worker's claim and the Space never see an exception."""
    from gamut_hf.leaderboard.queue import RequestQueue

    raw = data.draw(st.binary(max_size=200)) if data.draw(st.booleans()) else document(data.draw, REQUEST)
    with scratch() as folder:
        (folder / f"{REQUEST_KEY}.json").write_bytes(raw)
        logged: list[str] = []
        queue = RequestQueue(folder, echo=logged.append)
        records = queue.records()
        event("read as a request" if records else "skipped")
        if records:
            [record] = records
            assert record.key == REQUEST_KEY and not queue.unreadable and not logged
            claimed = queue.claim("fuzz-worker")  # a valid request can be claimed and written back
            if claimed is not None:
                assert queue.get(REQUEST_KEY) == claimed
        else:
            [(name, reason)] = queue.unreadable.items()
            assert name == f"{REQUEST_KEY}.json" and one_line(reason) and reason.strip(), reason
            assert logged == [f"skipping {name}: {reason}"]
            assert queue.claim("fuzz-worker") is None and queue.records() == [] and len(logged) == 1


@fuzz(150)
@given(st.data())
def test_stored_uploads_are_read_or_refused_with_one_line(data):
    """A request's stored responses, damaged any way, are read back or refused in one line naming the file."""
    from gamut_hf.leaderboard.queue import RequestFileError, RequestQueue

    records = [{"question_id": q, "response": data.draw(st.text(max_size=20))} for q in IDS]
    lines = [json.dumps(data.draw(broken_value(r)), ensure_ascii=data.draw(st.booleans())) for r in records]
    raw = data.draw(broken_text("\n".join(lines)) | st.binary(max_size=200))
    with scratch() as folder:
        (folder / f"{REQUEST_KEY}.jsonl").write_bytes(raw)
        queue = RequestQueue(folder)
        try:
            responses = queue.responses(REQUEST_KEY, IDS, partial=data.draw(st.booleans()))
        except RequestFileError as error:
            assert str(error).startswith(f"{REQUEST_KEY}.jsonl: ") and one_line(str(error)), str(error)
        else:
            assert responses and set(responses) <= set(IDS)
            assert all(isinstance(text, str) for text in responses.values())
            "".join(responses.values()).encode("utf-8")  # text a file can hold: no lone surrogate
