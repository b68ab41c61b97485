"""The submission queue: one request file per submission, as in the Hugging Face leaderboard template.

``REQUESTS/<key>.json`` holds the model card, who submitted it and when, and a status that
goes PENDING -> RUNNING -> FINISHED or FAILED (with the reason); ``REQUESTS/<key>.jsonl`` holds
the validated responses, rewritten by us (never the raw upload).

A try that fails for the judge's reasons (its endpoint or engine down, checks left unjudged)
is not the submitter's doing: the request goes back to PENDING with ``retry_after`` set, after
growing waits (:data:`RETRY_WAITS`), and ends FAILED only once the waits are used up. A failure
of the submission's own (its upload unreadable or invalid) is FAILED at once. A FAILED request
is put back by the maintainer (``gamut worker --retry-failed`` or ``--requeue KEY``), without
counting as a new submission. ``key`` comes from
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
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from filelock import FileLock
from pydantic import BaseModel, Field, ValidationError

from gamut_hf.atomic import write_text
from gamut_hf.errors import GamutError, first_problem, shown
from gamut_hf.files import InputError, read_bytes, read_text
from gamut_hf.leaderboard.submission import (
    MAX_UPLOAD_BYTES,
    ModelInfo,
    Submission,
    SubmissionError,
    parse_responses,
    storage_key,
)

Status = Literal["PENDING", "RUNNING", "FINISHED", "FAILED"]
# Whose failure ended a try: the submission's (its upload) is final; the judge's is tried again.
Fault = Literal["submission", "judge"]
MAX_PER_DAY = 3
LEASE = timedelta(minutes=10)  # a claim not renewed for this long is free to take over
MAX_REQUEST_BYTES = 1024 * 1024  # a request file is a card and a status: a few hundred bytes
# After a try that failed for the judge's reasons, the wait before the next: an outage of a few
# minutes costs a submission nothing, a longer one ends it FAILED after len(RETRY_WAITS) + 1 tries.
RETRY_WAITS = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30))
KEPT = "the submission is kept, and `gamut worker --retry-failed` judges it again"  # what a FAILED one can expect


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
    # Fields added later have defaults, so request files written before them still load.
    attempts: int = Field(0, ge=0)  # tries that failed for the judge's reasons
    retry_after: datetime | None = None  # a PENDING request waiting to be tried again is not claimed before
    fault: Fault | None = None  # whose failure a FAILED request's was


class RequeueRefused(GamutError):
    """A request the maintainer asked to put back that is not FAILED (nor waiting to be tried again)."""


class ClaimLost(GamutError):
    """Another worker took the request over (this worker's heartbeat was older than the lease)."""


class RequestFileError(GamutError):
    """A request's file that cannot be read; the message names the file by its name only (it is
    shown in the public queue, where the server's paths have no place)."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _now() -> datetime:
    return datetime.now(UTC)


def tries(count: int) -> str:
    return f"{count} {'try' if count == 1 else 'tries'}"


def due(record: RequestRecord, now: datetime) -> bool:
    """A PENDING request that is not waiting for the time of its next try."""
    return record.status == "PENDING" and (record.retry_after is None or record.retry_after <= now)


def retryable(record: RequestRecord) -> bool:
    """A FAILED request whose failure is not known to be the submission's (requests that failed
    before faults were recorded count as the judge's: one more try costs little)."""
    return record.status == "FAILED" and record.fault != "submission"


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
        name = shown(path.name)  # a name holding a line break or undecodable bytes stays one quoted line
        if path.is_symlink():  # it would be read from, and its reason shown, wherever it points
            raise RequestFileError(f"{name}: is a symbolic link; a request is a plain file in the folder")
        try:
            record = RequestRecord.model_validate_json(read_text(path, max_bytes=MAX_REQUEST_BYTES))
        except InputError as error:
            raise RequestFileError(f"{name}: {error.reason}") from None
        except ValidationError as error:
            where, message = first_problem(error)
            raise RequestFileError(f"{name}: {f'{where}: ' if where else ''}{message}") from None
        if record.key != path.stem:  # the key names the files a worker reads and writes
            raise RequestFileError(f"{name}: its key {record.key!r} is not its file name")
        return record

    def records(self) -> list[RequestRecord]:
        """Every readable request, by file name; the others are skipped (see :attr:`unreadable`)."""
        records: list[RequestRecord] = []
        unreadable: dict[str, str] = {}
        for path in sorted(self.folder.glob("*.json")):
            try:
                records.append(self._read(path))
            except RequestFileError as error:
                name = shown(path.name)
                unreadable[name] = str(error).removeprefix(f"{name}: ")
                if self.unreadable.get(name) != unreadable[name]:  # logged once, not every poll
                    self.echo(f"skipping {error}")
        self.unreadable = unreadable
        return records

    def get(self, key: str) -> RequestRecord | None:
        """The request ``key``; None when it has no file. RequestFileError when its file is unreadable."""
        path = self.folder / f"{key}.json"
        return self._read(path) if path.exists() or path.is_symlink() else None

    def responses(self, key: str, known_ids: Collection[str] | None = None, *, partial: bool = True) -> dict[str, str]:
        """A request's responses, checked as an upload is against ``known_ids`` (the questions
        judged; by default those the file answers), every question unless ``partial``.
        RequestFileError naming the file (not its path) when they cannot be read or taken."""
        name = f"{key}.jsonl"
        path = self.folder / name
        try:
            if path.is_symlink():  # what it points to is no upload of ours
                raise InputError(f"{name}: is a symbolic link", reason="is a symbolic link, not an upload")
            data = read_bytes(path, max_bytes=MAX_UPLOAD_BYTES)
        except InputError as error:
            raise RequestFileError(f"{name}: {error.reason}") from None
        try:
            return parse_responses(data, known_ids, partial=partial)
        except SubmissionError as error:
            raise RequestFileError(f"{name}: {error}") from None

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
        """The oldest PENDING request that is due (or RUNNING one whose claim is stale), now
        RUNNING for ``worker``; None when nothing is free."""
        now = now or _now()
        with self._claims():
            for record in sorted(self.records(), key=lambda r: r.submitted_at):
                if due(record, now) or stale(record, now, lease):
                    record = record.model_copy(
                        update={
                            "status": "RUNNING",
                            "worker": worker,
                            "heartbeat": now,
                            "updated_at": now,
                            "reason": None,
                            "retry_after": None,
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
        self,
        record: RequestRecord,
        status: Literal["FINISHED", "FAILED"],
        reason: str | None = None,
        *,
        fault: Fault | None = None,
    ) -> RequestRecord:
        """End a claim; ClaimLost (nothing written) when another worker took it over meanwhile."""
        with self._claims():
            record = self._held(record).model_copy(
                update={"status": status, "reason": reason, "fault": fault, "heartbeat": None, "updated_at": _now()}
            )
            self._save(record)
        return record

    def fail(
        self,
        record: RequestRecord,
        reason: str,
        fault: Fault,
        *,
        waits: Sequence[timedelta] = RETRY_WAITS,
        now: datetime | None = None,
    ) -> RequestRecord:
        """End a claim that failed. The submission's fault is final (FAILED); the judge's puts the
        request back as PENDING, due after the next of ``waits``, until they are used up (then
        FAILED with the count of tries). ClaimLost as :meth:`finish`."""
        if fault == "submission":
            return self.finish(record, "FAILED", reason, fault=fault)
        now = now or _now()
        with self._claims():
            held = self._held(record)
            attempts = held.attempts + 1
            update: dict[str, object] = {"attempts": attempts, "heartbeat": None, "updated_at": now}
            if attempts > len(waits):
                reason = f"failed after {tries(attempts)}: {reason}; {KEPT}"
                update |= {"status": "FAILED", "reason": reason, "fault": fault}
            else:
                retry_after = now + waits[attempts - 1]
                update |= {
                    "status": "PENDING",
                    "reason": f"try {attempts} of {len(waits) + 1} failed: {reason}; "
                    f"tried again after {retry_after.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC",
                    "retry_after": retry_after,
                    "worker": None,
                }
            record = held.model_copy(update=update)
            self._save(record)
        return record

    def _put_back(self, record: RequestRecord, now: datetime) -> RequestRecord:
        record = record.model_copy(
            update={
                "status": "PENDING",
                "reason": None,
                "fault": None,
                "attempts": 0,
                "retry_after": None,
                "worker": None,
                "heartbeat": None,
                "updated_at": now,
            }
        )
        self._save(record)
        return record

    def retry_failed(self, *, now: datetime | None = None) -> list[RequestRecord]:
        """Put every FAILED request that was not the submission's fault back to PENDING, due now,
        with its tries counted afresh; the ones put back, oldest first."""
        now = now or _now()
        with self._claims():
            failed = sorted((r for r in self.records() if retryable(r)), key=lambda r: r.submitted_at)
            return [self._put_back(record, now) for record in failed]

    def requeue(self, key: str, *, now: datetime | None = None) -> RequestRecord:
        """Put the FAILED request ``key`` back to PENDING whatever its fault (the maintainer fixed
        what failed), or make one waiting to be tried again due now; RequeueRefused otherwise."""
        now = now or _now()
        with self._claims():
            try:
                record = self.get(key)
            except RequestFileError as error:
                raise RequeueRefused(f"cannot put {key} back: {error}") from None
            if record is None:
                raise RequeueRefused(f"no request {key} in {self.folder}")
            if record.status == "FAILED" or record.status == "PENDING":
                return self._put_back(record, now)
            raise RequeueRefused(f"{key} is {record.status}; only a FAILED or PENDING request can be put back")
