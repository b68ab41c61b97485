"""Reading the project's JSON and JSONL inputs with errors that say what and where.

This is the I/O edge of the core: it turns a path into parsed JSON or a one-line
:class:`InputError`, so the pure modules never see a file and the CLI never shows a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gamut_hf.errors import GamutError


class InputError(GamutError, ValueError):
    """A file that cannot be read as the input it should be; the message is one line."""


def read_text(path: str | Path) -> str:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 (invalid byte at offset {error.start})") from None


def parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None


def read_json(path: str | Path) -> Any:
    return parse_json(read_text(path), str(path))


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed object)`` for each non-blank line."""
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if line.strip():
            yield number, parse_json(line, f"{path}:{number}")
