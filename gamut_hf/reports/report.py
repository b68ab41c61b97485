"""`gamut report`: the paper's tables and figures for any set of runs, with uncertainty.

A report reads run folders (results.json and details.parquet), builds every section that
applies to them and writes REPORT_DIR/report.md, a self-contained report.html (figures
embedded), figures/*.png and tables/*.csv. A section that does not apply is listed with the
reason. The sections follow the paper's claims, so a reader can check each on their own runs:

1. Leaderboard (Table 1) per judge and variant: Gamut, tiers and verdict shares with 95%
   bootstrap intervals, and a paired bootstrap test between neighbouring models.
2. Judge robustness (Table 2): the same candidates under different judges.
3. Text-only against multimodal (Table 3): the same candidate and judge on both variants.
4. Breakdowns: domain, tier, item type, check kind, and the hardest questions.
5. Judge audit: each judge's agreement with gold verdicts (`gamut judge-audit`), when an
   audit of it sits in the results folder beside the runs.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gamut_hf import atomic
from gamut_hf.core.rubric import TIERS, VERDICTS
from gamut_hf.evaluation.audit import FoundAudit, find_audits
from gamut_hf.evaluation.run_folder import (
    DETAILS_FILE,
    RESULTS_FILE,
    RunFolder,
    RunResults,
    is_run_folder,
    read_run_folder,
    run_folders_in,
)
from gamut_hf.files import InputError
from gamut_hf.reports import figures
from gamut_hf.reports import statistics as analysis
from gamut_hf.reports.audit_report import confusion_figure
from gamut_hf.reports.statistics import Bootstrap, Interval

if TYPE_CHECKING:
    import pyarrow as pa

TIER_LABELS = {"answer_critical": "AC", "valuable": "V", "context": "Ctx"}
VERDICT_LABELS = {"meets": "% meets", "partially_meets": "% partial", "missing": "% missing", "contradicts": "% contra"}
SIGNIFICANCE = 0.05


# -- runs ------------------------------------------------------------------------------------


@dataclass
class Run:
    """One run folder, read and scored per question."""

    folder: Path
    results: RunResults
    details: pd.DataFrame
    model_key: str
    judge_key: str
    model: str = ""  # display labels, unique within the report
    judge: str = ""
    # analysis.question_table; empty when the run has no score (then `excluded` says why)
    questions: pd.DataFrame = field(default_factory=pd.DataFrame)
    excluded: str | None = None

    @property
    def variant(self) -> str:
        return self.results.variant

    @property
    def scored(self) -> bool:
        return self.excluded is None

    def table(self, name: str, columns: Sequence[str] | None = None, **options) -> pa.Table:
        """One of the run's tables (run_folder's file names), refused unless results.json was written with it."""
        return RunFolder(self.folder, self.results).table(name, columns, **options)


def _name(fingerprint: dict) -> str:
    return str(fingerprint.get("model") or fingerprint.get("name") or "?")


def load_run(folder: str | Path) -> Run:
    """Read a run folder; a run whose score is blocked by judge errors is kept but excluded.

    Per-question scores are recomputed from details.parquet with the parameters the run was
    scored with (recorded in results.json), so every reader agrees with results.json.
    """
    outputs = read_run_folder(folder)
    results = outputs.results
    details = outputs.table(
        DETAILS_FILE, columns=["question_id", "domain", "check_id", "tier", "kind", "item_id", "verdict"]
    ).to_pandas()
    run = Run(
        outputs.folder,
        results,
        details,
        json.dumps(results.model, sort_keys=True),
        json.dumps(results.judge, sort_keys=True),
    )
    score = results.score
    if score.gamut is None:
        run.excluded = (
            f"no score: {results.judge_errors} judge errors and {results.unfinished_checks} unjudged checks "
            f"(finish it, or rescore with `gamut score {outputs.folder} --errors-as-missing`)"
        )
        return run
    unknown = set(details["verdict"].dropna()) - set(VERDICTS) - {"error"}
    if unknown:
        raise InputError(f"{outputs.folder / DETAILS_FILE}: unknown verdict {sorted(unknown)[0]!r}")
    # The run was scored with errors and unjudged checks counted as missing; so is the report.
    details["verdict"] = details["verdict"].where(details["verdict"].isin(VERDICTS), "missing")
    details["item_type"] = analysis.with_item_types(details)
    run.questions = analysis.question_table(details, results.score_params)
    return run


def find_run_folders(paths: Sequence[str | Path]) -> list[Path]:
    """The run folders named, or for a folder of runs, the run folders inside it."""
    folders: list[Path] = []
    for path in map(Path, paths):
        if is_run_folder(path):
            folders.append(path)
        elif path.is_dir() and (inner := run_folders_in(path)):
            folders.extend(inner)
        else:
            raise InputError(f"{path}: not a run folder (no {RESULTS_FILE}) and holds none")
    return list(dict.fromkeys(folders))


def label_runs(runs: list[Run]) -> None:
    """Display names: the model's name, with the backend (then the folder) added only where names collide."""
    for key_of, attr in ((lambda r: r.model_key, "model"), (lambda r: r.judge_key, "judge")):
        fingerprints = {key_of(r): json.loads(key_of(r)) for r in runs}
        labels = {key: _name(fp) for key, fp in fingerprints.items()}
        for step in (
            lambda k, fp: f"{_name(fp)} ({fp.get('backend', '?')})",
            lambda k, fp: f"{_name(fp)} ({fp.get('backend', '?')} {hashlib.sha256(k.encode()).hexdigest()[:6]})",
        ):
            clashes = pd.Series(labels).duplicated(keep=False)
            for key in clashes[clashes].index:
                labels[key] = step(key, fingerprints[key])
        for run in runs:
            setattr(run, attr, labels[key_of(run)])


def repeated_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs repeating an earlier one's model, judge and variant (shards beside their merge, a
    copied folder), in order: a report shows each combination once, so the first is the one kept."""
    seen: set[tuple[str, str, str]] = set()
    repeated = []
    for run in runs:
        combination = (run.variant, run.judge_key, run.model_key)
        if combination in seen:
            repeated.append(run)
        seen.add(combination)
    return repeated


def repeated_run_line(run: Run, name: str | None = None) -> str:
    """One line naming a run :func:`repeated_runs` found (by ``name``, its folder's path by default);
    ``run`` must be labelled (:func:`label_runs`)."""
    return (
        f"{name or run.folder}: a second run of {run.model} judged by {run.judge} ({run.variant}); "
        "report each combination once (merge shards with `gamut merge`)"
    )


# -- report structure ------------------------------------------------------------------------


@dataclass
class Table:
    name: str  # file stem of its CSV
    title: str
    shown: pd.DataFrame  # formatted for reading
    data: pd.DataFrame  # raw numbers, written as CSV


@dataclass
class Figure:
    name: str  # file stem of its PNG
    caption: str
    png: bytes


@dataclass
class Section:
    title: str
    blocks: list[str | list[str] | Table | Figure] = field(default_factory=list)
    omitted: str | None = None  # why the section is not in this report
    key: str = ""  # what the section is, for readers (the Space): one of SECTION_ORDER; set by build_report


# The sections of a report, in order; readers find a section by its key, never by its title.
SECTION_ORDER = ("runs", "claims", "leaderboard", "judges", "audit", "variants", "breakdowns")
CLAIMS_SECTION = "claims"


def _figure(name: str, caption: str, figure) -> Figure:
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return Figure(name, caption, buffer.getvalue())


def _slug(*parts: str) -> str:
    import re

    return "-".join(re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in parts if p)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _p(value: float, resamples: int) -> str:
    if math.isnan(value):
        return "n/a"
    return f"<{1 / resamples:.0g}" if value == 0 else f"{value:.3f}"


def _interval_columns(prefix: str, interval: Interval) -> dict[str, float]:
    return {prefix: interval.value, f"{prefix}_low": interval.low, f"{prefix}_high": interval.high}


# -- sections --------------------------------------------------------------------------------


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
        return _slug(self.variant, self.judge)


def _groups(runs: list[Run], bootstrap: Bootstrap) -> list[Group]:
    keyed: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        keyed.setdefault((run.variant, run.judge), []).append(run)
    groups = []
    for (variant, judge), members in keyed.items():
        group = Group(variant, judge, [])
        for run in members:
            group.summaries[id(run)] = analysis.run_summary(run.questions, bootstrap)
        group.runs = sorted(members, key=lambda r: -group.summaries[id(r)]["gamut"].value)
        group.neighbour_tests = [_paired(a, b, bootstrap) for a, b in zip(group.runs, group.runs[1:], strict=False)]
        groups.append(group)
    # Multimodal first (the paper's main setting), then the judge with the most runs.
    return sorted(groups, key=lambda g: (g.variant != "multimodal", -len(g.runs), g.judge))


def _summaries(groups: list[Group]) -> dict[int, dict[str, Interval]]:
    """Every scored run's Table 1 row, by id(run)."""
    return {id(r): g.summaries[id(r)] for g in groups for r in g.runs}


def _paired(a: Run, b: Run, bootstrap: Bootstrap) -> analysis.PairedTest:
    common = a.questions.index.intersection(b.questions.index)
    return bootstrap.paired_difference(
        a.questions.loc[common, "score"].to_numpy(), b.questions.loc[common, "score"].to_numpy()
    )


def leaderboard_section(groups: list[Group], bootstrap: Bootstrap) -> Section:
    section = Section("Leaderboard")
    section.blocks.append(
        f"Gamut and tier scores (0-100) and verdict shares (% of checks) with 95% bootstrap intervals "
        f"({bootstrap.resamples} resamples of the questions, seed {bootstrap.seed}, percentile method). "
        f"'vs next' is the paired bootstrap test of each model against the one below it, on the questions both "
        f"answered: the mean difference, its interval and a two-sided p-value."
    )
    for group in groups:
        shown_rows, data_rows = [], []
        for position, run in enumerate(group.runs):
            row = group.summaries[id(run)]
            test = group.neighbour_tests[position] if position < len(group.neighbour_tests) else None
            shown = {"rank": position + 1, "model": run.model, "Gamut": str(row["gamut"])}
            shown |= {TIER_LABELS[t]: str(row[t]) for t in TIERS}
            shown |= {VERDICT_LABELS[v]: str(row[v]) for v in VERDICTS}
            shown["vs next"] = f"{test.difference} p={_p(test.p_value, bootstrap.resamples)}" if test else ""
            shown["questions"] = len(run.questions)
            shown_rows.append(shown)
            data = {
                "rank": position + 1,
                "model": run.model,
                "judge": group.judge,
                "variant": group.variant,
                "questions": len(run.questions),
                "checks": int(run.questions["checks"].sum()),
                "run": str(run.folder),
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
            _figure(
                f"verdicts-{group.slug}",
                f"Verdict shares per model: {group.title}",
                figures.verdict_bars(shares, group.title),
            )
        )
    return section


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
                    "difference": [f"{difference[i]:+.1f}" for i in order],
                }
            )
            data = pd.DataFrame(
                {
                    "model": [models[i] for i in order],
                    "variant": variant,
                    "first_judge": first,
                    "second_judge": second,
                    "first": [a[i].value for i in order],
                    "second": [b[i].value for i in order],
                    "difference": difference[order],
                }
            )
            slug = _slug(variant, first, "vs", second)
            title = f"{variant}: judge {first} against judge {second}"
            section.blocks.append(Table(f"judges-{slug}", title, shown, data))

            ranks = analysis.rank_agreement([x.value for x in a], [y.value for y in b])
            worst = int(np.argmax(np.abs(difference)))
            lines = [
                f"Rank agreement over {ranks.models} models: Kendall tau {_fmt(ranks.kendall_tau, 2)}, "
                f"Spearman rho {_fmt(ranks.spearman_rho, 2)}"
                + ("" if ranks.kendall_tau is not None else " (undefined: fewer than 3 models or all tied)"),
                f"Largest absolute difference: {abs(difference[worst]):.1f} points ({models[worst]})",
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
                f"Per-check agreement over {agreement.checks} checks: {_fmt(100 * agreement.agreement)}% "
                f"identical verdicts, Cohen's kappa {_fmt(agreement.kappa, 2)}"
                + ("" if agreement.kappa is not None else " (undefined: one verdict everywhere)")
            )
            lines += _self_preference(first, second, models, shared, np.array([x.value for x in a]), difference)
            section.blocks.append(lines)
            confusion = agreement.confusion.copy()
            confusion.index = [f"{first}: {v}" for v in confusion.index]
            confusion.columns = [f"{second}: {v}" for v in confusion.columns]
            section.blocks.append(
                Table(
                    f"confusion-{slug}",
                    f"Verdicts, {first} (rows) against {second} (columns)",
                    confusion.reset_index(names=""),
                    confusion.reset_index(names=""),
                )
            )
            section.blocks.append(
                _figure(
                    f"judges-{slug}",
                    title,
                    figures.judge_scatter([x.value for x in a], [y.value for y in b], models, first, second),
                )
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
        f"Mean offset: {lenient} scores {abs(difference.mean()):.1f} points above {other}; higher on {higher} of "
        f"{len(ahead)} models"
    )
    if higher == len(ahead) and len(ahead) > 1:
        line += f": uniformly more lenient, by {ahead.min():.1f} to {ahead.max():.1f} points"
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
        family = analysis.model_family(_name(json.loads(shared[models[0]][index].judge_key)))
        own = np.array([analysis.model_family(_name(json.loads(shared[m][0].model_key))) == family for m in models])
        if own.any() and (~own).any():
            expected = analysis.expected_offsets(first_scores[~own], difference[~own], first_scores[own])
            offset = sign * float(np.mean(difference[own] - expected))
            lines.append(
                f"Self-preference of {judge} (family {family}): {offset:+.1f} points on its own family's "
                f"{int(own.sum())} candidate(s) beyond the offset expected from the other "
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
    shown = data.assign(**{c: data[c].map(lambda v: f"{v:+.1f}") for c in ("mean offset", "min", "max")})
    return Table("judge-leniency", "Leniency: each judge's offset from the judges' mean score, per model", shown, data)


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
        rows_shown, rows_data = [], []
        for model in models:
            mm, to = by_cell[(judge, model, "multimodal")], by_cell[(judge, model, "text_only")]
            gain = _paired(to, mm, bootstrap)
            rows_shown.append(
                {
                    "model": model,
                    "multimodal": str(summary[id(mm)]["gamut"]),
                    "text-only": str(summary[id(to)]["gamut"]),
                    "gain": str(gain.difference),
                    "p": _p(gain.p_value, bootstrap.resamples),
                }
            )
            rows_data.append(
                {
                    "model": model,
                    "judge": judge,
                    "multimodal": summary[id(mm)]["gamut"].value,
                    "text_only": summary[id(to)]["gamut"].value,
                    **_interval_columns("gain", gain.difference),
                    "p_value": gain.p_value,
                    "questions_paired": gain.questions,
                }
            )
        data = pd.DataFrame(rows_data).sort_values("multimodal", ascending=False)
        shown = pd.DataFrame(rows_shown).set_index("model").loc[data["model"]].reset_index()
        slug = _slug("variants", judge)
        section.blocks.append(Table(slug, f"Text-only against multimodal, judge {judge}", shown, data))
        ranks = analysis.rank_agreement(data["multimodal"], data["text_only"])
        r, p = analysis.correlation(data["gain"], data["multimodal"])
        gains = data["gain"].to_numpy()
        section.blocks.append(
            [
                f"Gain: mean {gains.mean():+.1f} points, from {gains.min():+.1f} to {gains.max():+.1f}; "
                f"{int((gains > 0).sum())} of {len(gains)} models score higher without the image",
                f"Rank agreement of the two variants over {ranks.models} models: Kendall tau {_fmt(ranks.kendall_tau, 2)}, "
                f"Spearman rho {_fmt(ranks.spearman_rho, 2)}",
                f"Correlation of gain with the multimodal score: Pearson r {_fmt(r, 2)}"
                + (f" (p={p:.3f})" if p is not None else " (undefined: fewer than 3 models or no spread)"),
            ]
        )
        section.blocks.append(
            _figure(
                slug,
                f"Text-only gain against the multimodal score, judge {judge}",
                figures.gain_plot(data["multimodal"], gains, data["model"].tolist(), f"Text-only gain, judge {judge}"),
            )
        )
    return section


def breakdown_section(groups: list[Group], top: int) -> Section:
    section = Section("Breakdowns")
    section.blocks.append(
        "Per leaderboard: the Gamut score on each domain's questions; verdict shares per tier; the pooled score "
        "(the tier formula over all checks of the kind, 0-100) per item type and per check kind; and the questions "
        "with the most missing and contradicted checks across the models."
    )
    for group in groups:
        models = [r.model for r in group.runs]
        by_domain = pd.DataFrame(
            {r.model: 100 * r.questions.groupby("domain", sort=True)["score"].mean() for r in group.runs}
        ).T
        counts = group.runs[0].questions.groupby("domain").size()
        shown = (
            by_domain.map(_fmt).rename(columns=lambda d, n=counts: f"{d} ({n.get(d, 0)})").reset_index(names="model")
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
            _figure(
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
                shown = shown.assign(**{c: shown[c].map(_fmt) for c in VERDICT_LABELS.values()})
            else:
                shown = pooled.pivot(index="model", columns=by, values="score").loc[models].map(_fmt).reset_index()
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
            "% missing": worst["missing"].map(_fmt),
            "% contra": worst["contradicts"].map(_fmt),
            "mean Gamut": worst["score"].map(_fmt),
        }
    )
    return Table(
        f"hardest-{group.slug}",
        f"Questions with the most missing and contradicted checks (mean over {len(group.runs)} models): {group.title}",
        shown,
        worst,
    )


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
            f"p<{SIGNIFICANCE}; intervals are +/-{_fmt(float(np.nanmean(widths)))} points on average against "
            f"a spread of {spread:.1f} points"
        )
    for group in groups:
        shares = [
            (r.model, group.summaries[id(r)]["missing"].value, group.summaries[id(r)]["contradicts"].value)
            for r in group.runs
        ]
        dominated = sum(m > c for _, m, c in shares)
        lines.append(
            f"Omission over contradiction ({group.title}): missing exceeds contradicts for {dominated} of "
            f"{len(shares)} models (mean {np.mean([m for _, m, _ in shares]):.1f}% missing against "
            f"{np.mean([c for _, _, c in shares]):.1f}% contradicts)"
        )
    for key, name in (("judges", "Judge robustness"), ("variants", "Text-only gain")):
        if sections[key].omitted:
            lines.append(f"{name}: not testable here ({sections[key].omitted})")
        else:
            lines.append(f"{name}: see the section '{sections[key].title}' below")
    section.blocks.append(lines)
    return section


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
            _figure(
                f"audit-confusion-{_slug(label, audit.folder.name)}",
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


def runs_section(runs: list[Run]) -> Section:
    section = Section("Runs")
    rows = [
        {
            "run": str(r.folder),
            "model": r.model,
            "judge": r.judge,
            "variant": r.variant,
            "dataset": str(r.results.dataset.get("source")),
            "questions": r.results.score.questions,
            "checks": r.results.score.checks,
            "judge errors": r.results.judge_errors,
            "status": r.excluded
            or ("scored, errors counted as missing" if r.results.score.errors_counted_as_missing else "scored"),
        }
        for r in runs
    ]
    frame = pd.DataFrame(rows)
    section.blocks.append(Table("runs", "Runs read", frame, frame))
    return section


# -- the report ------------------------------------------------------------------------------


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


def build_report(
    folders: Sequence[str | Path],
    bootstrap: Bootstrap = Bootstrap(),
    top: int = 10,
    audits: Sequence[FoundAudit] | None = None,
) -> Report:
    """The report of these run folders; ``audits`` default to those in the folders' results folders."""
    runs = [load_run(folder) for folder in folders]
    if audits is None:
        audits = find_audits(list(dict.fromkeys(Path(folder).resolve().parent for folder in folders)))
    label_runs(runs)
    repeated = repeated_runs(runs)
    if repeated:
        raise InputError(repeated_run_line(repeated[0]))
    scored = [r for r in runs if r.scored]
    sections = {"runs": runs_section(runs), "audit": audit_section(runs, audits)}
    if not scored:
        for key, title in (
            ("leaderboard", "Leaderboard"),
            ("judges", "Judge robustness"),
            ("variants", "Text-only against multimodal"),
            ("breakdowns", "Breakdowns"),
        ):
            sections[key] = Section(title, omitted="no run has a score")
        return _report(sections, runs)
    groups = _groups(scored, bootstrap)
    sections["leaderboard"] = leaderboard_section(groups, bootstrap)
    sections["judges"] = judge_section(scored, groups, bootstrap)
    sections["variants"] = variant_section(scored, groups, bootstrap)
    sections["breakdowns"] = breakdown_section(groups, top)
    sections["claims"] = claims_section(groups, sections)
    return _report(sections, runs)


def _report(sections: dict[str, Section], runs: list[Run]) -> Report:
    for key, section in sections.items():
        section.key = key
    return Report([sections[key] for key in SECTION_ORDER if key in sections], runs)


# -- writing ---------------------------------------------------------------------------------


def _md_cell(value: object) -> str:
    return html.escape(str(value), quote=False).replace("|", "\\|").replace("\n", " ")


def _contents(report: Report) -> list[str]:
    lines = ["Sections in this report: " + ", ".join(s.title for s in report.included) + "."]
    lines += [f"Left out: {s.title}: {s.omitted}." for s in report.sections if s.omitted]
    return lines


def render_markdown(report: Report) -> str:
    out = ["# GAMUT report", ""]
    out += [f"- {_md_cell(line)}" for line in _contents(report)] + [""]
    for section in report.included:
        out += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                out += [_md_cell(block), ""]
            elif isinstance(block, list):
                out += [f"- {_md_cell(line)}" for line in block] + [""]
            elif isinstance(block, Table):
                shown = block.shown.map(_md_cell).rename(columns=_md_cell)
                out += [
                    f"**{_md_cell(block.title)}** ([csv](tables/{block.name}.csv))",
                    "",
                    shown.to_markdown(index=False, disable_numparse=True),
                    "",
                ]
            else:
                out += [f"![{_md_cell(block.caption)}](figures/{block.name}.png)", ""]
    return "\n".join(out)


STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#212121}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.85em}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:left}th{background:#f0f0f0}img{max-width:100%}h2{border-bottom:1px solid #ddd;padding-bottom:4px}
.omitted{color:#6d4c41}"""


def render_html(report: Report) -> str:
    out = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'><title>GAMUT report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>GAMUT report</h1>",
        "<ul>",
    ]
    out += [f"<li>{html.escape(line)}</li>" for line in _contents(report)] + ["</ul>"]
    for section in report.included:
        out.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, str):
                out.append(f"<p>{html.escape(block)}</p>")
            elif isinstance(block, list):
                out.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in block) + "</ul>")
            elif isinstance(block, Table):
                out.append(f"<h3>{html.escape(block.title)}</h3>")
                out.append(block.shown.to_html(index=False, escape=True, border=0, na_rep=""))
            else:
                encoded = base64.b64encode(block.png).decode("ascii")
                out.append(
                    f"<figure><img alt='{html.escape(block.caption, quote=True)}' "
                    f"src='data:image/png;base64,{encoded}'><figcaption>{html.escape(block.caption)}"
                    f"</figcaption></figure>"
                )
    out.append("</body></html>")
    return "\n".join(out)


def write_report(report: Report, out: str | Path) -> Path:
    """report.md, report.html, tables/*.csv and figures/*.png under ``out``, beside any other files.

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
                    owned.write_bytes(f"figures/{block.name}.png", block.png)
        owned.write_text("report.md", render_markdown(report) + "\n")
        owned.write_text("report.html", render_html(report) + "\n")
    return folder
