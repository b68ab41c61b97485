"""The report's figures (matplotlib, drawn off-screen): each function takes tables and returns a Figure."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display: figures only go to files

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gamut_hf.core.rubric import VERDICTS  # noqa: E402

VERDICT_COLOURS = {"meets": "#2e7d32", "partially_meets": "#f9a825", "missing": "#9e9e9e", "contradicts": "#c62828"}


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
    """Models (rows) by domains (columns), each cell the Gamut score on that domain's questions."""
    figure, axes = plt.subplots(figsize=(1.0 * scores.shape[1] + 3, 0.4 * scores.shape[0] + 2))
    values = scores.to_numpy(float)
    image = axes.imshow(values, cmap="RdYlGn", vmin=-100, vmax=100, aspect="auto")
    axes.set_xticks(range(scores.shape[1]), [str(c) for c in scores.columns], rotation=40, ha="right")
    axes.set_yticks(range(scores.shape[0]), [str(i) for i in scores.index])
    for (row, column), value in np.ndenumerate(values):
        if not np.isnan(value):
            axes.text(column, row, f"{value:.0f}", ha="center", va="center", fontsize="x-small")
    figure.colorbar(image, ax=axes, label="Gamut score")
    axes.set_title(title)
    figure.tight_layout()
    return figure


def judge_scatter(
    first: Sequence[float], second: Sequence[float], labels: Sequence[str], first_name: str, second_name: str
) -> Figure:
    """One point per model: its score under one judge against the other; the diagonal is agreement."""
    figure, axes = plt.subplots(figsize=(5.5, 5.5))
    axes.scatter(first, second, color="#1565c0")
    for x, y, label in zip(first, second, labels, strict=False):
        axes.annotate(label, (x, y), fontsize="x-small", xytext=(3, 3), textcoords="offset points")
    low = min(min(first), min(second)) - 5
    high = max(max(first), max(second)) + 5
    axes.plot([low, high], [low, high], color="#757575", linestyle="--", linewidth=1)
    axes.set_xlim(low, high)
    axes.set_ylim(low, high)
    axes.set_xlabel(f"Gamut, judge {first_name}")
    axes.set_ylabel(f"Gamut, judge {second_name}")
    axes.set_title("Judge against judge")
    figure.tight_layout()
    return figure


def gain_plot(multimodal: Sequence[float], gain: Sequence[float], labels: Sequence[str], title: str) -> Figure:
    """Text-only gain against the multimodal score: a flat cloud means the image is worth a constant."""
    figure, axes = plt.subplots(figsize=(6.5, 4.5))
    axes.scatter(multimodal, gain, color="#6a1b9a")
    for x, y, label in zip(multimodal, gain, labels, strict=False):
        axes.annotate(label, (x, y), fontsize="x-small", xytext=(3, 3), textcoords="offset points")
    axes.axhline(float(np.mean(gain)), color="#757575", linestyle="--", linewidth=1, label="mean gain")
    axes.axhline(0, color="black", linewidth=0.5)
    axes.set_xlabel("Gamut, multimodal")
    axes.set_ylabel("text-only minus multimodal (points)")
    axes.set_title(title)
    axes.legend(frameon=False, fontsize="small")
    figure.tight_layout()
    return figure
