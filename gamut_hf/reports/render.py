"""A report as pages: report.md (GitHub-flavoured markdown) and report.html (one self-contained file).

Both open with a table of contents. Tables read as a paper's do: numbers right-aligned with
their decimal points in line (in the HTML, every number of a column is padded to the widest
sign, integer part and decimals at its place, invisibly, in a font with figures of one width),
an interval kept on one line; text columns left-aligned. Inline code (`gamut merge`) is code.
Every text is escaped: model names come from files anyone can write.
"""

from __future__ import annotations

import base64
import html
import re
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from gamut_hf.reports.sections import Figure, Report, Section, Table

# A cell that is a number: "56.8", "+1.2 [0.4, 2.0]", "<0.0005", "71.2%", "3.1 points"; "n/a ..." is
# a number that could not be computed and leaves its column numeric.
_NUMBER_CELL = re.compile(r"<?[-+]?\d+(?:\.\d+)?(?:%| points)?(?: \[[-+]?\d+(?:\.\d+)?, [-+]?\d+(?:\.\d+)?\])?")
_NUMBER = re.compile(r"([-+]?)(\d+)(?:\.(\d+))?")
_CODE = re.compile(r"`([^`]+)`")


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


@dataclass(frozen=True)
class Heading:
    level: int  # 2: a section, 3: a table
    title: str
    anchor: str


def headings(report: Report) -> dict[int, Heading]:
    """The headings of the report's sections and tables, by id() of the section or table, with
    anchors made unique as GitHub makes them (a repeated one gets -1, -2, ...)."""
    seen: Counter[str] = Counter(["gamut-report", "contents"])  # the page's own headings
    found = {}

    def add(key: object, level: int, title: str) -> None:
        base = anchor(title)
        unique = base if not seen[base] else f"{base}-{seen[base]}"
        seen[base] += 1
        found[id(key)] = Heading(level, title, unique)

    for section in report.included:
        add(section, 2, section.title)
        for block in section.blocks:
            if isinstance(block, Table):
                add(block, 3, block.title)
    return found


def _left_out(report: Report) -> list[str]:
    return [f"Left out: {s.title}: {s.omitted}." for s in report.sections if s.omitted]


def is_numeric(column: pd.Series) -> bool:
    """Whether a shown column holds numbers (n/a and blanks allowed, at least one number)."""
    cells = [str(cell) for cell in column if str(cell) not in ("", "nan", "None")]
    numbers = [cell for cell in cells if _NUMBER_CELL.fullmatch(cell)]
    return bool(numbers) and all(cell in numbers or cell.startswith("n/a") for cell in cells)


def _cell(value: object) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


# -- markdown --------------------------------------------------------------------------------


def _md_text(value: object) -> str:
    return html.escape(_cell(value), quote=False).replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> str:
    shown = table.shown.rename_axis(columns=None)
    align = ["right" if is_numeric(shown[column]) else "left" for column in shown.columns]
    shown = shown.map(_md_text).rename(columns=_md_text)
    return shown.to_markdown(index=False, disable_numparse=True, colalign=align)


def render_markdown(report: Report) -> str:
    found = headings(report)
    out = ["# GAMUT report", "", "## Contents", ""]
    for section in report.included:
        out.append(f"- [{_md_text(section.title)}](#{found[id(section)].anchor})")
        out += [
            f"  - [{_md_text(block.title)}](#{found[id(block)].anchor})"
            for block in section.blocks
            if isinstance(block, Table)
        ]
    out += [""] + [f"{_md_text(line)}" for line in _left_out(report)] + [""]
    for section in report.included:
        out += [f"## {_md_text(section.title)}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                out += [_md_text(block), ""]
            elif isinstance(block, list):
                out += [f"- {_md_text(line)}" for line in block] + [""]
            elif isinstance(block, Table):
                out += [f"### {_md_text(block.title)}", "", f"[CSV](tables/{block.name}.csv)", "", _md_table(block), ""]
            else:
                out += [
                    f"![{_md_text(block.caption)}](figures/{block.name}.png)",
                    "",
                    f"{_md_text(block.caption)} ([PDF](figures/{block.name}.pdf), [SVG](figures/{block.name}.svg))",
                    "",
                ]
    return "\n".join(out)


# -- HTML ------------------------------------------------------------------------------------

STYLE = """body{font-family:system-ui,sans-serif;max-width:1320px;margin:2em auto;padding:0 1em;color:#212121;
line-height:1.45}
h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:2em}h3{font-size:1em;margin:1.5em 0 0.3em}
nav{background:#fafafa;border:1px solid #e0e0e0;padding:0 1.5em 0.5em;font-size:0.9em}nav h2{margin-top:0.6em}
nav ul ul{font-size:0.9em}
.table{overflow-x:auto;margin:0.3em 0 1.2em}
table{border-collapse:collapse;font-size:0.85em}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}th{background:#f3f3f3}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td.short{white-space:nowrap}
.pad{visibility:hidden}.ci{color:#616161;font-size:0.9em}
code{background:#f3f3f3;padding:0 3px;border-radius:3px;font-size:0.92em}
figure{margin:1em 0 2em}img{max-width:100%}figcaption{font-size:0.9em;color:#424242}
.omitted{color:#6d4c41}a{color:#1565c0}"""


def html_text(text: object) -> str:
    """Text as HTML: escaped, with `inline code` as <code>."""
    return _CODE.sub(r"<code>\1</code>", html.escape(_cell(text), quote=True))


def _pad(text: str) -> str:
    return f"<span class='pad'>{text}</span>" if text else ""


def aligned_cells(cells: list[str]) -> list[str]:
    """A numeric column's cells as HTML, each number padded (invisibly) to the widest sign, integer
    part and decimals found at its place (counted from the cell's end) in the column, so that
    right-aligned, every decimal point is in line with those above it; an interval's bounds dimmed."""
    found = [list(_NUMBER.finditer(cell)) for cell in cells]
    widths: list[tuple[int, int, int]] = []  # per place from the end: sign, integer digits, decimals
    for place in range(max((len(numbers) for numbers in found), default=0)):
        at = [numbers[-1 - place] for numbers in found if len(numbers) > place]
        widths.append(
            (
                max(len(m.group(1)) for m in at),
                max(len(m.group(2)) for m in at),
                max(len(m.group(3) or "") for m in at),
            )
        )
    out = []
    for cell, numbers in zip(cells, found, strict=True):
        parts, done = [], 0
        for index, match in enumerate(numbers):
            sign_width, digits_width, decimals_width = widths[len(numbers) - 1 - index]
            sign, digits, decimals = match.group(1), match.group(2), match.group(3) or ""
            parts.append(html.escape(cell[done : match.start()]))
            parts.append(_pad("+" * (sign_width - len(sign)) + "0" * (digits_width - len(digits))))
            parts.append(html.escape(match.group(0)))
            parts.append(
                _pad(("." if decimals_width and not decimals else "") + "0" * (decimals_width - len(decimals)))
            )
            done = match.end()
        parts.append(html.escape(cell[done:]))
        text = "".join(parts)
        bracket = text.find(" [")
        out.append(f"{text[:bracket]} <span class='ci'>{text[bracket + 1 :]}</span>" if bracket >= 0 else text)
    return out


def html_table(frame: pd.DataFrame) -> str:
    """A shown table as HTML: a header cell per column (never a cell for the columns' name or the
    index), numeric columns right-aligned on the decimal point."""
    columns = list(frame.columns)
    numeric = [is_numeric(frame[column]) for column in columns]
    cells = []
    for position, column in enumerate(columns):
        texts = [_cell(value) for value in frame[column]]
        cells.append(aligned_cells(texts) if numeric[position] else [html_text(text) for text in texts])
    # Names and labels stay on one line; only a long text (a reason, a question) may wrap.
    kind = [
        "num" if flag else "text short" if max(map(len, map(_cell, frame[column])), default=0) <= 40 else "text"
        for column, flag in zip(columns, numeric, strict=True)
    ]
    head = "".join(f"<th class='{k}'>{html_text(c)}</th>" for k, c in zip(kind, columns, strict=True))
    rows = [
        "<tr>" + "".join(f"<td class='{k}'>{column[row]}</td>" for k, column in zip(kind, cells, strict=True)) + "</tr>"
        for row in range(len(frame))
    ]
    return f"<div class='table'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def _html_contents(report: Report, found: dict[int, Heading]) -> list[str]:
    out = ["<nav><h2 id='contents'>Contents</h2><ul>"]
    for section in report.included:
        tables = [
            f"<li><a href='#{found[id(b)].anchor}'>{html_text(b.title)}</a></li>"
            for b in section.blocks
            if isinstance(b, Table)
        ]
        nested = f"<ul>{''.join(tables)}</ul>" if tables else ""
        out.append(f"<li><a href='#{found[id(section)].anchor}'>{html_text(section.title)}</a>{nested}</li>")
    out.append("</ul>")
    out += [f"<p class='omitted'>{html_text(line)}</p>" for line in _left_out(report)]
    out.append("</nav>")
    return out


def _html_figure(block: Figure) -> str:
    # The SVG itself, embedded: sharp at any zoom and in print, and the page stays one file.
    encoded = base64.b64encode(block.svg).decode("ascii")
    caption = html_text(block.caption)
    links = " ".join(f"<a href='figures/{block.name}.{kind}'>{kind.upper()}</a>" for kind in ("pdf", "svg", "png"))
    return (
        f"<figure><img alt='{html.escape(block.caption, quote=True)}' src='data:image/svg+xml;base64,{encoded}'>"
        f"<figcaption>{caption} ({links})</figcaption></figure>"
    )


def _html_section(section: Section, found: dict[int, Heading]) -> list[str]:
    out = [f"<h2 id='{found[id(section)].anchor}'>{html_text(section.title)}</h2>"]
    for block in section.blocks:
        if isinstance(block, str):
            out.append(f"<p>{html_text(block)}</p>")
        elif isinstance(block, list):
            out.append("<ul>" + "".join(f"<li>{html_text(line)}</li>" for line in block) + "</ul>")
        elif isinstance(block, Table):
            out.append(
                f"<h3 id='{found[id(block)].anchor}'>{html_text(block.title)} "
                f"<small>(<a href='tables/{block.name}.csv'>CSV</a>)</small></h3>"
            )
            out.append(html_table(block.shown))
        else:
            out.append(_html_figure(block))
    return out


def render_html(report: Report) -> str:
    found = headings(report)
    out = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'><title>GAMUT report</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>GAMUT report</h1>",
        *_html_contents(report, found),
    ]
    for section in report.included:
        out += _html_section(section, found)
    out.append("</body></html>")
    return "\n".join(out)
