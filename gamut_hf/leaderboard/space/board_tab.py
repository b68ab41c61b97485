"""The Leaderboard tab: one variant under one judge, complete runs ranked, partial runs apart,
the judge's audit and the folders that could not be loaded; a model's name opens the failure browser.

The variant and the judge are chosen above the board (only judges with runs of the variant are
offered); the other filters and the columns wait in a closed accordion, so the board is on the
first screen of a phone. A view with no run says why instead of showing a blank table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from gamut_hf.core.names import MODEL_TYPES, VARIANTS
from gamut_hf.leaderboard.entries import LEADERBOARD_COLUMNS
from gamut_hf.leaderboard.space.data import (
    COLUMN_CHOICES,
    DEFAULT_COLUMNS,
    SIZE_BUCKETS,
    board_view,
    describe_board,
    filter_board,
)

if TYPE_CHECKING:
    from gamut_hf.leaderboard.space.app import SpaceUI

# Tall enough for a board of a few dozen runs to show whole, without a scroll bar inside the page.
BOARD_MAX_HEIGHT = 2400


@dataclass
class BoardView:
    """One view of the board: the ranked and the partial runs, the judge shown (the one asked for,
    or the variant's primary judge where that judge has no run of it), the judges on offer and
    the line above the board."""

    ranked: pd.DataFrame
    partial: pd.DataFrame
    judge: str | None
    judges: list[str]
    caption: str


@dataclass
class BoardTab:
    variants: Any
    judges: Any
    types: Any
    sizes: Any
    columns: Any
    caption: Any
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
        """What every change of the view updates, in :func:`shown` order."""
        return [
            self.table,
            self.shown_keys,
            self.partial_table,
            self.partial_keys,
            self.audit_note,
            self.caption,
            self.judges,
        ]


def board_of(ui: SpaceUI, types: list[str], variant: str, judge: str | None, sizes: list[str], columns: list[str]):
    """The board for these choices; a judge without a run of ``variant`` gives way to the primary one."""
    data = ui.data
    judges = data.judges(variant)
    if judge not in judges:
        judge = data.primary_judge(variant)
    ranked, partial = filter_board(data.board, types, variant, judge, sizes, ["model", *columns])
    caption = describe_board(data.board, types, variant, judge, sizes, ranked, partial)
    warning = data.judge_warning(judge)
    if warning and len(ranked):  # beside the scores it is about
        caption = f"{caption} {warning}"
    return BoardView(ranked, partial, judge, judges, caption)


def judge_choices(judges: list[str]) -> list[tuple[str, str]]:
    return [(f"judged by {judge}", judge) for judge in judges]


def shown(ui: SpaceUI, view: BoardView) -> tuple:
    """A view as the browser shows it (see :attr:`BoardTab.outputs`): the line saying what the
    board ranks is its label, beside the search box (a laptop shows 14 runs on its first screen);
    an empty table is hidden, and the same line, saying why it is empty, shows in its place.
    Numbers keep one decimal."""
    ranked, partial = view.ranked.drop(columns="key"), view.partial.drop(columns="key")
    return (
        gr.Dataframe(board_view(ranked), label=view.caption, visible=not ranked.empty),
        list(view.ranked["key"]),
        gr.Dataframe(board_view(partial), visible=not partial.empty),
        list(view.partial["key"]),
        ui.data.audit_note(view.judge),
        gr.Markdown(view.caption, visible=ranked.empty),
        gr.Radio(choices=judge_choices(view.judges), value=view.judge),
    )


def layout(ui: SpaceUI, tab: Any) -> None:
    data = ui.data
    variant = data.default_variant()
    view = board_of(ui, list(MODEL_TYPES), variant, None, list(SIZE_BUCKETS), DEFAULT_COLUMNS)
    with gr.Row(elem_id="board-choice", elem_classes=["gamut-stack"]):
        # The choices say what they are ("judged by ..."): no label above them, a line less.
        variants = gr.Radio(
            [(f"{v} variant", v) for v in VARIANTS],
            value=variant,
            label="Variant",
            show_label=False,
            elem_id="filter-variant",
            min_width=160,
        )
        judges = gr.Radio(
            judge_choices(view.judges),
            value=view.judge,
            label="Judge",
            show_label=False,
            elem_id="filter-judge",
            min_width=160,
        )
    with gr.Accordion("Filters: model type, size, columns", open=False, elem_id="board-filters"):
        with gr.Row():
            types = gr.CheckboxGroup(
                list(MODEL_TYPES), value=list(MODEL_TYPES), label="Model type", elem_id="filter-type"
            )
            sizes = gr.CheckboxGroup(list(SIZE_BUCKETS), value=list(SIZE_BUCKETS), label="Size", elem_id="filter-size")
        columns = gr.CheckboxGroup(
            COLUMN_CHOICES, value=[c for c in DEFAULT_COLUMNS if c != "model"], label="Columns", elem_id="columns"
        )
    ranked, partial = view.ranked.drop(columns="key"), view.partial.drop(columns="key")
    caption = gr.Markdown(view.caption, elem_id="board-caption", visible=ranked.empty)
    shown_keys = gr.State(list(view.ranked["key"]))
    table = gr.Dataframe(
        board_view(ranked),
        label=view.caption,
        show_label=True,
        show_search="search",
        interactive=False,
        elem_id="leaderboard-table",
        elem_classes=["gamut-board"],
        pinned_columns=2,
        max_height=BOARD_MAX_HEIGHT,
        visible=not ranked.empty,
    )
    partial_keys = gr.State(list(view.partial["key"]))
    partial_table = gr.Dataframe(
        board_view(partial),
        interactive=False,
        elem_id="partial-table",
        elem_classes=["gamut-board"],
        max_height=BOARD_MAX_HEIGHT,
        label="Partial runs: fewer questions answered, so not ranked",
        visible=not partial.empty,
    )
    audit_note = gr.Markdown(data.audit_note(view.judge), elem_id="judge-audit")
    not_loaded = gr.Markdown(data.not_loaded_note(), elem_id="not-loaded")
    refresh = gr.Button("Refresh", elem_id="refresh", size="sm")
    ui.board = BoardTab(
        variants,
        judges,
        types,
        sizes,
        columns,
        caption,
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
        return shown(ui, board_of(ui, types_, variant_, judge_, sizes_, columns_))

    for control in board.inputs:
        # "always_last": a tick made while the board is redrawn is shown after it, never dropped
        # (gradio's default drops it, and the board would show a choice no longer made).
        control.input(show_board, board.inputs, board.outputs, api_name=False, trigger_mode="always_last")

    def refresh_board(types_, variant_, judge_, sizes_, columns_):
        data.refresh()
        return (
            *show_board(types_, variant_, judge_, sizes_, columns_),
            gr.Dropdown(choices=data.model_choices()),
            data.not_loaded_note(),
        )

    board.refresh.click(
        refresh_board, board.inputs, [*board.outputs, failures.models, board.not_loaded], api_name=False
    )

    def refresh_api(types_, variant_, judge_, sizes_, columns_):
        """/refresh for scripted clients: the board's tables as plain frames, with any columns
        asked for (variant and judge among them), the audit, the model list, the judges, the
        not-loaded note."""
        data.refresh()
        view = board_of(ui, types_, variant_, judge_, sizes_, columns_)
        return (
            view.ranked.drop(columns="key"),
            view.partial.drop(columns="key"),
            data.audit_note(view.judge),
            gr.Dropdown(choices=data.model_choices()),
            gr.Radio(choices=judge_choices(view.judges), value=view.judge),
            data.not_loaded_note(),
        )

    # A named endpoint of its own, on hidden inputs that take what a script may ask and the page
    # does not offer (any judge, whatever the variant; the variant and judge columns); their
    # values are the board's defaults, as the API's description shows them.
    api_inputs = [
        gr.CheckboxGroup(list(MODEL_TYPES), value=board.types.value, visible=False),
        gr.Radio(list(VARIANTS), value=board.variants.value, visible=False),
        gr.Textbox(board.judges.value, visible=False),
        gr.CheckboxGroup(list(SIZE_BUCKETS), value=board.sizes.value, visible=False),
        gr.CheckboxGroup(["rank", *LEADERBOARD_COLUMNS], value=board.columns.value, visible=False),
    ]
    api_refresh = gr.Button(visible=False)
    api_refresh.click(
        refresh_api,
        api_inputs,
        [board.table, board.partial_table, board.audit_note, failures.models, board.judges, board.not_loaded],
        api_name="refresh",
    )

    opened = [ui.tabs, failures.models, *failures.listed_and_shown]

    def open_failures(
        keys: list[str],
        frame: pd.DataFrame,
        question: str,
        domain,
        tier,
        verdict,
        item_type,
        order,
        event: gr.SelectData,
    ):
        """Only a click on a model's name opens its failures: a number stays free to select and copy."""
        row, column = (list(event.index or []) + [None, None])[:2]
        on_name = isinstance(column, int) and column < len(frame.columns) and frame.columns[column] == "model"
        if not on_name or not isinstance(row, int) or row >= len(keys):
            return tuple(gr.skip() for _ in opened)
        chosen = [keys[row]]
        return (
            gr.Tabs(selected="failures"),
            gr.Dropdown(value=chosen),
            *failures.open_listed(chosen, question, domain, tier, verdict, item_type, order),
        )

    for frame, keys in ((board.table, board.shown_keys), (board.partial_table, board.partial_keys)):
        inputs = [keys, frame, failures.question_id, *failures.filters.values(), failures.order]
        # "multiple": every click is answered in turn, with the cell it was on (a click on a name
        # right after one on a number still opens the failures; "always_last" would answer it
        # with the earlier click's cell).
        frame.select(open_failures, inputs, opened, api_name=False, trigger_mode="multiple")
