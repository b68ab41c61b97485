"""All-or-nothing writes: a file or a folder appears complete or not at all.

A reader (the Space, a report, a worker on another machine) must never see half a file or a
folder with old and new files mixed, and a crash at any moment must lose nothing that was
there before. Files are written beside their target, flushed to disk and renamed over it;
folders are built beside their target and swapped in by two renames (the old one moved aside
first, deleted only once the new one is in place), never deleted first.

A folder a user may share with a command (a report's ``--out``, an export's ``OUT``) is written
through :class:`OwnedFolder`: the command replaces only the files its own manifest lists, so a
rerun never takes a stranger's file with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from gamut_hf.errors import shown
from gamut_hf.files import InputError


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


# -- folders a command owns only in part -------------------------------------------------------

MANIFEST = ".gamut-manifest.json"
# Held while a command fills a folder of its own (:func:`claimed_folder`).
LOCK = ".gamut-lock"


class FolderNotOwnedError(InputError):
    """A command would write into a folder, or over a file, that it did not write."""


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _relative(name: object) -> str | None:
    """A manifest entry as a plain relative path inside the folder, or None (absolute, ``..``, odd)."""
    if not isinstance(name, str) or not name or "\\" in name or "\x00" in name:
        return None
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts) or name == MANIFEST:
        return None
    return name


def read_manifest(
    target: Path, command: str, refuse: Callable[[str], FolderNotOwnedError]
) -> dict[str, list[str]] | None:
    """The files :data:`MANIFEST` in ``target`` says ``command`` wrote (name -> its digests), or
    None where there is no manifest; refused (``refuse(why)``) where it is another command's or
    cannot be read. Names that would point outside the folder are dropped, never followed."""
    marker = target / MANIFEST
    if not (marker.exists() or marker.is_symlink()):
        return None
    try:
        if marker.is_symlink() or not marker.is_file():
            raise ValueError
        data = json.loads(marker.read_text(encoding="utf-8"))
        files = data["files"]
        written_by = data["command"]
        if not isinstance(files, dict) or not isinstance(written_by, str):
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError):
        raise refuse(f"{MANIFEST} is not a manifest gamut can read") from None
    if written_by != command:
        raise refuse(f"holds the output of gamut {shown(written_by)}, not of gamut {command}")
    manifest: dict[str, list[str]] = {}
    for name, digests in files.items():
        relative = _relative(name)
        if relative is not None and isinstance(digests, list):
            manifest[relative] = [d for d in digests if isinstance(d, str)]
    return manifest


def _write_manifest(folder: Path, command: str, files: dict[str, list[str]]) -> None:
    manifest = {"command": command, "files": dict(sorted(files.items()))}
    write_text(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")


class OwnedFolder:
    """Write a command's files into ``target``, replacing only files the same command wrote.

    The rule for every command that writes a folder: it writes only inside a folder that is new,
    empty, or carries its own marker, :data:`MANIFEST` (the command's name and each file it wrote,
    with its SHA-256). Files are staged beside ``target`` while the command runs; on success each
    one is renamed into place (atomic per file), the files the previous manifest listed that this
    run did not write are removed (stale outputs), and the new manifest is written. Nothing else
    is touched: a file the command did not write, or one changed since it wrote it, is never
    replaced or removed; where the run would replace one, it is refused before anything is
    written. On a failure ``target`` is left as it was.

    ``others_allowed``: whether files of others may stay beside the command's own (a report
    written into a paper's folder); if not, a folder that is not empty and has no manifest of
    this command is refused at once (an annotation folder is not an export's to replace).
    ``advice`` ends the one-line refusal: what to do instead.

    >>> with OwnedFolder(out, "report", others_allowed=True, advice="...") as folder:
    ...     folder.write_text("report.md", text)
    ...     frame.to_csv(folder.path("tables/leaderboard.csv"))
    """

    def __init__(self, target: str | Path, command: str, *, others_allowed: bool, advice: str) -> None:
        self.target = Path(target)
        self.command = command
        self.others_allowed = others_allowed
        self.advice = advice
        self.previous: dict[str, list[str]] = {}
        self._staging: Path | None = None

    # -- reading the folder as it is ---------------------------------------------------------

    def _refuse(self, what: str) -> FolderNotOwnedError:
        return FolderNotOwnedError(f"{self.target}: {what}; {self.advice}")

    def _read_manifest(self) -> dict[str, list[str]] | None:
        return read_manifest(self.target, self.command, self._refuse)

    def _ours(self, relative: str) -> bool:
        """Whether ``target/relative`` is a plain file this command wrote, unchanged since."""
        path = self.target / relative
        return (
            relative in self.previous
            and not path.is_symlink()
            and path.is_file()
            and _digest(path) in self.previous[relative]
        )

    def __enter__(self) -> OwnedFolder:
        target = self.target
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise self._refuse("exists and is not a folder")
        manifest = self._read_manifest() if target.is_dir() else None
        if manifest is None and target.is_dir() and not self.others_allowed:
            strangers = sorted(child.name for child in target.iterdir())
            if strangers:
                raise self._refuse(
                    f"holds {len(strangers)} file(s) or folder(s) that gamut {self.command} did not write "
                    f"(first: {shown(strangers[0])})"
                )
        self.previous = manifest or {}
        self._staging = staging_folder(target)
        return self

    # -- writing -----------------------------------------------------------------------------

    def path(self, relative: str) -> Path:
        """Where to write the file ``relative`` (``tables/x.csv``) now; it lands in ``target`` on success."""
        if self._staging is None:
            raise RuntimeError("OwnedFolder.path outside its with block")
        if _relative(relative) is None:
            raise ValueError(f"not a plain relative path: {relative!r}")
        staged = self._staging / relative
        staged.parent.mkdir(parents=True, exist_ok=True)
        return staged

    def folder(self, relative: str) -> Path:
        """A folder that exists in ``target`` on success, even if no file lands in it."""
        if self._staging is None:
            raise RuntimeError("OwnedFolder.folder outside its with block")
        staged = self._staging / relative
        staged.mkdir(parents=True, exist_ok=True)
        return staged

    def write_bytes(self, relative: str, data: bytes) -> None:
        self.path(relative).write_bytes(data)

    def write_text(self, relative: str, text: str) -> None:
        self.path(relative).write_bytes(text.encode("utf-8"))

    def _commit(self, staging: Path) -> None:
        target = self.target
        folders: list[str] = []
        files: list[str] = []
        for root, dirs, names in os.walk(staging):
            base = Path(root).relative_to(staging)
            folders += [(base / name).as_posix() for name in dirs]
            files += [(base / name).as_posix() for name in names]
        written = {relative: [_digest(staging / relative)] for relative in sorted(files)}
        if not target.exists():  # a new folder: all of it appears at once
            _write_manifest(staging, self.command, written)
            fsync_tree(staging)
            try:  # a plain rename: onto a folder made meanwhile that is not empty, it fails
                staging.rename(target)
            except OSError:
                (staging / MANIFEST).unlink()
            else:
                _fsync_folder(target.parent)
                return
        # Refuse before anything is written: nothing of another's may be replaced.
        for relative in folders:
            there = target / relative
            if there.is_symlink() or (there.exists() and not there.is_dir()):
                raise self._refuse(f"{relative} is in the way and is not a folder gamut {self.command} made")
        for relative in written:
            there = target / relative
            if (there.exists() or there.is_symlink()) and not self._ours(relative):
                raise self._refuse(
                    f"{relative} was not written by gamut {self.command} (or was changed since); "
                    "move it away to let it be replaced"
                )
        stale = [relative for relative in self.previous if relative not in written and self._ours(relative)]
        fsync_tree(staging)
        # While files move, the manifest claims both the old and the new content of each: a crash
        # at any point leaves every file of this command's claimed, so a rerun is never stuck.
        during = {name: self.previous.get(name, []) + digests for name, digests in written.items()}
        _write_manifest(target, self.command, {**{name: self.previous[name] for name in stale}, **during})
        for relative in folders:
            (target / relative).mkdir(parents=True, exist_ok=True)
        for relative in written:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / relative, target / relative)
        for relative in stale:
            (target / relative).unlink(missing_ok=True)
        for parent in {(target / relative).parent for relative in [*written, *stale]}:
            _fsync_folder(parent)
        _write_manifest(target, self.command, written)

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        staging, self._staging = self._staging, None
        if staging is None:
            return
        try:
            if kind is None:
                self._commit(staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


# -- folders a command fills over time -----------------------------------------------------------


def claim_folder(target: str | Path, command: str, *, names: Collection[str], advice: str) -> Path:
    """Make ``target`` the folder of ``command``, one it fills over time (a run store that grows
    as work is done, outputs rewritten at the end), under the rule of :class:`OwnedFolder`: the
    folder must be new, empty, or carry ``command``'s manifest.

    ``names`` are the files (and folders) such a folder is made of (``store.sqlite``,
    ``results.json``...): the manifest claims them, and they are the only ones the command writes
    there. A folder without a manifest that holds nothing but these names (written by a gamut-hf
    from before manifests) is claimed as it is; one holding anything else is refused, as is a
    file, or a folder of another command.
    """
    target = Path(target)

    def refuse(what: str) -> FolderNotOwnedError:
        return FolderNotOwnedError(f"{target}: {what}; {advice}")

    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise refuse("exists and is not a folder")
    try:
        manifest = read_manifest(target, command, refuse) if target.is_dir() else None
        strangers = []
        if manifest is None and target.is_dir():
            strangers = sorted(child.name for child in target.iterdir() if child.name not in {*names, LOCK})
    except OSError as error:
        raise refuse(f"cannot be read ({error.strerror or error})") from None
    if strangers:
        raise refuse(
            f"holds {len(strangers)} file(s) or folder(s) that gamut {command} did not write "
            f"(first: {shown(strangers[0])})"
        )
    claimed = {name: (manifest or {}).get(name, []) for name in names}
    if manifest is None or not claimed.keys() <= manifest.keys():
        try:
            target.mkdir(parents=True, exist_ok=True)
            _write_manifest(target, command, {**(manifest or {}), **claimed})
        except OSError as error:
            raise refuse(f"cannot be written ({error.strerror or error})") from None
    return target


@contextmanager
def claimed_folder(target: str | Path, command: str, *, names: Collection[str], advice: str) -> Iterator[Path]:
    """:func:`claim_folder`, then hold the folder locked while the command writes there: a second
    command writing into it at the same time is refused in one line instead of mixing two runs
    (the lock dies with its process, so a killed run never leaves the folder stuck)."""
    from filelock import FileLock, Timeout

    folder = claim_folder(target, command, names=names, advice=advice)
    lock = FileLock(folder / LOCK, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise FolderNotOwnedError(
            f"{folder}: another gamut {command} is writing into it now; wait for it to end"
        ) from None
    except OSError as error:
        raise FolderNotOwnedError(f"{folder}: cannot be written ({error.strerror or error}); {advice}") from None
    try:
        yield folder
    finally:
        lock.release()
