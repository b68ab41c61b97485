"""The submission queue: one request file per submission, as in the Hugging Face leaderboard template.

``REQUESTS/<key>.json`` holds the model card, who submitted it and when, and a status that
goes PENDING -> RUNNING -> FINISHED or FAILED (with the reason); ``REQUESTS/<key>.jsonl`` holds
the validated responses, rewritten by us (never the raw upload). ``key`` comes from
:func:`gamut_hf.leaderboard.submission.storage_key`, never from user text directly. Every write goes to a
temporary file renamed into place (:mod:`gamut_hf.atomic`), so a crash leaves either the old
file or the new one.

A claim is a lease written into the request file itself: RUNNING, the worker's id and a
heartbeat time the worker renews while it judges. A claim whose heartbeat is older than the
lease belongs to a worker that died, and any worker may take it over. Workers sharing one
folder take claims under a file lock (released by the system when a process dies); workers on
different machines share the request files through a hub repository, where the hub's commit
decides between two claims (see :func:`gamut_hf.leaderboard.worker.claim_next`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from filelock import FileLock
from pydantic import BaseModel, ValidationError

from gamut_hf.atomic import write_text
from gamut_hf.errors import GamutError, first_problem
from gamut_hf.files import InputError, jsonl_lines, read_text
from gamut_hf.leaderboard.submission import (
    ModelInfo,
    Submission,
    SubmissionError,
    storage_key,
)

Status = Literal["PENDING", "RUNNING", "FINISHED", "FAILED"]
MAX_PER_DAY = 3
LEASE = timedelta(minutes=10)  # a claim not renewed for this long is free to take over
MAX_REQUEST_BYTES = 1024 * 1024  # a request file is a card and a status: a few hundred bytes


class RequestRecord(BaseModel):
    key: str
    model: ModelInfo
    status: Status
    submitted_by: str
    submitted_at: datetime
    updated_at: datetime
    partial: bool
    questions: int
    reason: str | None = None
    worker: str | None = None  # who holds the claim (RUNNING)
    heartbeat: datetime | None = None  # when that worker last renewed it


class ClaimLost(GamutError):
    """Another worker took the request over (this worker's heartbeat was older than the lease)."""


class RequestFileError(GamutError):
    """A request's file that cannot be read; the message names the file by its name only (it is
    shown in the public queue, where the server's paths have no place)."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _now() -> datetime:
    return datetime.now(UTC)


def stale(record: RequestRecord, now: datetime, lease: timedelta = LEASE) -> bool:
    """A RUNNING request whose worker stopped renewing its claim (a claim from before heartbeats
    counts from its last update)."""
    return record.status == "RUNNING" and (record.heartbeat or record.updated_at) < now - lease


class RequestQueue:
    """The request files of one folder. A file that cannot be read as a request (malformed JSON, a
    foreign object, not a regular file) is skipped, never fatal: it is logged once through ``echo``
    and listed in :attr:`unreadable`, so the Space can show it and every worker moves past it."""

    def __init__(self, folder: str | Path, echo: Callable[[str], None] = _stderr):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.echo = echo
        self.unreadable: dict[str, str] = {}  # file name -> why it was skipped, as of the last read

    def _read(self, path: Path) -> RequestRecord:
        """One request file; RequestFileError naming the file by its name when it is no request."""
        try:
            record = RequestRecord.model_validate_json(read_text(path, max_bytes=MAX_REQUEST_BYTES))
        except InputError as error:
            raise RequestFileError(f"{path.name}: {error.reason}") from None
        except ValidationError as error:
            where, message = first_problem(error)
            raise RequestFileError(f"{path.name}: {f'{where}: ' if where else ''}{message}") from None
        if record.key != path.stem:  # the key names the files a worker reads and writes
            raise RequestFileError(f"{path.name}: its key {record.key!r} is not its file name")
        return record

    def records(self) -> list[RequestRecord]:
        """Every readable request, by file name; the others are skipped (see :attr:`unreadable`)."""
        records: list[RequestRecord] = []
        unreadable: dict[str, str] = {}
        for path in sorted(self.folder.glob("*.json")):
            try:
                records.append(self._read(path))
            except RequestFileError as error:
                unreadable[path.name] = str(error).removeprefix(f"{path.name}: ")
                if self.unreadable.get(path.name) != unreadable[path.name]:  # logged once, not every poll
                    self.echo(f"skipping {error}")
        self.unreadable = unreadable
        return records

    def get(self, key: str) -> RequestRecord | None:
        """The request ``key``; None when it has no file. RequestFileError when its file is unreadable."""
        path = self.folder / f"{key}.json"
        return self._read(path) if path.exists() or path.is_symlink() else None

    def responses(self, key: str) -> dict[str, str]:
        """A request's responses; RequestFileError naming the file (not its path) when they cannot be read."""
        name = f"{key}.jsonl"
        try:
            text = read_text(self.folder / name)
        except InputError as error:
            raise RequestFileError(f"{name}: {error.reason}") from None
        try:
            records = [json.loads(line) for _, line in jsonl_lines(text)]
            return {record["question_id"]: record["response"] for record in records}
        except (ValueError, KeyError, TypeError) as error:  # written by us: only damage gets here
            raise RequestFileError(f"{name}: damaged ({type(error).__name__}: {error})".splitlines()[0]) from None

    def files(self, key: str) -> list[Path]:
        """The files of one request (what a hub mirror pushes after a change)."""
        return [path for path in (self.folder / f"{key}.json", self.folder / f"{key}.jsonl") if path.is_file()]

    def _save(self, record: RequestRecord) -> None:
        write_text(self.folder / f"{record.key}.json", record.model_dump_json(indent=2) + "\n")

    def submit(self, submission: Submission, user: str, *, now: datetime | None = None) -> RequestRecord:
        """Queue a validated submission as PENDING, within the per-user limits."""
        now = now or _now()
        key = storage_key(submission.model)
        mine = [r for r in self.records() if r.submitted_by == user]
        waiting = [r for r in mine if r.status in ("PENDING", "RUNNING")]
        if waiting:
            raise SubmissionError(
                [f"you already have a submission waiting ({waiting[0].model.name}, {waiting[0].status}); one at a time"]
            )
        today = [r for r in mine if r.submitted_at > now - timedelta(days=1)]
        if len(today) >= MAX_PER_DAY:
            raise SubmissionError(
                [f"you have submitted {len(today)} times in the last 24 hours; the limit is {MAX_PER_DAY}"]
            )
        try:
            existing = self.get(key)
        except RequestFileError:  # an unreadable file in its place holds no request: the new one replaces it
            existing = None
        if existing is not None and existing.status != "FAILED":
            raise SubmissionError(
                [
                    f"{submission.model.name} ({submission.model.variant}) is already on the board "
                    f"or in the queue ({existing.status})"
                ]
            )
        lines = "".join(
            json.dumps({"question_id": q, "response": r}, ensure_ascii=False) + "\n"
            for q, r in submission.responses.items()
        )
        write_text(self.folder / f"{key}.jsonl", lines)
        record = RequestRecord(
            key=key,
            model=submission.model,
            status="PENDING",
            submitted_by=user,
            submitted_at=now,
            updated_at=now,
            partial=submission.partial,
            questions=len(submission.responses),
        )
        self._save(record)
        return record

    def _claims(self) -> FileLock:
        # One claim change at a time among the workers of this folder; the lock dies with its process.
        return FileLock(self.folder / ".claims.lock")

    def claim(self, worker: str, *, lease: timedelta = LEASE, now: datetime | None = None) -> RequestRecord | None:
        """The oldest PENDING request (or RUNNING one whose claim is stale), now RUNNING for
        ``worker``; None when nothing is free."""
        now = now or _now()
        with self._claims():
            for record in sorted(self.records(), key=lambda r: r.submitted_at):
                if record.status == "PENDING" or stale(record, now, lease):
                    record = record.model_copy(
                        update={
                            "status": "RUNNING",
                            "worker": worker,
                            "heartbeat": now,
                            "updated_at": now,
                            "reason": None,
                        }
                    )
                    self._save(record)
                    return record
        return None

    def _held(self, record: RequestRecord) -> RequestRecord:
        try:
            current = self.get(record.key)
        except RequestFileError as error:  # its file was damaged meanwhile: no claim to hold any more
            raise ClaimLost(f"{record.key}: the claim of {record.worker} cannot be read back ({error})") from None
        if current is None or current.status != "RUNNING" or current.worker != record.worker:
            holder = f"{current.status} by {current.worker or 'nobody'}" if current is not None else "gone"
            raise ClaimLost(f"{record.key}: the claim of {record.worker} was taken over ({holder})")
        return current

    def renew(self, record: RequestRecord, *, now: datetime | None = None) -> RequestRecord:
        """Renew the claim's heartbeat; ClaimLost when another worker holds it now."""
        now = now or _now()
        with self._claims():
            record = self._held(record).model_copy(update={"heartbeat": now, "updated_at": now})
            self._save(record)
        return record

    def release(self, record: RequestRecord) -> RequestRecord:
        """Give a claim back untouched (PENDING), e.g. when it could not be made visible to other workers."""
        with self._claims():
            record = self._held(record).model_copy(
                update={"status": "PENDING", "worker": None, "heartbeat": None, "updated_at": _now()}
            )
            self._save(record)
        return record

    def finish(
        self, record: RequestRecord, status: Literal["FINISHED", "FAILED"], reason: str | None = None
    ) -> RequestRecord:
        """End a claim; ClaimLost (nothing written) when another worker took it over meanwhile."""
        with self._claims():
            record = self._held(record).model_copy(
                update={"status": status, "reason": reason, "heartbeat": None, "updated_at": _now()}
            )
            self._save(record)
        return record
