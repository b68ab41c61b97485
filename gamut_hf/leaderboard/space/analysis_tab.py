"""The Analysis tab: the report's tables and figures for the runs on the board (built in the
background after each refresh), the paper's claims checked on them, and what was left out."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from gamut_hf.reports.report import CLAIMS_SECTION, Figure, Table

if TYPE_CHECKING:
    from gamut_hf.leaderboard.space.app import SpaceUI

# Tables and figures the tab has room for, in report order (the breakdowns' tables are left to
# the report); enough for three boards, two judges' comparison and their audits.
ANALYSIS_SLOTS = 18


@dataclass
class AnalysisTab:
    tab: Any
    note: Any
    blocks: list[tuple[Any, Any, Any, Any]]  # (column, title, figure, table) per slot


def _png(png: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(png))


def layout(ui: SpaceUI, tab: Any) -> None:
    note = gr.Markdown("Open this tab to build the analysis.", elem_id="analysis-note")
    blocks = []
    for _ in range(ANALYSIS_SLOTS):
        with gr.Column(visible=False) as column:
            title = gr.Markdown()
            figure = gr.Image(interactive=False, show_label=False)
            frame = gr.Dataframe(interactive=False)
        blocks.append((column, title, figure, frame))
    ui.analysis = AnalysisTab(tab, note, blocks)


def wire(ui: SpaceUI) -> None:
    data, analysis = ui.data, ui.analysis

    def fill_analysis():
        built = data.analysis()
        report = built.report
        updates = []
        blocks = []
        if report is not None:
            for section in report.included:
                if section.key == "runs":  # the runs read: the board lists them here
                    continue
                for block in section.blocks:
                    if isinstance(block, Figure):
                        blocks.append((f"**{section.title}**: {block.caption}", _png(block.png), None))
                    elif isinstance(block, Table) and section.key != "breakdowns":
                        title = f"**{section.title}**: {block.title}"
                        if block.shown.empty:  # a blank table says nothing
                            blocks.append((f"{title}: none for these runs.", None, None))
                        else:
                            blocks.append((title, None, block.shown))
        blocks = blocks[: len(analysis.blocks)]
        for i in range(len(analysis.blocks)):
            if i < len(blocks):
                text, png, frame = blocks[i]
                updates += [
                    gr.Column(visible=True),
                    text,
                    gr.Image(value=png, visible=png is not None),
                    gr.Dataframe(value=frame, visible=frame is not None),
                ]
            else:
                updates += [gr.Column(visible=False), "", gr.Image(value=None), gr.Dataframe(value=None)]
        note = "Analysis of the runs on the leaderboard (`gamut report` gives the whole report)."
        if built.left_out:
            note += "\n\nRuns left out:\n" + "\n".join(f"- {line}" for line in built.left_out)
        if report is not None:
            claims = report.section(CLAIMS_SECTION)
            if claims is not None:
                note += "\n\n" + "\n".join(
                    f"- {line}" for block in claims.blocks if isinstance(block, list) for line in block
                )
            omitted = [f"- {s.title}: {s.omitted}" for s in report.sections if s.omitted]
            note += "\n\nLeft out:\n" + "\n".join(omitted) if omitted else ""
        return [note, *updates]

    outputs = [analysis.note] + [c for block in analysis.blocks for c in block]
    analysis.tab.select(fill_analysis, None, outputs, api_name="analysis")
