"""The ``gamut`` command line (SPEC section 7).

Every command reads its inputs through :mod:`gamut_hf.files`, so malformed input of any kind
ends in one line on standard error and exit status 2, never in a traceback. Heavy stacks
(datasets, huggingface_hub) are imported inside the commands that need them, so
``gamut validate`` and friends start fast and work with the core install alone.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from pydantic import ValidationError

from gamut_hf.backends import BACKENDS
from gamut_hf.compiler import CompileParams, compile_rubric
from gamut_hf.errors import GamutError, first_problem
from gamut_hf.files import InputError, read_json
from gamut_hf.rubric import Check, MetaRubric, RubricError, parse_checks, parse_meta_rubric
from gamut_hf.run_folder import DETAILS_FILE, RESULTS_FILE
from gamut_hf.scorer import ScoreParams, ScoringError, score_question

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    from gamut_hf.pipeline import ModelSpec, RunConfig, RunResults

EXIT_BAD_INPUT = 2


class BadInput(click.ClickException):
    """An input problem already phrased for the user; exits 2 with that one line."""

    exit_code = EXIT_BAD_INPUT


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _fail_lines(lines: list[str]) -> NoReturn:
    for line in lines:
        click.echo(line, err=True)
    raise click.exceptions.Exit(EXIT_BAD_INPUT)


def compile_options(command: Any) -> Any:
    """The compile-rule constants as options (defaults from SPEC section 2)."""
    defaults = CompileParams()
    for name, field in reversed(list(CompileParams.model_fields.items())):
        command = click.option(
            f"--{name.replace('_', '-')}", name, type=click.IntRange(min=field.metadata[0].ge),
            default=getattr(defaults, name), show_default=True, help=field.description,
        )(command)
    return command


def _compile_params(options: dict[str, Any]) -> CompileParams:
    return CompileParams(**{name: options[name] for name in CompileParams.model_fields})


def _load_meta_rubric(path: str, *, require_evidence: bool = False) -> MetaRubric:
    try:
        return parse_meta_rubric(read_json(path), require_evidence=require_evidence)
    except RubricError as error:
        _fail_lines([f"{path}: {problem}" for problem in error.problems])


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="gamut-hf", prog_name="gamut")
def cli() -> None:
    """GAMUT: factual completeness of long answers, graded check by check."""


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--release", is_flag=True, help="Also require evidence on every item of a JSON meta-rubric, as in "
              "a released rubric (questions files always need it, as in a build).")
def validate(paths: tuple[str, ...], release: bool) -> None:
    """Check meta-rubric files (JSON), questions files (JSONL) or annotation folders.

    A questions file (any .jsonl) or an annotation folder gets exactly the validation of
    `gamut build`: every row, its rubrics and its image (relative to the file's folder).
    Exit 0 when all are valid; otherwise exit 2 with one line per problem naming the
    file (and line), question id, item id, field and reason.
    """
    from gamut_hf.annotations import QUESTIONS_FILE, AnnotationError, read_questions_file

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
        _fail_lines(problems)
    click.echo(f"{valid} meta-rubric{'s' if valid != 1 else ''} valid")


@cli.command("compile")
@click.argument("path", metavar="PATH")
@compile_options
def compile_command(path: str, **options: Any) -> None:
    """Compile a meta-rubric file into its binary rubric, printed as a JSON array of checks."""
    rubric = _load_meta_rubric(path)
    checks = compile_rubric(rubric, _compile_params(options))
    _print_json([check.model_dump() for check in checks])


SCORE_FLAGS = {"partial_credit": "--partial-credit", "contradiction_penalty": "--contradiction-penalty",
               "tier_weights": "--weights"}


def _score_params(partial_credit: float, contradiction_penalty: float, weights: str) -> ScoreParams:
    try:
        ac, v, ctx = (float(w) for w in weights.split(","))
    except ValueError:
        raise BadInput(f"--weights: expected three numbers like 0.6,0.3,0.1, got {weights!r}") from None
    try:
        return ScoreParams(partial_credit=partial_credit, contradiction_penalty=contradiction_penalty,
                           tier_weights={"answer_critical": ac, "valuable": v, "context": ctx})
    except ValidationError as error:
        where, message = first_problem(error)
        field, _, tier = where.partition(".")
        flag = SCORE_FLAGS.get(field, "--weights")  # the whole-object check is about the weights
        raise BadInput(f"{flag}{f' ({tier})' if tier else ''}: {message}") from None


def _load_checks(path: str, params: CompileParams) -> list[Check]:
    data = read_json(path)
    try:
        if isinstance(data, list):
            return parse_checks(data)
        return compile_rubric(parse_meta_rubric(data), params)
    except RubricError as error:
        _fail_lines([f"{path}: {problem}" for problem in error.problems])


@cli.command()
@click.argument("rubric", metavar="RUBRIC|RUN_DIR")
@click.argument("verdicts", metavar="[VERDICTS]", required=False)
@click.option("--partial-credit", type=float, default=0.5, show_default=True,
              help="lambda: credit for partially_meets, from 0 to 1.")
@click.option("--contradiction-penalty", type=float, default=-2.0, show_default=True,
              help="mu: weight of contradicts, below 0.")
@click.option(
    "--weights", default="0.6,0.3,0.1", show_default=True, metavar="AC,V,CTX",
    help="Tier weights for answer_critical, valuable and context (non-negative, not all 0).",
)
@click.option("--errors-as-missing", is_flag=True,
              help="Run folder: count judge errors and unjudged checks as missing (their number is shown).")
@compile_options
def score(rubric: str, verdicts: str | None, partial_credit: float, contradiction_penalty: float,
          weights: str, errors_as_missing: bool, **options: Any) -> None:
    """Score one response, or a whole run from its store.

    RUBRIC VERDICTS: RUBRIC is a meta-rubric file or a JSON array of checks; VERDICTS a JSON
    object {check_id: verdict}. Prints {"score", "tiers", "counts"}.

    RUN_DIR: a folder written by `gamut run` (or generate/judge/merge); rewrites its
    results.json and details.parquet from the store alone, recording these parameters in
    results.json (reports and the leaderboard score the run with them).
    """
    params = _score_params(partial_credit, contradiction_penalty, weights)
    if verdicts is None:
        if not Path(rubric).is_dir():
            raise BadInput(f"{rubric}: expected a run folder, or a RUBRIC and a VERDICTS file")
        from gamut_hf.pipeline import score as score_store
        from gamut_hf.store import RunStore, has_store

        if not has_store(rubric):
            raise BadInput(f"{rubric}: no run store here (store.sqlite)")
        with RunStore(rubric) as store:
            results = score_store(store, rubric, errors_as_missing=errors_as_missing, params=params)
        _print_summary(results, rubric)
        return
    checks = _load_checks(rubric, _compile_params(options))
    given = read_json(verdicts)
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise BadInput(f"{verdicts}: expected a JSON object mapping check ids to verdict strings")
    try:
        result = score_question(checks, given, params)
    except ScoringError as error:
        raise BadInput(f"{verdicts}: {error}") from None
    _print_json({"score": result.score, "tiers": result.tiers, "counts": result.counts.model_dump()})


@cli.command()
@click.argument("source", metavar="SOURCE")
@click.argument("out", metavar="OUT")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it already holds files.")
@click.option("--repo-id", default=None, help="Hub id the card's examples should name (e.g. you/gamut).")
@click.option("--pretty-name", default="GAMUT", show_default=True)
@click.option("--license", "license_", default="cc-by-nc-4.0", show_default=True, help="Licence in the card.")
@click.option("--extra-domain", "extra_domains", multiple=True, help="Accept a domain beyond the known list.")
@compile_options
def build(source: str, out: str, overwrite: bool, repo_id: str | None, pretty_name: str, license_: str,
          extra_domains: tuple[str, ...], **options: Any) -> None:
    """Build an annotation folder (questions.jsonl + images) into a hub-layout dataset folder.

    Everything is validated first; any problem is reported (all of them, one per line), the
    exit status is 2 and nothing is written.
    """
    from gamut_hf.annotations import AnnotationError
    from gamut_hf.build import build_dataset

    try:
        questions = build_dataset(
            source, out, compile_params=_compile_params(options), overwrite=overwrite, pretty_name=pretty_name,
            license=license_, repo_id=repo_id, extra_domains=extra_domains)
    except AnnotationError as error:
        _fail_lines([f"{error.source}/{problem}" for problem in error.problems]
                    + [f"gamut build: {len(error.problems)} problem(s); nothing written"])
    checks = sum(len(q.checks) for q in questions)
    click.echo(f"built {out}: {len(questions)} questions, {checks} checks, configurations multimodal and text_only")


@cli.command()
@click.argument("dataset", metavar="DATASET", default="gamut-sample")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--revision", default=None, help="Hub revision (for a hub id).")
def stats(dataset: str, as_json: bool, revision: str | None) -> None:
    """Rubric statistics (the paper's table) of a built folder, annotation folder, hub id or the sample."""
    from gamut_hf.loader import iter_questions, load_gamut
    from gamut_hf.stats import RubricRecord, rubric_stats, stats_markdown

    data = load_gamut(dataset, "text_only", revision=revision)  # no images needed
    result = rubric_stats(
        RubricRecord(q.domain, q.meta_rubric, q.checks) for q in iter_questions(data, "text_only"))
    click.echo(result.model_dump_json(indent=2) if as_json else stats_markdown(result).rstrip())


@cli.command()
@click.argument("folder", metavar="OUT")
@click.argument("repo_id", metavar="REPO_ID")
@click.option("--private", is_flag=True, help="Create the repository as private.")
@click.option("--revision", default=None, help="Branch to push to (default: main).")
def push(folder: str, repo_id: str, private: bool, revision: str | None) -> None:
    """Upload a folder made by `gamut build` to the hub as dataset REPO_ID (token from HF_TOKEN or login)."""
    from gamut_hf.hub import PushError, push_dataset

    try:
        url = push_dataset(folder, repo_id, private=private, revision=revision)
    except PushError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"pushed {folder} to {repo_id}: {url}")


@cli.command()
@click.argument("out", metavar="OUT")
@click.option("--questions", type=click.IntRange(min=1), default=1813, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def synthetic(out: str, questions: int, seed: int) -> None:
    """Write a synthetic annotation folder with the paper's rubric statistics (for scale work)."""
    from gamut_hf.synthetic import SyntheticParams, write_synthetic

    params = SyntheticParams(questions=questions, seed=seed)
    write_synthetic(out, params)
    click.echo(f"wrote {out}: {questions} synthetic questions with {params.image_width}x{params.image_height} JPEGs")


# -- the evaluation pipeline ------------------------------------------------------------------


EMBEDDED_MAX_TOKENS = 256


def _key_values(pairs: tuple[str, ...], flag: str) -> dict[str, Any]:
    """KEY=VALUE options; a VALUE that parses as JSON (numbers, true, lists) is taken as such."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise BadInput(f"{flag}: expected KEY=VALUE, got {pair!r}")
        try:
            out[name.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[name.replace("-", "_")] = value
    return out


def _shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    index, sep, count = value.partition("/")
    if not (sep and index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise BadInput(f"--shard: expected i/n with 0 <= i < n, got {value!r}")
    return int(index), int(count)


def pipeline_options(command: Any) -> Any:
    """The options shared by run, generate and judge; what is not given comes from the run in --out."""
    options = [
        click.option("--out", required=True, metavar="DIR", help="Run folder: store, results.json, details.parquet."),
        click.option("--dataset", metavar="SOURCE", help="Sample name, annotation or built folder, or hub id "
                     "[default: gamut-sample]."),
        click.option("--revision", help="Hub revision of the dataset."),
        click.option("--images", metavar="WHERE", help="Where a dataset's referenced images are (the official "
                     "release points into CRAG-MM): crag-mm, crag-mm=PATH or a folder of <question id>.jpg."),
        click.option("--variant", type=click.Choice(["multimodal", "text_only"]),
                     help="[default: text_only for the embedded default model, else multimodal]"),
        click.option("--model", metavar="M", help="Candidate model: a packaged name, folder or hub id "
                     "[default: smollm2-135m]."),
        click.option("--backend", type=click.Choice(sorted(BACKENDS)), help="Candidate backend [default: transformers]."),
        click.option("--model-option", "model_options", multiple=True, metavar="KEY=VALUE",
                     help="Candidate backend option (e.g. tensor_parallel_size=2, max_pixels=1003520)."),
        click.option("--base-url", "base_urls", multiple=True, metavar="URL",
                     help="Candidate endpoint(s) for the openai backend; repeat for several."),
        click.option("--judge", metavar="J", help="Judge model [default: smollm2-135m]."),
        click.option("--judge-backend", type=click.Choice(sorted(BACKENDS)), help="Judge backend [default: transformers]."),
        click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE", help="Judge backend option."),
        click.option("--judge-base-url", "judge_base_urls", multiple=True, metavar="URL",
                     help="Judge endpoint(s) for the openai backend; repeat for several."),
        click.option("--concurrency", type=click.IntRange(min=1), help="Requests in flight per openai backend."),
        click.option("--batch-size", type=click.IntRange(min=1), help="Requests per backend call and per commit."),
        click.option("--judge-batch-size", type=click.IntRange(min=1), help="Checks per judge call (whole questions)."),
        click.option("--limit", type=click.IntRange(min=0), help="Only the first N questions (0: no limit)."),
        click.option("--question-id", "question_ids", multiple=True, metavar="ID", help="Only these questions."),
        click.option("--all", "all_questions", is_flag=True,
                     help="Every question: clears a --limit, --question-id or --shard the run in DIR has."),
        click.option("--shard", metavar="i/n", help="Only questions i, i+n, i+2n, ... (merge shards with `gamut merge`)."),
        click.option("--max-tokens", type=click.IntRange(min=1), help=f"Candidate answer length cap [default: 1024; {EMBEDDED_MAX_TOKENS} for the embedded default]."),
        click.option("--rationale/--no-rationale", default=None, help="Judge writes a short rationale first."),
        click.option("--judge-retries", type=click.IntRange(min=0), help="Retries of an unreadable verdict [default: 2]."),
        click.option("--retry-errors", is_flag=True, default=None, help="Judge again the checks stored as error."),
        click.option("--errors-as-missing", is_flag=True, default=None,
                     help="Score judge errors and unjudged checks as missing (their number is shown)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _model_spec(base: ModelSpec, name: str | None, backend: str | None, pairs: tuple[str, ...],
                base_urls: tuple[str, ...], concurrency: int | None, flag: str) -> ModelSpec:
    from gamut_hf.pipeline import ModelSpec

    extra = _key_values(pairs, flag)
    if base_urls:
        extra["base_url" if len(base_urls) == 1 else "base_urls"] = base_urls[0] if len(base_urls) == 1 \
            else list(base_urls)
    if name is None and backend is None and not extra:
        spec = base
    else:
        spec = ModelSpec(name=name or base.name, backend=backend or base.backend,
                         options=extra if (name or backend) else {**base.options, **extra})
    if concurrency is not None and spec.backend == "openai":
        spec = ModelSpec(name=spec.name, backend=spec.backend, options={**spec.options, "concurrency": concurrency})
    return spec


def _stored_config(out: str) -> RunConfig | None:
    """The settings of the run already in ``out``, if any."""
    from gamut_hf.pipeline import stored_config
    from gamut_hf.store import RunStore, has_store

    if not has_store(out):
        return None
    with RunStore(out) as store:
        return stored_config(store)


def _run_config(options: dict[str, Any], stored: RunConfig | None) -> RunConfig:
    """The run's settings: the options given, the rest from ``stored`` (the run in --out) or the defaults."""
    from gamut_hf.models import DEFAULT_MODEL
    from gamut_hf.pipeline import RunConfig

    selection = [flag for flag, name in (("--limit", "limit"), ("--question-id", "question_ids"), ("--shard", "shard"))
                 if options[name]]
    if options["all_questions"] and selection:
        raise BadInput(f"--all: every question, so not with {selection[0]}")
    base = stored or RunConfig()
    stored_variant = stored.variant if stored else None
    candidate = _model_spec(base.candidate, options["model"], options["backend"], options["model_options"],
                            options["base_urls"], options["concurrency"], "--model-option")
    judge = _model_spec(base.judge, options["judge"], options["judge_backend"], options["judge_options"],
                        options["judge_base_urls"], options["concurrency"], "--judge-option")
    variant = options["variant"] or stored_variant or ("text_only" if candidate.name == DEFAULT_MODEL else "multimodal")
    fields = {name: options[name] for name in ("dataset", "revision", "images", "limit", "max_tokens", "rationale",
                                                "judge_retries", "batch_size", "judge_batch_size")
              if options[name] is not None}
    # These two act on this invocation only; they are never inherited from the stored run.
    fields.update(retry_errors=bool(options["retry_errors"]), errors_as_missing=bool(options["errors_as_missing"]))
    if options["max_tokens"] is None and candidate.name == DEFAULT_MODEL and base == RunConfig():
        # A 135M model's answers past this are repetition; it keeps the demo to minutes on a CPU.
        fields["max_tokens"] = EMBEDDED_MAX_TOKENS
    if options["question_ids"]:
        fields["question_ids"] = options["question_ids"]
    if options["shard"] is not None:
        fields["shard"] = _shard(options["shard"])
    if options["limit"] == 0 or options["all_questions"]:
        fields["limit"] = None
    if options["all_questions"]:
        fields.update(question_ids=(), shard=None)
    return base.model_copy(update={"candidate": candidate, "judge": judge, "variant": variant, **fields})


# How an inherited setting is named on the command line.
RUN_FLAGS = {"dataset": "--dataset", "revision": "--revision", "variant": "--variant", "candidate": "--model",
             "judge": "--judge", "limit": "--limit", "question_ids": "--question-id", "images": "--images",
             "shard": "--shard", "max_tokens": "--max-tokens", "rationale": "--rationale",
             "judge_retries": "--judge-retries", "batch_size": "--batch-size", "judge_batch_size": "--judge-batch-size"}


def _inherited(options: dict[str, Any], config: RunConfig) -> dict[str, str]:
    """The settings taken from the stored run: where ``config`` differs from what the same
    options would give in an empty folder, each (by field) as the option that would set it."""
    fresh = _run_config(options, None)
    named = {}
    for name, flag in RUN_FLAGS.items():
        value = getattr(config, name)
        if value == getattr(fresh, name):
            continue
        if name in ("candidate", "judge"):
            keys = f"; options {', '.join(sorted(value.options))}" if value.options else ""  # values may be secrets
            named[name] = f"{flag} {value.name} ({value.backend}{keys})"
        elif name == "question_ids":
            named[name] = f"{flag} " + " ".join(value[:5]) + (f" and {len(value) - 5} more" if len(value) > 5 else "")
        elif name == "shard":
            named[name] = f"{flag} {value[0]}/{value[1]}"
        elif name == "rationale":
            named[name] = "--rationale" if value else "--no-rationale"
        else:
            named[name] = f"{flag} {'(none)' if value is None else value}"
    return named


def _print_summary(results: RunResults, out: str) -> None:
    score = results.score
    tiers = ", ".join(f"{t} {'-' if v is None else f'{v:.1f}'}" for t, v in score.tiers.items())
    shares = ", ".join(f"{k} {100 * v:.1f}%" for k, v in score.verdict_shares.items())
    if score.gamut is not None:
        click.echo(f"Gamut score {score.gamut:.1f} ({tiers})")
    else:
        click.echo(f"no Gamut score: {results.judge_errors} judge errors and {results.unfinished_checks} "
                   "unjudged checks; rerun to finish, or --errors-as-missing to count them as missing")
    if score.errors_counted_as_missing:
        click.echo(f"  {score.errors} errors and unjudged checks counted as missing")
    click.echo(f"  {score.questions} questions, {score.checks} checks: {shares}")
    if results.score_params != ScoreParams():
        params = results.score_params
        weights = ",".join(f"{w:g}" for w in params.tier_weights.values())
        click.echo(f"  scored with --partial-credit {params.partial_credit:g} --contradiction-penalty "
                   f"{params.contradiction_penalty:g} --weights {weights} (recorded in {RESULTS_FILE})")
    click.echo(f"  wrote {Path(out) / RESULTS_FILE} and {Path(out) / DETAILS_FILE}")


def _pipeline(stages: tuple[str, ...], options: dict[str, Any]) -> None:
    from gamut_hf.pipeline import run as run_pipeline

    stored = _stored_config(options["out"])
    config = _run_config(options, stored)
    if stored is not None and (inherited := _inherited(options, config)):
        # Said every time: a selection taken silently from an earlier run is easy to miss.
        hint = "; --all for every question" if inherited.keys() & {"limit", "question_ids", "shard"} else ""
        click.echo(f"from the run in {options['out']}: {', '.join(inherited.values())} "
                   f"(give an option to change it{hint})", err=True)
    click.echo(f"{' + '.join(stages)}: {config.candidate.name} ({config.candidate.backend}) judged by "
               f"{config.judge.name} ({config.judge.backend}) on {config.dataset}, {config.variant}", err=True)
    results = run_pipeline(config, options["out"], stages=stages, echo=lambda line: click.echo(line, err=True))
    if results is not None:
        _print_summary(results, options["out"])


@cli.command("run")
@pipeline_options
def run_command(**options: Any) -> None:
    """Generate, judge and score: DIR receives results.json and details.parquet.

    With no model or judge it runs the embedded default: the sample, text_only, SmolLM2-135M
    on the CPU as candidate and judge. Stopped at any point (Ctrl-C, a crash, SIGKILL) and
    started again with the same command, it redoes only unfinished work. Options not given
    are taken from the run already in DIR, if any.
    """
    _pipeline(("generate", "judge", "score"), options)


@cli.command()
@pipeline_options
def generate(**options: Any) -> None:
    """Only the candidate's answers, into the run store in DIR."""
    _pipeline(("generate",), options)


@cli.command()
@pipeline_options
def judge(**options: Any) -> None:
    """Judge the stored answers (a new --judge reuses them), then score."""
    _pipeline(("judge", "score"), options)


@cli.command("judge-audit")
@click.option("--judge", metavar="J", help="Judge model [default: smollm2-135m].")
@click.option("--judge-backend", type=click.Choice(sorted(BACKENDS)), help="Judge backend [default: transformers].")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE", help="Judge backend option.")
@click.option("--judge-base-url", "judge_base_urls", multiple=True, metavar="URL",
              help="Judge endpoint(s) for the openai backend; repeat for several.")
@click.option("--concurrency", type=click.IntRange(min=1), help="Requests in flight per openai backend.")
@click.option("--judge-batch-size", type=click.IntRange(min=1), help="Checks per judge call (whole responses).")
@click.option("--out", metavar="DIR", help="Where the store, audit.json, audit.md and the figure go; put it in a "
              "results folder to show the audit beside the judge's scores [default: judge-audit-<judge>-<backend>].")
@click.option("--labels", metavar="FILE", help="Human verdicts in the audit set's format, measured instead of the "
              "built-in gold.")
@click.option("--limit", type=click.IntRange(min=1), help="Only the responses of the first N questions.")
@click.option("--rationale/--no-rationale", default=False, show_default=True, help="Judge writes a short rationale first.")
@click.option("--judge-retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="Retries of an unreadable verdict.")
@click.option("--retry-errors", is_flag=True, help="Judge again the checks stored as error.")
def judge_audit(judge: str | None, judge_backend: str | None, judge_options: tuple[str, ...],
                judge_base_urls: tuple[str, ...], concurrency: int | None, judge_batch_size: int | None,
                out: str | None, labels: str | None, limit: int | None, rationale: bool, judge_retries: int,
                retry_errors: bool) -> None:
    """Measure a judge against responses whose right verdicts are known.

    Judges every check of the audit set shipped with the package (templated and prose
    responses to the sample's questions, and injected twins of them) through the same judge
    stage and store as `gamut judge`, so a stopped audit resumes; then writes DIR/audit.json,
    audit.md and audit-confusion.png: accuracy, Cohen's kappa, the confusion matrix,
    per-verdict precision and recall, the error of question and Gamut scores, and the
    injection flip rate.
    """
    from gamut_hf.audit import default_audit_folder, run_audit, summary_lines
    from gamut_hf.pipeline import ModelSpec

    spec = _model_spec(ModelSpec(), judge, judge_backend, judge_options, judge_base_urls, concurrency,
                       "--judge-option")
    folder = Path(out) if out else default_audit_folder(spec)
    click.echo(f"judge audit: {spec.name} ({spec.backend}) into {folder}", err=True)
    results = run_audit(spec, folder, labels=labels, rationale=rationale, judge_retries=judge_retries,
                        judge_batch_size=judge_batch_size, limit=limit, retry_errors=retry_errors,
                        echo=lambda line: click.echo(line, err=True))
    for line in summary_lines(results):
        click.echo(line)
    click.echo(f"  wrote {folder / 'audit.json'}, {folder / 'audit.md'} and {folder / 'audit-confusion.png'}")


@cli.command()
@click.argument("out", metavar="OUT")
@click.argument("sources", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option("--errors-as-missing", is_flag=True, help="Score errors and unjudged checks as missing.")
def merge(out: str, sources: tuple[str, ...], errors_as_missing: bool) -> None:
    """Join the stores of shard runs (`--shard i/n`) into OUT and score the whole run.

    All or nothing per source: an entry that two stores hold with different results is an
    error, never a silent overwrite.
    """
    from gamut_hf.pipeline import RunConfig, score as score_store, stored_config
    from gamut_hf.store import RunStore, StoreConflict, has_store

    configs = []
    with RunStore(out) as target:
        for source in sources:
            if not has_store(source):
                raise BadInput(f"{source}: no run store here (store.sqlite)")
            with RunStore(source) as other:
                config = stored_config(other)
                if config is None:
                    raise BadInput(f"{source}: the store records no run")
                try:
                    added = target.merge_from(other)
                except StoreConflict as error:
                    raise BadInput(str(error)) from None
                configs.append(config)
                fingerprint = other.info().get("dataset_fingerprint")
            click.echo(f"merged {source}: " + ", ".join(f"{n} {t}" for t, n in added.items()), err=True)
        same = {c.model_dump_json(include=RunConfig.IDENTITY) for c in configs}
        if len(same) > 1:
            raise BadInput("the runs differ in more than their shard (model, judge, dataset or settings); "
                           "merged rows are kept, but they do not make one run")
        config = configs[0].model_copy(update={"shard": None, "errors_as_missing": errors_as_missing})
        ids = [q.question_id for q in target.questions(config.variant)]
        target.set_info(config=config.model_dump(mode="json"), question_ids=ids, dataset_fingerprint=fingerprint)
        results = score_store(target, out, errors_as_missing=errors_as_missing)
    _print_summary(results, out)


# -- reports -----------------------------------------------------------------------------------


@cli.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option("--out", required=True, metavar="REPORT_DIR", help="Where report.md, report.html, figures/ and tables/ go.")
@click.option("--resamples", type=click.IntRange(min=1000), default=2000, show_default=True,
              help="Bootstrap resamples of the questions for every interval and paired test.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many of the hardest questions to list.")
def report(runs: tuple[str, ...], out: str, resamples: int, seed: int, top: int) -> None:
    """Tables and figures of the paper for RUN_DIR... (run folders, or folders of run folders).

    Writes REPORT_DIR/report.md, a self-contained report.html, figures/*.png and tables/*.csv;
    sections that do not apply to these runs are named with the reason.
    """
    from gamut_hf.analysis import Bootstrap
    from gamut_hf.report import build_report, find_run_folders, write_report

    built = build_report(find_run_folders(runs), Bootstrap(resamples=resamples, seed=seed), top=top)
    folder = write_report(built, out)
    scored = sum(run.scored for run in built.runs)
    click.echo(f"wrote {folder / 'report.md'} and {folder / 'report.html'}: {scored} of {len(built.runs)} runs scored; "
               f"sections: {', '.join(s.title for s in built.included)}")
    for section in built.sections:
        if section.omitted:
            click.echo(f"left out {section.title}: {section.omitted}")
    for run in built.runs:
        if not run.scored:
            click.echo(f"excluded {run.folder}: {run.excluded}", err=True)


@cli.command()
@click.argument("out", metavar="OUT")
@click.option("--questions", type=click.IntRange(min=10), default=1813, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--text-only/--no-text-only", default=True, show_default=True,
              help="Also simulate the text-only variant (graded by the first judge).")
def simulate(out: str, questions: int, seed: int, text_only: bool) -> None:
    """Simulated runs of the paper's 14 models (Table 1) under two judges, over synthetic questions.

    For validating reports at full scale: `gamut report OUT --out REPORT_DIR` must give back
    the paper's verdict shares and order.
    """
    from gamut_hf.simulate import SimulationParams, simulate_runs

    defaults = SimulationParams()
    params = SimulationParams(questions=questions, seed=seed,
                              text_only_easing=defaults.text_only_easing if text_only else None)
    folders = simulate_runs(out, params)
    click.echo(f"wrote {len(folders)} simulated runs under {out}")


# -- the leaderboard Space --------------------------------------------------------------------


@cli.command()
@click.option("--requests", "requests_dir", required=True, metavar="DIR", help="Request files (the Space's queue).")
@click.option("--results", "results_dir", required=True, metavar="DIR", help="Result folders, one per submission.")
@click.option("--dataset", default="gamut-sample", show_default=True, metavar="SOURCE", help="The questions judged.")
@click.option("--judge", metavar="J", help="Judge model [default: smollm2-135m].")
@click.option("--judge-backend", type=click.Choice(sorted(BACKENDS)), help="Judge backend [default: transformers].")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE", help="Judge backend option.")
@click.option("--judge-base-url", "judge_base_urls", multiple=True, metavar="URL", help="Judge endpoint(s) (openai).")
@click.option("--requests-repo", metavar="REPO_ID", help="Hub dataset mirrored in --requests (pulled, pushed).")
@click.option("--results-repo", metavar="REPO_ID", help="Hub dataset mirrored in --results (pushed).")
@click.option("--once", is_flag=True, help="Stop when the queue is empty instead of waiting for more.")
@click.option("--poll", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds between looks.")
@click.option("--lease", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Seconds a claim lasts without a heartbeat; then another worker may take the request over.")
def worker(requests_dir: str, results_dir: str, dataset: str, judge: str | None, judge_backend: str | None,
           judge_options: tuple[str, ...], judge_base_urls: tuple[str, ...], requests_repo: str | None,
           results_repo: str | None, once: bool, poll: float, lease: float) -> None:
    """Judge queued submissions (PENDING -> RUNNING -> FINISHED or FAILED) into result folders."""
    from datetime import timedelta

    from gamut_hf.hub import HubFolder
    from gamut_hf.pipeline import RunConfig
    from gamut_hf.request_files import RequestQueue
    from gamut_hf.worker import serve

    judge_spec = _model_spec(RunConfig().judge, judge, judge_backend, judge_options, judge_base_urls, None,
                             "--judge-option")
    queue = RequestQueue(requests_dir)
    handled = serve(queue, Path(results_dir), Path(requests_dir) / ".work", dataset, judge_spec, once=once, poll=poll,
                    echo=lambda line: click.echo(line, err=True),
                    requests_hub=HubFolder(requests_repo, requests_dir) if requests_repo else None,
                    results_hub=HubFolder(results_repo, results_dir) if results_repo else None,
                    lease=timedelta(seconds=lease))
    click.echo(f"handled {handled} submission(s)")


@cli.command()
@click.option("--results", "results_dir", default="runs", show_default=True, metavar="DIR",
              help="Folder of result folders (each a `gamut run` output, optionally with model.json).")
@click.option("--requests", "requests_dir", default=None, metavar="DIR",
              help="Request files for submissions [default: RESULTS/../requests].")
@click.option("--dataset", default="gamut-sample", show_default=True, metavar="SOURCE",
              help="Where question texts, images and meta-rubrics come from ('' for none).")
@click.option("--primary-judge", metavar="J", help="The judge of the default board [default: the judge of most runs].")
# Gradio's own variables, as `python app.py` honours them, when the flags are not given.
@click.option("--host", default="127.0.0.1", show_default=True, envvar="GRADIO_SERVER_NAME", show_envvar=True)
@click.option("--port", type=int, default=7860, show_default=True, envvar="GRADIO_SERVER_PORT", show_envvar=True)
def space(results_dir: str, requests_dir: str | None, dataset: str, primary_judge: str | None, host: str,
          port: int) -> None:
    """Serve the leaderboard Space locally over result folders."""
    from gamut_hf.space import SpaceConfig, build_app, launch_options

    config = SpaceConfig(results=Path(results_dir), requests=Path(requests_dir or Path(results_dir).parent / "requests"),
                         dataset=dataset or None, primary_judge=primary_judge)
    build_app(config).launch(server_name=host, server_port=port, **launch_options())


# -- authoring --------------------------------------------------------------------------------


@cli.group()
def author() -> None:
    """Build new questions and rubrics: propose -> draft -> refine -> review -> export (then `gamut build`)."""


def author_model_options(command: Any) -> Any:
    for option in reversed([
        click.option("--model", metavar="M", help="Model: a packaged name, folder, hub id or API model name."),
        click.option("--backend", type=click.Choice(sorted(BACKENDS)), help="Backend [default: transformers]."),
        click.option("--model-option", "model_options", multiple=True, metavar="KEY=VALUE", help="Backend option."),
        click.option("--base-url", "base_urls", multiple=True, metavar="URL", help="Endpoint(s) for the openai backend."),
    ]):
        command = option(command)
    return command


def _author_backend(options: dict[str, Any], *, need_model: bool = False):
    from gamut_hf.pipeline import ModelSpec

    if need_model and not options["model"]:
        raise BadInput("propose needs a multimodal model: --model M (and --backend, --base-url as needed)")
    spec = _model_spec(ModelSpec(), options["model"], options["backend"], options["model_options"],
                       options["base_urls"], None, "--model-option")
    return spec.load()


def _retriever(folder: str, snippets: str | None, search_url: str | None):
    from gamut_hf.evidence import LocalSnippetStore, SearxngRetriever

    if search_url:
        return SearxngRetriever(search_url, LocalSnippetStore.open(Path(folder) / "snippets.jsonl"))
    if not snippets:
        raise BadInput("say where evidence comes from: --snippets FILE (JSONL of url, title, text, retrieved) "
                       "or --search-url URL (a SearxNG instance)")
    store = LocalSnippetStore.open(snippets)
    if not store.snippets:
        raise BadInput(f"{snippets}: no snippets")
    return store


def evidence_options(command: Any) -> Any:
    for option in reversed([
        click.option("--snippets", metavar="FILE", help="Local snippet store: JSONL of {url, title, text, retrieved}."),
        click.option("--search-url", metavar="URL", help="A SearxNG instance to search instead (results cached in DIR)."),
    ]):
        command = option(command)
    return command


@author.command("propose")
@click.argument("images", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, metavar="DIR", help="The authoring workspace.")
@click.option("--domain", help="A domain hint for every image.")
@author_model_options
def author_propose(images: tuple[str, ...], out: str, domain: str | None, **options: Any) -> None:
    """Candidate questions per image; one chosen per image, every candidate kept with its reason."""
    from gamut_hf.authoring import propose
    from gamut_hf.authoring_store import AuthoringStore

    backend = _author_backend(options, need_model=True)
    try:
        with AuthoringStore(out) as store:
            rows = propose([Path(i) for i in images], backend, store, domain_hint=domain,
                           echo=lambda line: click.echo(line, err=True))
    finally:
        backend.close()
    chosen = sum(r["status"] == "selected" for r in rows)
    click.echo(f"{len(rows)} candidates for {len(images)} images: {chosen} chosen, "
               f"{sum(r['status'] == 'rejected' for r in rows)} rejected (see `gamut author review {out}`)")


@author.command("draft")
@click.argument("folder", metavar="DIR")
@click.option("--rounds", type=click.IntRange(min=1, max=10), default=3, show_default=True,
              help="Validation-repair rounds per question.")
@click.option("--question-id", "question_ids", multiple=True, metavar="ID", help="Only these questions (again).")
@click.option("--max-tokens", type=click.IntRange(min=16), default=3000, show_default=True,
              help="Length cap of one draft.")
@evidence_options
@author_model_options
def author_draft(folder: str, rounds: int, question_ids: tuple[str, ...], max_tokens: int, snippets: str | None,
                 search_url: str | None, **options: Any) -> None:
    """Evidence -> meta-rubric per proposed question, through structured output and a repair loop."""
    from gamut_hf.authoring import draft
    from gamut_hf.authoring_store import AuthoringStore

    retriever = _retriever(folder, snippets, search_url)
    backend = _author_backend(options)
    try:
        with AuthoringStore(folder) as store:
            failed = draft(store, retriever, backend, max_rounds=rounds, max_tokens=max_tokens,
                           question_ids=question_ids or None,
                           echo=lambda line: click.echo(line, err=True))
    finally:
        backend.close()
    for qid, problems in failed.items():
        for problem in problems:
            click.echo(f"{qid}: {problem}")
    if failed:
        raise click.exceptions.Exit(EXIT_BAD_INPUT)



@author.command("refine")
@click.argument("folder", metavar="DIR")
@evidence_options
@author_model_options
def author_refine(folder: str, snippets: str | None, search_url: str | None, **options: Any) -> None:
    """The self-refinement audit: item-by-item grounding, new evidence, rebuild and recompile."""
    from gamut_hf.authoring import refine
    from gamut_hf.authoring_store import AuthoringStore

    retriever = _retriever(folder, snippets, search_url)
    backend = _author_backend(options)
    try:
        with AuthoringStore(folder) as store:
            report = refine(store, retriever, backend, echo=lambda line: click.echo(line, err=True))
    finally:
        backend.close()
    for qid, findings in report.items():
        for finding in findings:
            if finding.verdict in ("removed", "re-grounded", "flagged"):
                click.echo(f"{qid}: item {finding.item_id}: {finding.verdict}: {finding.detail}")
    click.echo(f"audited {len(report)} question(s); findings in {Path(folder) / 'rubrics'}/*.audit.json")



@author.command("review")
@click.argument("folder", metavar="DIR")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=7861, show_default=True)
def author_review(folder: str, host: str, port: int) -> None:
    """The review app: edit questions and checks (saved as you type), accept, reject or send back."""
    from gamut_hf.review import build_review_app

    if not (Path(folder) / "authoring.sqlite").is_file():
        raise BadInput(f"{folder}: no authoring workspace here (start with `gamut author propose`)")
    build_review_app(folder).launch(server_name=host, server_port=port)


@author.command("export")
@click.argument("folder", metavar="DIR")
@click.argument("out", metavar="OUT")
def author_export(folder: str, out: str) -> None:
    """Accepted questions as an annotation folder for `gamut build`."""
    from gamut_hf.authoring import export
    from gamut_hf.authoring_store import AuthoringStore

    if not (Path(folder) / "authoring.sqlite").is_file():
        raise BadInput(f"{folder}: no authoring workspace here (start with `gamut author propose`)")
    with AuthoringStore(folder) as store:
        count = export(store, out)
    click.echo(f"exported {count} accepted question(s) to {out}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line and exit 2 on bad input, never a traceback."""
    try:
        outcome = cli.main(args=argv, prog_name="gamut", standalone_mode=False)
        return outcome if isinstance(outcome, int) else 0
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.UsageError as error:
        hint = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
        click.echo(f"gamut: {error.format_message()}{hint}", err=True)
        return EXIT_BAD_INPUT
    except click.ClickException as error:
        click.echo(f"gamut: {error.format_message()}", err=True)
        return error.exit_code
    except GamutError as error:  # the user's to fix; anything else below is our bug
        click.echo(f"gamut: {error}".splitlines()[0], err=True)
        return EXIT_BAD_INPUT
    except click.Abort:
        click.echo("gamut: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("gamut: interrupted; finished work is stored, the same command resumes", err=True)
        return 130
    except BrokenPipeError:
        # Downstream closed the pipe (`gamut compile x | head`); that is not an error.
        sys.stderr.close()
        return 0
    except Exception as error:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("GAMUT_DEBUG"):
            raise
        click.echo(f"gamut: internal error: {type(error).__name__}: {error} (GAMUT_DEBUG=1 shows the traceback)".splitlines()[0], err=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
