"""Where models fail: every verdict of every result folder in one index, fast to filter.

At full scale (1,813 questions x 14 models x 15 checks, about 380,000 verdicts) each filter is
a few boolean masks over categorical codes, so an interaction stays well under a second on two
cores. Question texts, images and meta-rubrics come from the dataset when the Space has it;
without it, checks are grouped under their item ids.

Everything shown is escaped here (``html.escape``): model names, responses, check texts and
rationales are user-supplied or model-written, and ``gr.HTML`` does not sanitise.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gamut_hf.core.rubric import ITEM_TYPES, TIERS, VERDICTS
from gamut_hf.core.scorer import top_verdict_share
from gamut_hf.dataset.release import CitedSnippet
from gamut_hf.evaluation.run_folder import DETAILS_FILE, RESPONSES_FILE, RunFolderError
from gamut_hf.leaderboard.entries import Entry
from gamut_hf.reports.figures import VERDICT_COLOURS

ANY = "any"
FILTERS = ("domain", "tier", "verdict", "item_type")
# How the question list is ordered: by the first model's score, or by the judge's least sure
# verdict among the matching checks (from its verdict probabilities, where the judge gave them).
WORST_FIRST = "worst score first"
UNSURE_FIRST = "judge least sure first"
ORDERS = (WORST_FIRST, UNSURE_FIRST)
SURE_COLUMN = "judge least sure (%)"


@dataclass
class QuestionInfo:
    """What the dataset says about a question (a result folder may outlive its dataset: all optional)."""

    question: str
    text_question: str
    items: list[dict] | None  # meta-rubric items: id, type, tier, label; None: the layout has no meta-rubric
    image: Callable[[], Any] | None = None  # decodes the image when a question is opened
    evidence: dict[str, tuple[CitedSnippet, ...]] = field(default_factory=dict)  # cited per check (the release)


def dataset_questions(source: str) -> dict[str, QuestionInfo]:
    """Question id -> QuestionInfo for a dataset the loader knows (sample, folder, hub id); images stay
    undecoded until asked for (1,813 decoded photos would not fit in memory)."""
    from gamut_hf.dataset.loader import iter_questions, load_gamut

    data = load_gamut(source, "multimodal")
    embedded = "image" in data.column_names

    def image_of(row: int) -> Callable[[], Any]:
        return lambda: data[row]["image"]

    return {
        question.id: QuestionInfo(
            question.prompt("multimodal"),
            question.text_question,
            None
            if question.meta_rubric is None
            else [
                {"id": item.id, "type": item.type, "tier": item.tier, "label": item.label}
                for item in question.meta_rubric.items
            ],
            image_of(row) if embedded else None,
            question.evidence,
        )
        for row, question in enumerate(iter_questions(data, "text_only"))
    }


@dataclass
class EntryTables:
    """What the index takes from one result folder: its verdicts, question scores and responses."""

    verdicts: pd.DataFrame
    scores: pd.DataFrame
    responses: pd.DataFrame


def _sureness(probabilities: Any) -> float:
    """How sure the judge was of a verdict (its top verdict's share); NaN where unknown."""
    if not isinstance(probabilities, Mapping):
        return math.nan
    share = top_verdict_share({v: float(p) for v, p in probabilities.items() if p is not None})
    return math.nan if share is None else share


def entry_tables(entry: Entry) -> EntryTables:
    """Read one result folder's part of the index. Raises (a RunFolderError naming the file) when a
    table is missing or not the one results.json records: callers reading many folders catch it per
    folder, so one bad folder is listed as not loaded instead of stopping the rest."""
    try:
        extra = entry.run.table(
            DETAILS_FILE, ["check_text", "rationale", "verdict_probabilities"], read_dictionary=["check_text"]
        ).to_pandas()
    except RunFolderError:  # a folder written before verdict probabilities were kept
        extra = entry.run.table(DETAILS_FILE, ["check_text", "rationale"], read_dictionary=["check_text"]).to_pandas()
        extra["verdict_probabilities"] = None
    details = entry.run.details
    verdicts = pd.DataFrame(
        {
            "entry": entry.key,
            "question_id": details["question_id"],
            "domain": details["domain"],
            "check_id": details["check_id"],
            "item_id": details["item_id"],
            "tier": details["tier"],
            "kind": details["kind"],
            "item_type": details["item_type"],
            "verdict": details["verdict"],
            "check_text": extra["check_text"].astype(str),
            "rationale": extra["rationale"],
            "judge_sure": [_sureness(p) for p in extra["verdict_probabilities"]],
        }
    )
    scores = entry.run.questions[["domain", "score", *VERDICTS, "checks"]].assign(entry=entry.key)
    responses = entry.run.table(RESPONSES_FILE, ["question_id", "response"]).to_pandas().assign(entry=entry.key)
    return EntryTables(verdicts, scores, responses)


class FailureIndex:
    def __init__(
        self,
        entries: list[Entry],
        questions: dict[str, QuestionInfo] | None = None,
        tables: Mapping[str, EntryTables] | None = None,
    ):
        """``tables``: each entry's :func:`entry_tables` by key, read already (the Space reads them
        per folder, where a folder that fails is left out); read here for any entry not given."""
        self.entries = {e.key: e for e in entries}
        self.info = questions or {}
        frames, scores, responses = [], [], []
        for entry in entries:
            mine = tables[entry.key] if tables is not None and entry.key in tables else entry_tables(entry)
            frames.append(mine.verdicts)
            scores.append(mine.scores)
            responses.append(mine.responses)
        categorical = (
            "entry",
            "question_id",
            "domain",
            "check_id",
            "item_id",
            "tier",
            "kind",
            "item_type",
            "verdict",
            "check_text",
        )
        self.verdicts = pd.concat(frames, ignore_index=True).astype({c: "category" for c in categorical})
        self.codes = {c: self.verdicts[c].cat.codes.to_numpy() for c in ("entry", *FILTERS, "question_id")}
        self.scores = pd.concat(scores).reset_index().set_index(["entry", "question_id"]).sort_index()
        self.responses = (
            pd.concat(responses).set_index(["entry", "question_id"])["response"] if responses else pd.Series(dtype=str)
        )
        self.by_question = self.verdicts.groupby("question_id", observed=True).indices

    def choices(self, column: str) -> list[str]:
        values = [str(v) for v in self.verdicts[column].cat.categories]
        order = {"tier": TIERS, "verdict": VERDICTS, "item_type": ITEM_TYPES}.get(column)
        return [v for v in order if v in values] if order else sorted(values)

    def _code(self, column: str, value: str) -> int:
        categories = self.verdicts[column].cat.categories
        return int(categories.get_loc(value)) if value in categories else -2

    def questions(
        self, models: list[str], limit: int = 200, order: str = WORST_FIRST, **filters: str
    ) -> tuple[pd.DataFrame, int]:
        """Questions with at least one check matching the filters for the first model, worst first
        (or, ``order`` UNSURE_FIRST, the one whose judge was least sure of a matching verdict first).

        Columns: question id, domain, the number of matching checks, each chosen model's score on
        the question (0-100) and, where the judge gave verdict probabilities, the probability of its
        least sure matching verdict. Returns at most ``limit`` rows and the total count.
        """
        if not models:
            return pd.DataFrame(columns=["question", "domain", "matching checks"]), 0
        mask = self.codes["entry"] == self._code("entry", models[0])
        for column, value in filters.items():
            if value and value != ANY:
                mask &= self.codes[column] == self._code(column, value)
        counts = np.bincount(
            self.codes["question_id"][mask], minlength=len(self.verdicts["question_id"].cat.categories)
        )
        hit = np.flatnonzero(counts)
        ids = self.verdicts["question_id"].cat.categories[hit]
        table = pd.DataFrame({"question": ids, "matching checks": counts[hit]})
        first = self.scores.loc[models[0]].reindex(ids)
        table.insert(1, "domain", first["domain"].to_numpy())
        for key in models:
            label = self.entries[key].label if key in self.entries else key
            table[f"{label} score"] = (100 * self.scores.loc[key]["score"].reindex(ids)).round(1).to_numpy()
        by = [f"{self.entries[models[0]].label} score", "matching checks"]
        ascending = [True, False]
        sure = self.verdicts["judge_sure"].to_numpy()[mask]
        if not np.isnan(sure).all():
            least = pd.Series(sure).groupby(self.codes["question_id"][mask]).min()
            table[SURE_COLUMN] = (100 * least.reindex(hit).to_numpy()).round(1)
            if order == UNSURE_FIRST:
                by, ascending = [SURE_COLUMN, *by], [True, *ascending]
        table = table.sort_values(by, ascending=ascending, ignore_index=True, na_position="last")
        return table.head(limit), len(table)

    # -- one question ------------------------------------------------------------------------

    def question_header(self, question_id: str) -> str:
        info = self.info.get(question_id)
        if info is None:
            return f"<h3>{html.escape(question_id)}</h3><p><em>The dataset of this question is not loaded.</em></p>"
        return (
            f"<h3>{html.escape(question_id)}</h3>"
            f"<p><strong>Question:</strong> {html.escape(info.question)}</p>"
            f"<p><strong>Text-only question:</strong> {html.escape(info.text_question)}</p>"
        )

    def image(self, question_id: str):
        info = self.info.get(question_id)
        return info.image() if info is not None and info.image is not None else None

    def answer_html(self, question_id: str, key: str) -> str:
        """One model's response and every check, nested under its item, coloured by verdict."""
        entry = self.entries.get(key)
        rows = self.by_question.get(question_id)
        if entry is None or rows is None:
            return "<p>No such model or question.</p>"
        checks = self.verdicts.iloc[rows]
        checks = checks[checks["entry"] == key]
        if checks.empty:
            return f"<p>{html.escape(entry.label)} has no verdicts on this question.</p>"
        score = self.scores.loc[(key, question_id)]
        response = self.responses.get((key, question_id))
        parts = [
            f"<h4>{html.escape(entry.label)}: {100 * score['score']:.1f}</h4>",
            f"<p style='font-size:0.85em'>judge {html.escape(entry.run.judge)}, {html.escape(entry.run.variant)}; "
            + ", ".join(f"{int(score[v])} {v.replace('_', ' ')}" for v in VERDICTS)
            + "</p>",
            "<details open><summary>Response</summary><div style='white-space:pre-wrap;border:1px solid #ddd;"
            "padding:6px;max-height:300px;overflow:auto'>"
            + (html.escape(response) if isinstance(response, str) else "<em>not stored</em>")
            + "</div></details>",
        ]
        info = self.info.get(question_id)
        items = (info.items if info else None) or []
        if info is not None and info.items is None:
            parts.append(
                "<p class='no-meta-rubric' style='font-size:0.85em;color:#555'>No meta-rubric view: this dataset "
                "has no typed meta-rubric (the official release publishes its checks already compiled), so each "
                "check is listed on its own with the snippets it cites.</p>"
            )
        evidence = info.evidence if info else {}
        known = {item["id"] for item in items}
        scaffold = items + [
            {"id": i, "type": t, "tier": "", "label": ""}
            for i, t in checks[["item_id", "item_type"]].drop_duplicates().itertuples(index=False)
            if i not in known
        ]
        for item in scaffold:
            mine = checks[checks["item_id"] == item["id"]]
            if mine.empty:
                continue
            title = " · ".join(
                html.escape(str(x)) for x in (item["id"], item["type"], item["tier"], item["label"]) if x
            )
            parts.append(f"<div style='margin:8px 0 4px'><strong>{title}</strong></div><ul style='margin-top:0'>")
            for check in mine.itertuples(index=False):
                colour = VERDICT_COLOURS.get(str(check.verdict), "#000")
                rationale = (
                    f"<br><span style='color:#555'>judge: {html.escape(check.rationale)}</span>"
                    if isinstance(check.rationale, str) and check.rationale
                    else ""
                )
                parts.append(
                    f"<li class='check verdict-{html.escape(str(check.verdict))}' style='border-left:6px solid {colour};"
                    f"padding-left:6px;margin:3px 0;list-style:none'><code>{html.escape(str(check.check_id))}</code> "
                    f"<b style='color:{colour}'>{html.escape(str(check.verdict).replace('_', ' '))}</b> "
                    f"<small>{html.escape(str(check.tier))}, {html.escape(str(check.kind))}</small><br>"
                    f"{html.escape(str(check.check_text))}{rationale}{_cited(evidence.get(str(check.check_id), ()))}</li>"
                )
            parts.append("</ul>")
        return "".join(parts)


def _cited(snippets: tuple[CitedSnippet, ...]) -> str:
    """The snippets a check cites, folded under it; a citation naming no snippet says so."""
    if not snippets:
        return ""
    shown = "".join(
        f"<li><b>{html.escape(s.citation)}</b> "
        + (
            "<em>cites no snippet of this question</em>"
            if s.dangling
            else f"{html.escape(s.title or '')}: {html.escape(s.text or '')}"
        )
        + "</li>"
        for s in snippets
    )
    return f"<details class='evidence'><summary>evidence ({len(snippets)})</summary><ul>{shown}</ul></details>"
