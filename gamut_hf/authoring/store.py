"""The authoring workspace: one folder, one SQLite file, every stage's output and every human edit.

``DIR/authoring.sqlite`` (WAL, one transaction per change) holds

- ``proposals``: every candidate question an image got, kept or rejected, with the reasons;
- ``questions``: the selected questions, their current meta-rubric, the human-edited binary
  rubric (null until someone edits it) and the review status;
- ``rounds``: each drafting round's raw model output and the validation errors it got back;
- ``audits``: the self-refinement findings per question;
- ``edits``: the audit trail, one row per human change (who, when, what, before, after).

Images are copied into ``DIR/images``; rubrics and audits are also written as JSON beside
them in ``DIR/rubrics`` so a reviewer can read them without the app.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gamut_hf.atomic import claim_folder

SCHEMA = """
CREATE TABLE IF NOT EXISTS proposals (
    image TEXT, candidate INTEGER, question TEXT, text_question TEXT, entity TEXT, domain TEXT,
    status TEXT, reasons TEXT, research INTEGER, PRIMARY KEY (image, candidate));
CREATE TABLE IF NOT EXISTS questions (
    id TEXT PRIMARY KEY, image TEXT, domain TEXT, question TEXT, text_question TEXT, entity TEXT,
    meta_rubric TEXT, binary_rubric TEXT, stage TEXT, status TEXT, updated_at TEXT);
CREATE TABLE IF NOT EXISTS rounds (
    question_id TEXT, round INTEGER, raw TEXT, errors TEXT, PRIMARY KEY (question_id, round));
CREATE TABLE IF NOT EXISTS audits (question_id TEXT PRIMARY KEY, findings TEXT);
CREATE TABLE IF NOT EXISTS edits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, question_id TEXT, who TEXT, at TEXT, field TEXT,
    before TEXT, after TEXT);
"""

# stage: proposed -> drafted | draft_failed -> refined; status (the review): open, accepted, rejected, rework
STAGES = ("proposed", "drafted", "draft_failed", "refined")
STATUSES = ("open", "accepted", "rejected", "rework")
COALESCE = timedelta(seconds=60)
EDITABLE = ("question", "text_question", "binary_rubric", "status")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class AuthoredQuestion:
    id: str
    image: str
    domain: str
    question: str
    text_question: str
    entity: str
    meta_rubric: dict | None
    binary_rubric: list | None
    stage: str
    status: str
    updated_at: str


# What a workspace is made of: the store (and SQLite's files beside it), the photos, the rubrics
# written as questions are accepted, and the review app's exports.
WORKSPACE_FILES = (
    "authoring.sqlite",
    "authoring.sqlite-wal",
    "authoring.sqlite-shm",
    "authoring.sqlite-journal",
    "images",
    "rubrics",
    "exports",
)


class AuthoringStore:
    """The workspace's store; safe to share between threads (the review app serves each request
    on a worker thread): every thread gets its own SQLite connection, so one thread's transaction
    or rollback never touches another's, and SQLite's own locking orders their writes."""

    BUSY_TIMEOUT_S = 30.0

    def __init__(self, folder: str | Path):
        # The workspace is the authoring commands' own folder: never one of another's files.
        self.folder = claim_folder(
            folder, "author", names=WORKSPACE_FILES, advice="choose a new or empty folder for the workspace"
        )
        (self.folder / "images").mkdir(exist_ok=True)
        (self.folder / "rubrics").mkdir(exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.db.executescript(SCHEMA)

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(
                self.folder / "authoring.sqlite",
                isolation_level=None,
                timeout=self.BUSY_TIMEOUT_S,
                check_same_thread=False,
            )
            connection.execute("PRAGMA journal_mode=WAL")
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()

    def __enter__(self) -> AuthoringStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- proposals ---------------------------------------------------------------------------

    def put_proposals(self, rows: list[dict]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO proposals VALUES (:image, :candidate, :question, :text_question, :entity, "
                ":domain, :status, :reasons, :research)",
                [{**row, "reasons": json.dumps(row["reasons"])} for row in rows],
            )

    def proposals(self) -> list[dict]:
        rows = self.db.execute("SELECT * FROM proposals ORDER BY image, candidate").fetchall()
        names = [d[0] for d in self.db.execute("SELECT * FROM proposals LIMIT 0").description]
        return [{**dict(zip(names, r, strict=False)), "reasons": json.loads(r[names.index("reasons")])} for r in rows]

    # -- questions ---------------------------------------------------------------------------

    def put_question(self, q: AuthoredQuestion) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO questions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                q.id,
                q.image,
                q.domain,
                q.question,
                q.text_question,
                q.entity,
                None if q.meta_rubric is None else json.dumps(q.meta_rubric),
                None if q.binary_rubric is None else json.dumps(q.binary_rubric),
                q.stage,
                q.status,
                now(),
            ),
        )
        if q.meta_rubric is not None:
            (self.folder / "rubrics" / f"{q.id}.json").write_text(
                json.dumps(q.meta_rubric, indent=2) + "\n", encoding="utf-8"
            )

    def questions(self) -> list[AuthoredQuestion]:
        return [self._question(row) for row in self.db.execute("SELECT * FROM questions ORDER BY id")]

    def question(self, question_id: str) -> AuthoredQuestion | None:
        row = self.db.execute("SELECT * FROM questions WHERE id = ?", (question_id,)).fetchone()
        return self._question(row) if row else None

    @staticmethod
    def _question(row: tuple) -> AuthoredQuestion:
        values = list(row)
        values[6] = json.loads(values[6]) if values[6] else None
        values[7] = json.loads(values[7]) if values[7] else None
        return AuthoredQuestion(*values)

    # -- drafting and auditing ---------------------------------------------------------------

    def put_round(self, question_id: str, number: int, raw: str, errors: list[str]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO rounds VALUES (?, ?, ?, ?)", (question_id, number, raw, json.dumps(errors))
        )

    def rounds(self, question_id: str) -> list[tuple[int, str, list[str]]]:
        rows = self.db.execute(
            "SELECT round, raw, errors FROM rounds WHERE question_id = ? ORDER BY round", (question_id,)
        )
        return [(n, raw, json.loads(errors)) for n, raw, errors in rows]

    def put_audit(self, question_id: str, findings: dict) -> None:
        self.db.execute("INSERT OR REPLACE INTO audits VALUES (?, ?)", (question_id, json.dumps(findings)))
        (self.folder / "rubrics" / f"{question_id}.audit.json").write_text(
            json.dumps(findings, indent=2) + "\n", encoding="utf-8"
        )

    def audit(self, question_id: str) -> dict | None:
        row = self.db.execute("SELECT findings FROM audits WHERE question_id = ?", (question_id,)).fetchone()
        return json.loads(row[0]) if row else None

    # -- human review ------------------------------------------------------------------------

    def edit(self, question_id: str, who: str, field: str, after: Any) -> None:
        """One human change, saved at once with who and when; the trail keeps the value before."""
        if field not in EDITABLE:  # also what makes the column name below safe to format in
            raise ValueError(f"{field!r} is not editable; expected one of {', '.join(EDITABLE)}")
        stored = json.dumps(after) if field == "binary_rubric" else after
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            before = self.db.execute(f"SELECT {field} FROM questions WHERE id = ?", (question_id,)).fetchone()
            if before is None:
                raise KeyError(question_id)
            if before[0] == stored:
                return
            self.db.execute(
                f"UPDATE questions SET {field} = ?, updated_at = ? WHERE id = ?", (stored, now(), question_id)
            )
            last = self.db.execute(
                "SELECT seq, who, field, at FROM edits WHERE question_id = ? ORDER BY seq DESC LIMIT 1", (question_id,)
            ).fetchone()
            if (
                last is not None
                and last[1] == who
                and last[2] == field
                and field != "status"
                and datetime.now(UTC) - datetime.fromisoformat(last[3]) < COALESCE
            ):
                # The same person still typing in the same field: one trail entry, from the first value.
                self.db.execute("UPDATE edits SET after = ?, at = ? WHERE seq = ?", (stored, now(), last[0]))
            else:
                self.db.execute(
                    "INSERT INTO edits (question_id, who, at, field, before, after) VALUES (?, ?, ?, ?, ?, ?)",
                    (question_id, who, now(), field, before[0], stored),
                )

    def edits(self, question_id: str | None = None) -> list[dict]:
        sql = "SELECT seq, question_id, who, at, field, before, after FROM edits"
        rows = self.db.execute(
            sql + (" WHERE question_id = ? ORDER BY seq" if question_id else " ORDER BY seq"),
            (question_id,) if question_id else (),
        )
        return [
            dict(zip(("seq", "question_id", "who", "at", "field", "before", "after"), r, strict=False)) for r in rows
        ]
