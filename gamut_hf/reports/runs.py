"""The runs a report reads: run folders found, read and scored per question, and named for display.

A :class:`Run` is one run folder (results.json and details.parquet) with its per-question table.
Its display labels (model and judge names, made unique within the report) and its folder's name
(the path from the folder every run of the report shares) are set on the whole set at once,
since both depend on the other runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.evaluation.run_folder import (
    DETAILS_FILE,
    RESULTS_FILE,
    RunFolder,
    RunResults,
    is_run_folder,
    read_run_folder,
    run_folders_in,
)
from gamut_hf.files import InputError
from gamut_hf.reports import statistics as analysis

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Run:
    """One run folder, read and scored per question."""

    folder: Path
    results: RunResults
    details: pd.DataFrame
    model_key: str
    judge_key: str
    model: str = ""  # display labels, unique within the report (label_runs)
    judge: str = ""
    # analysis.question_table; empty when the run has no score (then `excluded` says why)
    questions: pd.DataFrame = field(default_factory=pd.DataFrame)
    excluded: str | None = None
    name: str = ""  # the folder's path from the folder the report's runs share (name_folders)

    @property
    def variant(self) -> str:
        return self.results.variant

    @property
    def scored(self) -> bool:
        return self.excluded is None

    def table(self, name: str, columns: Sequence[str] | None = None, **options) -> pa.Table:
        """One of the run's tables (run_folder's file names), refused unless results.json was written with it."""
        return RunFolder(self.folder, self.results).table(name, columns, **options)


def fingerprint_name(fingerprint: dict) -> str:
    """The model's name in a model or judge fingerprint."""
    return str(fingerprint.get("model") or fingerprint.get("name") or "?")


def load_run(folder: str | Path) -> Run:
    """Read a run folder; a run whose score is blocked by judge errors is kept but excluded.

    Per-question scores are recomputed from details.parquet with the parameters the run was
    scored with (recorded in results.json), so every reader agrees with results.json.
    """
    outputs = read_run_folder(folder)
    results = outputs.results
    details = outputs.table(
        DETAILS_FILE, columns=["question_id", "domain", "check_id", "tier", "kind", "item_id", "verdict"]
    ).to_pandas()
    run = Run(
        outputs.folder,
        results,
        details,
        json.dumps(results.model, sort_keys=True),
        json.dumps(results.judge, sort_keys=True),
        name=outputs.folder.name,
    )
    score = results.score
    if score.gamut is None:
        run.excluded = (
            f"no score: {results.judge_errors} judge errors and {results.unfinished_checks} unjudged checks "
            f"(finish it, or rescore with `gamut score {outputs.folder} --errors-as-missing`)"
        )
        return run
    unknown = set(details["verdict"].dropna()) - set(VERDICTS) - {"error"}
    if unknown:
        raise InputError(f"{outputs.folder / DETAILS_FILE}: unknown verdict {sorted(unknown)[0]!r}")
    # The run was scored with errors and unjudged checks counted as missing; so is the report.
    details["verdict"] = details["verdict"].where(details["verdict"].isin(VERDICTS), "missing")
    details["item_type"] = analysis.with_item_types(details)
    run.questions = analysis.question_table(details, results.score_params)
    return run


def find_run_folders(paths: Sequence[str | Path]) -> list[Path]:
    """The run folders named, or for a folder of runs, the run folders inside it (anything else
    inside it, such as the dataset `gamut simulate` writes beside its runs, is not a run and is passed over)."""
    folders: list[Path] = []
    for path in map(Path, paths):
        if is_run_folder(path):
            folders.append(path)
        elif path.is_dir() and (inner := run_folders_in(path)):
            folders.extend(inner)
        else:
            raise InputError(f"{path}: not a run folder (no {RESULTS_FILE}) and holds none")
    return list(dict.fromkeys(folders))


def label_runs(runs: list[Run]) -> None:
    """Display names: the model's name, with the backend (then the folder) added only where names collide."""
    for key_of, attr in ((lambda r: r.model_key, "model"), (lambda r: r.judge_key, "judge")):
        fingerprints = {key_of(r): json.loads(key_of(r)) for r in runs}
        labels = {key: fingerprint_name(fp) for key, fp in fingerprints.items()}
        for step in (
            lambda k, fp: f"{fingerprint_name(fp)} ({fp.get('backend', '?')})",
            lambda k, fp: (
                f"{fingerprint_name(fp)} ({fp.get('backend', '?')} {hashlib.sha256(k.encode()).hexdigest()[:6]})"
            ),
        ):
            clashes = pd.Series(labels).duplicated(keep=False)
            for key in clashes[clashes].index:
                labels[key] = step(key, fingerprints[key])
        for run in runs:
            setattr(run, attr, labels[key_of(run)])


def shared_folder(runs: Sequence[Run]) -> Path:
    """The deepest folder holding every run's folder (their results folder, when they share one)."""
    parents = [str(run.folder.resolve().parent) for run in runs]
    return Path(os.path.commonpath(parents)) if parents else Path.cwd()


def name_folders(runs: Sequence[Run]) -> Path:
    """Set each run's ``name`` to its folder's path from :func:`shared_folder` (a report shows no
    absolute paths: they say where the author's disk keeps them, nothing about the runs); returns that folder."""
    shared = shared_folder(runs)
    for run in runs:
        run.name = run.folder.resolve().relative_to(shared).as_posix()
    return shared


def repeated_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs repeating an earlier one's model, judge and variant (shards beside their merge, a
    copied folder), in order: a report shows each combination once, so the first is the one kept."""
    seen: set[tuple[str, str, str]] = set()
    repeated = []
    for run in runs:
        combination = (run.variant, run.judge_key, run.model_key)
        if combination in seen:
            repeated.append(run)
        seen.add(combination)
    return repeated


def repeated_run_line(run: Run, name: str | None = None) -> str:
    """One line naming a run :func:`repeated_runs` found (by ``name``, its folder's path by default);
    ``run`` must be labelled (:func:`label_runs`)."""
    return (
        f"{name or run.folder}: a second run of {run.model} judged by {run.judge} ({run.variant}); "
        "report each combination once (merge shards with `gamut merge`)"
    )
