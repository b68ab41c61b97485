"""The Failures tab: a model's questions (or two models' side by side) filtered by domain, tier,
verdict and item type, worst first; a question shows its image, checks and both answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from gamut_hf.leaderboard.failures import ANY

if TYPE_CHECKING:
    from gamut_hf.leaderboard.space.app import SpaceUI

FILTERS = ("domain", "tier", "verdict", "item_type")


@dataclass
class FailuresTab:
    models: Any
    filters: dict[str, Any]
    count: Any
    questions: Any
    question_id: Any
    question_view: list[Any]  # image, header, left answer, right answer
    list_questions: Callable[..., Any]
    show_question: Callable[..., Any]

    @property
    def inputs(self) -> list[Any]:
        return [self.models, *self.filters.values()]


def layout(ui: SpaceUI, tab: Any) -> None:
    data = ui.data
    index = data.index
    ranked = ui.board.shown_keys.value  # the board's first ranked model opens here
    with gr.Row():
        models = gr.Dropdown(
            data.model_choices(),
            value=list(ranked[:1] if ranked else data.board["key"][:1]),
            multiselect=True,
            max_choices=2,
            label="Model (a second one shows side by side)",
            elem_id="failure-models",
        )
        filters = {
            name: gr.Dropdown(
                [ANY, *(index.choices(name) if index else [])],
                value=ANY,
                label=name.replace("_", " "),
                elem_id=f"failure-{name}",
            )
            for name in FILTERS
        }
    count = gr.Markdown(elem_id="failure-count")
    questions = gr.Dataframe(interactive=False, elem_id="failure-questions", max_height=300)
    question_id = gr.Textbox(label="Question id", elem_id="question-id")
    with gr.Row():
        image = gr.Image(label="Image", height=280, elem_id="question-image", interactive=False)
        header = gr.HTML(elem_id="question-header")
    with gr.Row():
        left = gr.HTML(elem_id="answer-left")
        right = gr.HTML(elem_id="answer-right")

    def list_questions(keys, domain, tier, verdict, item_type):
        if data.index is None or not keys:
            return pd.DataFrame(), "No model chosen."
        found, total = data.index.questions(list(keys), domain=domain, tier=tier, verdict=verdict, item_type=item_type)
        shown = (
            f"{total} questions match; the {len(found)} worst first."
            if total > len(found)
            else f"{total} questions match, worst first."
        )
        return found, shown

    def show_question(qid: str, keys: list[str]):
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

    ui.failures = FailuresTab(
        models, filters, count, questions, question_id, [image, header, left, right], list_questions, show_question
    )


def wire(ui: SpaceUI) -> None:
    failures = ui.failures
    listed = [failures.questions, failures.count]
    for control in failures.inputs:
        control.input(failures.list_questions, failures.inputs, listed, api_name=False)
    ui.app.load(failures.list_questions, failures.inputs, listed, api_name=False)

    def pick_question(frame: pd.DataFrame, event: gr.SelectData):
        return str(frame.iloc[event.index[0]]["question"]) if event.index else ""

    # Programmatic updates chain with .then; only a person's input starts an event (.input, .submit,
    # .select), so no update can set off another (a Dropdown updated from the server re-fires .change).
    shown = [failures.question_id, failures.models]
    failures.question_id.submit(failures.show_question, shown, failures.question_view, api_name="question")
    failures.models.input(failures.show_question, shown, failures.question_view, api_name=False)
    failures.questions.select(pick_question, [failures.questions], [failures.question_id], api_name=False).then(
        failures.show_question, shown, failures.question_view, api_name=False
    )
    # The question list as a named endpoint, for scripted clients (and the tests).
    api_questions = gr.Button(visible=False)
    api_questions.click(failures.list_questions, failures.inputs, listed, api_name="questions")
