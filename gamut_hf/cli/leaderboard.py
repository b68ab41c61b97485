"""`gamut worker` and `gamut space`: the leaderboard Space and the worker that judges its queue."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gamut_hf.backends import BACKENDS
from gamut_hf.cli.options import key_values

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    pass


def retry_waits(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    """``--retry-waits 1,5,30``: minutes before each automatic try again ('' or 'none': no retries)."""
    if value.strip().lower() in ("", "none"):
        return ()
    try:
        minutes = tuple(float(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected minutes separated by commas, e.g. 1,5,30") from None
    if not all(0 <= m < 60 * 24 * 365 for m in minutes):  # also refuses nan and inf
        raise click.BadParameter(f"{value!r}: each wait is from 0 to a year of minutes")
    return minutes


# -- the leaderboard Space --------------------------------------------------------------------


@click.command()
@click.option("--requests", "requests_dir", required=True, metavar="DIR", help="Request files (the Space's queue).")
@click.option("--results", "results_dir", required=True, metavar="DIR", help="Result folders, one per submission.")
@click.option("--dataset", default="gamut-sample", show_default=True, metavar="SOURCE", help="The questions judged.")
@click.option("--judge", metavar="J", help="Judge model [default: smollm2-135m].")
@click.option("--judge-backend", type=click.Choice(sorted(BACKENDS)), help="Judge backend [default: transformers].")
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE", help="Judge backend option.")
@click.option("--judge-base-url", "judge_base_urls", multiple=True, metavar="URL", help="Judge endpoint(s) (openai).")
@click.option("--requests-repo", metavar="REPO_ID", help="Hub dataset mirrored in --requests (pulled, pushed).")
@click.option("--results-repo", metavar="REPO_ID", help="Hub dataset mirrored in --results (pushed).")
@click.option("--once", is_flag=True, help="Stop when no request is due instead of waiting for more.")
@click.option(
    "--retry-failed",
    is_flag=True,
    help="First put every FAILED request that was not the submission's fault back to PENDING (after a judge outage).",
)
@click.option(
    "--requeue",
    "requeue_keys",
    multiple=True,
    metavar="KEY",
    help="First put the FAILED request KEY back to PENDING, whatever failed (or try a waiting one now).",
)
@click.option(
    "--retry-waits",
    default="1,5,30",
    show_default=True,
    callback=retry_waits,
    metavar="MINUTES",
    help="After a try the judge failed, the waits before each try again; then FAILED ('' for no retries).",
)
@click.option("--poll", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds between looks.")
@click.option(
    "--lease",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="Seconds a claim lasts without a heartbeat; then another worker may take the request over.",
)
def worker(
    requests_dir: str,
    results_dir: str,
    dataset: str,
    judge: str | None,
    judge_backend: str | None,
    judge_options: tuple[str, ...],
    judge_base_urls: tuple[str, ...],
    requests_repo: str | None,
    results_repo: str | None,
    once: bool,
    retry_failed: bool,
    requeue_keys: tuple[str, ...],
    retry_waits: tuple[float, ...],
    poll: float,
    lease: float,
) -> None:
    """Judge queued submissions (PENDING -> RUNNING -> FINISHED or FAILED) into result folders.

    A try that the judge fails (not the submission) is tried again after each of --retry-waits;
    after the last, the request is FAILED until --retry-failed or --requeue puts it back."""
    from datetime import timedelta

    from gamut_hf.dataset.hub import HubFolder
    from gamut_hf.evaluation.config import RunConfig, model_spec
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.worker import put_back, serve

    judge_spec = model_spec(
        RunConfig().judge, judge, judge_backend, key_values(judge_options, "--judge-option"), judge_base_urls
    )

    def echo(line: str) -> None:
        click.echo(line, err=True)

    queue = RequestQueue(requests_dir, echo=echo)  # a request file that cannot be read is skipped, said once
    requests_hub = HubFolder(requests_repo, requests_dir) if requests_repo else None
    if retry_failed or requeue_keys:
        put_back(queue, requeue_keys, every_failed=retry_failed, requests_hub=requests_hub, echo=echo)
    handled = serve(
        queue,
        Path(results_dir),
        Path(requests_dir) / ".work",
        dataset,
        judge_spec,
        once=once,
        poll=poll,
        echo=echo,
        requests_hub=requests_hub,
        results_hub=HubFolder(results_repo, results_dir) if results_repo else None,
        lease=timedelta(seconds=lease),
        retry_waits=[timedelta(minutes=minutes) for minutes in retry_waits],
    )
    click.echo(f"handled {handled} submission(s)")


@click.command()
@click.option(
    "--results",
    "results_dir",
    default="runs",
    show_default=True,
    metavar="DIR",
    help="Folder of result folders (each a `gamut run` output, optionally with model.json).",
)
@click.option(
    "--requests",
    "requests_dir",
    default=None,
    metavar="DIR",
    help="Request files for submissions [default: RESULTS/../requests].",
)
@click.option(
    "--dataset",
    default="gamut-sample",
    show_default=True,
    metavar="SOURCE",
    help="Where question texts, images and meta-rubrics come from ('' for none).",
)
@click.option("--primary-judge", metavar="J", help="The judge of the default board [default: the judge of most runs].")
# Gradio's own variables, as `python app.py` honours them, when the flags are not given.
@click.option("--host", default="127.0.0.1", show_default=True, envvar="GRADIO_SERVER_NAME", show_envvar=True)
@click.option("--port", type=int, default=7860, show_default=True, envvar="GRADIO_SERVER_PORT", show_envvar=True)
def space(
    results_dir: str, requests_dir: str | None, dataset: str, primary_judge: str | None, host: str, port: int
) -> None:
    """Serve the leaderboard Space locally over result folders."""
    from gamut_hf.evaluation.run_folder import is_run_folder
    from gamut_hf.files import InputError
    from gamut_hf.leaderboard.space import SpaceConfig, build_app, launch_options

    # Refused before anything is created (the queue folder): a mistyped --results would otherwise
    # serve an empty board without a word.
    results = Path(results_dir)
    if not results.exists():
        raise InputError(f"{results}: no such folder; give --results the folder holding your result folders")
    if not results.is_dir():
        raise InputError(f"{results}: not a folder; give --results the folder holding your result folders")
    if is_run_folder(results):
        raise InputError(f"{results}: a run folder itself; give --results the folder holding it ({results.parent})")
    requests = Path(requests_dir) if requests_dir else results.parent / "requests"
    if requests.exists() and not requests.is_dir():
        raise InputError(f"{requests}: not a folder; give --requests a folder for the request files")
    config = SpaceConfig(
        results=results,
        requests=requests,
        dataset=dataset or None,
        primary_judge=primary_judge,
    )
    build_app(config).launch(server_name=host, server_port=port, **launch_options())


@click.command()
@click.argument("run", metavar="RUN_DIR")
@click.argument("out", metavar="OUT.jsonl")
def submission(run: str, out: str) -> None:
    """The answers stored in RUN_DIR as the leaderboard's upload file.

    Generate with `gamut generate` (the prompt the leaderboard expects: the question, and the photo
    for the multimodal variant, nothing else), then upload OUT.jsonl in the Space's Submit tab with
    the variant it names. Checked as the Space checks it; reasoning is never included.

    \b
    Example:
      gamut generate --out runs/mine --model M --backend vllm --variant multimodal --dataset facebook/GAMUT
      gamut submission runs/mine responses.jsonl
    """
    from gamut_hf import atomic
    from gamut_hf.files import InputError
    from gamut_hf.leaderboard.submission_file import submission_file

    target = Path(out)
    if target.exists() or target.is_symlink():
        raise InputError(f"{target}: exists; remove it or choose another file name (nothing is overwritten)")
    made = submission_file(run)
    atomic.write_bytes(target, made.data)
    click.echo(f"wrote {target}: {made.answered} of {made.questions} answers of {made.model} ({made.variant})")
    click.echo(
        f"In the Space's Submit tab choose the variant {made.variant}"
        + (", and tick 'Partial submission': not every question is answered" if made.partial else "")
        + "."
    )
    if made.failed:
        click.echo(
            f"{made.failed} generation(s) failed and are left out: `gamut generate --out {run}` tries them again",
            err=True,
        )


COMMANDS = [worker, space, submission]
