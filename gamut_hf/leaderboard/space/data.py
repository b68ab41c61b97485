"""What the Space shows, without any of gradio: its settings (:class:`SpaceConfig`), the
result folders loaded as board entries, audits and the failure index (:class:`SpaceData`), and
the board's filter (:func:`filter_board`)."""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gamut_hf.dataset.hub import HubFolder, PushError
from gamut_hf.errors import shown
from gamut_hf.evaluation.audit import AUDIT_JSON, FoundAudit, find_audits
from gamut_hf.evaluation.run_folder import RESULTS_FILE
from gamut_hf.files import InputError
from gamut_hf.leaderboard.entries import (
    LEADERBOARD_COLUMNS,
    Entry,
    is_partial,
    leaderboard_row,
    leaderboard_table,
    load_entry,
)
from gamut_hf.leaderboard.failures import EntryTables, FailureIndex, QuestionInfo, dataset_questions, entry_tables
from gamut_hf.leaderboard.submission import MAX_UPLOAD_BYTES
from gamut_hf.reports.report import Report, label_runs, repeated_run_line, repeated_runs
from gamut_hf.reports.statistics import Bootstrap, run_summary

LOCAL_USER = "local"
DEFAULT_COLUMNS = [
    "rank",
    "model",
    "type",
    "size (B)",
    "variant",
    "judge",
    "Gamut",
    "Gamut 95% CI",
    "AC",
    "V",
    "Ctx",
    "% meets",
    "% missing",
    "% contra",
]
SIZE_BUCKETS = {"under 10B": (0, 10), "10B to 100B": (10, 100), "over 100B": (100, float("inf")), "unknown": None}


def launch_options() -> dict:
    """What every launch of the Space passes to ``launch``: gradio refuses a bigger upload itself,
    while it streams in, instead of saving it whole before the submission check sees it."""
    return {"max_file_size": MAX_UPLOAD_BYTES}


def in_space() -> bool:
    """Inside a Hugging Face Space with OAuth enabled (``hf_oauth: true``)."""
    return bool(os.environ.get("SPACE_ID") and os.environ.get("OAUTH_CLIENT_ID"))


@dataclass
class SpaceConfig:
    results: Path
    requests: Path
    dataset: str | None = "gamut-sample"
    login: bool = field(default_factory=in_space)
    resamples: int = 1000
    primary_judge: str | None = None  # the default board's judge; None: the judge of the most runs
    results_hub: HubFolder | None = None  # in a Space: the results dataset, pulled on refresh
    requests_hub: HubFolder | None = None  # in a Space: the requests dataset, pushed on submit


# A hub dataset repository's own files, beside the result folders the Space mirrors from it.
REPOSITORY_FILES = frozenset({"README.md", ".gitattributes"})
# What a look at one entry of the results folder saw (see :func:`look_at`).
Signature = tuple[tuple[object, ...], ...]


def look_at(path: Path) -> Signature:
    """What the Space saw of one entry of the results folder: its own status and, for a folder it
    can list, each file's. Any change to it (a file rewritten, added or removed; a chmod) changes
    this, and nothing else does: an entry is read again exactly when it changed."""
    own = path.lstat()
    seen: list[tuple[object, ...]] = []
    if stat.S_ISDIR(own.st_mode):
        try:
            with os.scandir(path) as children:
                for child in children:
                    status = child.stat(follow_symlinks=False)  # a status only: a FIFO is never opened
                    seen.append((child.name, status.st_mode, status.st_mtime_ns, status.st_size))
        except OSError:  # unreadable: its own status says when that changes
            pass
    return ((own.st_mode, own.st_mtime_ns, own.st_size), *sorted(seen, key=lambda child: str(child[0])))


@dataclass
class LoadedFolder:
    """A result folder on the board: its entry, its ``run_summary`` and its part of the failure
    index (the intervals and the tables are the costly part, kept until the folder changes)."""

    entry: Entry
    summary: dict
    tables: EntryTables


@dataclass
class Analysis:
    """The report on the board's runs, and what it leaves out, one line each (a second run of the
    same model, judge and variant; the reason no report could be built)."""

    report: Report | None
    left_out: list[str] = field(default_factory=list)


def public_reason(error: Exception, folder: Path, key: str) -> str:
    """An error met reading ``folder`` in one line, naming it by ``key`` (its name in the results
    folder): the server's own paths are not the visitor's business."""
    reason = str(error).replace(f"{folder}{os.sep}", "").replace(str(folder), key)
    return f"{type(error).__name__}: {reason}".splitlines()[0]


def build_analysis(entries: list[Entry], bootstrap: Bootstrap) -> Analysis:
    """The report on ``entries`` (labelled), each model, judge and variant once: of runs sharing
    them (shards beside their merge, a copied folder) the one over the most questions is kept and
    the others are named, as `gamut report` names them."""
    from gamut_hf.reports.report import build_report

    if not entries:
        return Analysis(None)
    keys = {entry.run.folder: entry.key for entry in entries}
    preferred = sorted(entries, key=lambda entry: (-len(entry.run.questions), entry.key))
    repeated = {run.folder: run for run in repeated_runs([entry.run for entry in preferred])}
    left_out = [repeated_run_line(run, f"`{shown(keys[folder])}`") for folder, run in repeated.items()]
    kept = [entry.run.folder for entry in entries if entry.run.folder not in repeated]
    try:
        return Analysis(build_report(kept, bootstrap), left_out)
    except Exception as error:  # noqa: BLE001 - the tab says why; the rest of the Space keeps serving
        reason = f"{type(error).__name__}: {error}".splitlines()[0]
        for folder, key in keys.items():  # named as the board names them
            reason = reason.replace(str(folder), key)
        print(f"gamut space: the analysis could not be built: {reason}")
        return Analysis(None, [*left_out, f"the analysis could not be built: {reason}"])


class SpaceData:
    """What the tabs show. A refresh reads only the entries of the results folder that appeared or
    changed since the last look (a worker finished a submission; someone fixed a folder): one that
    did not change keeps its place on the board, or its reason for not being there, without a
    second read. The analysis is rebuilt in the background, so no click waits for it."""

    def __init__(self, config: SpaceConfig):
        self.config = config
        self.questions: dict[str, QuestionInfo] = dataset_questions(config.dataset) if config.dataset else {}
        self.seen: dict[str, Signature] = {}  # each entry of the results folder, as the last look saw it
        self.loaded: dict[str, LoadedFolder] = {}  # result folder -> what the board shows of it
        self.entries: list[Entry] = []
        self.not_loaded: dict[str, str] = {}  # entry of the results folder -> why it is not on the board
        self.audits: list[FoundAudit] = []  # judge audits in the results folder
        self.board = leaderboard_table([])
        self.index: FailureIndex | None = None
        self._analysis = Analysis(None)
        self.analysis_thread: threading.Thread | None = None
        self.refresh()

    def _candidates(self) -> dict[str, Path]:
        """The entries of the results folder that should be result folders, by name: all but hidden
        ones (staging folders, the hub's cache), the hub repository's own files, judge audits (read
        by ``find_audits``) and the queue where it lies inside."""
        root = self.config.results
        try:
            names = sorted(os.listdir(root))
        except FileNotFoundError:  # no result yet (a Space before its first sync)
            return {}
        except OSError as error:
            print(f"gamut space: the results folder cannot be read ({error.strerror or error}); showing none")
            return {}
        requests = self.config.requests.resolve()
        candidates = {}
        for name in names:
            path = root / name
            if name.startswith(".") or name in REPOSITORY_FILES or path.resolve() == requests:
                continue
            readable = not path.is_symlink() and path.is_dir() and os.access(path, os.R_OK | os.X_OK)
            if readable and (path / AUDIT_JSON).exists() and not (path / RESULTS_FILE).exists():
                continue
            candidates[name] = path
        return candidates

    def _load(self, path: Path, bootstrap: Bootstrap) -> LoadedFolder:
        """One entry of the results folder, read; raises (one line) when it is no readable result folder."""
        if path.is_symlink():  # the failure browser serves what a folder holds: only what lies inside
            raise InputError(f"{path}: a link, not a folder; the Space reads only folders inside the results folder")
        if not path.is_dir():
            raise InputError(f"{path}: not a folder (the results folder holds one folder per run)")
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputError(f"{path}: cannot be read (permission denied)")
        entry = load_entry(path)
        if entry is None:
            raise InputError(f"{path}: no score (the judge left checks unreadable or unjudged)")
        # Every table the Space reads is read here, inside the caller's guard for this folder.
        return LoadedFolder(entry, run_summary(entry.run.questions, bootstrap), entry_tables(entry))

    def refresh(self) -> bool:
        """Take in the entries of the results folder that appeared or changed since the last look;
        True when any did."""
        if self.config.results_hub is not None:
            try:
                self.config.results_hub.pull()
            except PushError as error:  # the hub is down: show what is already here
                print(f"gamut space: {error}; showing the local copy")
        self.audits = find_audits([self.config.results])  # a few small files: read on every look
        candidates = self._candidates()
        seen = {}
        for key, path in candidates.items():
            try:
                seen[key] = look_at(path)
            except FileNotFoundError:  # removed between the listing and the look
                continue
        if seen == self.seen:
            return False
        bootstrap = Bootstrap(resamples=self.config.resamples)
        loaded: dict[str, LoadedFolder] = {}
        not_loaded: dict[str, str] = {}
        for key, signature in seen.items():
            if self.seen.get(key) == signature:  # unchanged: as it was, on the board or not
                if key in self.loaded:
                    loaded[key] = self.loaded[key]
                else:
                    not_loaded[key] = self.not_loaded[key]
                continue
            try:
                loaded[key] = self._load(candidates[key], bootstrap)
            except Exception as error:  # noqa: BLE001 - one unreadable folder must not take the board down
                not_loaded[key] = public_reason(error, candidates[key], key)
                print(f"gamut space: result folder {key} not loaded: {not_loaded[key]}")
        self.seen, self.loaded, self.not_loaded = seen, loaded, not_loaded
        self.entries = [folder.entry for folder in loaded.values()]
        # Labels depend on every entry (a backend is added where names collide): made afresh each time.
        label_runs([entry.run for entry in self.entries])
        size = len(self.questions) or None
        self.board = leaderboard_table(
            [
                leaderboard_row(folder.entry, folder.summary, is_partial(folder.entry, size))
                for folder in loaded.values()
            ]
        )
        parts = {key: folder.tables for key, folder in loaded.items()}
        self.index = FailureIndex(self.entries, self.questions, parts) if self.entries else None
        self._analysis = Analysis(None)
        thread = threading.Thread(target=self._build_analysis, args=(list(self.entries),), daemon=True)
        self.analysis_thread = thread
        thread.start()
        return True

    def _build_analysis(self, entries: list[Entry]) -> None:
        analysis = build_analysis(entries, Bootstrap(resamples=self.config.resamples))
        if threading.current_thread() is self.analysis_thread:  # not overtaken by a later refresh
            self._analysis = analysis

    def analysis(self) -> Analysis:
        """The analysis of the runs on the board, waiting for the build under way (a refresh during
        the wait starts a newer one, waited for in turn)."""
        while (thread := self.analysis_thread) is not None and thread.is_alive():
            thread.join()
        return self._analysis

    def judges(self) -> list[str]:
        return sorted(self.board["judge"].unique())

    def primary_judge(self) -> str | None:
        """The configured judge, else the one that judged the most runs (the paper's main judge
        grades both variants; others often one)."""
        judges = self.board["judge"].value_counts()
        if self.config.primary_judge in judges.index:
            return self.config.primary_judge
        return min(judges.index, key=lambda judge: (-judges[judge], judge)) if len(judges) else None

    def not_loaded_note(self) -> str:
        """The entries of the results folder left off the board, and audits that cannot be read, with why."""
        problems = {**self.not_loaded, **{a.folder.name: a.problem for a in self.audits if a.problem}}
        if not problems:
            return ""
        return "**Not loaded** (fix or remove these result folders):\n" + "\n".join(
            f"- `{shown(key)}`: {why}" for key, why in sorted(problems.items())
        )

    def audit_note(self, judge: str | None) -> str:
        """The audit(s) of the judge whose board is shown, or how to make one."""
        keys = {entry.run.judge_key for entry in self.entries if entry.run.judge == judge}
        if not keys:
            return ""
        lines = []
        for audit in self.audits:
            if audit.judge_key in keys:
                assert audit.results is not None  # a matched judge key comes from its figures
                row = audit.row(shown=True)  # an undefined figure reads "n/a (<why>)"
                gamut_error = audit.results.shown("gamut_mae", ".1f", " points")
                lines.append(
                    f"- `{row['audit']}` ({row['labels']}, {row['checks judged']} checks): kappa "
                    f"{row['kappa']}, accuracy {row['accuracy']}, Gamut error {gamut_error}, "
                    f"injection flip rate {row['injection flip rate']}"
                )
        if not lines:
            return (
                f"**Judge audit**: none for {judge} in the results folder yet "
                "(`gamut judge-audit --out RESULTS/judge-audit-NAME`)."
            )
        return f"**Judge audit of {judge}** (its verdicts against known right verdicts):\n" + "\n".join(lines)

    def model_choices(self) -> list[tuple[str, str]]:
        return [(f"{row.model} · {row.variant} · judge {row.judge}", row.key) for row in self.board.itertuples()]


# -- leaderboard -----------------------------------------------------------------------------


def filter_board(
    board: pd.DataFrame, types: list[str], variant: str | None, judge: str | None, sizes: list[str], columns: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One variant under one judge: (complete runs, ranked best first; partial runs, unranked)."""
    mask = board["type"].isin(types) & (board["variant"] == variant) & (board["judge"] == judge)
    size = pd.to_numeric(board["size (B)"], errors="coerce")
    in_bucket = pd.Series(False, index=board.index)
    for bucket in sizes:
        bounds = SIZE_BUCKETS.get(bucket)
        in_bucket |= size.isna() if bounds is None else ((size >= bounds[0]) & (size < bounds[1]))
    shown = [c for c in LEADERBOARD_COLUMNS if c in columns or c == "model"]
    chosen = board[mask & in_bucket]
    partial = chosen["partial"].astype(bool)
    complete = chosen[~partial].reset_index(drop=True)
    ranked = complete[shown + ["key"]]
    if "rank" in columns:  # ties share a rank, counted within what is shown
        ranked.insert(0, "rank", complete["Gamut"].rank(method="min", ascending=False).astype(int))
    return ranked, chosen[partial][shown + ["key"]].reset_index(drop=True)
