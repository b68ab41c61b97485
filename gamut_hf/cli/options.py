"""What the commands share: the user-error exception, option groups, and parsing and printing helpers."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from pydantic import ValidationError

from gamut_hf.backends import BACKENDS
from gamut_hf.core.compiler import CompileParams, compile_rubric
from gamut_hf.core.names import VARIANTS
from gamut_hf.core.rubric import (
    Check,
    MetaRubric,
    RubricError,
    parse_checks,
    parse_meta_rubric,
)
from gamut_hf.core.scorer import ScoreParams
from gamut_hf.errors import first_problem, shown
from gamut_hf.evaluation.config import EMBEDDED_MAX_TOKENS
from gamut_hf.evaluation.prices import cost_line
from gamut_hf.evaluation.run_folder import DETAILS_FILE, RESULTS_FILE, unclosed_line
from gamut_hf.files import InputError, parse_json, read_json

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    from gamut_hf.evaluation.run_folder import RunResults, StageReport


EXIT_BAD_INPUT = 2
# A run that asked its model and got nothing back: every request of a stage failed (an endpoint
# down, a model that cannot load its inputs). Not 2: nothing the user gave was refused, and the
# same command retries once the cause is gone.
EXIT_REQUESTS_FAILED = 3
EXIT_STATUS_HELP = (
    "Exit status: 0 done (a Gamut score, or 'no Gamut score' and why); 1 an internal error (a bug); "
    f"{EXIT_BAD_INPUT} an input refused, in one line; {EXIT_REQUESTS_FAILED} every request of a stage failed: "
    "the first error is named, the store keeps the finished work and the same command retries the rest."
)


class BadInput(click.ClickException):
    """An input problem already phrased for the user; exits 2 with that one line."""

    exit_code = EXIT_BAD_INPUT


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def fail_lines(lines: list[str]) -> NoReturn:
    for line in lines:
        click.echo(line, err=True)
    raise click.exceptions.Exit(EXIT_BAD_INPUT)


def compile_options(command: Any) -> Any:
    """The compile-rule constants as options (defaults from SPEC section 2)."""
    defaults = CompileParams()
    for name, field in reversed(list(CompileParams.model_fields.items())):
        command = click.option(
            f"--{name.replace('_', '-')}",
            name,
            type=click.IntRange(min=field.metadata[0].ge),
            default=getattr(defaults, name),
            show_default=True,
            help=field.description,
        )(command)
    return command


def compile_params(options: dict[str, Any]) -> CompileParams:
    return CompileParams(**{name: options[name] for name in CompileParams.model_fields})


def load_meta_rubric(path: str, *, require_evidence: bool = False) -> MetaRubric:
    try:
        return parse_meta_rubric(read_json(path), require_evidence=require_evidence)
    except RubricError as error:
        fail_lines([f"{path}: {problem}" for problem in error.problems])


SCORE_FLAGS = {
    "partial_credit": "--partial-credit",
    "contradiction_penalty": "--contradiction-penalty",
    "tier_weights": "--weights",
}


def score_params(partial_credit: float, contradiction_penalty: float, weights: str) -> ScoreParams:
    try:
        ac, v, ctx = (float(w) for w in weights.split(","))
    except ValueError:
        raise BadInput(f"--weights: expected three numbers like 0.6,0.3,0.1, got {weights!r}") from None
    try:
        return ScoreParams(
            partial_credit=partial_credit,
            contradiction_penalty=contradiction_penalty,
            tier_weights={"answer_critical": ac, "valuable": v, "context": ctx},
        )
    except ValidationError as error:
        where, message = first_problem(error)
        field, _, tier = where.partition(".")
        flag = SCORE_FLAGS.get(field, "--weights")  # the whole-object check is about the weights
        raise BadInput(f"{flag}{f' ({tier})' if tier else ''}: {message}") from None


def load_checks(path: str, params: CompileParams) -> list[Check]:
    data = read_json(path)
    try:
        if isinstance(data, list):
            return parse_checks(data)
        return compile_rubric(parse_meta_rubric(data), params)
    except RubricError as error:
        fail_lines([f"{path}: {problem}" for problem in error.problems])


# -- the evaluation pipeline ------------------------------------------------------------------


def option_value(text: str) -> Any:
    """A KEY=VALUE option's value: the JSON it spells (a number, true, a list), else the text itself.

    Strict JSON (:func:`gamut_hf.files.parse_json`): what it refuses (NaN, an integer too long for
    Python, nesting too deep, a key given twice) stays text, and the backend's declaration of the
    option then says in one line what it takes."""
    try:
        return parse_json(text, "")
    except InputError:
        return text


def key_values(pairs: tuple[str, ...], flag: str) -> dict[str, Any]:
    """KEY=VALUE options; a VALUE that parses as JSON (numbers, true, lists) is taken as such."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise BadInput(f"{flag}: expected KEY=VALUE, got {pair!r}")
        out[name.replace("-", "_")] = option_value(value)
    return out


# ASCII digits only: str.isdigit() also takes superscripts ('²'), which int() then refuses, and
# int() takes other scripts' digits ('٣') that no one means as a shard. Nine digits is far past
# any number of machines.
SHARD = re.compile(r"([0-9]{1,9})/([0-9]{1,9})")


def parse_shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    match = SHARD.fullmatch(value)
    if match is None or not int(match[1]) < int(match[2]):
        raise BadInput(f"--shard: expected i/n in digits 0-9 with 0 <= i < n (like 0/4), got {value!r}")
    return int(match[1]), int(match[2])


# "2:KEY=VALUE", "2:http://...": the second judge's only.
JUDGE_POSITION = re.compile(r"([0-9]{1,3}):(?!//)(.*)", re.DOTALL)


def _per_judge(values: tuple[str, ...], judges: int, flag: str) -> list[list[str]]:
    """Each judge's values of ``flag``: those without ``N:`` go to every judge, those with to the N-th."""
    each: list[list[str]] = [[] for _ in range(max(judges, 1))]
    for value in values:
        match = JUDGE_POSITION.fullmatch(value)
        if match is None:
            for mine in each:
                mine.append(value)
            continue
        position = int(match[1])
        if not 1 <= position <= max(judges, 1):
            raise BadInput(f"{flag} {value!r}: there is no judge {position} (--judge given {judges} times)")
        each[position - 1].append(match[2])
    return each


def judges_given(options: dict[str, Any]) -> dict[str, Any]:
    """The repeated --judge flags as the first judge's options and the panel's others."""
    names = list(options["judge"] or ())
    backends = list(options["judge_backend"] or ())
    if len(backends) > 1 and len(backends) != len(names):
        raise BadInput(
            f"--judge-backend given {len(backends)} times for {len(names)} judges: give it once for all, or once per judge"
        )
    count = max(len(names), 1)
    backends = backends * count if len(backends) == 1 else backends or [None] * count
    pairs = _per_judge(options["judge_options"], len(names), "--judge-option")
    extras = [key_values(tuple(mine), "--judge-option") for mine in pairs]
    urls = _per_judge(options["judge_base_urls"], len(names), "--judge-base-url")
    return {
        "judge": names[0] if names else None,
        "judge_backend": backends[0],
        "judge_options": extras[0],
        "judge_base_urls": tuple(urls[0]),
        "panel": list(zip(names[1:], backends[1:], extras[1:], urls[1:], strict=True)),
    }


def run_options(options: dict[str, Any]) -> dict[str, Any]:
    """The run options as :func:`gamut_hf.evaluation.config.resolve_run_config` takes them:
    KEY=VALUE pairs parsed, the shard as ``(i, n)``, the judges split into the first and a panel's others."""
    return {
        **options,
        **judges_given(options),
        "model_options": key_values(options["model_options"], "--model-option"),
        "escalate_judge_options": key_values(options["escalate_judge_options"], "--escalate-judge-option"),
        "shard": parse_shard(options["shard"]),
    }


def judge_flags(flag: str, metavar: str, help: str, *, panel: bool = False) -> list[Any]:
    """A judge's model, backend, options and endpoints: --J, --J-backend, --J-option, --J-base-url;
    ``panel``: --J repeatable (a panel), with a backend per judge and ``N:`` before an option or
    endpoint that is the N-th judge's only."""
    dest = flag.replace("-", "_")
    each = " (N:KEY=VALUE for the N-th judge only)" if panel else ""
    return [
        click.option(f"--{flag}", multiple=panel, metavar=metavar, help=help),
        click.option(
            f"--{flag}-backend",
            type=click.Choice(sorted(BACKENDS)),
            multiple=panel,
            help="Its backend [default: transformers]"
            + ("; once for all judges, or once per judge." if panel else "."),
        ),
        click.option(
            f"--{flag}-option", f"{dest}_options", multiple=True, metavar="KEY=VALUE", help=f"Its backend option{each}."
        ),
        click.option(
            f"--{flag}-base-url",
            f"{dest}_base_urls",
            multiple=True,
            metavar="URL",
            help="Its endpoint(s) for the openai backend; repeat for several"
            + (" (N:URL: the N-th judge's)." if panel else "."),
        ),
    ]


def pipeline_options(command: Any) -> Any:
    """The options shared by run, generate and judge; what is not given comes from the run in --out."""
    options = [
        click.option("--out", required=True, metavar="DIR", help="Run folder: store, results.json, details.parquet."),
        click.option(
            "--dataset",
            metavar="SOURCE",
            help="Sample name, annotation or built folder, or hub id [default: gamut-sample].",
        ),
        click.option("--revision", help="Hub revision of the dataset."),
        click.option(
            "--images",
            metavar="WHERE",
            help="Where a dataset's referenced images are (the official "
            "release points into CRAG-MM): crag-mm, crag-mm=PATH or a folder of <question id>.jpg.",
        ),
        click.option(
            "--fetch-image-urls",
            is_flag=True,
            default=None,
            help="Download the CRAG-MM photos it holds only as an image_url (off: such a question is named).",
        ),
        click.option(
            "--variant",
            type=click.Choice(VARIANTS),
            help="[default: text_only for the embedded default model, else multimodal]",
        ),
        click.option(
            "--model", metavar="M", help="Candidate model: a packaged name, folder or hub id [default: smollm2-135m]."
        ),
        click.option(
            "--backend", type=click.Choice(sorted(BACKENDS)), help="Candidate backend [default: transformers]."
        ),
        click.option(
            "--model-option",
            "model_options",
            multiple=True,
            metavar="KEY=VALUE",
            help="Candidate backend option (e.g. tensor_parallel_size=2, max_pixels=1003520).",
        ),
        click.option(
            "--base-url",
            "base_urls",
            multiple=True,
            metavar="URL",
            help="Candidate endpoint(s) for the openai backend; repeat for several.",
        ),
        *judge_flags(
            "judge",
            "J",
            "Judge model [default: smollm2-135m]; repeat for a panel (its majority is the verdict).",
            panel=True,
        ),
        click.option(
            "--escalate-below",
            type=float,
            metavar="P",
            help="Ask the checks whose most probable verdict is under P (0 < P <= 1; and unreadable ones) "
            "again of --escalate-judge, whose verdict replaces the judge's.",
        ),
        *judge_flags("escalate-judge", "J2", "The second judge of --escalate-below."),
        click.option("--concurrency", type=click.IntRange(min=1), help="Requests in flight per openai backend."),
        click.option(
            "--batch",
            is_flag=True,
            default=None,
            help="Send new requests of the openai backend as provider batches (OpenAI's Batch API, Anthropic's "
            "Message Batches: about half the price, answered within 24 h); waits, and a rerun waits on them again.",
        ),
        click.option(
            "--batch-fallback",
            type=click.Choice(["resubmit", "sync"]),
            help="What a failed or expired batch left unanswered gets: one more batch, or synchronous calls "
            "[default: resubmit].",
        ),
        click.option(
            "--batch-poll",
            type=click.FloatRange(min=0, min_open=True),
            metavar="SECONDS",
            help="Seconds before the first look at a batch; each pause grows by half, up to 10 minutes [default: 30].",
        ),  # fmt: skip
        click.option(
            "--batch-forget-unknown",
            is_flag=True,
            default=None,
            help="Give up the run's batches the provider no longer knows, and send their requests again.",
        ),
        click.option("--batch-size", type=click.IntRange(min=1), help="Requests per backend call and per commit."),
        click.option("--judge-batch-size", type=click.IntRange(min=1), help="Checks per judge call (whole questions)."),
        click.option("--limit", type=click.IntRange(min=0), help="Only the first N questions (0: no limit)."),
        click.option("--question-id", "question_ids", multiple=True, metavar="ID", help="Only these questions."),
        click.option(
            "--all",
            "all_questions",
            is_flag=True,
            help="Every question: clears a --limit, --question-id or --shard the run in DIR has.",
        ),
        click.option(
            "--shard", metavar="i/n", help="Only questions i, i+n, i+2n, ... (merge shards with `gamut merge`)."
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(min=1),
            help=f"Candidate answer length cap [default: 1024; {EMBEDDED_MAX_TOKENS} for the embedded default].",
        ),
        click.option("--rationale/--no-rationale", default=None, help="Judge writes a short rationale first."),
        click.option(
            "--judge-retries", type=click.IntRange(min=0), help="Retries of an unreadable verdict [default: 2]."
        ),
        click.option("--retry-errors", is_flag=True, default=None, help="Judge again the checks stored as error."),
        click.option(
            "--errors-as-missing",
            is_flag=True,
            default=None,
            help="Score judge errors and unjudged checks as missing (their number is shown).",
        ),
        click.option(
            "--dry-run",
            is_flag=True,
            help="Say what would run (requests, stored work, tokens, cost) and stop: no model loaded, nothing written.",
        ),
        click.option(
            "--model-price",
            metavar="IN/OUT",
            help="The candidate's US$ per million prompt/output tokens (e.g. 1.25/10), for the run's cost and "
            "--dry-run's estimate; kept with the run [default: the shipped list price of an API model].",
        ),
        click.option("--judge-price", metavar="IN/OUT", help="The judge's, likewise."),
        click.option("--escalate-judge-price", metavar="IN/OUT", help="The escalation judge's, likewise."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def print_summary(results: RunResults, out: str) -> None:
    score = results.score
    tiers = ", ".join(f"{t} {'-' if v is None else f'{v:.1f}'}" for t, v in score.tiers.items())
    shares = ", ".join(f"{k} {100 * v:.1f}%" for k, v in score.verdict_shares.items())
    if score.gamut is not None:
        click.echo(f"Gamut score {score.gamut:.1f} ({tiers})")
    else:
        click.echo(
            f"no Gamut score: {results.judge_errors} judge errors and {results.unfinished_checks} "
            "unjudged checks; rerun to finish, or --errors-as-missing to count them as missing"
        )
    if score.errors_counted_as_missing:
        click.echo(f"  {score.errors} errors and unjudged checks counted as missing")
    if results.panel is not None:
        panel = results.panel
        click.echo(f"  panel of {len(panel.members)} judges, each alone: {panel.alone()}")
        click.echo(f"  agreement over {panel.checks} checks: {panel.agreement_text()}")
    if results.escalation is not None:
        escalation = results.escalation
        waiting = escalation.escalated - escalation.answered
        click.echo(
            f"  escalated {escalation.escalated} of {escalation.checks} checks (top verdict probability under "
            f"{escalation.below:g}, or unreadable) to {escalation.judge.get('model')} ({escalation.judge.get('backend')})"
            + (f"; {waiting} not answered yet" if waiting else "")
        )
    if results.expected_gamut is not None and score.gamut is not None:
        click.echo(f"  expected score {results.expected_gamut:.1f} from the judge's verdict probabilities")
    cost = cost_line(results.cost, results.usage)
    if cost:
        click.echo(f"  {cost}")
    _echo_judge_audit(results, Path(out))
    click.echo(f"  {score.questions} questions, {score.checks} checks: {shares}")
    if results.unclosed_reasoning:
        click.echo(f"  {unclosed_line(results.unclosed_reasoning)}; judged as empty answers")
    if results.score_params != ScoreParams():
        params = results.score_params
        weights = ",".join(f"{w:g}" for w in params.tier_weights.values())
        click.echo(
            f"  scored with --partial-credit {params.partial_credit:g} --contradiction-penalty "
            f"{params.contradiction_penalty:g} --weights {weights} (recorded in {RESULTS_FILE})"
        )
    click.echo(f"  wrote {Path(out) / RESULTS_FILE} and {Path(out) / DETAILS_FILE}")


def _echo_judge_audit(results: RunResults, out: Path) -> None:
    """The judge's audit beside the score, where one is known (beside the run, or shipped), and a
    plain warning where it shows the judge close to chance: a score is read with its judge."""
    from gamut_hf.evaluation.audit import audit_line, audit_of, judge_warning

    found = audit_of(results.judge, results.prompt_versions.get("judge", ""), roots=[out.parent])
    if found is None or found.results is None:
        return
    click.echo(f"  {audit_line(found)}")
    warning = judge_warning(found.results)
    if warning:
        click.echo(f"  warning: {warning}")


def exit_if_every_request_failed(stages: Sequence[StageReport]) -> None:
    """Exit :data:`EXIT_REQUESTS_FAILED`, with a line naming the first error, when a stage of this
    invocation asked its model and every request failed; a script must not take the run as done."""
    for stage in stages:
        if stage.failed and not stage.done_now:
            click.echo(
                f"gamut: {stage.stage}: every request failed ({stage.failed} of {stage.failed}), the first with: "
                f"{shown(stage.first_error)}; the same command retries them (the store keeps finished work)",
                err=True,
            )
            raise click.exceptions.Exit(EXIT_REQUESTS_FAILED)
