"""The run store: every generation and every verdict, in SQLite (WAL) in the run folder.

Each row is keyed by a content hash of what determines it (the model and its parameters,
the prompt version, the question or check text, the response being judged), so a run
started again after any interruption redoes only what is missing, a new judge reuses the
stored generations, and scores can be recomputed from the store alone. Every batch is one
transaction: a SIGKILL loses at most the batch in flight, never a stored row.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, astuple, dataclass, replace
from pathlib import Path
from typing import Any

from gamut_hf.backends.base import Completion
from gamut_hf.core.rubric import VERDICTS
from gamut_hf.errors import GamutError

STORE_FILE = "store.sqlite"
# The store's file and the ones SQLite keeps beside it (WAL journal, shared memory, rollback journal).
STORE_FILES = (STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal")

SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    question_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    error TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER, seconds REAL,
    session TEXT NOT NULL, created_at REAL NOT NULL,
    reasoning TEXT,
    reasoning_unclosed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    generation_key TEXT NOT NULL,
    question_id TEXT NOT NULL,
    check_id TEXT NOT NULL,
    judge TEXT NOT NULL,
    verdict TEXT NOT NULL CHECK (verdict IN ('meets', 'partially_meets', 'missing', 'contradicts', 'error')),
    rationale TEXT,
    raw TEXT,
    attempts INTEGER NOT NULL,
    prompt_tokens INTEGER, completion_tokens INTEGER, cached_tokens INTEGER, seconds REAL,
    session TEXT NOT NULL, created_at REAL NOT NULL,
    probabilities TEXT
);
CREATE INDEX IF NOT EXISTS verdicts_by_generation ON verdicts (generation_key);
CREATE TABLE IF NOT EXISTS questions (
    question_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    domain TEXT NOT NULL,
    prompt TEXT NOT NULL,
    image_sha TEXT,
    checks TEXT NOT NULL,
    PRIMARY KEY (question_id, variant)
);
CREATE TABLE IF NOT EXISTS run_info (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    tag TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    stage TEXT NOT NULL,
    model TEXT NOT NULL,
    batch_id TEXT,
    state TEXT NOT NULL,
    custom_ids TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    resubmission INTEGER NOT NULL,
    message TEXT,
    session TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_answers (
    key TEXT PRIMARY KEY,
    stage TEXT NOT NULL,
    model TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    completion TEXT NOT NULL,
    session TEXT NOT NULL, created_at REAL NOT NULL
);
"""

# Columns added since the first stores: a store made before gets them on opening (old rows
# read as NULL, or the default). A thinking candidate's reasoning is kept apart from its
# response, which is what the judge reads; reasoning_unclosed marks a reasoning cut by
# max_tokens, which left the response empty. A verdict's probabilities (a JSON object: each
# verdict's probability at the verdict's position) are kept where the judge's backend gives them.
# ``batch_id``: the provider batch that answered a row (None: asked synchronously), priced at the batch rate.
ADDED_COLUMNS = {
    "generations": (
        ("reasoning", "TEXT"),
        ("reasoning_unclosed", "INTEGER NOT NULL DEFAULT 0"),
        ("batch_id", "TEXT"),
    ),
    "verdicts": (("probabilities", "TEXT"), ("batch_id", "TEXT")),
}


VERDICT_COLUMNS = (
    "key", "generation_key", "question_id", "check_id", "judge", "verdict", "rationale", "raw", "attempts",
    "prompt_tokens", "completion_tokens", "cached_tokens", "seconds", "session", "created_at", "probabilities",
    "batch_id",
)  # fmt: skip


def _probabilities_text(probabilities: dict[str, float] | None) -> str | None:
    return None if probabilities is None else json.dumps(probabilities, sort_keys=True)


def _probabilities(text: str | None) -> dict[str, float] | None:
    """A stored verdict's probabilities; None where none were given, or the text is not theirs."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != set(VERDICTS):
        return None
    if not all(isinstance(p, int | float) and not isinstance(p, bool) for p in value.values()):
        return None
    return {verdict: float(value[verdict]) for verdict in VERDICTS}


def has_store(folder: str | Path) -> bool:
    return (Path(folder) / STORE_FILE).is_file()


def content_key(**parts: Any) -> str:
    """A stable hash of everything that determines a stored result."""
    canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredGeneration:
    key: str
    question_id: str
    response: str
    error: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float | None = None
    reasoning: str | None = None  # never shown to the judge
    reasoning_unclosed: bool = False  # the reasoning never closed: response is ""
    batch_id: str | None = None  # the provider batch that answered it; None: asked synchronously


@dataclass(frozen=True)
class StoredVerdict:
    key: str
    generation_key: str
    question_id: str
    check_id: str
    verdict: str
    rationale: str | None
    raw: str | None
    attempts: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    seconds: float | None = None
    probabilities: dict[str, float] | None = None  # each verdict's, where the judge's backend gave them
    batch_id: str | None = None  # the provider batch that answered it; None: asked synchronously


@dataclass(frozen=True)
class StoredQuestion:
    """What the store keeps of a question: enough to recompute every key and score alone."""

    question_id: str
    variant: str
    domain: str
    prompt: str
    image_sha: str | None
    checks: str  # the binary rubric as a JSON array


# A batch still to wait on: being submitted (its provider id not yet known) or submitted.
OPEN_BATCH_STATES = ("submitting", "running")


@dataclass(frozen=True)
class StoredBatch:
    """A provider batch of one stage, in the store before anyone waits on it (nothing is paid twice).

    ``state``: submitting (its id not yet back: a cut-off submission is looked for by ``tag``),
    running, then collected once its answers are stored, or failed / expired / cancelled (its
    answers stored, the rest asked again), abandoned (never created), forgotten (unknown to the
    provider, given up with --batch-forget-unknown)."""

    tag: str  # this project's name of the submission (the provider's metadata where it keeps any)
    provider: str
    endpoint: str
    stage: str
    model: str  # the fingerprint of the model answering, as the stage's rows name it
    batch_id: str | None
    state: str
    custom_ids: tuple[str, ...]  # the row keys it answers
    attempt: int  # the answer attempt of its requests (an unreadable verdict is asked again)
    resubmission: int  # 1: it asks again what an expired or failed batch left unanswered
    message: str | None = None


@dataclass(frozen=True)
class KeptAnswer:
    """A batch's answer to a request no question of the invocation that collected it asked (a
    rerun with a narrower selection waited on a batch of the wider one): it was paid for, so it
    is kept until a run that asks it stores it as its row."""

    batch_id: str
    attempt: int
    completion: Completion


class StoreConflict(GamutError, ValueError):
    """Two stores disagree about the same key (``gamut merge``)."""


def _failed(table: str, row: dict[str, Any]) -> bool:
    """A stored row that records a failure to produce a result, not a result."""
    if table == "generations":
        return bool(row["error"])
    return table == "verdicts" and row["verdict"] == "error"


class StoreError(GamutError):
    """The run store's file cannot be used: not a database, read-only, locked, or its disk full."""


# SQLite's primary result codes that mean the file or its place, not gamut: what each tells the user.
STORE_PROBLEMS = {
    "NOTADB": "is not a run store SQLite can read ({error}); move it aside (the run then starts afresh) "
    "or use another folder",
    "CORRUPT": "is damaged ({error}); move it aside (the run then starts afresh) or use another folder",
    "READONLY": "cannot be written ({error}); make the file and its folder writable, or copy the run to a "
    "folder you can write",
    "PERM": "cannot be written ({error}); make the file and its folder writable",
    "CANTOPEN": "cannot be opened ({error}); its folder must be readable and writable",
    "BUSY": "is locked by another process ({error}); let the other gamut command finish, then rerun",
    "LOCKED": "is locked by another process ({error}); let the other gamut command finish, then rerun",
    "FULL": "cannot grow: the disk is full ({error}); free space, then rerun (finished work is kept)",
}


def store_problem(path: Path, error: sqlite3.Error) -> StoreError | None:
    """``error`` as the one line the user acts on, naming the store's file; None when it is not
    about the file (a constraint, a query: our bug, left to show as one)."""
    code = (getattr(error, "sqlite_errorname", None) or "").removeprefix("SQLITE_").split("_")[0]
    problem = STORE_PROBLEMS.get(code)
    return StoreError(f"{path}: {problem.format(error=error)}") if problem else None


@contextmanager
def naming_the_store(path: Path) -> Iterator[None]:
    """SQLite's errors that are the file's (it names no path) as a :class:`StoreError` naming it."""
    try:
        yield
    except sqlite3.Error as error:
        problem = store_problem(path, error)
        if problem is None:
            raise
        raise problem from None


class StoreConnection(sqlite3.Connection):
    """A connection whose every statement names the store when the file is the problem."""

    path: Path

    def execute(self, *args: Any) -> sqlite3.Cursor:
        with naming_the_store(self.path):
            return super().execute(*args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        with naming_the_store(self.path):
            return super().executemany(*args)

    def executescript(self, *args: Any) -> sqlite3.Cursor:
        with naming_the_store(self.path):
            return super().executescript(*args)


def connect(path: Path) -> StoreConnection:
    """The store at ``path``, opened (created if new) as every command uses it: autocommit, with
    the file named in the errors that are the file's."""
    with naming_the_store(path):
        db = sqlite3.connect(path, timeout=60, isolation_level=None, factory=StoreConnection)
    db.path = path
    return db


class RunStore:
    def __init__(self, folder: str | Path, *, session: str | None = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / STORE_FILE
        self.session = session or f"{time.time():.6f}"
        self.db = connect(self.path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self._add_columns()

    @classmethod
    @contextmanager
    def reading(cls, folder: str | Path) -> Iterator[RunStore]:
        """The store in ``folder`` to read, writing nothing beside it (:func:`read_only_store`):
        for commands that only look (a dry run, a submission file)."""
        store = cls.__new__(cls)
        store.folder = Path(folder)
        store.path = store.folder / STORE_FILE
        store.session = "reading"
        with read_only_store(store.path) as db:
            store.db = db
            yield store

    def _add_columns(self) -> None:
        for table, columns in ADDED_COLUMNS.items():
            present = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns:
                if name in present:
                    continue
                try:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
                except sqlite3.OperationalError as error:  # another process added it first
                    if "duplicate column" not in str(error):
                        raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- run info -------------------------------------------------------------------------

    def set_info(self, **values: Any) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO run_info VALUES (?, ?)",
                [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()],
            )

    def info(self) -> dict[str, Any]:
        return {name: json.loads(value) for name, value in self.db.execute("SELECT name, value FROM run_info")}

    # -- questions ------------------------------------------------------------------------

    def put_questions(self, questions: Iterable[StoredQuestion]) -> None:
        """Record the questions of a run (a question whose rubric was re-released is replaced)."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO questions VALUES (?, ?, ?, ?, ?, ?)", [astuple(q) for q in questions]
            )

    def questions(self, variant: str) -> list[StoredQuestion]:
        rows = self.db.execute("SELECT * FROM questions WHERE variant = ? ORDER BY rowid", (variant,))
        return [StoredQuestion(*row) for row in rows]

    # -- generations ----------------------------------------------------------------------

    def _where_key_in(self, sql: str, keys: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        """Run ``sql ... key IN (...)`` over keys in chunks (SQLite caps bound parameters)."""
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            yield from self.db.execute(f"{sql} key IN ({','.join('?' * len(chunk))})", chunk)

    def generations(self, keys: Iterable[str]) -> dict[str, StoredGeneration]:
        rows = self._where_key_in(
            "SELECT key, question_id, response, error, prompt_tokens, completion_tokens, seconds, reasoning,"
            " reasoning_unclosed, batch_id FROM generations WHERE",
            keys,
        )
        generations = {}
        for key, question_id, response, error, prompt, completion, seconds, reasoning, unclosed, batch in rows:
            generations[key] = StoredGeneration(
                key, question_id, response, error, prompt, completion, seconds, reasoning, bool(unclosed), batch
            )
        return generations

    def add_generations(self, rows: Iterable[dict[str, Any]]) -> None:
        now = time.time()
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO generations (key, question_id, variant, model, response, error, prompt_tokens,"
                " completion_tokens, seconds, session, created_at, reasoning, reasoning_unclosed, batch_id) VALUES"
                " (:key, :question_id, :variant, :model, :response, :error, :prompt_tokens, :completion_tokens,"
                " :seconds, :session, :created_at, :reasoning, :reasoning_unclosed, :batch_id)",
                [
                    {
                        "session": self.session,
                        "created_at": now,
                        "reasoning": None,
                        "reasoning_unclosed": False,
                        "batch_id": None,
                        **row,
                    }
                    for row in rows
                ],
            )

    # -- verdicts -------------------------------------------------------------------------

    def verdicts(self, keys: Iterable[str]) -> dict[str, StoredVerdict]:
        rows = self._where_key_in(
            "SELECT key, generation_key, question_id, check_id, verdict, rationale, raw, attempts, prompt_tokens,"
            " completion_tokens, cached_tokens, seconds, probabilities, batch_id FROM verdicts WHERE",
            keys,
        )
        return {
            row[0]: replace(StoredVerdict(*row[:-2]), probabilities=_probabilities(row[-2]), batch_id=row[-1])
            for row in rows
        }

    def add_verdicts(self, rows: Iterable[dict[str, Any]]) -> None:
        now = time.time()
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                f"INSERT OR REPLACE INTO verdicts ({', '.join(VERDICT_COLUMNS)}) "
                f"VALUES ({', '.join(':' + name for name in VERDICT_COLUMNS)})",
                [
                    {
                        "session": self.session,
                        "created_at": now,
                        "batch_id": None,
                        **row,
                        "probabilities": _probabilities_text(row.get("probabilities")),
                    }
                    for row in rows
                ],
            )

    def forget_errors(self, keys: Iterable[str]) -> int:
        """Drop stored judge errors so a rerun retries them (``--retry-errors``)."""
        errors = [row[0] for row in self._where_key_in("SELECT key FROM verdicts WHERE verdict = 'error' AND", keys)]
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("DELETE FROM verdicts WHERE key = ?", [(k,) for k in errors])
        return len(errors)

    # -- provider batches -----------------------------------------------------------------

    def add_batch(self, batch: StoredBatch) -> None:
        now = time.time()
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute(
                "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    batch.tag, batch.provider, batch.endpoint, batch.stage, batch.model, batch.batch_id, batch.state,
                    json.dumps(list(batch.custom_ids)), batch.attempt, batch.resubmission, batch.message,
                    self.session, now, now,
                ),
            )  # fmt: skip

    def update_batch(self, tag: str, **fields: Any) -> None:
        """Set a stored batch's ``batch_id``, ``state`` or ``message``."""
        assert set(fields) <= {"batch_id", "state", "message"}, fields
        assignments = ", ".join(f"{name} = ?" for name in fields)
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute(
                f"UPDATE batches SET {assignments}, updated_at = ? WHERE tag = ?", (*fields.values(), time.time(), tag)
            )

    def batches(
        self, stage: str | None = None, model: str | None = None, *, open_only: bool = False
    ) -> list[StoredBatch]:
        """The stored batches (of one stage and model; only those still to wait on), oldest first."""
        sql = (
            "SELECT tag, provider, endpoint, stage, model, batch_id, state, custom_ids, attempt, resubmission, message"
            " FROM batches WHERE 1"
        )
        parameters: list[Any] = []
        for column, value in (("stage", stage), ("model", model)):
            if value is not None:
                sql += f" AND {column} = ?"
                parameters.append(value)
        if open_only:
            sql += f" AND state IN ({', '.join('?' * len(OPEN_BATCH_STATES))})"
            parameters.extend(OPEN_BATCH_STATES)
        rows = self.db.execute(sql + " ORDER BY created_at, rowid", parameters)
        return [
            StoredBatch(
                tag,
                provider,
                endpoint,
                stage_,
                model_,
                batch_id,
                state,
                tuple(json.loads(keys)),
                attempt,
                again,
                message,
            )
            for tag, provider, endpoint, stage_, model_, batch_id, state, keys, attempt, again, message in rows
        ]

    def keep_batch_answers(
        self, stage: str, model: str, batch_id: str, attempt: int, answers: Mapping[str, Completion]
    ) -> None:
        now = time.time()
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR IGNORE INTO batch_answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (key, stage, model, batch_id, attempt, json.dumps(asdict(c)), self.session, now)
                    for key, c in answers.items()
                ],
            )

    def kept_batch_answers(self, keys: Iterable[str]) -> dict[str, KeptAnswer]:
        """The kept batch answers (:class:`KeptAnswer`) of ``keys`` (a key names its stage and model)."""
        rows = self._where_key_in("SELECT key, batch_id, attempt, completion FROM batch_answers WHERE", keys)
        return {key: KeptAnswer(batch, attempt, Completion(**json.loads(text))) for key, batch, attempt, text in rows}

    def drop_batch_answers(self, keys: Iterable[str]) -> None:
        """Forget kept batch answers once they are stored as rows."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("DELETE FROM batch_answers WHERE key = ?", [(k,) for k in keys])

    # -- usage and merging ----------------------------------------------------------------

    def usage(self) -> dict[str, dict[str, float]]:
        out = {}
        for table in ("generations", "verdicts"):
            extra = ", SUM(cached_tokens)" if table == "verdicts" else ", 0"
            calls, prompt, completion, seconds, cached = self.db.execute(
                f"SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(seconds){extra} FROM {table}"
            ).fetchone()
            out[table] = {
                "calls": calls,
                "prompt_tokens": prompt or 0,
                "completion_tokens": completion or 0,
                "seconds": seconds or 0.0,
                "cached_tokens": cached or 0,
            }
        return out

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        cursor = self.db.execute(f"SELECT * FROM {table}")  # noqa: S608 - table names are ours
        names = [d[0] for d in cursor.description]
        for row in cursor:
            yield dict(zip(names, row, strict=False))

    def merge_from(self, other: RunStore) -> dict[str, int]:
        """Copy another store's rows in, all or nothing; the same key with a different result
        is a conflict. A failure (a failed generation, a verdict stored as ``error``) gives way
        to a real result of the same key, whichever store holds which: a shard answered again
        or judged again with ``--retry-errors`` merges over its first attempt."""
        identity = {"questions": ("question_id", "variant"), "generations": ("key",), "verdicts": ("key",)}
        compare = {
            "questions": ("domain", "prompt", "image_sha", "checks"),
            "generations": ("response", "error"),
            "verdicts": ("verdict", "rationale", "raw"),
        }
        plan: dict[str, list[dict[str, Any]]] = {}
        for table, fields in compare.items():
            existing = {tuple(r[k] for k in identity[table]): r for r in self.rows(table)}
            plan[table] = []
            for row in other.rows(table):
                mine = existing.get(tuple(row[k] for k in identity[table]))
                if mine is None or (_failed(table, mine) and not _failed(table, row)):
                    plan[table].append(row)
                elif _failed(table, row):  # mine is a result, or a failure as good as this one
                    continue
                elif any(mine[f] != row[f] for f in fields):
                    raise StoreConflict(
                        f"{other.path}: {table} entry {row.get('key', row['question_id'])[:12]} (question "
                        f"{row['question_id']}) differs from the one already in {self.path}; nothing merged"
                    )
        with self.db:
            self.db.execute("BEGIN")
            for table, rows in plan.items():
                if rows:
                    names = list(rows[0])
                    self.db.executemany(
                        f"INSERT OR REPLACE INTO {table} ({','.join(names)}) VALUES ({','.join('?' * len(names))})",
                        [tuple(r[n] for n in names) for r in rows],
                    )
        return {table: len(rows) for table, rows in plan.items()}


@contextmanager
def read_only_store(path: Path) -> Iterator[StoreConnection]:
    """The store at ``path`` for reading without writing a byte beside it (a dry run): even a
    read-only connection to a WAL database makes its -shm file, so the store is opened immutable,
    or, where a -wal file holds work not yet in the store (a killed run), read from a copy."""
    import shutil
    import tempfile

    wal = path.with_name(path.name + "-wal")
    with tempfile.TemporaryDirectory(prefix="gamut-store-") as copy:
        if wal.exists():
            shutil.copy2(path, Path(copy) / path.name)
            shutil.copy2(wal, Path(copy) / wal.name)
            db = sqlite3.connect(Path(copy) / path.name, factory=StoreConnection)
        else:
            db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, factory=StoreConnection)
        db.path = path  # errors name the user's store, not the copy
        try:
            yield db
        finally:
            db.close()


def read_info(out: str | Path) -> dict[str, Any] | None:
    """The run info of the store in the folder ``out``, read without writing (a dry run); None
    where there is no store, or none this version reads."""
    path = Path(out) / STORE_FILE
    if not path.is_file():
        return None
    try:
        with read_only_store(path) as db:
            return {name: json.loads(value) for name, value in db.execute("SELECT name, value FROM run_info")}
    except (sqlite3.Error, ValueError):
        return None
