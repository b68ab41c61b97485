"""The one exception family for problems the user can fix.

Every error that means "what you gave (a file, an option, a model name, an endpoint) is not
usable" derives from :class:`GamutError`, whose message is one line naming what and where. The
CLI maps a ``GamutError`` to exit status 2 and that line; any other exception is a bug in
gamut-hf and exits 1 as an internal error (``GAMUT_DEBUG=1`` shows its traceback). Each area
keeps its own subclass beside the code that raises it (``files.InputError``,
``rubric.RubricError``, ``scorer.ScoringError``, ...), so callers can catch just their area.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class GamutError(Exception):
    """A problem with the user's input or environment, phrased for them in one line."""


def shown(text: object) -> str:
    """``text`` as it may appear in a one-line message: as is when printable, else quoted
    (repr), so a key or an id holding a newline or a line separator cannot break the line."""
    text = str(text)
    return text if text.isprintable() else repr(text)


def field_path(loc: Sequence[str | int]) -> str:
    """A pydantic error location as a dotted field path (``items.0.statement``), one line."""
    return ".".join(shown(part) for part in loc)


def first_problem(error: ValidationError) -> tuple[str, str]:
    """A pydantic ValidationError's first problem as (field path, message), for a one-line
    GamutError that names the field (``""`` for the object as a whole)."""
    problem = error.errors(include_url=False)[0]
    message = problem["msg"].removeprefix("Value error, ")
    if problem["type"] == "extra_forbidden":
        message = "unknown field"
    return field_path(problem["loc"]), message
