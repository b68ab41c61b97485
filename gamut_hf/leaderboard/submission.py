"""Submitted responses: a JSONL upload and its model card, validated before anything is stored.

An upload is one JSON object per line, ``{"question_id": ..., "response": ...}``. Every problem
is reported at once (up to a limit), each naming its line: a submitter fixes the file in one
go. Nothing here touches the filesystem; the model name never becomes a path (see
:func:`storage_key`). Self-reported scores have no field to go in: extra keys are refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    ValidationError,
    field_validator,
)

from gamut_hf.core.names import ModelAccess, Variant
from gamut_hf.errors import GamutError, field_path
from gamut_hf.files import InputError, jsonl_lines, parse_json

MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # 1,813 answers of ~10 KB each with room to spare
MAX_RESPONSE_CHARS = 50_000
MAX_PROBLEMS = 20

# Letters, digits and . _ + - inside words, one optional "org/" part; no markup, no path tricks.
MODEL_NAME = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9._+ -]{0,62}[A-Za-z0-9.+])?(?:/[A-Za-z0-9](?:[A-Za-z0-9._+ -]{0,62}[A-Za-z0-9.+])?)?$"
)


class SubmissionError(GamutError, ValueError):
    """An upload that cannot be accepted; ``problems`` lists every reason, one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(problems[0] + more)


class ModelInfo(BaseModel):
    """What a submitter says about the model; shown on the leaderboard (escaped)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1, max_length=129)
    link: HttpUrl | None = None
    access: ModelAccess
    parameters_billions: float | None = Field(None, gt=0, le=100_000)
    variant: Variant

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        if not MODEL_NAME.match(name) or ".." in name:
            raise ValueError(
                "use letters, digits, spaces and . _ + - (one 'org/' prefix allowed), "
                "starting and ending with a letter or digit"
            )
        return name

    @field_validator("link")
    @classmethod
    def _https(cls, link: HttpUrl | None) -> HttpUrl | None:
        if link is not None and link.scheme != "https":
            raise ValueError("the link must be an https:// address")
        return link


class Submission(BaseModel):
    model: ModelInfo
    responses: dict[str, str]
    partial: bool


def parse_model_info(fields: dict) -> ModelInfo:
    try:
        return ModelInfo.model_validate(fields)
    except ValidationError as error:
        raise SubmissionError([f"model {field_path(e['loc']) or 'card'}: {e['msg']}" for e in error.errors()]) from None


def parse_responses(
    data: bytes, known_ids: Collection[str] | None, *, partial: bool = False, max_bytes: int = MAX_UPLOAD_BYTES
) -> dict[str, str]:
    """question_id -> response from a JSONL upload; every question unless ``partial``. With
    ``known_ids`` None, any question id is taken (only the file's form is checked)."""
    if len(data) > max_bytes:
        raise SubmissionError([f"the file is {len(data):,} bytes; the limit is {max_bytes:,}"])
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is accepted, as by every other reader
    except UnicodeDecodeError as error:
        row = data[: error.start].count(b"\n") + 1
        column = error.start - data.rfind(b"\n", 0, error.start)
        raise SubmissionError([f"line {row}: not UTF-8 (byte {column} of the line)"]) from None
    known = None if known_ids is None else set(known_ids)
    responses: dict[str, str] = {}
    first_line: dict[str, int] = {}
    problems: list[str] = []
    for number, line in jsonl_lines(text):
        if len(problems) >= MAX_PROBLEMS:
            break
        record, problem = _line_record(line, number, known, first_line)
        if record is None:
            problems.append(str(problem))
            continue
        responses[record["question_id"]] = record["response"]
        first_line[record["question_id"]] = number
    if not responses and not problems:
        problems.append('the file has no responses (one JSON object per line: {"question_id": ..., "response": ...})')
    missing = [qid for qid in known_ids if qid not in responses] if known_ids is not None else []
    if missing and not partial and not problems:
        problems.append(
            f"{len(missing)} of {len(known or ())} questions have no response (first: {missing[0]!r}); "
            "answer every question, or submit as partial"
        )
    if problems:
        raise SubmissionError(problems)
    return responses


def _line_record(
    line: str, number: int, known: set[str] | None, first_line: dict[str, int]
) -> tuple[dict[str, str], None] | tuple[None, str]:
    """One line as its record, or why it cannot be taken."""
    try:
        record = parse_json(line, f"line {number}")
    except InputError as error:  # the same strict JSON as every other input (no duplicate keys)
        return None, str(error)
    if not isinstance(record, dict):
        return None, f"line {number}: expected a JSON object, got {type(record).__name__}"
    extra = sorted(set(record) - {"question_id", "response"})
    if extra:
        return None, (
            f"line {number}: unexpected key {extra[0]!r} (only question_id and response; scores are computed here)"
        )
    absent = [key for key in ("question_id", "response") if key not in record]
    if absent:
        return None, f'line {number}: no "{absent[0]}" (each line is {{"question_id": ..., "response": ...}})'
    qid, response = record.get("question_id"), record.get("response")
    if not isinstance(qid, str):
        return None, f"line {number}: question_id must be a string"
    if not isinstance(response, str):
        return None, f"line {number}: response must be a string"
    if known is not None and qid not in known:
        return None, f"line {number}: unknown question_id {qid[:80]!r}"
    if qid in first_line:
        return None, f"line {number}: question_id {qid!r} again (first on line {first_line[qid]})"
    if len(response) > MAX_RESPONSE_CHARS:
        return None, f"line {number}: response is {len(response):,} characters; the limit is {MAX_RESPONSE_CHARS:,}"
    try:
        response.encode("utf-8")  # JSON's "\\ud800" escapes give lone surrogates, which no file can hold
    except UnicodeEncodeError as error:
        return None, (
            f"line {number}: the response to {qid!r} holds a lone surrogate ({response[error.start]!r} at "
            f"character {error.start + 1}), not text; pair it or remove it"
        )
    return record, None


def parse_submission(
    data: bytes, model: dict, known_ids: Collection[str], *, partial: bool = False, max_bytes: int = MAX_UPLOAD_BYTES
) -> Submission:
    """The whole upload, card and responses; every problem of both in one SubmissionError."""
    problems: list[str] = []
    info = responses = None
    try:
        info = parse_model_info(model)
    except SubmissionError as error:
        problems += error.problems
    try:
        responses = parse_responses(data, known_ids, partial=partial, max_bytes=max_bytes)
    except SubmissionError as error:
        problems += error.problems
    if problems:
        raise SubmissionError(problems)
    return Submission(model=info, responses=responses, partial=partial)


def storage_key(info: ModelInfo) -> str:
    """A file-name-safe key for a model's request and result files: a slug plus a hash of the exact name.

    Names differing only in case or punctuation get different keys; no name can reach outside
    the folder it is joined to.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", info.name.lower()).strip("-")[:60] or "model"
    digest = hashlib.sha256(f"{info.name}\x00{info.variant}".encode()).hexdigest()[:10]
    return f"{slug}-{info.variant}-{digest}"
