"""`gamut validate`, `gamut compile` and `gamut score`: the rubric core from the command line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gamut_hf.cli.options import (
    BadInput,
    compile_options,
    compile_params,
    fail_lines,
    load_checks,
    load_meta_rubric,
    print_json,
    print_summary,
    score_params,
)
from gamut_hf.core.compiler import compile_rubric
from gamut_hf.core.rubric import RubricError, parse_meta_rubric
from gamut_hf.core.scorer import ScoringError, score_question
from gamut_hf.files import InputError, read_json

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    pass


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--release",
    is_flag=True,
    help="Also require evidence on every item of a JSON meta-rubric, as in "
    "a released rubric (questions files always need it, as in a build).",
)
def validate(paths: tuple[str, ...], release: bool) -> None:
    """Check meta-rubric files (JSON), questions files (JSONL) or annotation folders.

    A questions file (any .jsonl) or an annotation folder gets exactly the validation of
    `gamut build`: every row, its rubrics and its image (relative to the file's folder).
    Exit 0 when all are valid; otherwise exit 2 with one line per problem naming the
    file (and line), question id, item id, field and reason.
    """
    from gamut_hf.dataset.annotations import (
        QUESTIONS_FILE,
        AnnotationError,
        read_questions_file,
    )

    problems: list[str] = []
    valid = 0
    for path in paths:
        try:
            if path.endswith(".jsonl") or Path(path).is_dir():
                questions_file = Path(path) / QUESTIONS_FILE if Path(path).is_dir() else Path(path)
                if Path(path).is_dir() and not questions_file.is_file():
                    raise InputError(f"{path}: no {QUESTIONS_FILE} in this folder")
                try:
                    valid += len(read_questions_file(questions_file))
                except AnnotationError as error:  # problems start with the file's name, as in a build
                    folder = os.path.dirname(questions_file)
                    problems.extend(f"{folder}/{problem}" if folder else problem for problem in error.problems)
                continue
            parse_meta_rubric(read_json(path), require_evidence=release)
            valid += 1
        except RubricError as error:
            problems.extend(f"{path}: {problem}" for problem in error.problems)
        except InputError as error:
            problems.append(str(error))
    if problems:
        fail_lines(problems)
    click.echo(f"{valid} meta-rubric{'s' if valid != 1 else ''} valid")


@click.command("compile")
@click.argument("path", metavar="PATH")
@click.option(
    "--question-id",
    metavar="ID",
    help="PATH is a dataset (folder, annotation folder, hub id, gamut-sample): compile this question's meta-rubric.",
)
@compile_options
def compile_command(path: str, question_id: str | None, **options: Any) -> None:
    """Compile a meta-rubric file into its binary rubric, printed as a JSON array of checks.

    With --question-id, the meta-rubric of one question of the dataset PATH."""
    rubric = load_meta_rubric(path) if question_id is None else _dataset_meta_rubric(path, question_id)
    checks = compile_rubric(rubric, compile_params(options))
    print_json([check.model_dump() for check in checks])


def _dataset_meta_rubric(source: str, question_id: str) -> Any:
    from gamut_hf.dataset.loader import iter_questions, load_gamut

    for question in iter_questions(load_gamut(source, "text_only"), "text_only"):
        if question.id == question_id:
            return question.typed_meta_rubric("gamut compile")
    raise BadInput(f"{source}: no question {question_id!r}")


@click.command()
@click.argument("rubric", metavar="RUBRIC|RUN_DIR")
@click.argument("verdicts", metavar="[VERDICTS]", required=False)
@click.option(
    "--partial-credit",
    type=float,
    default=0.5,
    show_default=True,
    help="lambda: credit for partially_meets, from 0 to 1.",
)
@click.option(
    "--contradiction-penalty",
    type=float,
    default=-2.0,
    show_default=True,
    help="mu: weight of contradicts, below 0 and at least -1e6.",
)
@click.option(
    "--weights",
    default="0.6,0.3,0.1",
    show_default=True,
    metavar="AC,V,CTX",
    help="Tier weights for answer_critical, valuable and context (non-negative, not all 0).",
)
@click.option(
    "--errors-as-missing",
    is_flag=True,
    help="Run folder: count judge errors and unjudged checks as missing (their number is shown).",
)
@compile_options
def score(
    rubric: str,
    verdicts: str | None,
    partial_credit: float,
    contradiction_penalty: float,
    weights: str,
    errors_as_missing: bool,
    **options: Any,
) -> None:
    """Score one response, or a whole run from its store.

    RUBRIC VERDICTS: RUBRIC is a meta-rubric file or a JSON array of checks; VERDICTS a JSON
    object {check_id: verdict}. Prints {"score", "tiers", "counts"}.

    RUN_DIR: a folder written by `gamut run` (or generate/judge/merge); rewrites its
    results.json and details.parquet from the store alone, recording these parameters in
    results.json (reports and the leaderboard score the run with them).
    """
    params = score_params(partial_credit, contradiction_penalty, weights)
    if verdicts is None:
        if not Path(rubric).is_dir():
            raise BadInput(f"{rubric}: expected a run folder, or a RUBRIC and a VERDICTS file")
        from gamut_hf.evaluation.pipeline import rescore

        print_summary(rescore(rubric, errors_as_missing=errors_as_missing, params=params), rubric)
        return
    checks = load_checks(rubric, compile_params(options))
    given = read_json(verdicts)
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise BadInput(f"{verdicts}: expected a JSON object mapping check ids to verdict strings")
    try:
        result = score_question(checks, given, params)
    except ScoringError as error:
        raise BadInput(f"{verdicts}: {error}") from None
    print_json({"score": result.score, "tiers": result.tiers, "counts": result.counts.model_dump()})


COMMANDS = [validate, compile_command, score]
