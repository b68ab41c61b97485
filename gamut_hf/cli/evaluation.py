"""`gamut run`, `generate`, `judge`, `judge-audit` and `merge`: the evaluation engine's commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gamut_hf.cli.options import (
    EXIT_STATUS_HELP,
    BadInput,
    exit_if_every_request_failed,
    judge_flags,
    judges_given,
    pipeline_options,
    print_summary,
    run_options,
)

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    pass


def _price(text: str | None, flag: str) -> Any:
    """``IN/OUT``, US$ per million prompt and output tokens, as a :class:`~gamut_hf.evaluation.prices.Price`."""
    import math

    from gamut_hf.evaluation.prices import Price

    if text is None:
        return None
    parts = text.split("/")
    try:
        prompt, output = (float(part) for part in parts) if len(parts) == 2 else (math.nan, math.nan)
    except ValueError:
        prompt = output = math.nan
    if not all(math.isfinite(x) and x >= 0 for x in (prompt, output)):
        raise BadInput(
            f"{flag}: expected IN/OUT, US$ per million prompt and output tokens (like 1.25/10), got {text!r}"
        )
    return Price(prompt=prompt, output=output)


def audit_options(command: Any) -> Any:
    """--audit: the judge's audit with the run's own judge engine (one load for both)."""
    for option in reversed(
        [
            click.option(
                "--audit",
                is_flag=True,
                help="Audit the judge first with the engine the run then judges with (as `gamut judge-audit`, "
                "one load of the judge for both).",
            ),
            click.option(
                "--audit-out",
                metavar="DIR",
                help="The audit's folder [default: judge-audit-<judge>-<backend> beside --out, where "
                "`gamut report` finds it].",
            ),
            click.option(
                "--audit-limit", type=click.IntRange(min=1), help="Audit only the responses of the first N questions."
            ),
        ]
    ):
        command = option(command)
    return command


def _audit_first(options: dict[str, Any]) -> tuple[bool, Path | None, int | None]:
    """Whether an audit is asked for, its folder (None: the default, once the judge is known) and
    limit, taken out of the run's options."""
    audit, folder, limit = options.pop("audit", False), options.pop("audit_out", None), options.pop("audit_limit", None)
    if not audit and (folder is not None or limit is not None):
        raise BadInput("--audit-out and --audit-limit go with --audit")
    return audit, Path(folder) if folder is not None else None, limit


def _pipeline(stages: tuple[str, ...], options: dict[str, Any]) -> None:
    from gamut_hf.evaluation.config import (
        check_batch,
        inherited_settings,
        resolve_run_config,
        stored_run_config,
    )
    from gamut_hf.evaluation.pipeline import run as run_pipeline

    audit, audit_folder, audit_limit = _audit_first(options)
    dry_run, prices = (
        options.pop("dry_run"),
        {
            "candidate": _price(options.pop("model_price"), "--model-price"),
            "judge": _price(options.pop("judge_price"), "--judge-price"),
            "escalation": _price(options.pop("escalate_judge_price"), "--escalate-judge-price"),
        },
    )
    given = run_options(options)
    stored = stored_run_config(options["out"], claim=not dry_run)
    config = resolve_run_config(given, stored)
    check_batch(config, stages)
    if stored is not None and (inherited := inherited_settings(given, config)):
        # Said every time: a selection taken silently from an earlier run is easy to miss.
        hint = "; --all for every question" if inherited.keys() & {"limit", "question_ids", "shard"} else ""
        click.echo(
            f"from the run in {options['out']}: {', '.join(inherited.values())} (give an option to change it{hint})",
            err=True,
        )
    click.echo(
        f"{' + '.join(stages)}: {config.candidate.name} ({config.candidate.backend}) judged by "
        f"{' + '.join(f'{j.name} ({j.backend})' for j in config.judges)}"
        f"{' (a panel: the majority verdict)' if config.panel else ''} on {config.dataset}, {config.variant}",
        err=True,
    )
    if audit and config.panel:
        raise BadInput(
            "--audit audits one judge in its run's engine; audit a panel with `gamut judge-audit --judge A --judge B`"
        )
    if audit and audit_folder is None:
        from gamut_hf.evaluation.audit import default_audit_folder

        audit_folder = Path(options["out"]).parent / default_audit_folder(config.judge)
    if dry_run:
        from gamut_hf.evaluation.plan import plan_lines, plan_run, stored_work
        from gamut_hf.evaluation.prices import run_prices
        from gamut_hf.evaluation.source import QuestionSource
        from gamut_hf.evaluation.store import read_info

        plan = plan_run(
            config,
            QuestionSource(config),
            stored_work(options["out"], config.retry_errors),
            [stage for stage in stages if stage != "score"],
            run_prices(config, prices, (read_info(options["out"]) or {}).get("prices")),
        )
        for line in plan_lines(plan, config):
            click.echo(line)
        if audit_folder is not None:
            click.echo(f"then the judge's audit into {audit_folder}, with the judge's engine of the judge stage")
        return
    if audit_folder is None:
        results, reports = run_pipeline(config, options["out"], stages=stages, echo=echo_err, prices=prices)
    else:
        results, reports = _run_with_audit(config, options["out"], stages, audit_folder, audit_limit, prices)
    if results is not None:
        print_summary(results, options["out"])
    exit_if_every_request_failed(reports)


def echo_err(line: str) -> None:
    click.echo(line, err=True)


def _claim_audit_folder(folder: Path, flag: str) -> Any:
    """The audit folder held from the first verdict to audit.json: a second audit into it meanwhile
    is refused, so audit.json always measures the store beside it."""
    from gamut_hf.atomic import claimed_folder
    from gamut_hf.evaluation.audit import AUDIT_FOLDER_FILES

    return claimed_folder(
        folder, "judge-audit", names=AUDIT_FOLDER_FILES, advice=f"give {flag} a new or empty folder, or an audit folder"
    )


def _audit_and_show(judge: Any, folder: Path, **audit: Any) -> None:
    """The judge's audit (a panel's: ``judge`` a list) into ``folder``
    (:func:`~gamut_hf.evaluation.audit.run_audit`'s options), its reports written and its figures printed."""
    from gamut_hf.evaluation.audit import run_audit
    from gamut_hf.reports.audit_report import summary_lines, write_audit_report

    results = run_audit(judge, folder, echo=echo_err, **audit)
    write_audit_report(results, folder)
    for line in summary_lines(results):
        click.echo(line)
    click.echo(f"  wrote {folder / 'audit.json'}, {folder / 'audit.md'} and {folder / 'audit-confusion.png'}")


def _run_with_audit(
    config: Any, out: str, stages: tuple[str, ...], folder: Path, limit: int | None, prices: dict[str, Any]
) -> Any:
    """The run, with the judge's audit (into ``folder``) judged by the judge stage's own engine.
    The folder is claimed before anything runs, so a folder that is not an audit's is refused
    before generation, not after it."""
    from gamut_hf.evaluation.pipeline import run as run_pipeline

    def audit(shared: Any) -> None:
        echo_err(f"judge audit: {config.judge.name} ({config.judge.backend}) into {folder}")
        _audit_and_show(
            config.judge,
            folder,
            rationale=config.rationale,
            judge_retries=config.judge_retries,
            judge_batch_size=config.judge_batch_size,
            limit=limit,
            shared=shared,
        )

    with _claim_audit_folder(folder, "--audit-out"):
        return run_pipeline(config, out, stages=stages, echo=echo_err, before_judging=audit, prices=prices)


@click.command("run", epilog=EXIT_STATUS_HELP)
@pipeline_options
@audit_options
def run_command(**options: Any) -> None:
    """Generate, judge and score: DIR receives results.json and details.parquet.

    With no model or judge it runs the embedded default: the sample, text_only, SmolLM2-135M
    on the CPU as candidate and judge. Stopped at any point (Ctrl-C, a crash, SIGKILL) and
    started again with the same command, it redoes only unfinished work. Options not given
    are taken from the run already in DIR, if any. --dry-run says first what it would send.
    --audit measures the judge first (as `gamut judge-audit`), with the engine that then judges
    the run, and writes the audit beside DIR, where `gamut report` shows it.

    \b
    Examples:
      gamut run --out runs/default                      # the embedded default, on the CPU
      gamut run --out runs/q --model Qwen/Qwen3-VL-8B-Instruct --backend vllm \\
          --judge Qwen/Qwen3-VL-235B-A22B-Instruct --judge-backend vllm --dry-run
      gamut run --out runs/api --model gpt-5.4 --backend openai --base-url https://api.openai.com/v1 \\
          --judge J --judge-backend openai --judge-base-url URL --dry-run --model-price 1.25/10
    """
    _pipeline(("generate", "judge", "score"), options)


@click.command(epilog=EXIT_STATUS_HELP)
@pipeline_options
def generate(**options: Any) -> None:
    """Only the candidate's answers, into the run store in DIR.

    \b
    Examples:
      gamut generate --out runs/q --model Qwen/Qwen3-VL-8B-Instruct --backend vllm --dry-run
      gamut generate --out runs/q --model Qwen/Qwen3-VL-8B-Instruct --backend vllm
    """
    _pipeline(("generate",), options)


@click.command(epilog=EXIT_STATUS_HELP)
@pipeline_options
@audit_options
def judge(**options: Any) -> None:
    """Judge the stored answers (a new --judge reuses them), then score.

    \b
    Examples:
      gamut judge --out runs/q --judge Qwen/Qwen3-VL-235B-A22B-Instruct --judge-backend vllm --dry-run
      gamut judge --out runs/q --judge J --judge-backend openai --judge-base-url URL --dry-run --judge-price 1.25/10
    """
    _pipeline(("judge", "score"), options)


def _judge_flags_of(command: Any) -> Any:
    for option in reversed(
        judge_flags("judge", "J", "Judge model [default: smollm2-135m]; repeat for a panel.", panel=True)
    ):
        command = option(command)
    return command


@click.command("judge-audit")
@_judge_flags_of
@click.option("--concurrency", type=click.IntRange(min=1), help="Requests in flight per openai backend.")
@click.option("--judge-batch-size", type=click.IntRange(min=1), help="Checks per judge call (whole responses).")
@click.option(
    "--out",
    metavar="DIR",
    help="Where the store, audit.json, audit.md and the figure go; put it in a "
    "results folder to show the audit beside the judge's scores [default: judge-audit-<judge>-<backend>].",
)
@click.option(
    "--labels", metavar="FILE", help="Human verdicts in the audit set's format, measured instead of the built-in gold."
)
@click.option("--limit", type=click.IntRange(min=1), help="Only the responses of the first N questions.")
@click.option(
    "--rationale/--no-rationale", default=False, show_default=True, help="Judge writes a short rationale first."
)
@click.option(
    "--judge-retries",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Retries of an unreadable verdict.",
)
@click.option("--retry-errors", is_flag=True, help="Judge again the checks stored as error.")
def judge_audit(
    judge: tuple[str, ...],
    judge_backend: tuple[str, ...],
    judge_options: tuple[str, ...],
    judge_base_urls: tuple[str, ...],
    concurrency: int | None,
    judge_batch_size: int | None,
    out: str | None,
    labels: str | None,
    limit: int | None,
    rationale: bool,
    judge_retries: int,
    retry_errors: bool,
) -> None:
    """Measure a judge against responses whose right verdicts are known.

    Judges every check of the audit set shipped with the package (templated and prose
    responses to the sample's questions, and injected twins of them) through the same judge
    stage and store as `gamut judge`, so a stopped audit resumes; then writes DIR/audit.json,
    audit.md and audit-confusion.png: accuracy, Cohen's kappa, the confusion matrix,
    per-verdict precision and recall, the error of question and Gamut scores, and the
    injection flip rate. With --judge repeated, audits the panel: each judge, then the panel's
    majority verdicts, each judge's own figures beside the panel's.
    """
    from gamut_hf.evaluation.audit import default_audit_folder
    from gamut_hf.evaluation.config import ModelSpec, check_distinct_judges, model_spec

    given = judges_given(
        {
            "judge": judge,
            "judge_backend": judge_backend,
            "judge_options": judge_options,
            "judge_base_urls": judge_base_urls,
        }
    )
    first = model_spec(
        ModelSpec(),
        given["judge"],
        given["judge_backend"],
        given["judge_options"],
        given["judge_base_urls"],
        concurrency,
    )
    specs = [first] + [
        model_spec(ModelSpec(), name, backend, extra, tuple(urls), concurrency)
        for name, backend, extra, urls in given["panel"]
    ]
    check_distinct_judges(specs)
    folder = (
        Path(out)
        if out
        else default_audit_folder(first if len(specs) == 1 else ModelSpec(name="panel", backend=first.backend))
    )
    names = " + ".join(f"{spec.name} ({spec.backend})" for spec in specs)
    echo_err(f"judge audit: {names} into {folder}")
    audit: dict[str, Any] = dict(
        labels=labels,
        rationale=rationale,
        judge_retries=judge_retries,
        judge_batch_size=judge_batch_size,
        limit=limit,
        retry_errors=retry_errors,
    )
    with _claim_audit_folder(folder, "--out"):
        _audit_and_show(first if len(specs) == 1 else specs, folder, **audit)


@click.command()
@click.argument("out", metavar="OUT")
@click.argument("sources", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option("--errors-as-missing", is_flag=True, help="Score errors and unjudged checks as missing.")
def merge(out: str, sources: tuple[str, ...], errors_as_missing: bool) -> None:
    """Join the stores of shard runs (`--shard i/n`) into OUT and score the whole run.

    All or nothing per source: an entry that two stores hold with different results is an
    error, never a silent overwrite.
    """
    from gamut_hf.evaluation.merge import merge_runs

    results = merge_runs(
        out, sources, errors_as_missing=errors_as_missing, echo=lambda line: click.echo(line, err=True)
    )
    print_summary(results, out)


COMMANDS = [run_command, generate, judge, judge_audit, merge]
