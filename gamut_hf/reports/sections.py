"""The report's sections, built from scored runs: what each table and figure holds, in numbers
(the CSV) and in words (the page). The sections follow the paper's claims, so a reader can
check each on their own runs:

1. Leaderboard (Table 1) per judge and variant: Gamut, tiers and verdict shares with 95%
   bootstrap intervals, and a paired bootstrap test between neighbouring models.
2. The paper's claims, checked on these runs where they can be.
3. Judge robustness (Table 2): the same candidates under different judges.
4. Judge audit: each judge's agreement with gold verdicts (`gamut judge-audit`), when an
   audit of it sits in the results folder beside the runs.
5. Text-only against multimodal (Table 3): the same candidate and judge on both variants.
6. Breakdowns: domain, tier, item type, check kind, and the hardest questions.
7. The runs read, by their folders' names.

A section that does not apply says why (``omitted``); readers (the Space) find a section by
its key (:data:`SECTION_ORDER`), never by its title.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from gamut_hf.core.rubric import TIERS, VERDICTS
from gamut_hf.evaluation.audit import FoundAudit
from gamut_hf.evaluation.prices import shown_cost
from gamut_hf.reports import figures
from gamut_hf.reports import statistics as analysis
from gamut_hf.reports.audit_report import confusion_figure
from gamut_hf.reports.runs import Run, fingerprint_name
from gamut_hf.reports.statistics import Bootstrap, Interval, p_clause, shown_number, shown_p_value

TIER_LABELS = {"answer_critical": "AC", "valuable": "V", "context": "Ctx"}
VERDICT_LABELS = {"meets": "% meets", "partially_meets": "% partial", "missing": "% missing", "contradicts": "% contra"}
SIGNIFICANCE = 0.05

# The sections of a report, in order: the leaderboard first (what a reader came for), the runs
# it was made from last. Readers find a section by its key, never by its title.
SECTION_ORDER = ("leaderboard", "claims", "judges", "audit", "variants", "breakdowns", "runs")
CLAIMS_SECTION = "claims"


@dataclass
class Table:
    name: str  # file stem of its CSV
    title: str
    shown: pd.DataFrame  # formatted for reading
    data: pd.DataFrame  # raw numbers, written as CSV


@dataclass
class Figure:
    name: str  # file stem of its files, one per figures.FIGURE_FORMATS
    caption: str
    png: bytes
    pdf: bytes
    svg: bytes

    def file(self, kind: str) -> bytes:
        """Its bytes in one of :data:`figures.FIGURE_FORMATS`."""
        return {"png": self.png, "pdf": self.pdf, "svg": self.svg}[kind]


Block = str | list[str] | Table | Figure


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    omitted: str | None = None  # why the section is not in this report
    key: str = ""  # what the section is, for readers (the Space): one of SECTION_ORDER


@dataclass
class Report:
    sections: list[Section]
    runs: list[Run]

    @property
    def included(self) -> list[Section]:
        return [s for s in self.sections if not s.omitted]

    def section(self, key: str) -> Section | None:
        """The section of that kind (:data:`SECTION_ORDER`), or None when this report has none."""
        return next((s for s in self.sections if s.key == key), None)


def figure_block(name: str, caption: str, figure) -> Figure:
    """A matplotlib figure as a report's block, rendered in every format (and closed)."""
    files = figures.rendered(figure)
    return Figure(name, caption, files["png"], files["pdf"], files["svg"])


def slug(*parts: str) -> str:
    return "-".join(re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in parts if p)


def _interval_columns(prefix: str, interval: Interval) -> dict[str, float]:
    return {prefix: interval.value, f"{prefix}_low": interval.low, f"{prefix}_high": interval.high}


def _plain_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without a name on its columns (a pivot's ``columns=`` leaves one, which a table
    writer shows as an extra header cell over an empty first column)."""
    return frame.rename_axis(columns=None)


# -- leaderboards ----------------------------------------------------------------------------


@dataclass
class Group:
    """Runs that share a judge and a variant: one leaderboard."""

    variant: str
    judge: str
    runs: list[Run]  # in leaderboard order, best first
    summaries: dict[int, dict[str, Interval]] = field(default_factory=dict)  # id(run) -> row
    neighbour_tests: list[analysis.PairedTest] = field(default_factory=list)  # run i against run i + 1

    @property
    def title(self) -> str:
        return f"{self.variant}, judge {self.judge}"

    @property
    def slug(self) -> str:
        return slug(self.variant, self.judge)


def leaderboard_groups(runs: list[Run], summaries: dict[int, dict[str, Interval]], bootstrap: Bootstrap) -> list[Group]:
    """The scored ``runs`` as leaderboards, each model's Table 1 row from ``summaries`` (by id(run),
    :func:`analysis.run_summary`), with the paired test of each model against the next."""
    keyed: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        keyed.setdefault((run.variant, run.judge), []).append(run)
    groups = []
    for (variant, judge), members in keyed.items():
        group = Group(variant, judge, [])
        group.summaries = {id(run): summaries[id(run)] for run in members}
        group.runs = sorted(members, key=lambda r: -group.summaries[id(r)]["gamut"].value)
        group.neighbour_tests = [paired(a, b, bootstrap) for a, b in zip(group.runs, group.runs[1:], strict=False)]
        groups.append(group)
    # Multimodal first (the paper's main setting), then the judge with the most runs.
    return sorted(groups, key=lambda g: (g.variant != "multimodal", -len(g.runs), g.judge))


def _summaries(groups: list[Group]) -> dict[int, dict[str, Interval]]:
    """Every scored run's Table 1 row, by id(run)."""
    return {id(r): g.summaries[id(r)] for g in groups for r in g.runs}


def paired(a: Run, b: Run, bootstrap: Bootstrap) -> analysis.PairedTest:
    """``a`` minus ``b`` over the questions both answered."""
    common = a.questions.index.intersection(b.questions.index)
    return bootstrap.paired_difference(
        a.questions.loc[common, "score"].to_numpy(), b.questions.loc[common, "score"].to_numpy()
    )


def _smallest_p(bootstrap: Bootstrap) -> float:
    """The smallest p-value a bootstrap of this many resamples tells apart from zero."""
    return 1 / bootstrap.resamples


def leaderboard_section(groups: list[Group], bootstrap: Bootstrap) -> Section:
    section = Section("Leaderboard")
    section.blocks.append(
        f"Gamut and tier scores (0-100) and verdict shares (% of checks) with 95% bootstrap intervals "
        f"({bootstrap.resamples} resamples of the questions, seed {bootstrap.seed}, percentile method). "
        f"'vs next' is the paired bootstrap test of each model against the one below it, on the questions both "
        f"answered: the mean difference with its interval, and its two-sided p-value. 'expected', where "
        f"the judge gave verdict probabilities, is the Gamut score with each check counted by them."
    )
    for group in groups:
        shown_rows, data_rows = [], []
        for position, run in enumerate(group.runs):
            row = group.summaries[id(run)]
            test = group.neighbour_tests[position] if position < len(group.neighbour_tests) else None
            shown = {"rank": position + 1, "model": run.model, "Gamut": str(row["gamut"])}
            shown |= {TIER_LABELS[t]: str(row[t]) for t in TIERS}
            shown |= {VERDICT_LABELS[v]: str(row[v]) for v in VERDICTS}
            shown["vs next"] = test.difference.signed() if test else ""
            shown["p"] = shown_p_value(test.p_value, _smallest_p(bootstrap)) if test else ""
            shown["questions"] = len(run.questions)
            if any(r.results.expected_gamut is not None for r in group.runs):  # from verdict probabilities
                shown["expected"] = shown_number(run.results.expected_gamut)
            if any(r.results.cost for r in group.runs):  # what each row cost, where a run was priced
                shown["cost (US$)"] = shown_cost(run.results.cost_usd)
            shown_rows.append(shown)
            data = {
                "rank": position + 1,
                "model": run.model,
                "judge": group.judge,
                "variant": group.variant,
                "questions": len(run.questions),
                "checks": int(run.questions["checks"].sum()),
                "cost_usd": run.results.cost_usd,
                "expected_gamut": run.results.expected_gamut,
                "run": run.name,
            }
            for key, interval in row.items():
                data |= _interval_columns(key, interval)
            if test:
                data |= _interval_columns("difference_to_next", test.difference) | {"p_value_to_next": test.p_value}
            data_rows.append(data)
        section.blocks.append(
            Table(
                f"leaderboard-{group.slug}",
                f"Leaderboard: {group.title}",
                pd.DataFrame(shown_rows),
                pd.DataFrame(data_rows),
            )
        )
        if len({len(r.questions) for r in group.runs}) > 1:
            section.blocks.append(
                "These runs cover different numbers of questions: their scores are not "
                "comparable one to one; the paired tests use the questions they share."
            )
        shares = pd.DataFrame(
            {v: [group.summaries[id(r)][v].value for r in group.runs] for v in VERDICTS},
            index=[r.model for r in group.runs],
        )
        section.blocks.append(
            figure_block(
                f"verdicts-{group.slug}",
                f"Verdict shares per model: {group.title}",
                figures.verdict_bars(shares, group.title),
            )
        )
    return section


def panel_blocks(runs: list[Run]) -> list[Block]:
    """For each run judged by a panel: each member's own score beside the panel's, and how far
    the members agree (Krippendorff's alpha; Cohen's kappa per pair)."""
    blocks: list[Block] = []
    for run in runs:
        panel = run.results.panel
        if panel is None:
            continue
        rows = [
            {"judge": "the panel (majority)", "Gamut": run.results.score.gamut, "errors": run.results.judge_errors}
        ] + [
            {"judge": f"{m.judge.get('model')} ({m.judge.get('backend')})", "Gamut": m.gamut, "errors": m.errors}
            for m in panel.members
        ]
        data = pd.DataFrame(rows)
        shown = data.assign(Gamut=data["Gamut"].map(shown_number))
        blocks.append(Table(f"panel-{slug(run.name)}", f"Judge panel of {run.model}: each judge alone", shown, data))
        blocks.append(
            f"Agreement of the panel judging {run.model}, over the {panel.checks} checks every judge could read: "
            f"{panel.agreement_text()}."
        )
    return blocks


# -- judges ----------------------------------------------------------------------------------


def _judge_pairs(runs: list[Run]) -> dict[str, dict[tuple[str, str], dict[str, tuple[Run, Run]]]]:
    """variant -> (judge A, judge B) -> candidate -> (run under A, run under B), for pairs sharing candidates."""
    out: dict[str, dict[tuple[str, str], dict[str, tuple[Run, Run]]]] = {}
    by_cell = {(r.variant, r.judge, r.model): r for r in runs}
    for variant in dict.fromkeys(r.variant for r in runs):
        judges = list(dict.fromkeys(r.judge for r in runs if r.variant == variant))
        for first, second in combinations(judges, 2):
            shared = {
                model: (by_cell[(variant, first, model)], by_cell[(variant, second, model)])
                for (v, j, model) in by_cell
                if v == variant and j == first and (variant, second, model) in by_cell
            }
            if shared:
                out.setdefault(variant, {})[(first, second)] = shared
    return out


def judge_section(runs: list[Run], groups: list[Group], bootstrap: Bootstrap) -> Section:
    section = Section("Judge robustness")
    pairs = _judge_pairs(runs)
    if not pairs:
        judges = {r.judge for r in runs}
        section.omitted = (
            f"needs two judges grading the same candidate on the same variant; these runs have "
            f"{len(judges)} judge{'s' if len(judges) != 1 else ''} and no candidate graded twice"
        )
        return section
    summary = _summaries(groups)
    section.blocks.append(
        "For each pair of judges: both judges' Gamut scores for every candidate they share, how the two rankings "
        "agree (Kendall tau, Spearman rho), the largest absolute difference, the mean offset (from the more lenient "
        "judge's side), per-check verdict agreement (Cohen's kappa over the same responses and checks), and "
        "self-preference: a judge's offset on candidates of its own family beyond the offset expected at their "
        "level from the other candidates."
    )
    for variant, by_pair in pairs.items():
        for (first, second), shared in by_pair.items():
            models = list(shared)
            a = [summary[id(shared[m][0])]["gamut"] for m in models]
            b = [summary[id(shared[m][1])]["gamut"] for m in models]
            difference = np.array([y.value - x.value for x, y in zip(a, b, strict=False)])
            order = np.argsort([-x.value for x in a])
            shown = pd.DataFrame(
                {
                    "model": [models[i] for i in order],
                    f"judge {first}": [str(a[i]) for i in order],
                    f"judge {second}": [str(b[i]) for i in order],
                    "difference": [shown_number(difference[i], signed=True) for i in order],
                }
            )
            data = pd.DataFrame(
                [
                    {
                        "model": models[i],
                        "variant": variant,
                        "first_judge": first,
                        "second_judge": second,
                        **_interval_columns("first", a[i]),
                        **_interval_columns("second", b[i]),
                        "difference": difference[i],
                    }
                    for i in order
                ]
            )
            name = slug(variant, first, "vs", second)
            title = f"{variant}: judge {first} against judge {second}"
            section.blocks.append(Table(f"judges-{name}", title, shown, data))

            ranks = analysis.rank_agreement([x.value for x in a], [y.value for y in b])
            worst = int(np.argmax(np.abs(difference)))
            lines = [
                f"Rank agreement over {ranks.models} models: Kendall tau {shown_number(ranks.kendall_tau, 2)}, "
                f"Spearman rho {shown_number(ranks.spearman_rho, 2)}"
                + ("" if ranks.kendall_tau is not None else " (undefined: fewer than 3 models or all tied)"),
                f"Largest absolute difference: {shown_number(abs(difference[worst]))} points ({models[worst]})",
                _offset_line(first, second, difference),
            ]
            sizes = {(len(shared[m][0].questions), len(shared[m][1].questions)) for m in models}
            uneven = [pair for pair in sizes if pair[0] != pair[1]]
            if uneven:
                lines.append(
                    f"The two judges' runs are over different questions ({uneven[0][0]} and {uneven[0][1]}): "
                    "their scores differ in coverage as well as in judging; the per-check agreement "
                    "below uses the checks both graded"
                )
            first_verdicts, second_verdicts = [], []
            for model in models:
                x, y = shared[model]
                joined = x.details[["question_id", "check_id", "verdict"]].merge(
                    y.details[["question_id", "check_id", "verdict"]], on=["question_id", "check_id"]
                )
                first_verdicts += joined["verdict_x"].tolist()
                second_verdicts += joined["verdict_y"].tolist()
            agreement = analysis.verdict_agreement(first_verdicts, second_verdicts)
            lines.append(
                f"Per-check agreement over {agreement.checks} checks: {shown_number(100 * agreement.agreement)}% "
                f"identical verdicts, Cohen's kappa {shown_number(agreement.kappa, 2)}"
                + ("" if agreement.kappa is not None else " (undefined: one verdict everywhere)")
            )
            lines += _self_preference(first, second, models, shared, np.array([x.value for x in a]), difference)
            section.blocks.append(lines)
            confusion = agreement.confusion.copy()
            confusion.index = [f"{first}: {v}" for v in confusion.index]
            confusion.columns = [f"{second}: {v}" for v in confusion.columns]
            confusion = confusion.reset_index(names="verdicts")
            section.blocks.append(
                Table(
                    f"confusion-{name}",
                    f"Verdicts, {first} (rows) against {second} (columns)",
                    confusion,
                    confusion,
                )
            )
            section.blocks.append(
                figure_block(f"judges-{name}", title, figures.judge_scatter(a, b, models, first, second))
            )

    leniency = _leniency(runs, summary)
    if leniency is not None:
        section.blocks.append(leniency)
    return section


def _offset_line(first: str, second: str, difference: np.ndarray) -> str:
    """The mean offset, told from the more lenient judge's side (difference: second minus first, per model)."""
    lenient, other, ahead = (second, first, difference) if difference.mean() >= 0 else (first, second, -difference)
    higher = int((ahead > 0).sum())
    line = (
        f"Mean offset: {lenient} scores {shown_number(abs(difference.mean()))} points above {other}; higher on "
        f"{higher} of {len(ahead)} models"
    )
    if higher == len(ahead) and len(ahead) > 1:
        line += f": uniformly more lenient, by {shown_number(ahead.min())} to {shown_number(ahead.max())} points"
    return line


def _self_preference(
    first: str,
    second: str,
    models: list[str],
    shared: dict[str, tuple[Run, Run]],
    first_scores: np.ndarray,
    difference: np.ndarray,
) -> list[str]:
    """A judge's extra offset on its own family's candidates.

    Offsets between judges grow or shrink with a model's level (a lenient judge adds more
    where there is more to forgive), so the expected offset of a candidate is read off a line
    fitted to the other families' candidates (with 3 or more of them; else their mean).
    """
    lines = []
    for judge, sign, index in ((first, -1, 0), (second, 1, 1)):
        family = analysis.model_family(fingerprint_name(json.loads(shared[models[0]][index].judge_key)))
        own = np.array(
            [analysis.model_family(fingerprint_name(json.loads(shared[m][0].model_key))) == family for m in models]
        )
        if own.any() and (~own).any():
            expected = analysis.expected_offsets(first_scores[~own], difference[~own], first_scores[own])
            offset = sign * float(np.mean(difference[own] - expected))
            lines.append(
                f"Self-preference of {judge} (family {family}): {shown_number(offset, signed=True)} points on its "
                f"own family's {int(own.sum())} candidate(s) beyond the offset expected from the other "
                f"{int((~own).sum())} at their level"
            )
        else:
            reason = "every shared candidate is" if own.any() else "no shared candidate is"
            lines.append(f"Self-preference of {judge} not testable: {reason} of its family ({family})")
    return lines


def _leniency(runs: list[Run], summary: dict[int, dict[str, Interval]]) -> Table | None:
    """Each judge's mean offset from the judges' mean, over the candidates every judge of the variant graded."""
    rows = []
    for variant in dict.fromkeys(r.variant for r in runs):
        members = [r for r in runs if r.variant == variant]
        judges = list(dict.fromkeys(r.judge for r in members))
        if len(judges) < 2:
            continue
        common = set.intersection(*({r.model for r in members if r.judge == j} for j in judges))
        if not common:
            continue
        scores = pd.DataFrame(
            [(r.model, r.judge, summary[id(r)]["gamut"].value) for r in members if r.model in common],
            columns=["model", "judge", "gamut"],
        ).pivot(index="model", columns="judge", values="gamut")
        offsets = scores.sub(scores.mean(axis=1), axis=0)
        for judge in judges:
            rows.append(
                {
                    "variant": variant,
                    "judge": judge,
                    "models": len(common),
                    "mean offset": offsets[judge].mean(),
                    "min": offsets[judge].min(),
                    "max": offsets[judge].max(),
                }
            )
    if not rows:
        return None
    data = pd.DataFrame(rows)
    shown = data.assign(
        **{c: data[c].map(lambda v: shown_number(v, signed=True)) for c in ("mean offset", "min", "max")}
    )
    return Table("judge-leniency", "Leniency: each judge's offset from the judges' mean score, per model", shown, data)


def audit_section(runs: list[Run], audits: Sequence[FoundAudit]) -> Section:
    """Each judge of these runs beside its audit(s), matched by the judge's fingerprint."""
    section = Section("Judge audit")
    judges = {r.judge_key: r.judge for r in runs}
    matched = [(judges[a.judge_key], a) for a in audits if a.judge_key in judges]
    unreadable = [a for a in audits if a.results is None]
    if not matched:
        hint = "; ".join(f"`{a.folder.name}`: {a.problem}" for a in unreadable)
        section.omitted = (
            "no audit of these runs' judges in their results folder (`gamut judge-audit --judge J "
            "--judge-backend B --out RESULTS/judge-audit-J`)" + (f"; unreadable: {hint}" if hint else "")
        )
        return section
    section.blocks.append(
        "The judge measured against responses whose right verdicts are known (`gamut judge-audit`): agreement "
        "with gold (accuracy, Cohen's kappa with unreadable verdicts as a fifth answer), the error it puts into "
        "question and Gamut scores, and how often an injection in the response changes its verdict."
    )
    # Numbers in the CSV (blank where undefined); the page says "n/a (<why>)" as audit.md does.
    data = pd.DataFrame([{"judge": label, **audit.row()} for label, audit in matched])
    shown = pd.DataFrame([{"judge": label, **audit.row(shown=True)} for label, audit in matched])
    section.blocks.append(Table("judge-audit", "Judge audit", shown, data))
    for label, audit in matched:
        assert audit.results is not None
        section.blocks.append(
            figure_block(
                f"audit-confusion-{slug(label, audit.folder.name)}",
                f"Gold against judged verdicts: {label} ({audit.folder.name})",
                confusion_figure(audit.results),
            )
        )
    missing = [label for key, label in judges.items() if key not in {a.judge_key for a in audits}]
    if missing:
        section.blocks.append(f"No audit in the results folder for: {', '.join(missing)}.")
    for audit in unreadable:
        section.blocks.append(f"Audit folder `{audit.folder.name}` not read: {audit.problem}")
    return section


# -- variants --------------------------------------------------------------------------------


def variant_section(runs: list[Run], groups: list[Group], bootstrap: Bootstrap) -> Section:
    section = Section("Text-only against multimodal")
    by_cell = {(r.judge, r.model, r.variant): r for r in runs}
    judges = [
        j
        for j in dict.fromkeys(r.judge for r in runs)
        if any((j, r.model, "multimodal") in by_cell and (j, r.model, "text_only") in by_cell for r in runs)
    ]
    if not judges:
        variants = sorted({r.variant for r in runs})
        section.omitted = (
            f"needs the same candidate and judge on both variants; these runs have {' and '.join(variants)} only"
            if len(variants) == 1
            else "needs the same candidate and judge on both variants; no candidate has both under one judge"
        )
        return section
    summary = _summaries(groups)
    section.blocks.append(
        "Per model: the Gamut score on each variant and the gain from dropping the image (text-only minus "
        "multimodal, paired over the questions in both variants, with its 95% interval); then whether the ranking "
        "survives (rank correlation) and whether the gain depends on how good the model is (Pearson r of gain "
        "with the multimodal score)."
    )
    for judge in judges:
        models = [
            m
            for m in dict.fromkeys(r.model for r in runs)
            if (judge, m, "multimodal") in by_cell and (judge, m, "text_only") in by_cell
        ]
        rows = []
        for model in models:
            mm, to = by_cell[(judge, model, "multimodal")], by_cell[(judge, model, "text_only")]
            rows.append((model, summary[id(mm)]["gamut"], summary[id(to)]["gamut"], paired(to, mm, bootstrap)))
        rows.sort(key=lambda row: -row[1].value)
        shown = pd.DataFrame(
            {
                "model": [model for model, *_ in rows],
                "multimodal": [str(multimodal) for _, multimodal, _, _ in rows],
                "text-only": [str(text_only) for _, _, text_only, _ in rows],
                "gain": [gain.difference.signed() for *_, gain in rows],
                "p": [shown_p_value(gain.p_value, _smallest_p(bootstrap)) for *_, gain in rows],
            }
        )
        data = pd.DataFrame(
            [
                {
                    "model": model,
                    "judge": judge,
                    **_interval_columns("multimodal", multimodal),
                    **_interval_columns("text_only", text_only),
                    **_interval_columns("gain", gain.difference),
                    "p_value": gain.p_value,
                    "questions_paired": gain.questions,
                }
                for model, multimodal, text_only, gain in rows
            ]
        )
        name = slug("variants", judge)
        section.blocks.append(Table(name, f"Text-only against multimodal, judge {judge}", shown, data))
        ranks = analysis.rank_agreement(data["multimodal"], data["text_only"])
        r, p = analysis.correlation(data["gain"], data["multimodal"])
        gains = data["gain"].to_numpy()
        section.blocks.append(
            [
                f"Gain: mean {shown_number(gains.mean(), signed=True)} points, from "
                f"{shown_number(gains.min(), signed=True)} to {shown_number(gains.max(), signed=True)}; "
                f"{int((gains > 0).sum())} of {len(gains)} models score higher without the image",
                f"Rank agreement of the two variants over {ranks.models} models: Kendall tau "
                f"{shown_number(ranks.kendall_tau, 2)}, Spearman rho {shown_number(ranks.spearman_rho, 2)}",
                f"Correlation of gain with the multimodal score: Pearson r {shown_number(r, 2)}"
                + (f" ({p_clause(p)})" if p is not None else " (undefined: fewer than 3 models or no spread)"),
            ]
        )
        section.blocks.append(
            figure_block(
                name,
                f"Text-only gain against the multimodal score, judge {judge}",
                figures.gain_plot(
                    [multimodal for _, multimodal, _, _ in rows],
                    [gain.difference for *_, gain in rows],
                    [model for model, *_ in rows],
                    f"Text-only gain, judge {judge}",
                ),
            )
        )
    return section


# -- breakdowns ------------------------------------------------------------------------------


def breakdown_section(groups: list[Group], top: int) -> Section:
    section = Section("Breakdowns")
    section.blocks.append(
        "Per leaderboard: the Gamut score on each domain's questions; verdict shares per tier; the pooled score "
        "(the tier formula over all checks of the kind, 0-100) per item type and per check kind; and the questions "
        "with the most missing and contradicted checks across the models."
    )
    for group in groups:
        models = [r.model for r in group.runs]
        by_domain = _plain_columns(
            pd.DataFrame(
                {r.model: 100 * r.questions.groupby("domain", sort=True)["score"].mean() for r in group.runs}
            ).T
        )
        counts = group.runs[0].questions.groupby("domain").size()
        shown = (
            by_domain.map(shown_number)
            .rename(columns=lambda d, n=counts: f"{d} ({n.get(d, 0)})")
            .reset_index(names="model")
        )
        section.blocks.append(
            Table(
                f"domains-{group.slug}",
                f"Gamut per domain (questions): {group.title}",
                shown,
                by_domain.reset_index(names="model"),
            )
        )
        section.blocks.append(
            figure_block(
                f"domains-{group.slug}",
                f"Gamut per domain: {group.title}",
                figures.domain_heatmap(by_domain, group.title),
            )
        )

        for by, title in (
            ("tier", "Verdict shares per tier"),
            ("item_type", "Pooled score per item type"),
            ("kind", "Pooled score per check kind"),
        ):
            pooled = pd.concat(
                {r.model: analysis.pooled_scores(r.details, by, r.results.score_params) for r in group.runs},
                names=["model"],
            )
            pooled = pooled.reset_index()
            if by == "tier":  # leaderboard order, tiers by importance
                pooled = pooled.assign(
                    model=pd.Categorical(pooled["model"], models), tier=pd.Categorical(pooled["tier"], TIERS)
                ).sort_values(["model", "tier"])
                shown = pooled.assign(tier=pooled["tier"].map(TIER_LABELS))
                shown = shown.rename(columns=VERDICT_LABELS)[["model", "tier", "checks", *VERDICT_LABELS.values()]]
                shown = shown.assign(**{c: shown[c].map(shown_number) for c in VERDICT_LABELS.values()})
            else:
                pivot = pooled.pivot(index="model", columns=by, values="score").loc[models]
                shown = _plain_columns(pivot.map(shown_number)).rename(columns=lambda c: str(c).replace("_", " "))
                shown = shown.reset_index()
            section.blocks.append(Table(f"{by}-{group.slug}", f"{title}: {group.title}", shown, pooled))

        section.blocks.append(_hardest(group, top))
    return section


def _hardest(group: Group, top: int) -> Table:
    frames = []
    for run in group.runs:
        q = run.questions
        frames.append(
            pd.DataFrame(
                {
                    "model": run.model,
                    "domain": q["domain"],
                    "checks": q["checks"],
                    "missing": 100 * q["missing"] / q["checks"],
                    "contradicts": 100 * q["contradicts"] / q["checks"],
                    "score": 100 * q["score"],
                }
            )
        )
    long = pd.concat(frames).reset_index(names="question_id")
    per_question = long.groupby("question_id").agg(
        domain=("domain", "first"),
        checks=("checks", "first"),
        missing=("missing", "mean"),
        contradicts=("contradicts", "mean"),
        score=("score", "mean"),
        models=("model", "size"),
    )
    per_question["missing_or_contradicted"] = per_question["missing"] + per_question["contradicts"]
    worst = per_question.sort_values(["missing_or_contradicted", "contradicts"], ascending=False).head(top)
    worst = worst.reset_index()
    shown = worst[["question_id", "domain", "checks", "models"]].assign(
        **{
            "% missing": worst["missing"].map(shown_number),
            "% contra": worst["contradicts"].map(shown_number),
            "mean Gamut": worst["score"].map(shown_number),
        }
    )
    return Table(
        f"hardest-{group.slug}",
        f"Questions with the most missing and contradicted checks (mean over {len(group.runs)} models): {group.title}",
        shown,
        worst,
    )


# -- claims and runs -------------------------------------------------------------------------


def claims_section(groups: list[Group], sections: dict[str, Section]) -> Section:
    """The paper's four claims, each checked on these runs where they can be."""
    section = Section("The paper's claims on these runs")
    lines = []
    for group in groups:
        if len(group.runs) < 2:
            lines.append(f"Separation ({group.title}): one model only; nothing to separate")
            continue
        tests = group.neighbour_tests
        significant = sum(t.p_value < SIGNIFICANCE for t in tests)
        widths = [(s["gamut"].high - s["gamut"].low) / 2 for s in group.summaries.values()]
        spread = group.summaries[id(group.runs[0])]["gamut"].value - group.summaries[id(group.runs[-1])]["gamut"].value
        lines.append(
            f"Separation ({group.title}): {significant} of {len(tests)} neighbouring pairs differ at "
            f"p<{SIGNIFICANCE}; intervals are +/-{shown_number(float(np.nanmean(widths)))} points on average against "
            f"a spread of {shown_number(spread)} points"
        )
    for group in groups:
        shares = [
            (r.model, group.summaries[id(r)]["missing"].value, group.summaries[id(r)]["contradicts"].value)
            for r in group.runs
        ]
        dominated = sum(m > c for _, m, c in shares)
        lines.append(
            f"Omission over contradiction ({group.title}): missing exceeds contradicts for {dominated} of "
            f"{len(shares)} models (mean {shown_number(float(np.mean([m for _, m, _ in shares])))}% missing against "
            f"{shown_number(float(np.mean([c for _, _, c in shares])))}% contradicts)"
        )
    for key, name in (("judges", "Judge robustness"), ("variants", "Text-only gain")):
        if sections[key].omitted:
            lines.append(f"{name}: not testable here ({sections[key].omitted})")
        else:
            lines.append(f"{name}: see the section '{sections[key].title}' below")
    section.blocks.append(lines)
    return section


def _status(run: Run) -> str:
    if run.excluded:
        return run.excluded.replace(str(run.folder), run.name)
    return "scored, errors counted as missing" if run.results.score.errors_counted_as_missing else "scored"


def runs_section(runs: list[Run], shared: Path) -> Section:
    """The runs read, each by its folder's path from ``shared`` (the folder they all sit in)."""
    section = Section("Runs")
    section.blocks.append(
        f"Each run folder by its path from the folder the runs share (`{shared.name or shared}`); "
        "the dataset as each run recorded it."
    )
    rows = [
        {
            "run": r.name,
            "model": r.model,
            "judge": r.judge,
            "variant": r.variant,
            "dataset": str(r.results.dataset.get("source")),
            "questions": r.results.score.questions,
            "checks": r.results.score.checks,
            "judge errors": r.results.judge_errors,
            "status": _status(r),
        }
        for r in runs
    ]
    frame = pd.DataFrame(rows)
    section.blocks.append(Table("runs", "Runs read", frame, frame))
    return section
