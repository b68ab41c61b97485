"""The Failures tab: a model's questions (or two models' side by side) filtered by domain, tier,
verdict and item type, worst first; a question shows its image, checks and both answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from gamut_hf.leaderboard.failures import ANY, ORDERS, SURE_COLUMN, UNSURE_FIRST, WORST_FIRST
from gamut_hf.leaderboard.space.data import one_decimal

if TYPE_CHECKING:
    from gamut_hf.leaderboard.space.app import SpaceUI

FILTERS = ("domain", "tier", "verdict", "item_type")


@dataclass
class FailuresTab:
    models: Any
    filters: dict[str, Any]
    order: Any  # worst score first, or the judge's least sure verdict first
    count: Any
    questions: Any
    question_id: Any
    question_view: list[Any]  # image, header, left answer, right answer
    list_questions: Callable[..., Any]  # the API's: plain values
    question_parts: Callable[..., Any]  # the API's: plain values
    show_question: Callable[..., Any]
    open_listed: Callable[..., Any]  # (models, question, *filters) -> what `listed_and_shown` shows

    @property
    def inputs(self) -> list[Any]:
        return [self.models, *self.filters.values(), self.order]

    @property
    def listed_and_shown(self) -> list[Any]:
        return [self.questions, self.count, self.question_id, *self.question_view]


def layout(ui: SpaceUI, tab: Any) -> None:
    data = ui.data
    index = data.index
    ranked = ui.board.shown_keys.value  # the board's first ranked model opens here
    models = gr.Dropdown(
        data.model_choices(),
        value=list(ranked[:1] if ranked else data.board["key"][:1]),
        multiselect=True,
        max_choices=2,
        label="Model (a second one shows side by side)",
        elem_id="failure-models",
    )
    with gr.Row():  # two to a line on a phone
        filters = {
            name: gr.Dropdown(
                [ANY, *(index.choices(name) if index else [])],
                value=ANY,
                label=name.replace("_", " "),
                elem_id=f"failure-{name}",
                min_width=140,
            )
            for name in FILTERS
        }
    order = gr.Radio(list(ORDERS), value=WORST_FIRST, label="order", elem_id="failure-order")
    count = gr.Markdown(elem_id="failure-count")
    questions = gr.Dataframe(interactive=False, elem_id="failure-questions", max_height=300, visible=False)
    question_id = gr.Textbox(label="Question id", elem_id="question-id")
    # Side by side on a wide screen, one above the other on a phone (the Space's CSS: .gamut-stack).
    with gr.Row(elem_classes=["gamut-stack"]):
        image = gr.Image(label="Image", height=280, elem_id="question-image", interactive=False, visible=False)
        header = gr.HTML(elem_id="question-header")
    with gr.Row(elem_classes=["gamut-stack"]):
        left = gr.HTML(elem_id="answer-left")
        right = gr.HTML(elem_id="answer-right")

    def matching(keys, domain, tier, verdict, item_type, order=WORST_FIRST) -> tuple[pd.DataFrame, str]:
        """The questions matching the filters, worst first or least sure first (the chosen models'
        scores beside each id, where a phone has room for them), and a line saying how many, or why none."""
        if data.index is None:
            return pd.DataFrame(), "**No result yet**: no model to browse."
        if not keys:
            return pd.DataFrame(), "**No model chosen**: pick one above."
        found, total = data.index.questions(
            list(keys), order=order or WORST_FIRST, domain=domain, tier=tier, verdict=verdict, item_type=item_type
        )
        if not total:
            return found, "**No question matches**: no check of this model has these filters."
        scores = [column for column in found.columns if column.endswith(" score")]
        found = found[["question", *scores, *(c for c in found.columns if c not in scores and c != "question")]]
        first = "the judge's least sure" if order == UNSURE_FIRST and SURE_COLUMN in found else "worst"
        if order == UNSURE_FIRST and SURE_COLUMN not in found:
            first = "worst (this judge gave no verdict probabilities)"
        if total > len(found):
            return found, f"{total} questions match; the {len(found)} {first} first. Click one to open it."
        return found, f"{total} questions match, {first} first. Click one to open it."

    def questions_table(found: pd.DataFrame):
        """The list as shown: hidden when empty (the line above says why), scores with one decimal."""
        scores = [column for column in found.columns if column.endswith(" score") or column == SURE_COLUMN]
        return gr.Dataframe(found.style.format(one_decimal, subset=scores), visible=not found.empty)

    def list_questions(keys, domain, tier, verdict, item_type, order=WORST_FIRST):
        """/questions for scripted clients: the list as a plain frame, and the line."""
        return matching(keys, domain, tier, verdict, item_type, order)

    def question_parts(qid: str, keys: list[str]):
        """/question for scripted clients: one question's image (None without one), its header,
        and the first two models' answers with their checks."""
        qid = (qid or "").strip()
        if data.index is None or not qid:
            return None, "", "", ""
        if qid not in data.index.by_question:
            return None, "<p>No such question.</p>", "", ""
        keys = list(keys or [])
        views = [data.index.answer_html(qid, key) for key in keys[:2]]
        return (
            data.index.image(qid),
            data.index.question_header(qid),
            views[0] if views else "",
            views[1] if len(views) > 1 else "",
        )

    def show_question(qid: str, keys: list[str]):
        """A question as the page shows it: no empty image box where it has no image."""
        image, *rest = question_parts(qid, keys)
        return gr.Image(image, visible=image is not None), *rest

    def open_listed(keys, question, domain, tier, verdict, item_type, order=WORST_FIRST):
        """The list, and a question open beside it: the one open already while it is listed, else
        the first listed (a tab that opens on a question shows what the browser is for)."""
        found, line = matching(keys, domain, tier, verdict, item_type, order)
        listed = list(found["question"]) if "question" in found else []
        question = question if question in listed else (listed[0] if listed else "")
        return questions_table(found), line, question, *show_question(question, keys)

    ui.failures = FailuresTab(
        models,
        filters,
        order,
        count,
        questions,
        question_id,
        [image, header, left, right],
        list_questions,
        question_parts,
        show_question,
        open_listed,
    )


def wire(ui: SpaceUI) -> None:
    failures = ui.failures
    listing = [failures.models, failures.question_id, *failures.filters.values(), failures.order]
    for control in failures.inputs:
        control.input(  # the last choice is always shown (see board_tab)
            failures.open_listed, listing, failures.listed_and_shown, api_name=False, trigger_mode="always_last"
        )
    ui.app.load(failures.open_listed, listing, failures.listed_and_shown, api_name=False)

    def pick_question(frame: pd.DataFrame, event: gr.SelectData):
        return str(frame.iloc[event.index[0]]["question"]) if event.index else ""

    # Programmatic updates chain with .then; only a person's input starts an event (.input, .submit,
    # .select), so no update can set off another (a Dropdown updated from the server re-fires .change).
    shown = [failures.question_id, failures.models]
    failures.question_id.submit(failures.show_question, shown, failures.question_view, api_name=False)
    failures.questions.select(
        pick_question, [failures.questions], [failures.question_id], api_name=False, trigger_mode="multiple"
    ).then(failures.show_question, shown, failures.question_view, api_name=False)
    # The question list and one question as named endpoints, for scripted clients (and the tests):
    # plain values, where the page's events send updates (a table hidden while empty).
    api_questions = gr.Button(visible=False)
    api_questions.click(
        failures.list_questions, failures.inputs, [failures.questions, failures.count], api_name="questions"
    )
    api_question = gr.Button(visible=False)
    api_question.click(failures.question_parts, shown, failures.question_view, api_name="question")
