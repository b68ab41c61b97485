"""What the Space shows, without any of gradio: its settings (:class:`SpaceConfig`), the
result folders loaded as board entries, audits and the failure index (:class:`SpaceData`), and
the board's filter (:func:`filter_board`)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gamut_hf.dataset.hub import HubFolder, PushError
from gamut_hf.evaluation.audit import FoundAudit, find_audits
from gamut_hf.evaluation.run_folder import RESULTS_FILE
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
from gamut_hf.reports.report import Report, label_runs
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


class SpaceData:
    """What the tabs show. A refresh loads only new or changed result folders (a worker finished a
    submission); the analysis report is rebuilt in the background, so no click waits for it."""

    def __init__(self, config: SpaceConfig):
        self.config = config
        self.questions: dict[str, QuestionInfo] = dataset_questions(config.dataset) if config.dataset else {}
        # folder name -> (mtime, entry, its run_summary, its part of the failure index): the intervals
        # and the tables are the costly part, kept across refreshes
        self.loaded: dict[str, tuple[int, Entry, dict, EntryTables]] = {}
        self.entries: list[Entry] = []
        self.not_loaded: dict[str, str] = {}  # result folder -> why it is not on the board
        self.audits: list[FoundAudit] = []  # judge audits in the results folder
        self.board = leaderboard_table([])
        self.index: FailureIndex | None = None
        self.report: Report | None = None
        self.report_thread: threading.Thread | None = None
        self.refresh()

    def refresh(self) -> bool:
        """Take in result folders that appeared or changed since the last look; True when any did."""
        if self.config.results_hub is not None:
            try:
                self.config.results_hub.pull()
            except PushError as error:  # the hub is down: show what is already here
                print(f"gamut space: {error}; showing the local copy")
        self.audits = find_audits([self.config.results])  # a few small files: read on every look
        found = {p.parent.name: p.stat().st_mtime_ns for p in self.config.results.glob(f"*/{RESULTS_FILE}")}
        if found == {key: loaded[0] for key, loaded in self.loaded.items()}:
            return False
        bootstrap = Bootstrap(resamples=self.config.resamples)
        loaded, not_loaded = {}, {}
        for key, mtime in sorted(found.items()):
            if key in self.loaded and self.loaded[key][0] == mtime:
                loaded[key] = self.loaded[key]
                continue
            try:
                entry = load_entry(self.config.results / key)
                if entry is None:
                    not_loaded[key] = "no score (the judge left checks unreadable or unjudged)"
                else:
                    # Every table the Space reads is read here, inside this folder's guard.
                    loaded[key] = (mtime, entry, run_summary(entry.run.questions, bootstrap), entry_tables(entry))
            except Exception as error:  # noqa: BLE001 - one unreadable folder must not take the board down
                # Named from the results folder: the server's own paths are not the visitor's business.
                folder = self.config.results / key
                reason = str(error).replace(f"{folder}{os.sep}", "").replace(str(folder), key).splitlines()[0]
                not_loaded[key] = f"{type(error).__name__}: {reason}"
                print(f"gamut space: result folder {key} not loaded: {not_loaded[key]}")
        self.loaded = loaded
        # Folders that failed before and have not changed keep their reason without a second try.
        self.not_loaded = {
            **{k: why for k, why in self.not_loaded.items() if k in found and k not in loaded},
            **not_loaded,
        }
        self.entries = [entry for _, entry, _, _ in loaded.values()]
        # Labels depend on every entry (a backend is added where names collide): made afresh each time.
        label_runs([entry.run for entry in self.entries])
        size = len(self.questions) or None
        self.board = leaderboard_table(
            [leaderboard_row(entry, summary, is_partial(entry, size)) for _, entry, summary, _ in loaded.values()]
        )
        parts = {key: part for key, (_, _, _, part) in loaded.items()}
        self.index = FailureIndex(self.entries, self.questions, parts) if self.entries else None
        self.report = None
        self.report_thread = threading.Thread(target=self._build_report, args=(list(self.entries),), daemon=True)
        self.report_thread.start()
        return True

    def _build_report(self, entries: list[Entry]) -> None:
        from gamut_hf.reports.report import build_report

        report = (
            build_report([e.run.folder for e in entries], Bootstrap(resamples=self.config.resamples))
            if entries
            else None
        )
        if entries == self.entries:  # not overtaken by a later refresh
            self.report = report

    def analysis(self):
        if self.report is None and self.report_thread is not None:
            self.report_thread.join()
        return self.report

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
        if not self.not_loaded:
            return ""
        return "**Not loaded** (fix or remove these result folders):\n" + "\n".join(
            f"- `{key}`: {why}" for key, why in sorted(self.not_loaded.items())
        )

    def audit_note(self, judge: str | None) -> str:
        """The audit(s) of the judge whose board is shown, or how to make one."""
        keys = {entry.run.judge_key for entry in self.entries if entry.run.judge == judge}
        if not keys:
            return ""
        lines = []
        for audit in self.audits:
            if audit.judge_key in keys:
                row = audit.row()
                flip = row["injection flip rate"]
                lines.append(
                    f"- `{row['audit']}` ({row['labels']}, {row['checks judged']} checks): kappa "
                    f"{row['kappa']:.3f}, accuracy {100 * row['accuracy']:.1f}%, Gamut error "
                    f"{row['Gamut MAE']:.1f} points, injection flip rate "
                    f"{'-' if flip is None else f'{100 * flip:.1f}%'}"
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
