"""The submission queue: one request file per submission, as in the Hugging Face leaderboard template.

``REQUESTS/<key>.json`` holds the model card, who submitted it and when, and a status that
goes PENDING -> RUNNING -> FINISHED or FAILED (with the reason); ``REQUESTS/<key>.jsonl`` holds
the validated responses, rewritten by us (never the raw upload). ``key`` comes from
:func:`gamut_hf.submission.storage_key`, never from user text directly. Every write goes to a
temporary file renamed into place, and a worker claims a request with an exclusive lock file,
so a crash leaves either the old file or the new one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from gamut_hf.submission import ModelInfo, Submission, SubmissionError, storage_key

Status = Literal["PENDING", "RUNNING", "FINISHED", "FAILED"]
MAX_PER_DAY = 3


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


def _now() -> datetime:
    return datetime.now(UTC)


def _write_atomically(path: Path, text: str) -> None:
    staging = path.with_name(path.name + ".partial")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, path)


class RequestQueue:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def records(self) -> Iterator[RequestRecord]:
        for path in sorted(self.folder.glob("*.json")):
            yield RequestRecord.model_validate_json(path.read_text(encoding="utf-8"))

    def get(self, key: str) -> RequestRecord | None:
        path = self.folder / f"{key}.json"
        return RequestRecord.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None

    def responses(self, key: str) -> dict[str, str]:
        with (self.folder / f"{key}.jsonl").open(encoding="utf-8") as handle:
            return {r["question_id"]: r["response"] for r in map(json.loads, handle)}

    def files(self, key: str) -> list[Path]:
        """The files of one request (what a hub mirror pushes after a change)."""
        return [path for path in (self.folder / f"{key}.json", self.folder / f"{key}.jsonl") if path.is_file()]

    def _save(self, record: RequestRecord) -> None:
        _write_atomically(self.folder / f"{record.key}.json", record.model_dump_json(indent=2) + "\n")

    def submit(self, submission: Submission, user: str, *, now: datetime | None = None) -> RequestRecord:
        """Queue a validated submission as PENDING, within the per-user limits."""
        now = now or _now()
        key = storage_key(submission.model)
        mine = [r for r in self.records() if r.submitted_by == user]
        waiting = [r for r in mine if r.status in ("PENDING", "RUNNING")]
        if waiting:
            raise SubmissionError([f"you already have a submission waiting ({waiting[0].model.name}, "
                                   f"{waiting[0].status}); one at a time"])
        today = [r for r in mine if r.submitted_at > now - timedelta(days=1)]
        if len(today) >= MAX_PER_DAY:
            raise SubmissionError([f"you have submitted {len(today)} times in the last 24 hours; the limit is "
                                   f"{MAX_PER_DAY}"])
        existing = self.get(key)
        if existing is not None and existing.status != "FAILED":
            raise SubmissionError([f"{submission.model.name} ({submission.model.variant}) is already on the board "
                                   f"or in the queue ({existing.status})"])
        lines = "".join(json.dumps({"question_id": q, "response": r}, ensure_ascii=False) + "\n"
                        for q, r in submission.responses.items())
        _write_atomically(self.folder / f"{key}.jsonl", lines)
        record = RequestRecord(key=key, model=submission.model, status="PENDING", submitted_by=user, submitted_at=now,
                               updated_at=now, partial=submission.partial, questions=len(submission.responses))
        self._save(record)
        return record

    def claim(self) -> RequestRecord | None:
        """The oldest PENDING request, now RUNNING; None when nothing waits (or another worker has them)."""
        for record in sorted(self.records(), key=lambda r: r.submitted_at):
            if record.status != "PENDING":
                continue
            lock = self.folder / f"{record.key}.lock"
            try:
                os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            record = record.model_copy(update={"status": "RUNNING", "updated_at": _now()})
            self._save(record)
            return record
        return None

    def finish(self, record: RequestRecord, status: Literal["FINISHED", "FAILED"], reason: str | None = None) -> RequestRecord:
        record = record.model_copy(update={"status": status, "reason": reason, "updated_at": _now()})
        self._save(record)
        (self.folder / f"{record.key}.lock").unlink(missing_ok=True)
        return record
