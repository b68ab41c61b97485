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
from pandas.io.formats.style import Styler

from gamut_hf.core.names import DEFAULT_VARIANT
from gamut_hf.dataset.annotations import QUESTIONS_FILE
from gamut_hf.dataset.hub import HubFolder, PushError
from gamut_hf.errors import shown
from gamut_hf.evaluation.audit import AUDIT_JSON, FoundAudit, find_audits, judge_warning, measured_audits
from gamut_hf.evaluation.prices import shown_cost
from gamut_hf.evaluation.run_folder import RESULTS_FILE
from gamut_hf.files import InputError
from gamut_hf.leaderboard.entries import (
    COST_COLUMN,
    DESCRIPTION_COLUMNS,
    SCORE_COLUMNS,
    Entry,
    is_partial,
    leaderboard_row,
    leaderboard_table,
    load_entry,
)
from gamut_hf.leaderboard.failures import EntryTables, FailureIndex, QuestionInfo, dataset_questions, entry_tables
from gamut_hf.leaderboard.space.style import SPACE_CSS, SPACE_HEAD
from gamut_hf.leaderboard.submission import MAX_UPLOAD_BYTES
from gamut_hf.reports.report import Report, label_runs, repeated_run_line, repeated_runs
from gamut_hf.reports.statistics import DEFAULT_RESAMPLES, Bootstrap, run_summary

LOCAL_USER = "local"
# The board's columns in the order shown: scores first, beside the model's name (on a phone the
# name and its score are what fits); the run's description after. Variant and judge are the
# board's choice, said above it, so they are no column of the board (scripted clients may ask).
BOARD_ORDER = [
    "model",
    *SCORE_COLUMNS,
    "questions",
    *(c for c in DESCRIPTION_COLUMNS if c not in ("model", "questions")),
]
COLUMN_CHOICES = ["rank", *(c for c in BOARD_ORDER if c not in ("model", "variant", "judge"))]
DEFAULT_COLUMNS = [
    "rank",
    "model",
    "Gamut",
    "Gamut 95% CI",
    "AC",
    "V",
    "Ctx",
    "% meets",
    "% missing",
    "% contra",
    "type",
    "size (B)",
    COST_COLUMN,
]
# Columns holding a score or a percentage: shown with one decimal ("56.0", never "56").
SCORE_COLUMNS = ["Gamut", "AC", "V", "Ctx", "% meets", "% partial", "% missing", "% contra"]
SIZE_BUCKETS = {"under 10B": (0, 10), "10B to 100B": (10, 100), "over 100B": (100, float("inf")), "unknown": None}


def launch_options() -> dict:
    """What every launch of the Space passes to ``launch``: its CSS (gradio 6 takes it there, not
    in ``Blocks``), and the upload limit, so that gradio refuses a bigger upload itself, while it
    streams in, instead of saving it whole before the submission check sees it."""
    return {"max_file_size": MAX_UPLOAD_BYTES, "css": SPACE_CSS, "head": SPACE_HEAD}


def in_space() -> bool:
    """Inside a Hugging Face Space with OAuth enabled (``hf_oauth: true``)."""
    return bool(os.environ.get("SPACE_ID") and os.environ.get("OAUTH_CLIENT_ID"))


@dataclass
class SpaceConfig:
    results: Path
    requests: Path
    dataset: str | None = "gamut-sample"
    login: bool = field(default_factory=in_space)
    resamples: int = DEFAULT_RESAMPLES  # as `gamut report`: the same run shows the same interval
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


def run_dataset_folder(results: Path, source: object) -> Path | None:
    """The folder a run's recorded dataset source names, where the source is a relative path to a
    folder inside the results folder or beside it (``gamut simulate OUT`` writes its questions to
    ``OUT/dataset`` and records "dataset"); None for a hub id, a named dataset, or any path
    leading elsewhere (a result folder is not trusted to name the server's files)."""
    if not isinstance(source, str) or not source.strip() or Path(source).is_absolute():
        return None
    for base in (results, results.parent):
        try:
            root = base.resolve(strict=True)
            folder = (base / source).resolve(strict=True)
        except (OSError, RuntimeError):  # missing, unreadable, a link loop
            continue
        if folder != root and folder.is_relative_to(root) and folder.is_dir():
            return folder
    return None


@dataclass
class RunDataset:
    """The questions of a dataset found beside the runs (see :func:`run_dataset_folder`), as the
    last look at its folder saw it, or why they could not be read."""

    signature: Signature
    questions: dict[str, QuestionInfo]
    problem: str | None = None


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
        # The Space's dataset (submissions are checked against it), and the datasets runs name
        # beside them (the failure browser shows their questions too).
        self.questions: dict[str, QuestionInfo] = dataset_questions(config.dataset) if config.dataset else {}
        self.run_datasets: dict[Path, RunDataset] = {}
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
        by ``find_audits``), annotation folders (read as the runs' dataset) and the queue where it
        lies inside."""
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
            # A judge audit (read by find_audits) or an annotation folder (the questions runs were
            # over, read as their dataset): no result folder, and nothing wrong with it.
            if readable and not (path / RESULTS_FILE).exists():
                if (path / AUDIT_JSON).exists() or (path / QUESTIONS_FILE).exists():
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
        # Then those shipped with the package, for judges no audit in the results folder measures.
        local = {audit.judge_key for audit in self.audits}
        self.audits += [audit for audit in measured_audits() if audit.judge_key not in local]
        candidates = self._candidates()
        seen = {}
        for key, path in candidates.items():
            try:
                seen[key] = look_at(path)
            except FileNotFoundError:  # removed between the listing and the look
                continue
        runs_changed = seen != self.seen
        if runs_changed:
            self._take_in(candidates, seen)
        if not self._look_at_run_datasets() and not runs_changed:
            return False
        self.entries = [folder.entry for folder in self.loaded.values()]
        # Labels depend on every entry (a backend is added where names collide): made afresh each time.
        label_runs([entry.run for entry in self.entries])
        self.board = leaderboard_table(
            [
                leaderboard_row(
                    folder.entry, folder.summary, is_partial(folder.entry, self._dataset_size(folder.entry))
                )
                for folder in self.loaded.values()
            ]
        )
        parts = {key: folder.tables for key, folder in self.loaded.items()}
        self.index = FailureIndex(self.entries, self.browsed_questions(), parts) if self.entries else None
        self._analysis = Analysis(None)
        thread = threading.Thread(target=self._build_analysis, args=(list(self.entries),), daemon=True)
        self.analysis_thread = thread
        thread.start()
        return True

    def _take_in(self, candidates: dict[str, Path], seen: dict[str, Signature]) -> None:
        """Read the entries that appeared or changed; keep the others as they were."""
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

    def _run_dataset(self, entry: Entry) -> Path | None:
        return run_dataset_folder(self.config.results, entry.run.results.dataset.get("source"))

    def _look_at_run_datasets(self) -> bool:
        """Read the datasets the runs name beside them that appeared or changed since the last
        look (one that cannot be read is named under the board); True when any did, or went."""
        wanted = {folder for folder in map(self._run_dataset, (f.entry for f in self.loaded.values())) if folder}
        found: dict[Path, RunDataset] = {}
        for folder in sorted(wanted):
            try:
                signature = look_at(folder)
            except OSError:  # removed since
                continue
            known = self.run_datasets.get(folder)
            if known is not None and known.signature == signature:
                found[folder] = known
                continue
            try:
                found[folder] = RunDataset(signature, dataset_questions(str(folder)))
            except Exception as error:  # noqa: BLE001 - the runs still show, with bare question ids
                name = self._shown_name(folder)
                found[folder] = RunDataset(signature, {}, public_reason(error, folder, name))
                print(f"gamut space: the dataset {name} of the runs is not loaded: {found[folder].problem}")
        changed = {f: d.signature for f, d in found.items()} != {f: d.signature for f, d in self.run_datasets.items()}
        self.run_datasets = found
        return changed

    def _shown_name(self, folder: Path) -> str:
        """A dataset folder named relative to the results folder, as a visitor knows it."""
        for base in (self.config.results, self.config.results.parent):
            try:
                return str(folder.relative_to(base.resolve()))
            except (ValueError, OSError):
                continue
        return folder.name

    def _dataset_size(self, entry: Entry) -> int | None:
        """The questions of the dataset ``entry`` was run over, where known: a complete run has them all."""
        folder = self._run_dataset(entry)
        own = self.run_datasets.get(folder) if folder else None
        if own is not None and own.questions:
            return len(own.questions)
        return len(self.questions) or None

    def browsed_questions(self) -> dict[str, QuestionInfo]:
        """Every question the failure browser can show: the runs' own datasets, and the Space's."""
        merged: dict[str, QuestionInfo] = {}
        for dataset in self.run_datasets.values():
            merged.update(dataset.questions)
        return {**merged, **self.questions}

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

    def judges(self, variant: str | None = None) -> list[str]:
        """The judges of the board's runs (of ``variant`` only, when given)."""
        return judges_of(self.board, variant) if variant else sorted(self.board["judge"].unique())

    def primary_judge(self, variant: str | None = None) -> str | None:
        """The configured judge, else the one that judged the most runs (the paper's main judge
        grades both variants; others often one); among the runs of ``variant`` when given."""
        runs = self.board if variant is None else self.board[self.board["variant"] == variant]
        judges = runs["judge"].value_counts()
        if self.config.primary_judge in judges.index:
            return self.config.primary_judge
        return min(judges.index, key=lambda judge: (-judges[judge], judge)) if len(judges) else None

    def default_variant(self) -> str:
        """The variant the board opens on: multimodal, unless only the other has runs."""
        variants = set(self.board["variant"])
        return DEFAULT_VARIANT if DEFAULT_VARIANT in variants or not variants else min(variants)

    def not_loaded_note(self) -> str:
        """The entries of the results folder left off the board, and audits that cannot be read, with why."""
        problems = {**self.not_loaded, **{a.folder.name: a.problem for a in self.audits if a.problem}}
        for folder, dataset in self.run_datasets.items():
            if dataset.problem:
                problems[self._shown_name(folder)] = f"the runs' dataset, not loaded: {dataset.problem}"
        if not problems:
            return ""
        return "**Not loaded** (fix or remove these result folders):\n" + "\n".join(
            f"- `{shown(key)}`: {why}" for key, why in sorted(problems.items())
        )

    def judge_warning(self, judge: str | None) -> str | None:
        """A plain warning where the audit of ``judge`` shows its verdicts close to chance."""
        keys = {entry.run.judge_key for entry in self.entries if entry.run.judge == judge}
        for audit in self.audits:
            if audit.results is not None and audit.judge_key in keys:
                warning = judge_warning(audit.results)
                return f"Warning: {warning} (judge audit below the board)." if warning else None
        return None

    def panel_note(self, judge: str | None) -> str:
        """Where the board's judge is a panel: each judge's own score per model, and their agreement."""
        lines = []
        for entry in self.entries:
            panel = entry.run.results.panel
            if entry.run.judge != judge or panel is None:
                continue
            lines.append(f"- {entry.label} ({entry.run.variant}): {panel.alone()}; {panel.agreement_text()}")
        if not lines:
            return ""
        return "**A panel of judges**: each row's score is their majority verdict; each judge alone:\n" + "\n".join(
            lines
        )

    def audit_note(self, judge: str | None) -> str:
        """The audit(s) of the judge whose board is shown, or how to make one (and, for a panel,
        its judges' own scores)."""
        keys = {entry.run.judge_key for entry in self.entries if entry.run.judge == judge}
        if not keys:
            return ""
        panel = self.panel_note(judge)
        if panel:
            return panel + "\n\n" + self._audit_lines(judge, keys)
        return self._audit_lines(judge, keys)

    def _audit_lines(self, judge: str | None, keys: set[str]) -> str:
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
    """One variant under one judge: (complete runs, ranked best first; partial runs, unranked),
    each with the model, the ``columns`` asked for in the board's order, and the folder's key."""
    mask = board["type"].isin(types) & (board["variant"] == variant) & (board["judge"] == judge)
    size = pd.to_numeric(board["size (B)"], errors="coerce")
    in_bucket = pd.Series(False, index=board.index)
    for bucket in sizes:
        bounds = SIZE_BUCKETS.get(bucket)
        in_bucket |= size.isna() if bounds is None else ((size >= bounds[0]) & (size < bounds[1]))
    shown = [c for c in BOARD_ORDER if c in columns or c == "model"]
    chosen = board[mask & in_bucket]
    partial = chosen["partial"].astype(bool)
    complete = chosen[~partial].reset_index(drop=True)
    ranked = complete[shown + ["key"]]
    if "rank" in columns:  # ties share a rank, counted within what is shown
        ranked.insert(0, "rank", complete["Gamut"].rank(method="min", ascending=False).astype(int))
    return ranked, chosen[partial][shown + ["key"]].reset_index(drop=True)


def judges_of(board: pd.DataFrame, variant: str | None) -> list[str]:
    """The judges with a run of ``variant`` on the board: the only ones worth offering."""
    return sorted(board.loc[board["variant"] == variant, "judge"].unique())


def describe_board(
    board: pd.DataFrame,
    types: list[str],
    variant: str | None,
    judge: str | None,
    sizes: list[str],
    ranked: pd.DataFrame,
    partial: pd.DataFrame,
) -> str:
    """The line over the board: what it ranks, or why it ranks nothing (a blank table says nothing)."""
    runs = f"{len(partial)} partial run{'s' * (len(partial) != 1)}"
    partial_note = f" ({runs} below)" if len(partial) else ""
    if len(ranked):
        count = f"{len(ranked)} complete run{'s' * (len(ranked) != 1)}"
        return (
            f"{count} of the {variant} variant judged by {judge}, ranked by Gamut{partial_note}. "
            "Click a model's name to browse its failures."
        )
    if board.empty:
        return "No result yet: the board fills as result folders are added."
    if not (board["variant"] == variant).any():
        return f"No run of the {variant} variant yet: choose another variant."
    if not ((board["variant"] == variant) & (board["judge"] == judge)).any():
        return f"{judge} judged no {variant} run: choose another judge."
    if not types:
        return "No model type chosen: tick one under Filters."
    if not sizes:
        return "No size chosen: tick one under Filters."
    if len(partial):
        return f"No complete run of the {variant} variant judged by {judge} matches the filters{partial_note}."
    return (
        f"No run matches the filters: no {' or '.join(types)} model of {' or '.join(sizes)} "
        f"has a {variant} run judged by {judge}."
    )


def one_decimal(value: object) -> str:
    """A score as every table of GAMUT writes it: one decimal always, "n/a" where undefined, and
    a value that rounds to zero written 0.0, never -0.0."""
    number = pd.to_numeric(value, errors="coerce")
    if pd.isna(number):
        return "n/a"
    text = f"{number:.1f}"
    return "0.0" if text == "-0.0" else text


def _size_text(value: object) -> str:
    number = pd.to_numeric(value, errors="coerce")
    return "unknown" if pd.isna(number) else f"{number:g}"


def board_view(frame: pd.DataFrame) -> Styler:
    """A board table as the browser shows it: scores with one decimal ("56.0", never "56") while
    the cells keep their numbers (so a column sorts as numbers), and the model's name styled as
    the one cell that opens the failure browser."""
    scores = [c for c in SCORE_COLUMNS if c in frame.columns]
    view = frame.style.format(one_decimal, subset=scores)
    if "size (B)" in frame.columns:
        view = view.format(_size_text, subset=["size (B)"])
    if COST_COLUMN in frame.columns:
        view = view.format(lambda value: shown_cost(pd.to_numeric(value, errors="coerce")), subset=[COST_COLUMN])
    if "model" in frame.columns and len(frame):
        view = view.map(lambda _: "color: var(--link-text-color); cursor: pointer", subset=["model"])
    return view
