"""The Space's Blocks: the tabs in order, each laid out and wired by its own module, around one
shared handle (:class:`SpaceUI`) that holds the data and every component another tab needs.

Each tab module has ``layout(ui)``, called inside its ``gr.Tab`` to create its components and
store them on ``ui``, and ``wire(ui)``, called once every tab exists, to bind its events (a board
row opens the failure browser; a refresh updates the failure browser's model list).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from gamut_hf.leaderboard.queue import RequestQueue
from gamut_hf.leaderboard.space import analysis_tab, board_tab, failures_tab, submit_tab
from gamut_hf.leaderboard.space.data import SpaceConfig, SpaceData

# Short titles, wrapping onto a second line rather than hiding behind a menu on a phone.
TABS = (
    ("Leaderboard", "leaderboard", board_tab),
    ("Failures", "failures", failures_tab),
    ("Analysis", "analysis", analysis_tab),
    ("Submit", "submit", submit_tab),
)


@dataclass
class SpaceUI:
    """The handle the tabs share: the data, the queue, and each tab's components by name
    (``ui.board.table``, ``ui.failures.models``), set by the tabs' ``layout``."""

    config: SpaceConfig
    data: SpaceData
    queue: RequestQueue
    app: gr.Blocks
    tabs: gr.Tabs | None = None
    board: Any = None
    failures: Any = None
    analysis: Any = None
    submit: Any = None
    known_ids: list[str] = field(default_factory=list)


def build_app(config: SpaceConfig) -> gr.Blocks:
    data = SpaceData(config)
    with gr.Blocks(title="GAMUT leaderboard") as app:
        queue = RequestQueue(config.requests, echo=lambda line: print(f"gamut space: {line}"))
        ui = SpaceUI(config, data, queue, app, known_ids=list(data.questions))
        gr.Markdown(
            "# GAMUT leaderboard\nFactual completeness of long answers, scored here from the judge's "
            "verdict on every check; intervals are 95% bootstrap intervals over questions.",
            elem_id="space-header",
        )
        with gr.Tabs(selected="leaderboard", overflow_behavior="wrap") as tabs:
            ui.tabs = tabs
            for title, key, module in TABS:
                with gr.Tab(title, id=key) as tab:
                    module.layout(ui, tab)
        for _, _, module in TABS:
            module.wire(ui)
    return app
