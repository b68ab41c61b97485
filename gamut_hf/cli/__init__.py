"""The ``gamut`` command line (SPEC section 7): the group and :func:`main` here, shared options in
:mod:`.options`, one module per command group (rubrics, dataset, evaluation, reports,
leaderboard, authoring). Commands only parse and print; the work is in the packages.

Every command reads its inputs through :mod:`gamut_hf.files`, so malformed input of any kind
ends in one line on standard error and exit status 2, never in a traceback. Heavy stacks
(datasets, torch, gradio) are imported inside the commands that need them, so ``gamut
validate`` and friends start fast and work with the core install alone.
"""

from __future__ import annotations

import errno
import os
import sys

import click

from gamut_hf.cli import authoring, dataset, doctor, evaluation, integrations, leaderboard, reports, rubrics
from gamut_hf.cli.options import EXIT_BAD_INPUT
from gamut_hf.errors import GamutError, shown

# What the system refuses about a path the user chose (an --out folder they cannot write, a
# read-only mount, a full disk): theirs to fix, named in one line. Other OSErrors stay ours.
SYSTEM_REFUSALS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def refused_by_the_system(error: BaseException) -> str | None:
    """``PATH: reason`` for an OSError the user can act on and that names its path; else None."""
    if not isinstance(error, OSError) or error.errno not in SYSTEM_REFUSALS or not error.filename:
        return None
    reason = (error.strerror or os.strerror(error.errno)).lower()
    return f"{shown(os.fsdecode(error.filename))}: {reason}"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="gamut-hf", prog_name="gamut")
def cli() -> None:
    """GAMUT: factual completeness of long answers, graded check by check."""


for _group in (rubrics, dataset, evaluation, reports, leaderboard, authoring, integrations, doctor):
    for _command in _group.COMMANDS:
        cli.add_command(_command)


def _end_progress_bars() -> None:
    """Close the progress bars a failing command left open, so its one-line error starts a line of
    its own (a bar stays open while the exception that stopped its loop is handled)."""
    progress = sys.modules.get("tqdm.std")
    if progress is not None:
        for bar in list(getattr(progress.tqdm, "_instances", ())):
            bar.close()


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line and exit 2 on bad input, never a traceback."""
    try:
        try:
            outcome = cli.main(args=argv, prog_name="gamut", standalone_mode=False)
        finally:
            _end_progress_bars()
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
        if refusal := refused_by_the_system(error):
            click.echo(f"gamut: {refusal}", err=True)
            return EXIT_BAD_INPUT
        if os.environ.get("GAMUT_DEBUG"):
            raise
        click.echo(
            f"gamut: internal error: {type(error).__name__}: {error} (GAMUT_DEBUG=1 shows the traceback)".splitlines()[
                0
            ],
            err=True,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
