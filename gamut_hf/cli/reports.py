"""`gamut report` and `gamut simulate`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gamut_hf.reports.defaults import DEFAULT_RESAMPLES

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    pass


# -- reports -----------------------------------------------------------------------------------


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option(
    "--out", required=True, metavar="REPORT_DIR", help="Where report.md, report.html, figures/ and tables/ go."
)
@click.option(
    "--resamples",
    type=click.IntRange(min=1000),
    default=DEFAULT_RESAMPLES,
    show_default=True,
    help="Bootstrap resamples of the questions for every interval and paired test (the Space uses the same default).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="How many of the hardest questions to list.",
)
def report(runs: tuple[str, ...], out: str, resamples: int, seed: int, top: int) -> None:
    """Tables and figures of the paper for RUN_DIR... (run folders, or folders of run folders).

    Writes REPORT_DIR/report.md, a self-contained report.html, each figure as PNG, PDF and SVG
    (figures/) and each table as CSV (tables/); sections that do not apply to these runs are
    named with the reason. Progress goes to standard error.

    \b
    Examples:
      gamut report results/ --out report/
      gamut simulate sim/ && gamut report sim/ --out sim-report/
    """
    from gamut_hf.reports.report import build_report, find_run_folders, write_report
    from gamut_hf.reports.statistics import Bootstrap

    built = build_report(find_run_folders(runs), Bootstrap(resamples=resamples, seed=seed), top=top, progress=True)
    folder = write_report(built, out)
    scored = sum(run.scored for run in built.runs)
    click.echo(
        f"wrote {folder / 'report.md'} and {folder / 'report.html'}: {scored} of {len(built.runs)} runs scored; "
        f"sections: {', '.join(s.title for s in built.included)}"
    )
    for section in built.sections:
        if section.omitted:
            click.echo(f"left out {section.title}: {section.omitted}")
    for run in built.runs:
        if not run.scored:
            click.echo(f"excluded {run.folder}: {run.excluded}", err=True)


@click.command()
@click.argument("out", metavar="OUT")
@click.option("--questions", type=click.IntRange(min=10), default=1813, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--text-only/--no-text-only",
    default=True,
    show_default=True,
    help="Also simulate the text-only variant (graded by the first judge).",
)
def simulate(out: str, questions: int, seed: int, text_only: bool) -> None:
    """Simulated runs of the paper's 14 models (Table 1) under two judges, over synthetic questions.

    For validating reports at full scale: `gamut report OUT --out REPORT_DIR` must give back
    the paper's verdict shares and order. OUT/dataset/ holds the synthetic questions and images
    the runs answer (the Space's failure browser shows them); each run has a model.json card with
    the model's type and size where the paper states it. Progress goes to standard error.

    \b
    Examples:
      gamut simulate sim/ --questions 100
      gamut simulate sim/ && gamut space --results sim/
    """
    from gamut_hf.reports.simulate import DATASET_FOLDER, SimulationParams, simulate_runs

    defaults = SimulationParams()
    params = SimulationParams(
        questions=questions, seed=seed, text_only_easing=defaults.text_only_easing if text_only else None
    )
    folders = simulate_runs(out, params, progress=True)
    click.echo(
        f"wrote {len(folders)} simulated runs under {out}, each with its model's card, and the "
        f"{questions} questions they answer (with images) in {Path(out) / DATASET_FOLDER}"
    )


COMMANDS = [report, simulate]
