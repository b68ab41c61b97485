"""Commands that bring runs from other harnesses: `gamut import-inspect`."""

from __future__ import annotations

from pathlib import Path

import click

from gamut_hf.cli.options import EXIT_STATUS_HELP, print_summary
from gamut_hf.files import InputError


@click.command("import-inspect", epilog=EXIT_STATUS_HELP)
@click.argument("logs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", required=True, metavar="DIR", help="The run folder to write (new, empty, or this run's).")
def import_inspect(logs: tuple[Path, ...], out: str) -> None:
    """Turn inspect logs of `inspect eval gamut_hf/gamut` into a run folder.

    DIR receives what `gamut run` writes (results.json, details.parquet, responses.parquet and
    store.sqlite), keyed as `gamut run` keys it: `gamut score`, `gamut judge` with another judge,
    `gamut merge`, `gamut report` and the Space read it like any other run. Give an eval and its
    eval-retry logs together: each question's first answer that succeeded is kept.

    \b
    Examples:
      gamut import-inspect logs/2026-01-01T00-00-00_gamut_abc.eval --out runs/inspect-qwen
    """
    try:
        from gamut_hf.integrations.inspect_log import import_inspect as import_logs
    except ImportError as error:
        if error.name is None or not error.name.startswith("inspect_ai"):
            raise
        raise InputError("reading inspect logs needs inspect_ai: pip install 'gamut-hf[inspect]'") from None
    results = import_logs(list(logs), out)
    print_summary(results, out)


COMMANDS = [import_inspect]
