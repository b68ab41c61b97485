"""The report's figures (matplotlib, drawn off-screen): each function takes tables and returns a Figure;
:func:`rendered` turns one into the files a report writes (PNG for screens, PDF and SVG for papers)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display: figures only go to files

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from gamut_hf.core.rubric import VERDICTS  # noqa: E402
from gamut_hf.reports.statistics import Interval  # noqa: E402

VERDICT_COLOURS = {"meets": "#2e7d32", "partially_meets": "#f9a825", "missing": "#9e9e9e", "contradicts": "#c62828"}
# The files each figure is written as: a raster for the page, vector formats for a paper.
FIGURE_FORMATS = ("png", "pdf", "svg")
PNG_DPI = 200
# Without a date or random ids in the files, a rerun over the same runs writes the same bytes.
_METADATA = {"png": {}, "pdf": {"CreationDate": None, "ModDate": None}, "svg": {"Date": None}}
# Label placement gives up after this many rounds (a count, not adjustText's default of one
# second of wall time, so that a figure is the same on a busy machine).
LABEL_ROUNDS = 1000


def rendered(figure: Figure) -> dict[str, bytes]:
    """The figure in each of :data:`FIGURE_FORMATS`, by format; the figure is closed after."""
    out = {}
    with matplotlib.rc_context({"svg.hashsalt": "gamut", "pdf.fonttype": 42, "svg.fonttype": "path"}):
        for kind in FIGURE_FORMATS:
            buffer = io.BytesIO()
            figure.savefig(buffer, format=kind, dpi=PNG_DPI, metadata=_METADATA[kind])
            out[kind] = buffer.getvalue()
    plt.close(figure)
    return out


def verdict_bars(shares: pd.DataFrame, title: str) -> Figure:
    """Stacked horizontal bars, one per model (rows of ``shares``, % per verdict column), best at the top."""
    figure, axes = plt.subplots(figsize=(8, 0.4 * len(shares) + 1.4))
    left = np.zeros(len(shares))
    rows = np.arange(len(shares))[::-1]
    for verdict in VERDICTS:
        values = shares[verdict].to_numpy(float)
        axes.barh(rows, values, left=left, color=VERDICT_COLOURS[verdict], label=verdict.replace("_", " "))
        left += values
    axes.set_yticks(rows, [str(label) for label in shares.index])
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of checks")
    axes.set_title(title)
    axes.legend(ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.06), frameon=False, fontsize="small")
    figure.tight_layout()
    return figure


def domain_heatmap(scores: pd.DataFrame, title: str) -> Figure:
    """Models (rows) by domains (columns), each cell the Gamut score on that domain's questions.

    The colour scale spans the scores present (a fixed -100..100 scale paints every cell of a
    real leaderboard the same shade), from light (lowest) to dark (highest), with each cell's
    number written in a colour that stays readable on it.
    """
    figure, axes = plt.subplots(figsize=(0.9 * scores.shape[1] + 3.5, 0.4 * scores.shape[0] + 2.2))
    values = scores.to_numpy(float)
    present = values[~np.isnan(values)]
    low, high = (float(present.min()), float(present.max())) if present.size else (0.0, 1.0)
    if high - low < 1:  # one value (or nearly): a scale of one point around it
        low, high = low - 0.5, high + 0.5
    colours = plt.get_cmap("viridis_r")
    image = axes.imshow(values, cmap=colours, vmin=low, vmax=high, aspect="auto")
    axes.set_xticks(range(scores.shape[1]), [str(c) for c in scores.columns], rotation=40, ha="right")
    axes.set_yticks(range(scores.shape[0]), [str(i) for i in scores.index])
    for (row, column), value in np.ndenumerate(values):
        if not np.isnan(value):
            dark = (value - low) / (high - low) > 0.55  # viridis_r turns dark past the middle
            axes.text(
                column,
                row,
                f"{value:.0f}" if round(value) != 0 else "0",
                ha="center",
                va="center",
                fontsize="small",
                color="white" if dark else "black",
            )
    bar = figure.colorbar(image, ax=axes)
    bar.set_label("Gamut score on the domain's questions")
    axes.set_title(title)
    figure.tight_layout()
    return figure


def _errors(intervals: Sequence[Interval]) -> np.ndarray:
    """Matplotlib's error bar lengths (below, above) of each interval; 0 where it has none."""
    below = [0.0 if np.isnan(i.low) else i.value - i.low for i in intervals]
    above = [0.0 if np.isnan(i.high) else i.high - i.value for i in intervals]
    return np.array([below, above])


def place_labels(axes, xs: np.ndarray, ys: np.ndarray, labels: Sequence[str]) -> list[Text]:
    """Label each point, the labels moved apart until none overlaps another or a point (adjustText),
    each joined to its point by a thin line where it had to move away. Call once the axes are final."""
    from adjustText import adjust_text

    texts = [axes.text(x, y, label, fontsize="x-small") for x, y, label in zip(xs, ys, labels, strict=True)]
    adjust_text(
        texts,
        x=list(xs),
        y=list(ys),
        ax=axes,
        iter_lim=LABEL_ROUNDS,
        expand=(1.1, 1.3),
        arrowprops={"arrowstyle": "-", "color": "#9e9e9e", "linewidth": 0.5},
    )
    return texts


def judge_scatter(
    first: Sequence[Interval], second: Sequence[Interval], labels: Sequence[str], first_name: str, second_name: str
) -> Figure:
    """One point per model: its score under one judge against the other, each with its 95% interval;
    the diagonal is agreement."""
    x = np.array([i.value for i in first])
    y = np.array([i.value for i in second])
    figure, axes = plt.subplots(figsize=(6.5, 6.5))
    axes.errorbar(
        x, y, xerr=_errors(first), yerr=_errors(second), fmt="o", color="#1565c0", ecolor="#90caf9", markersize=4
    )
    low = min(x.min(), y.min()) - 5
    high = max(x.max(), y.max()) + 8  # room for the labels of the top models
    axes.plot([low, high], [low, high], color="#757575", linestyle="--", linewidth=1)
    axes.set_xlim(low, high)
    axes.set_ylim(low, high)
    axes.set_xlabel(f"Gamut, judge {first_name}")
    axes.set_ylabel(f"Gamut, judge {second_name}")
    axes.set_title("Judge against judge (95% intervals)")
    figure.tight_layout()
    place_labels(axes, x, y, labels)
    return figure


def gain_plot(multimodal: Sequence[Interval], gain: Sequence[Interval], labels: Sequence[str], title: str) -> Figure:
    """Text-only gain against the multimodal score, each with its 95% interval: a flat cloud means
    the image is worth a constant."""
    x = np.array([i.value for i in multimodal])
    y = np.array([i.value for i in gain])
    figure, axes = plt.subplots(figsize=(7.5, 5.5))
    axes.errorbar(
        x, y, xerr=_errors(multimodal), yerr=_errors(gain), fmt="o", color="#6a1b9a", ecolor="#ce93d8", markersize=4
    )
    axes.margins(x=0.12, y=0.12)  # room for the labels of the points at the edges
    axes.axhline(float(np.mean(y)), color="#757575", linestyle="--", linewidth=1, label="mean gain")
    axes.axhline(0, color="black", linewidth=0.5)
    axes.set_xlabel("Gamut, multimodal")
    axes.set_ylabel("text-only minus multimodal (points)")
    axes.set_title(title)
    axes.legend(frameon=False, fontsize="small", loc="best")
    figure.tight_layout()
    place_labels(axes, x, y, labels)
    return figure
