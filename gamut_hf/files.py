"""Reading the project's inputs (JSON, JSONL, images) with errors that say what and where.

This is the I/O edge of the core: it turns a path into parsed JSON or a one-line
:class:`InputError`, so the pure modules never see a file and the CLI never shows a traceback.
Whatever a user can point a command at is refused before it can hurt: a device or a FIFO
(``/dev/zero`` would fill memory, a FIFO would hang), a file over the size cap (only cap + 1
bytes are ever read), a JSON integer too long for Python, a key given twice (JSON readers
otherwise keep the last one silently), nesting too deep to process, and an image whose header
claims more pixels than can be decoded safely.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
import warnings
from collections.abc import Iterator
from json.decoder import JSONObject  # type: ignore[attr-defined]  # the pure-Python object parser
from json.scanner import py_make_scanner  # type: ignore[attr-defined]
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gamut_hf.errors import GamutError

if TYPE_CHECKING:
    from PIL.Image import Image

# Far above any real input (the paper's 1,813 questions are about 10 MB of questions.jsonl);
# below what would exhaust memory once parsed.
MAX_JSON_BYTES = 256 * 1024 * 1024
MAX_IMAGE_BYTES = 64 * 1024 * 1024
# Rubrics, verdicts and uploads nest a few levels; anything deeper is not one of them, and
# deep values break whatever walks them recursively (repr, pydantic's error reports).
MAX_JSON_DEPTH = 64


class InputError(GamutError, ValueError):
    """A file that cannot be read as the input it should be; the message is one line.

    ``reason`` is the message without the file's name, for callers that name it their own way.
    """

    def __init__(self, message: str, *, reason: str | None = None):
        super().__init__(message)
        self.reason = reason if reason is not None else message


def _refuse(path: Path, reason: str) -> InputError:
    return InputError(f"{path}: {reason}", reason=reason)


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):,.0f} MiB" if size >= 1024 * 1024 else f"{size:,} bytes"


def read_bytes(path: str | Path, *, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, or an InputError naming it.

    The file is opened without blocking and checked on the open descriptor, so a FIFO or a
    device is refused rather than read, and a file that grows while read is still capped.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise _refuse(path, "no such file") from None
    except IsADirectoryError:
        raise _refuse(path, "is a directory, expected a file") from None
    except PermissionError:
        raise _refuse(path, "permission denied") from None
    except OSError as error:
        raise _refuse(path, f"cannot read ({error.strerror or error})") from None
    status = os.fstat(fd)
    refusal = None
    if stat.S_ISDIR(status.st_mode):  # Linux opens a folder read-only without complaint
        refusal = "is a directory, expected a file"
    elif not stat.S_ISREG(status.st_mode):
        refusal = "is not a regular file (a device, FIFO or socket cannot be read as input)"
    elif status.st_size > max_bytes:
        refusal = f"is {_megabytes(status.st_size)}; the limit is {_megabytes(max_bytes)}"
    if refusal:
        os.close(fd)
        raise _refuse(path, refusal)
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as error:
            raise _refuse(path, f"cannot read ({error.strerror or error})") from None
    if len(data) > max_bytes:
        raise _refuse(path, f"is over the limit of {_megabytes(max_bytes)}")
    return data


def decode_text(data: bytes, where: str) -> str:
    """UTF-8, with or without a byte-order mark (editors on Windows add one)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{where}: not UTF-8 (invalid byte at offset {error.start})",
            reason=f"not UTF-8 (invalid byte at offset {error.start})",
        ) from None


def read_text(path: str | Path, *, max_bytes: int = MAX_JSON_BYTES) -> str:
    return decode_text(read_bytes(path, max_bytes=max_bytes), str(path))


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for each non-blank line of JSONL text.

    Lines end at ``\\n`` only (a trailing ``\\r`` is dropped): ``str.splitlines`` would also
    split at U+2028, U+2029 and U+0085, which are legal inside a JSON string.
    """
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield number, line


class _Refused(Exception):
    """Raised from inside the decoder; ``position`` is filled in where it can be found."""

    def __init__(self, reason: str, position: int | None = None):
        self.reason, self.position = reason, position


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not valid JSON")


_BETWEEN_PAIRS = re.compile(r"[ \t\n\r,]*")


def _locate_duplicate(text: str) -> int | None:
    """Where the second occurrence of a duplicated key is (its value's offset), or None.

    Only run once a duplicate is known: it reparses with the pure-Python scanner, whose object
    parser we can wrap to learn each value's offset (the C scanner reports none).
    """

    def parse_object(
        s_and_end: tuple[str, int],
        strict: bool,
        scan_once: Any,
        object_hook: Any,
        object_pairs_hook: Any,
        memo: Any = None,
        *rest: Any,
    ) -> tuple[dict[str, Any], int]:
        ends: list[int] = [s_and_end[1]]  # each key starts after the previous value (or the brace)

        def scan_value(string: str, index: int) -> tuple[Any, int]:
            value, end = scan_once(string, index)
            ends.append(end)
            return value, end

        pairs, end = JSONObject(s_and_end, strict, scan_value, None, list, memo)
        seen: set[str] = set()
        for (key, _value), previous in zip(pairs, ends, strict=False):
            if key in seen:
                between = _BETWEEN_PAIRS.match(s_and_end[0], previous)
                raise _Refused(f"duplicate key {key!r}", between.end() if between else previous)
            seen.add(key)
        return dict(pairs), end

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        decoder.decode(text)
    except _Refused as refused:
        return refused.position
    except (RecursionError, ValueError):
        pass
    return None


def _locate_long_integer(text: str) -> int | None:
    digits = sys.get_int_max_str_digits() + 1
    match = re.search(rf"(?:^|(?<=[\s:,\[]))-?\d{{{digits},}}", text)
    return match.start() if match else None


def _too_deep(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _at(text: str, position: int | None) -> str:
    """ " at line L column C" (just the column for one-line text, a JSONL line), or ""."""
    if position is None:
        return ""
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    if "\n" not in text:
        return f" at column {column}"
    return f" at line {text.count(chr(10), 0, position) + 1} column {column}"


def parse_json(text: str, where: str) -> Any:
    """Strict JSON: duplicate keys, NaN/Infinity, integers Python cannot convert and nesting
    deeper than :data:`MAX_JSON_DEPTH` are refused with the place they are at."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        reason = f"not valid JSON ({error.msg}{_at(text, error.pos)})"
    except _Refused as refused:
        position = _locate_duplicate(text) if refused.reason.startswith("duplicate") else None
        reason = f"{refused.reason}{_at(text, position)}"
    except RecursionError:
        reason = f"JSON nested too deeply (the limit is {MAX_JSON_DEPTH} levels)"
    except ValueError as error:  # an integer longer than int's max_str_digits
        if "integer string conversion" not in str(error):
            raise
        reason = (
            f"integer too long{_at(text, _locate_long_integer(text))} "
            f"(the limit is {sys.get_int_max_str_digits():,} digits)"
        )
    else:
        if not _too_deep(value, MAX_JSON_DEPTH):
            return value
        reason = f"JSON nested too deeply (the limit is {MAX_JSON_DEPTH} levels)"
    raise InputError(f"{where}: {reason}", reason=reason)


def read_json(path: str | Path) -> Any:
    return parse_json(read_text(path), str(path))


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed object)`` for each non-blank line."""
    for number, line in jsonl_lines(read_text(path)):
        yield number, parse_json(line, f"{path}:{number}")


def _decode_image(path: Path, max_bytes: int) -> Image:
    return decode_image(read_bytes(path, max_bytes=max_bytes), str(path))


def decode_image(data: bytes, where: str, *, max_bytes: int = MAX_IMAGE_BYTES) -> Image:
    """Image bytes from anywhere (a file, a parquet cell, a download), fully decoded, or an
    InputError naming ``where``: the same size and decompression-bomb limits as :func:`open_image`."""
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    if len(data) > max_bytes:
        reason = f"is {_megabytes(len(data))}; the limit is {_megabytes(max_bytes)}"
        raise InputError(f"{where}: {reason}", reason=reason)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            image = PILImage.open(io.BytesIO(data))
            image.load()
            return image
    except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as error:
        reason = f"is too large to decode ({str(error).split(', could be')[0]})"
    except UnidentifiedImageError:  # its message names our in-memory buffer, not the source
        reason = "is not a readable image (not a format PIL recognises)"
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        reason = f"is not a readable image ({type(error).__name__}: {error})"
    raise InputError(f"{where}: {reason}", reason=reason)


def open_image(path: str | Path, *, max_bytes: int = MAX_IMAGE_BYTES) -> Image:
    """A user's image, fully decoded, or an InputError naming the file and why.

    Besides the file checks of :func:`read_bytes`, an image whose header claims more pixels
    than PIL's ``MAX_IMAGE_PIXELS`` is refused before decoding (PIL only warns up to twice that).
    """
    return _decode_image(Path(path), max_bytes)


def check_image(path: str | Path, *, max_bytes: int = MAX_IMAGE_BYTES) -> None:
    """What :func:`open_image` refuses. The pixels are decoded, once: PIL's ``verify`` reads only
    the structure, and a truncated JPEG passed it, to fail later in every run that used it."""
    _decode_image(Path(path), max_bytes)


def cache_root() -> Path:
    """gamut-hf's cache (GAMUT_CACHE): converted models (backends.models) and built datasets (dataset.loader)."""
    return Path(os.environ.get("GAMUT_CACHE", Path.home() / ".cache" / "gamut-hf"))
