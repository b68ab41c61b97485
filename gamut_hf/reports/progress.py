"""Progress of the reports' long commands (`gamut simulate`, `gamut report`), on standard error as
`gamut run` shows its own; off for library callers such as the Space, which build reports unseen."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
# Seconds a step runs before its bar shows (a refusal found at once stays one line); 0 shows every bar.
DELAY_ENV = "GAMUT_PROGRESS_DELAY"
DEFAULT_DELAY = 1.0


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get(DELAY_ENV, DEFAULT_DELAY)))
    except ValueError:  # not a number: the default, rather than a failed report
        return DEFAULT_DELAY


def steps(items: Sequence[Item], what: str, unit: str, shown: bool) -> Iterable[Item]:
    """``items``, with a progress bar (``what``, counted in ``unit``) while they are worked through
    when ``shown``; the bar is cleared when done, so the command's own summary stands alone."""
    if not shown:
        return items
    from tqdm.auto import tqdm

    # Shown once a step has run a second: a refusal found at once (a bad run folder) stays one line.
    return tqdm(items, desc=what, unit=unit, dynamic_ncols=True, leave=False, delay=_delay())
