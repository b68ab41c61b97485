"""The Leaderboard tab: one variant under one judge, complete runs ranked, partial runs apart,
the judge's audit and the folders that could not be loaded; a row opens the failure browser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from gamut_hf.core.names import DEFAULT_VARIANT, MODEL_TYPES, VARIANTS
from gamut_hf.leaderboard.entries import LEADERBOARD_COLUMNS
from gamut_hf.leaderboard.space.data import DEFAULT_COLUMNS, SIZE_BUCKETS, filter_board

if TYPE_CHECKING:
    from gamut_hf.leaderboard.space.app import SpaceUI


@dataclass
class BoardTab:
    variants: Any
    judges: Any
    types: Any
    sizes: Any
    columns: Any
    table: Any
    shown_keys: Any
    partial_table: Any
    partial_keys: Any
    audit_note: Any
    not_loaded: Any
    refresh: Any

    @property
    def inputs(self) -> list[Any]:
        return [self.types, self.variants, self.judges, self.sizes, self.columns]

    @property
    def outputs(self) -> list[Any]:
        return [self.table, self.shown_keys, self.partial_table, self.partial_keys, self.audit_note]


def layout(ui: SpaceUI, tab: Any) -> None:
    data = ui.data
    with gr.Row():
        variants = gr.Radio(list(VARIANTS), value=DEFAULT_VARIANT, label="Variant", elem_id="filter-variant")
        judges = gr.Radio(data.judges(), value=data.primary_judge(), label="Judge", elem_id="filter-judge")
        types = gr.CheckboxGroup(list(MODEL_TYPES), value=list(MODEL_TYPES), label="Model type", elem_id="filter-type")
        sizes = gr.CheckboxGroup(list(SIZE_BUCKETS), value=list(SIZE_BUCKETS), label="Size", elem_id="filter-size")
    columns = gr.CheckboxGroup(
        ["rank", *LEADERBOARD_COLUMNS[1:]],
        value=[c for c in DEFAULT_COLUMNS if c != "model"],
        label="Columns",
        elem_id="columns",
    )
    ranked, partial_runs = filter_board(
        data.board, list(MODEL_TYPES), DEFAULT_VARIANT, data.primary_judge(), list(SIZE_BUCKETS), DEFAULT_COLUMNS
    )
    shown_keys = gr.State(list(ranked["key"]))
    table = gr.Dataframe(
        ranked.drop(columns="key"),
        show_search="search",
        interactive=False,
        elem_id="leaderboard-table",
        pinned_columns=2,
        wrap=True,
    )
    gr.Markdown(
        "Complete runs of one variant under one judge, ranked by Gamut; pick another variant "
        "or judge above. Click a model's row to browse its failures."
    )
    partial_keys = gr.State(list(partial_runs["key"]))
    partial_table = gr.Dataframe(
        partial_runs.drop(columns="key"),
        interactive=False,
        elem_id="partial-table",
        wrap=True,
        label="Partial runs: fewer questions answered, so not ranked",
    )
    audit_note = gr.Markdown(data.audit_note(data.primary_judge()), elem_id="judge-audit")
    not_loaded = gr.Markdown(data.not_loaded_note(), elem_id="not-loaded")
    refresh = gr.Button("Refresh", elem_id="refresh", size="sm")
    ui.board = BoardTab(
        variants,
        judges,
        types,
        sizes,
        columns,
        table,
        shown_keys,
        partial_table,
        partial_keys,
        audit_note,
        not_loaded,
        refresh,
    )


def wire(ui: SpaceUI) -> None:
    data, board, failures = ui.data, ui.board, ui.failures

    def show_board(types_, variant_, judge_, sizes_, columns_):
        ranked_, partial_ = filter_board(data.board, types_, variant_, judge_, sizes_, ["model", *columns_])
        return (
            ranked_.drop(columns="key"),
            list(ranked_["key"]),
            partial_.drop(columns="key"),
            list(partial_["key"]),
            data.audit_note(judge_),
        )

    for control in board.inputs:
        control.input(show_board, board.inputs, board.outputs, api_name=False)

    def refresh_board(types_, variant_, judge_, sizes_, columns_):
        data.refresh()
        if judge_ not in data.judges():  # none yet, or its runs are gone: the primary judge
            judge_ = data.primary_judge()
        return (
            *show_board(types_, variant_, judge_, sizes_, columns_),
            gr.Dropdown(choices=data.model_choices()),
            gr.Radio(choices=data.judges(), value=judge_),
            data.not_loaded_note(),
        )

    board.refresh.click(
        refresh_board,
        board.inputs,
        [*board.outputs, failures.models, board.judges, board.not_loaded],
        api_name="refresh",
    )

    def open_failures(keys: list[str], event: gr.SelectData):
        key = keys[event.index[0]] if event.index and event.index[0] < len(keys) else None
        if key is None:
            return gr.Tabs(), gr.Dropdown()
        return gr.Tabs(selected="failures"), gr.Dropdown(value=[key])

    for frame, keys in ((board.table, board.shown_keys), (board.partial_table, board.partial_keys)):
        frame.select(open_failures, [keys], [ui.tabs, failures.models], api_name=False).then(
            failures.list_questions, failures.inputs, [failures.questions, failures.count], api_name=False
        ).then(failures.show_question, [failures.question_id, failures.models], failures.question_view, api_name=False)
