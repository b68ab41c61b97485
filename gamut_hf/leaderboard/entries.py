"""The leaderboard's data: a folder of result folders, one per model, variant and judge.

A result folder is what ``gamut run`` writes (results.json, details.parquet, responses.parquet),
with an optional ``model.json`` (the submitter's card: :class:`gamut_hf.leaderboard.submission.ModelInfo`
plus who submitted it and whether it is partial). Runs without a card show their model name
and "unknown" type and size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gamut_hf.core.rubric import TIERS, VERDICTS
from gamut_hf.evaluation.run_folder import run_folders_in
from gamut_hf.files import InputError, read_json
from gamut_hf.reports.report import Run, label_runs, load_run
from gamut_hf.reports.statistics import Interval

CARD_FILE = "model.json"
# What the run's priced stages cost (results.json's cost): unknown for a local model given no price.
COST_COLUMN = "cost (US$)"
# What a run is (its description), then how it scored: the board's columns, in the CSV's order.
DESCRIPTION_COLUMNS = ["model", "type", "size (B)", "variant", "judge", "questions", COST_COLUMN]
SCORE_COLUMNS = [
    "Gamut",
    "Gamut 95% CI",
    "AC",
    "AC 95% CI",
    "V",
    "V 95% CI",
    "Ctx",
    "Ctx 95% CI",
    "% meets",
    "% partial",
    "% missing",
    "% contra",
]
LEADERBOARD_COLUMNS = [*DESCRIPTION_COLUMNS, *SCORE_COLUMNS]


@dataclass
class Entry:
    """One result folder, loaded."""

    key: str  # the folder's name: the id the Space uses for it
    run: Run
    card: dict

    @property
    def label(self) -> str:
        return self.card.get("name") or self.run.model


def load_entry(folder: Path) -> Entry | None:
    """A result folder with its card; None when its run has no score (judge errors)."""
    run = load_run(folder)
    if not run.scored:
        return None
    card_path = folder / CARD_FILE
    card = read_json(card_path) if card_path.exists() or card_path.is_symlink() else {}
    if not isinstance(card, dict):  # every reader of a card asks it for fields
        raise InputError(f"{card_path}: expected a JSON object (the model's card), found {type(card).__name__}")
    return Entry(folder.name, run, card)


def load_entries(root: str | Path) -> list[Entry]:
    """Every scored result folder under ``root`` (a folder of result folders), by folder name, labelled
    as reports label runs (a backend added where two models or judges share a name)."""
    entries = [e for e in (load_entry(folder) for folder in run_folders_in(root)) if e is not None]
    label_runs([entry.run for entry in entries])
    return entries


def _size(card: dict) -> float | None:
    value = card.get("parameters_billions")
    return float(value) if isinstance(value, int | float) else None


def _interval(interval: Interval) -> str:
    return "" if math.isnan(interval.low) else f"[{interval.low:.1f}, {interval.high:.1f}]"


def is_partial(entry: Entry, dataset_questions: int | None = None) -> bool:
    """A submission sent as partial, or a run over fewer questions than the dataset has (``--limit``):
    not comparable with complete runs, so never ranked with them."""
    return bool(entry.card.get("partial")) or (
        dataset_questions is not None and len(entry.run.questions) < dataset_questions
    )


def leaderboard_row(entry: Entry, summary: dict[str, Interval], partial: bool = False) -> dict:
    """An entry's Table 1 figures (``summary`` is its ``run_summary``); numbers stay numbers so the
    browser sorts them."""
    gamut = summary["gamut"]
    return {
        "model": entry.label + (" (partial)" if partial else ""),
        "type": entry.card.get("access", "unknown"),
        "size (B)": _size(entry.card),
        "variant": entry.run.variant,
        "judge": entry.run.judge,
        "questions": len(entry.run.questions),
        COST_COLUMN: entry.run.results.cost_usd,
        "Gamut": round(gamut.value, 1),
        "Gamut 95% CI": _interval(gamut),
        **{label: round(summary[t].value, 1) for label, t in zip(("AC", "V", "Ctx"), TIERS, strict=False)},
        **{f"{label} 95% CI": _interval(summary[t]) for label, t in zip(("AC", "V", "Ctx"), TIERS, strict=False)},
        **{
            label: round(summary[v].value, 1)
            for label, v in zip(("% meets", "% partial", "% missing", "% contra"), VERDICTS, strict=False)
        },
        "key": entry.key,
        "partial": partial,
    }


def leaderboard_table(rows: list[dict]) -> pd.DataFrame:
    """Leaderboard rows (``leaderboard_row``) as one table, best first."""
    table = pd.DataFrame(rows, columns=[*LEADERBOARD_COLUMNS, "key", "partial"])
    return table.sort_values("Gamut", ascending=False, ignore_index=True)
