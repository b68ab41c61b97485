"""All-or-nothing writes: a file or a folder appears complete or not at all.

A reader (the Space, a report, a worker on another machine) must never see half a file or a
folder with old and new files mixed, and a crash at any moment must lose nothing that was
there before. Files are written beside their target, flushed to disk and renamed over it;
folders are built beside their target and swapped in by two renames (the old one moved aside
first, deleted only once the new one is in place), never deleted first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _fsync_folder(folder: Path) -> None:
    # A rename is durable only once the folder holding it is flushed (POSIX; a no-op elsewhere).
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(staging, 0o644)  # mkstemp's 0600 would survive the rename
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def staging_folder(target: str | Path) -> Path:
    """A new empty folder beside ``target`` (same file system, so the final rename is atomic)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".staging", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would survive the rename
    return staging


def fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` and the folders themselves, before it is renamed into place."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with open(Path(root) / name, "rb") as handle:
                os.fsync(handle.fileno())
        _fsync_folder(Path(root))


def replace_folder(staging: str | Path, target: str | Path) -> None:
    """Put the complete folder ``staging`` at ``target``, replacing what is there.

    The old ``target`` is renamed aside, the new one renamed in, and only then the old one is
    deleted: at every instant ``target`` is either the old folder or the new one, and a crash
    in between leaves the old one beside it (``.<name>.*.old``), never nothing.
    """
    staging, target = Path(staging), Path(target)
    fsync_tree(staging)
    aside = None
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        aside.rmdir()  # only the unique name is wanted; the rename creates it
        target.rename(aside)
    try:
        staging.rename(target)
    except BaseException:
        if aside is not None:
            aside.rename(target)
        raise
    _fsync_folder(target.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def folder_in_place(target: str | Path) -> Iterator[Path]:
    """Fill the yielded staging folder; on success it replaces ``target`` whole
    (:func:`replace_folder`), on any failure it is removed and ``target`` is untouched."""
    staging = staging_folder(target)
    try:
        yield staging
        replace_folder(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
