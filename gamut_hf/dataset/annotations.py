"""Annotation folders (SPEC section 5): ``questions.jsonl`` beside the images it names.

``read_annotations`` validates everything before anything is built and collects every
problem it finds (invalid rubric, missing or unreadable image, duplicate id, unknown domain,
an image path that leaves the folder), so an annotator fixes a folder in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gamut_hf.core.compiler import CompileParams, compile_rubric
from gamut_hf.core.rubric import (
    Check,
    MetaRubric,
    NonEmptyText,
    RubricError,
    parse_checks,
    parse_meta_rubric,
)
from gamut_hf.errors import GamutError, field_path, shown
from gamut_hf.files import InputError, check_image, jsonl_lines, parse_json, read_text

QUESTIONS_FILE = "questions.jsonl"

# The paper's ten domains are only partly named; these are the named ones plus CRAG-MM's
# own labels, which the official images come from. A build refuses any other domain name
# unless it is added explicitly (``extra_domains``), so a typo never becomes a new domain.
KNOWN_DOMAINS: tuple[str, ...] = (
    "Animal",
    "Book",
    "Everyday Objects",
    "Food",
    "General Object Recognition",
    "Local",
    "Math & Science",
    "Other",
    "Plants & Gardening",
    "Shopping",
    "Sports & Games",
    "Style & Fashion",
    "Text Understanding",
    "Vehicle",
)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")


class AnnotationRow(BaseModel):
    """One line of questions.jsonl, before its rubrics are validated."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: NonEmptyText
    domain: NonEmptyText
    question: NonEmptyText
    text_question: NonEmptyText
    entity: NonEmptyText
    image: NonEmptyText
    image_source: NonEmptyText
    image_license: NonEmptyText
    meta_rubric: dict[str, Any]
    binary_rubric: list[Any] | None = Field(None, description="human-edited checks replacing the compiled ones")


@dataclass(frozen=True)
class AnnotatedQuestion:
    """A validated question, ready to become a dataset row."""

    id: str
    domain: str
    question: str
    text_question: str
    entity: str
    image_path: Path
    image_source: str
    image_license: str
    meta_rubric: MetaRubric
    checks: list[Check]
    checks_edited: bool


class AnnotationError(GamutError, ValueError):
    """An annotation folder with problems; ``problems`` has one line for each."""

    def __init__(self, source: Path, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem{'s' if len(problems) != 1 else ''}")


def _image_problem(folder: Path, relative: str) -> str | None:
    """Why an image cannot be used, or None. Paths, links included, must stay inside the folder."""
    posix = PurePosixPath(relative)
    if posix.is_absolute() or ".." in posix.parts or "\\" in relative:
        return f"image path {relative!r} must be relative and inside the annotation folder"
    if posix.suffix.lower() not in IMAGE_SUFFIXES:
        return f"image {relative!r} has no image file extension ({', '.join(IMAGE_SUFFIXES)})"
    path = folder / posix
    if not path.exists():
        return f"image {relative!r} not found"
    if not path.resolve().is_relative_to(folder.resolve()):
        return f"image {relative!r} is a link to a file outside the annotation folder"
    try:
        check_image(path)
    except InputError as error:
        return f"image {relative!r} {error.reason}"
    return None


def read_annotations(
    source: str | Path,
    *,
    compile_params: CompileParams = CompileParams(),
    extra_domains: tuple[str, ...] = (),
    require_evidence: bool = True,
) -> list[AnnotatedQuestion]:
    """Validate an annotation folder and return its questions, or raise AnnotationError."""
    folder = Path(source)
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder (expected an annotation folder with {QUESTIONS_FILE})")
    questions_file = folder / QUESTIONS_FILE
    if not questions_file.is_file():
        raise InputError(f"{folder}: no {QUESTIONS_FILE} in this folder")
    return read_questions_file(
        questions_file, compile_params=compile_params, extra_domains=extra_domains, require_evidence=require_evidence
    )


def read_questions_file(
    questions_file: str | Path,
    *,
    compile_params: CompileParams = CompileParams(),
    extra_domains: tuple[str, ...] = (),
    require_evidence: bool = True,
) -> list[AnnotatedQuestion]:
    """Validate a questions JSONL file, its images relative to its folder; the rows of a build.

    ``gamut validate questions.jsonl`` and ``gamut build`` both come here, so they accept and
    refuse the same rows with the same words. The AnnotationError's source is the file's folder
    and each problem starts with the file's name and line.
    """
    questions_file = Path(questions_file)
    folder = questions_file.parent
    domains = set(KNOWN_DOMAINS) | set(extra_domains)
    problems: list[str] = []
    questions: list[AnnotatedQuestion] = []
    first_line: dict[str, int] = {}
    try:
        text = read_text(questions_file)
    except InputError as error:
        raise AnnotationError(folder, [f"{questions_file.name}: {error.reason}"]) from None
    for number, line in jsonl_lines(text):
        where = f"{questions_file.name}:{number}"
        try:
            data = parse_json(line, where)
        except InputError as error:  # report the line and keep going: every problem at once
            problems.append(str(error))
            continue
        question = _check_line(
            folder, where, data, domains, first_line, number, compile_params, require_evidence, problems
        )
        if question is not None:
            questions.append(question)
    if not questions and not problems:
        problems.append(f"{questions_file.name}: no questions")
    if problems:
        raise AnnotationError(folder, problems)
    return questions


def _check_line(
    folder: Path,
    where: str,
    data: Any,
    domains: set[str],
    first_line: dict[str, int],
    number: int,
    compile_params: CompileParams,
    require_evidence: bool,
    problems: list[str],
) -> AnnotatedQuestion | None:
    if not isinstance(data, dict):
        problems.append(f"{where}: expected a JSON object per line")
        return None
    question_id = shown(data["id"]) if isinstance(data.get("id"), str) else "?"
    try:
        row = AnnotationRow.model_validate(data)
    except ValidationError as error:
        for detail in error.errors(include_url=False):
            field = field_path(detail["loc"])
            reason = (
                "required field is missing"
                if detail["type"] == "missing"
                else ("unknown field" if detail["type"] == "extra_forbidden" else detail["msg"])
            )
            problems.append(f"{where}: question {question_id}, field {field}: {reason}")
        return None

    ok = True
    if row.id in first_line:
        problems.append(f"{where}: question {question_id}: duplicate id (first on line {first_line[row.id]})")
        ok = False
    else:
        first_line[row.id] = number
    if row.domain not in domains:
        problems.append(f"{where}: question {question_id}, field domain: unknown domain {row.domain!r}")
        ok = False
    image_problem = _image_problem(folder, row.image)
    if image_problem:
        problems.append(f"{where}: question {question_id}, field image: {image_problem}")
        ok = False
    rubric_id = row.meta_rubric.get("question_id")
    if rubric_id is not None and rubric_id != row.id:
        problems.append(
            f"{where}: question {question_id}, field meta_rubric.question_id: {rubric_id!r} differs from id"
        )
        ok = False
    try:
        rubric = parse_meta_rubric({"question_id": row.id, **row.meta_rubric}, require_evidence=require_evidence)
    except RubricError as error:
        problems.extend(f"{where}: {problem}" for problem in error.problems)
        return None
    compiled = compile_rubric(rubric, compile_params)
    checks = compiled
    if row.binary_rubric is not None:
        try:
            checks = parse_checks(row.binary_rubric, question_id=row.id)
        except RubricError as error:
            problems.extend(f"{where}: {problem} (in binary_rubric)" for problem in error.problems)
            return None
        item_ids = {item.id for item in rubric.items}
        for check in checks:
            if check.item_id not in item_ids:
                problems.append(
                    f"{where}: question {question_id}, field binary_rubric: check {shown(check.id)} names item "
                    f"{check.item_id!r}, which the meta-rubric lacks"
                )
                ok = False
    if not ok:
        return None
    return AnnotatedQuestion(
        id=row.id,
        domain=row.domain,
        question=row.question,
        text_question=row.text_question,
        entity=row.entity,
        image_path=folder / row.image,
        image_source=row.image_source,
        image_license=row.image_license,
        meta_rubric=rubric,
        checks=checks,
        checks_edited=checks != compiled,
    )
