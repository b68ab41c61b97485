"""`gamut simulate` then `gamut report` at the paper's scale, as a researcher runs them: the report's
numbers against the paper's, and the report as pages and figures to put in a paper (issue 24 items
5 to 9). One module-scoped fixture holds the simulated runs and their report; every test reads it."""

from __future__ import annotations

import base64
import csv
import itertools
import json
import os
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.reports import figures
from gamut_hf.reports.defaults import DEFAULT_RESAMPLES
from gamut_hf.reports.simulate import PAPER_TABLE1
from gamut_hf.reports.statistics import Interval

SECTION_TITLES = [
    "Leaderboard",
    "The paper's claims on these runs",
    "Judge robustness",
    "Text-only against multimodal",
    "Breakdowns",
    "Runs",
]


@dataclass(frozen=True)
class PaperReport:
    runs: Path  # what `gamut simulate` wrote
    report: Path  # what `gamut report` wrote from it
    simulate_err: str  # each command's standard error: its progress
    report_out: str
    report_err: str

    @property
    def markdown(self) -> str:
        return (self.report / "report.md").read_text(encoding="utf-8")

    @property
    def html(self) -> str:
        return (self.report / "report.html").read_text(encoding="utf-8")

    def table(self, name: str) -> list[dict[str, str]]:
        with (self.report / "tables" / f"{name}.csv").open(encoding="utf-8") as handle:
            return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def paper(tmp_path_factory) -> PaperReport:
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("paper")
    runs, report = root / "sim", root / "report"
    # Every step's bar, however fast the machine runs it (by default a bar waits a second).
    shown = {**os.environ, "GAMUT_PROGRESS_DELAY": "0"}
    simulated = run_gamut("simulate", runs, env=shown)
    assert simulated.code == 0, simulated.err
    done = run_gamut("report", runs, "--out", report, env=shown)  # the default bootstrap
    assert done.code == 0, done.err
    return PaperReport(runs, report, simulated.err, done.out, done.err)


# -- the numbers -----------------------------------------------------------------------------


def test_simulated_paper_runs_give_back_the_papers_shares_order_and_lenient_judge(paper):
    rows = paper.table("leaderboard-multimodal-gemini-3-1-pro")
    assert [r["model"] for r in rows] == [p.model for p in PAPER_TABLE1]
    worst = 0.0
    for row, published in zip(rows, PAPER_TABLE1, strict=True):
        assert int(row["questions"]) == 1813
        for verdict in VERDICTS:
            standard_error = (float(row[f"{verdict}_high"]) - float(row[f"{verdict}_low"])) / (2 * 1.96)
            worst = max(worst, abs(float(row[verdict]) - getattr(published, verdict)) / standard_error)
    assert worst < 4, f"a verdict share is {worst:.1f} standard errors from the paper's"

    judges = paper.table("judges-multimodal-gemini-3-1-pro-vs-qwen3-vl-235b")
    assert len(judges) == 14 and all(float(r["difference"]) > 0 for r in judges)
    leniency = {r["judge"]: float(r["mean offset"]) for r in paper.table("judge-leniency")}
    assert leniency["Qwen3-VL 235B"] > 1 and leniency["Gemini 3.1 Pro"] < -1
    markdown = paper.markdown
    assert (
        "Mean offset: Qwen3-VL 235B scores" in markdown
        and "higher on 14 of 14 models: uniformly more lenient" in markdown
    )
    tau = float(re.search(r"Rank agreement over 14 models: Kendall tau ([0-9.]+)", markdown).group(1))
    assert tau >= 0.9
    assert "missing exceeds contradicts for 14 of 14 models" in markdown


def test_the_report_and_the_space_share_one_bootstrap_default(paper, gamut):
    """Issue 24 item 5: the Space drew 1,000 resamples and the report 2,000, so one run showed two intervals."""
    from gamut_hf.reports import statistics

    assert statistics.DEFAULT_RESAMPLES == DEFAULT_RESAMPLES
    assert statistics.Bootstrap().resamples == DEFAULT_RESAMPLES
    shown = gamut("report", "--help")
    assert re.search(rf"--resamples[^\[]*\[default: {DEFAULT_RESAMPLES}; ", " ".join(shown.out.split()))
    assert f"({DEFAULT_RESAMPLES} resamples of the questions" in paper.markdown


# -- the page --------------------------------------------------------------------------------


@dataclass
class HtmlTable:
    header: list[tuple[str, str]] = field(default_factory=list)  # (class, text)
    rows: list[list[tuple[str, str, str]]] = field(default_factory=list)  # (class, shown text, padded text)


class PageReader(HTMLParser):
    """The page's tables (each cell's class, its text as shown and with its invisible padding),
    its headings' ids, its links, its images and the text a reader sees."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[HtmlTable] = []
        self.ids: list[str] = []
        self.heading_ids: list[tuple[str, str]] = []  # (tag, id)
        self.links: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []
        self._cell: list | None = None  # [tag, class, shown, padded]
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if "id" in found:
            self.ids.append(found["id"])
            if tag in ("h2", "h3"):
                self.heading_ids.append((tag, found["id"]))
        if tag == "a" and "href" in found:
            self.links.append(found["href"])
        if tag == "img":
            self.images.append(found["src"])
        if tag == "table":
            self.tables.append(HtmlTable())
        if tag == "tr":
            self.tables[-1].rows.append([])
        if tag in ("td", "th"):
            self._cell = [tag, found.get("class", ""), "", ""]
        if tag == "span" and self._hidden:
            self._hidden += 1
        elif tag == "span" and found.get("class") == "pad":
            self._hidden = 1

    def handle_endtag(self, tag):
        if tag == "span" and self._hidden:
            self._hidden -= 1
        if tag in ("td", "th") and self._cell is not None:
            kind, classes, shown, padded = self._cell
            if kind == "th":
                self.tables[-1].header.append((classes, shown))
            else:
                self.tables[-1].rows[-1].append((classes, shown, padded))
            self._cell = None
        if tag == "tr" and not self.tables[-1].rows[-1]:  # the header row: its cells are the header
            self.tables[-1].rows.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[3] += data
            if not self._hidden:
                self._cell[2] += data
        if not self._hidden:
            self.text.append(data)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)


def page_of(paper: PaperReport) -> PageReader:
    reader = PageReader()
    reader.feed(paper.html)
    return reader


def test_the_report_opens_with_the_leaderboard_after_its_contents_and_ends_with_the_runs(paper):
    """Issue 24 item 7: the page opened with 42 rows of absolute paths before the leaderboard and had no contents."""
    markdown = paper.markdown
    headings = re.findall(r"^## (.+)$", markdown, flags=re.MULTILINE)
    assert headings == ["Contents", *SECTION_TITLES]
    contents = markdown.split("## Contents", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^- \[([^\]]+)\]", contents, flags=re.MULTILINE) == SECTION_TITLES
    assert (
        "  - [Leaderboard: multimodal, judge Gemini 3.1 Pro](#leaderboard-multimodal-judge-gemini-31-pro)" in contents
    )

    page = page_of(paper)
    sections = [anchor for tag, anchor in page.heading_ids if tag == "h2"]
    assert sections == [
        "contents",
        "leaderboard",
        "the-papers-claims-on-these-runs",
        "judge-robustness",
        "text-only-against-multimodal",
        "breakdowns",
        "runs",
    ]
    anchors = [link[1:] for link in page.links if link.startswith("#")]
    assert len(anchors) > len(sections) and set(anchors) <= set(page.ids)  # every contents entry leads somewhere
    assert len(page.ids) == len(set(page.ids))


def test_runs_are_named_from_the_folder_they_share_never_by_absolute_path(paper):
    names = sorted(r["run"] for r in paper.table("runs"))
    assert names == sorted(p.parent.name for p in paper.runs.glob("*/results.json")) and len(names) == 42
    for row in paper.table("leaderboard-multimodal-gemini-3-1-pro"):
        assert (paper.runs / row["run"] / "results.json").is_file()
    root = str(paper.runs.parent)
    for text in (paper.markdown, paper.html, (paper.report / "tables" / "runs.csv").read_text()):
        assert root not in text
    assert "by its path from the folder the runs share (`sim`)" in paper.markdown


def test_every_html_table_has_a_header_per_column_and_no_empty_column(paper):
    """Issue 24 item 7: every pivot table had an extra empty first column (the columns' name as a header)."""
    page = page_of(paper)
    assert len(page.tables) > 20
    for table in page.tables:
        titles = [text for _, text in table.header]
        assert table.rows and all(title.strip() for title in titles), titles
        for row in table.rows:
            assert len(row) == len(titles), titles
        for position, title in enumerate(titles):
            assert any(row[position][1].strip() for row in table.rows), f"column {title!r} is empty"
    pivots = [t for t in page.tables if [text for _, text in t.header][:2] == ["model", "flexible list"]]
    assert len(pivots) == 3  # the item-type tables, one per leaderboard


def test_numbers_are_right_aligned_on_the_decimal_point_and_never_wrap(paper):
    page = page_of(paper)
    style = re.search(r"<style>(.*?)</style>", paper.html, flags=re.DOTALL).group(1)
    numeric_rule = re.search(r"td\.num,th\.num\{([^}]*)\}", style).group(1)
    assert "text-align:right" in numeric_rule and "font-variant-numeric:tabular-nums" in numeric_rule
    assert "white-space:nowrap" in numeric_rule
    leaderboard = page.tables[0]
    classes = {text: kind for kind, text in leaderboard.header}
    assert classes["model"] != "num" and all(classes[c] == "num" for c in ("rank", "Gamut", "AC", "p", "questions"))
    checked = 0
    for table in page.tables:
        for position, (kind, title) in enumerate(table.header):
            if kind != "num":
                continue
            padded = [row[position][2] for row in table.rows if re.search(r"\d", row[position][2])]
            # With the invisible padding, every number of a column is as wide as the others at its
            # place: cells of one shape are of one length, their decimal points at one offset from the end.
            by_shape: dict[str, set[int]] = {}
            for text in padded:
                by_shape.setdefault(re.sub(r"[-+\d]", "0", text), set()).add(len(text))
            assert len(by_shape) == 1 or title == "p", (title, sorted(by_shape))
            decimals = {len(text) - text.rfind(".") for text in padded if "." in text}
            assert len(decimals) <= 1, (title, padded)
            checked += 1
    assert checked > 50


def test_the_pages_write_p_values_zeroes_and_code_as_a_reader_expects(paper):
    """Issue 24 item 7: "p=<0.0005", "-0.0" and literal backticks on the page."""
    page = page_of(paper)
    visible = "".join(page.text)
    for text in (paper.markdown, visible):
        assert "p=<" not in text
        assert not re.search(r"(?<![\d.])[-+]0\.0+(?![\d])", text)
    assert "<0.0005" in visible  # 2,000 resamples: nothing below 1/2000 can be told apart
    assert "`" not in visible
    assert "<code>gamut judge-audit --judge J" in paper.html


# -- the figures -----------------------------------------------------------------------------


def test_each_figure_is_written_as_png_pdf_and_svg_and_the_page_embeds_the_vector_one(paper):
    """Issue 24 item 8: PNG only, at 110 dpi."""
    folder = paper.report / "figures"
    stems = {path.stem for path in folder.iterdir()}
    assert len(stems) == 8  # verdict shares and domains per leaderboard, the judges' scatter, the text-only gain
    for stem in stems:
        with Image.open(folder / f"{stem}.png") as image:
            assert image.size[0] >= 1200
        pdf = (folder / f"{stem}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
        assert ElementTree.parse(folder / f"{stem}.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"
        assert f"figures/{stem}.pdf" in paper.markdown and f"figures/{stem}.svg" in paper.markdown
    images = page_of(paper).images
    assert len(images) == len(stems)
    for source in images:
        assert source.startswith("data:image/svg+xml;base64,")
        svg = ElementTree.fromstring(base64.b64decode(source.split(",", 1)[1]))
        assert svg.tag.endswith("svg")


def intervals(rows: list[dict[str, str]], column: str) -> list[Interval]:
    return [Interval(float(r[column]), float(r[f"{column}_low"]), float(r[f"{column}_high"])) for r in rows]


def assert_labels_apart(figure, labels: list[str]) -> None:
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    texts = [text for text in axes.texts if text.get_text() in labels]
    assert sorted(text.get_text() for text in texts) == sorted(labels)
    boxes = [text.get_window_extent(renderer) for text in texts]
    overlapping = [
        (texts[i].get_text(), texts[j].get_text())
        for i, j in itertools.combinations(range(len(boxes)), 2)
        if boxes[i].overlaps(boxes[j])
    ]
    assert not overlapping
    frame = axes.get_window_extent(renderer)
    assert all(frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1 for box in boxes)


def test_scatter_labels_never_overlap_and_each_point_carries_its_intervals(paper):
    """Issue 24 item 8: "Claude Sonnet 4.6" lay on "GPT-5.4", "Gemini 3 Flash" on "Gemini 3.1 Pro"."""
    judges = paper.table("judges-multimodal-gemini-3-1-pro-vs-qwen3-vl-235b")
    models = [r["model"] for r in judges]
    scatter = figures.judge_scatter(
        intervals(judges, "first"), intervals(judges, "second"), models, "Gemini 3.1 Pro", "Qwen3-VL 235B"
    )
    assert_labels_apart(scatter, models)
    [bars] = scatter.axes[0].containers
    horizontal = bars.lines[2][0].get_segments()
    assert len(horizontal) == 14
    assert horizontal[0][0][0] == pytest.approx(float(judges[0]["first_low"]))
    assert horizontal[0][1][0] == pytest.approx(float(judges[0]["first_high"]))

    gains = paper.table("variants-gemini-3-1-pro")
    plot = figures.gain_plot(
        intervals(gains, "multimodal"), intervals(gains, "gain"), [r["model"] for r in gains], "gain"
    )
    assert_labels_apart(plot, [r["model"] for r in gains])
    [bars] = plot.axes[0].containers
    vertical = bars.lines[2][1].get_segments()
    assert vertical[0][0][1] == pytest.approx(float(gains[0]["gain_low"]))


def test_the_domain_heatmap_spans_the_scores_it_shows(paper):
    """Issue 24 item 8: a fixed -100..100 scale painted every cell the same pale green."""
    import pandas as pd

    scores = pd.read_csv(paper.report / "tables" / "domains-multimodal-gemini-3-1-pro.csv", index_col="model")
    heatmap = figures.domain_heatmap(scores, "domains")
    image = heatmap.axes[0].images[0]
    assert image.get_clim() == pytest.approx((scores.min().min(), scores.max().max()))
    # The lowest score takes one end of the colour scale and the highest the other: cells differ.
    assert image.norm(scores.min().min()) == pytest.approx(0) and image.norm(scores.max().max()) == pytest.approx(1)
    colours = {tuple(np.round(c, 2)) for c in image.to_rgba(scores.to_numpy(float)).reshape(-1, 4)}
    assert len(colours) > scores.size / 2
    assert heatmap.axes[1].get_ylabel() == "Gamut score on the domain's questions"


def test_a_figure_renders_the_same_bytes_every_time():
    """No dates or random ids in the files: a rerun over the same runs changes no figure."""
    import pandas as pd

    shares = pd.DataFrame({v: [25.0, 40.0] for v in VERDICTS}, index=["a", "b"])
    first = figures.rendered(figures.verdict_bars(shares, "t"))
    assert first == figures.rendered(figures.verdict_bars(shares, "t"))
    assert set(first) == {"png", "pdf", "svg"}


# -- simulate --------------------------------------------------------------------------------


def test_simulate_writes_the_dataset_it_simulated_over_and_each_models_card(paper, gamut):
    """Issue 24 item 6: the Space over simulated runs had bare question ids, no images, type and size unknown."""
    from gamut_hf.leaderboard.entries import leaderboard_row, load_entry
    from gamut_hf.reports.statistics import Bootstrap, run_summary

    dataset = paper.runs / "dataset"
    questions = [json.loads(line) for line in (dataset / "questions.jsonl").read_text().splitlines()]
    assert len(questions) == 1813
    for question in questions[::181]:
        with Image.open(dataset / question["image"]) as image:
            image.verify()
    assert len(list((dataset / "images").iterdir())) == 1813
    assert gamut("validate", dataset).code == 0

    folders = sorted(path.parent for path in paper.runs.glob("*/results.json"))
    assert len(folders) == 42
    for folder in folders:
        source = json.loads((folder / "results.json").read_text())["dataset"]["source"]
        assert source == "dataset" and (paper.runs / source / "questions.jsonl").is_file()
    small = load_entry(paper.runs / "qwen3-vl-8b__gemini-3-1-pro__multimodal")
    row = leaderboard_row(small, run_summary(small.run.questions, Bootstrap(resamples=1000)))
    assert (row["model"], row["type"], row["size (B)"]) == ("Qwen3-VL 8B", "open", 8)
    frontier = load_entry(paper.runs / "gpt-4o__qwen3-vl-235b__multimodal")
    assert (frontier.card["access"], frontier.card["parameters_billions"]) == ("proprietary", None)
    ids = {q["id"] for q in questions}
    assert set(small.run.questions.index) == ids


def test_simulate_and_report_show_their_progress_on_stderr(paper):
    """Issue 24 item 9: both printed nothing for half a minute."""
    for step in ("calibrating", "writing the dataset", "simulating runs"):
        assert f"{step}:" in paper.simulate_err
    for step in ("reading runs", "bootstrapping runs", "building sections"):
        assert f"{step}:" in paper.report_err
    assert "%|" not in paper.report_out and paper.report_out.startswith("wrote ")


def test_the_heatmap_scale_of_one_value_is_still_a_scale():
    import pandas as pd

    heatmap = figures.domain_heatmap(pd.DataFrame({"d": [40.0]}, index=["m"]), "one")
    low, high = heatmap.axes[0].images[0].get_clim()
    assert low < 40 < high and np.isfinite([low, high]).all()
