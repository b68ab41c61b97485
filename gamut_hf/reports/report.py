"""`gamut report`: the paper's tables and figures for any set of runs, with uncertainty.

A report reads run folders (:mod:`.runs`), builds every section that applies to them
(:mod:`.sections`: the leaderboard first, the runs read last) and writes REPORT_DIR/report.md and
a self-contained report.html (:mod:`.render`), figures/*.png, *.pdf and *.svg, and tables/*.csv.
A section that does not apply is listed with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from gamut_hf import atomic
from gamut_hf.evaluation.audit import FoundAudit, find_audits, judge_warning, measured_audits
from gamut_hf.files import InputError
from gamut_hf.reports import statistics as analysis
from gamut_hf.reports.figures import FIGURE_FORMATS
from gamut_hf.reports.progress import steps
from gamut_hf.reports.render import render_html, render_markdown
from gamut_hf.reports.runs import (
    Run,
    find_run_folders,
    label_runs,
    load_run,
    name_folders,
    repeated_run_line,
    repeated_runs,
)
from gamut_hf.reports.sections import (
    CLAIMS_SECTION,
    SECTION_ORDER,
    Figure,
    Report,
    Section,
    Table,
    audit_section,
    breakdown_section,
    claims_section,
    judge_section,
    leaderboard_groups,
    leaderboard_section,
    panel_blocks,
    runs_section,
    variant_section,
)
from gamut_hf.reports.statistics import Bootstrap

# Readers import these from here (the Space, the leaderboard's entries): the report's public names.
__all__ = [
    "CLAIMS_SECTION",
    "SECTION_ORDER",
    "Figure",
    "Report",
    "Run",
    "Section",
    "Table",
    "build_report",
    "find_run_folders",
    "label_runs",
    "load_run",
    "repeated_run_line",
    "repeated_runs",
    "write_report",
]


def build_report(
    folders: Sequence[str | Path],
    bootstrap: Bootstrap = Bootstrap(),
    top: int = 10,
    audits: Sequence[FoundAudit] | None = None,
    progress: bool = False,
) -> Report:
    """The report of these run folders; ``audits`` default to those in the folders' results folders.
    ``progress``: show how far it is (reading runs, bootstrapping them, building each section) on stderr."""
    runs = [load_run(folder) for folder in steps(folders, "reading runs", "run", progress)]
    if audits is None:
        audits = find_audits(list(dict.fromkeys(Path(folder).resolve().parent for folder in folders)))
        # Then the audits shipped with the package, for judges no audit beside the runs measures.
        local = {audit.judge_key for audit in audits}
        audits = [*audits, *(audit for audit in measured_audits() if audit.judge_key not in local)]
    label_runs(runs)
    repeated = repeated_runs(runs)
    if repeated:
        raise InputError(repeated_run_line(repeated[0]))
    shared = name_folders(runs)
    scored = [r for r in runs if r.scored]
    sections = {"runs": runs_section(runs, shared), "audit": audit_section(runs, audits)}
    if not scored:
        for key, title in (
            ("leaderboard", "Leaderboard"),
            ("judges", "Judge robustness"),
            ("variants", "Text-only against multimodal"),
            ("breakdowns", "Breakdowns"),
        ):
            sections[key] = Section(title, omitted="no run has a score")
        return _report(sections, runs)
    summaries = {
        id(run): analysis.run_summary(run.questions, bootstrap)
        for run in steps(scored, "bootstrapping runs", "run", progress)
    }
    groups = leaderboard_groups(scored, summaries, bootstrap)
    builders: list[tuple[str, Callable[[], Section]]] = [
        ("leaderboard", lambda: leaderboard_section(groups, bootstrap)),
        ("judges", lambda: judge_section(scored, groups, bootstrap)),
        ("variants", lambda: variant_section(scored, groups, bootstrap)),
        ("breakdowns", lambda: breakdown_section(groups, top)),
        ("claims", lambda: claims_section(groups, sections)),  # last: it points to the others
    ]
    for key, build in steps(builders, "building sections", "section", progress):
        sections[key] = build()
    sections["leaderboard"].blocks[1:1] = judge_warnings(scored, audits)
    sections["leaderboard"].blocks += panel_blocks(scored)
    return _report(sections, runs)


def judge_warnings(runs: Sequence[Run], audits: Sequence[FoundAudit]) -> list[str]:
    """A plain warning, above the boards, for each judge of these runs whose audit shows its
    verdicts close to chance: its scores are read with that in mind, or not at all."""
    judges = {run.judge_key: run.judge for run in runs}
    warned: dict[str, str] = {}  # judge -> its warning (the first audit of a judge speaks for it)
    for audit in audits:
        if audit.results is not None and audit.judge_key in judges:
            warning = judge_warning(audit.results)
            if warning:
                warned.setdefault(judges[audit.judge_key], warning)
    return [f"**Warning: {judge}**: {warning} (see Judge audit)." for judge, warning in warned.items()]


def _report(sections: dict[str, Section], runs: list[Run]) -> Report:
    for key, section in sections.items():
        section.key = key
    return Report([sections[key] for key in SECTION_ORDER if key in sections], runs)


def write_report(report: Report, out: str | Path) -> Path:
    """report.md, report.html, tables/*.csv and figures/* (each figure as PNG, PDF and SVG) under
    ``out``, beside any other files.

    ``out`` may hold files of others (a paper's folder): they are left alone. A rerun replaces the
    files the previous report wrote (its manifest, :class:`atomic.OwnedFolder`), each atomically,
    and removes those it no longer writes; a file of another's in the way is refused, never replaced.
    """
    folder = Path(out)
    with atomic.OwnedFolder(folder, "report", others_allowed=True, advice="choose another --out folder") as owned:
        owned.folder("tables")
        owned.folder("figures")
        for section in report.included:
            for block in section.blocks:
                if isinstance(block, Table):
                    block.data.to_csv(owned.path(f"tables/{block.name}.csv"), index=False)
                elif isinstance(block, Figure):
                    for kind in FIGURE_FORMATS:
                        owned.write_bytes(f"figures/{block.name}.{kind}", block.file(kind))
        owned.write_text("report.md", render_markdown(report) + "\n")
        owned.write_text("report.html", render_html(report) + "\n")
    return folder
