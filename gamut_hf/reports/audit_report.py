"""The judge audit's page: audit.md, the confusion figure and the summary lines of
`gamut judge-audit` (the figures themselves are measured in :mod:`gamut_hf.evaluation.audit`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.evaluation.audit import (
    AUDIT_MD,
    CONFUSION_PNG,
    AuditResults,
    InjectionFigures,
    save_audit_results,
)
from gamut_hf.reports.figures import plt


def render_markdown(results: AuditResults) -> str:
    """audit.md."""
    judge = results.judge
    lines = [
        f"# Judge audit: {judge.get('model')} ({judge.get('backend')})",
        "",
        f"Labels: {results.labels} ({results.responses} responses, {results.checks} checks); prompt "
        f"{results.prompt_version}, {'rationale then verdict' if results.rationale else 'verdict only'}.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| accuracy | {results.shown('accuracy', '.1%')} |",
        f"| Cohen's kappa | {results.shown('kappa', '.3f')} |",
        f"| question score, mean absolute error | {results.shown('question_score_mae', '.3f')} |",
        f"| Gamut score, mean absolute error over the response sets | {results.shown('gamut_mae', '.1f', ' points')} |",
    ]
    if results.injection is not None:
        lines += [
            f"| injection flip rate | {_flip_rate(results, 'injection', results.injection)} |",
            "| injected checks judged meets where gold is not | "
            f"{results.shown('injection.false_meets_rate', '.1%')} "
            f"(base responses: {results.shown('injection.base_false_meets_rate', '.1%')}) |",
        ]
    lines += [
        f"| unreadable verdicts (errors) | {results.errors} |",
        f"| not judged yet | {results.unfinished} |",
        "",
        "## Confusion matrix (rows: gold, columns: judged)",
        "",
        "| gold \\ judged | " + " | ".join([*VERDICTS, "error"]) + " |",
        "|---" * (len(VERDICTS) + 2) + "|",
    ]
    lines += [
        f"| {g} | " + " | ".join(str(results.confusion[g][j]) for j in [*VERDICTS, "error"]) + " |" for g in VERDICTS
    ]
    lines += ["", "## Per verdict", "", "| verdict | precision | recall | gold checks |", "|---|---|---|---|"]
    lines += [
        f"| {v} | {results.shown(f'per_verdict.{v}.precision', '.1%')} | "
        f"{results.shown(f'per_verdict.{v}.recall', '.1%')} | {q.support} |"
        for v, q in results.per_verdict.items()
    ]
    lines += ["", "## Gamut score per response set", "", "| set | responses | gold | judged |", "|---|---|---|---|"]
    lines += [
        f"| {name} | {s.responses} | {s.gold_gamut:.1f} | {s.judged_gamut:.1f} |" for name, s in results.sets.items()
    ]
    if results.injection_by_kind:
        lines += [
            "",
            "## Injections",
            "",
            "| kind | twins | checks | left out (unreadable) | flip rate | judged meets where gold is not |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {kind} | {f.twins} | {f.checks} | {f.unreadable} | "
            f"{results.shown(f'injection_by_kind.{kind}.flip_rate', '.1%')} | "
            f"{results.shown(f'injection_by_kind.{kind}.false_meets_rate', '.1%')} |"
            for kind, f in results.injection_by_kind.items()
        ]
    lines += ["", "## By style", "", "| style | checks | accuracy | kappa |", "|---|---|---|---|"]
    lines += [
        f"| {style} | {f.checks} | {f.accuracy:.1%} | {results.shown(f'by_style.{style}.kappa', '.3f')} |"
        for style, f in results.by_style.items()
    ]
    lines += ["", f"![confusion matrix]({CONFUSION_PNG})", ""]
    return "\n".join(lines)


def confusion_figure(results: AuditResults):
    import numpy as np

    columns = [*VERDICTS, "error"]
    values = np.array([[results.confusion[g][j] for j in columns] for g in VERDICTS], dtype=float)
    rows = values.sum(axis=1, keepdims=True)
    shares = np.divide(values, rows, out=np.zeros_like(values), where=rows > 0)
    figure, axes = plt.subplots(figsize=(6.5, 4.2))
    image = axes.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    axes.set_xticks(range(len(columns)), [c.replace("_", " ") for c in columns], rotation=30, ha="right")
    axes.set_yticks(range(len(VERDICTS)), [v.replace("_", " ") for v in VERDICTS])
    for (row, column), value in np.ndenumerate(values):
        axes.text(
            column,
            row,
            f"{int(value)}",
            ha="center",
            va="center",
            fontsize="small",
            color="white" if shares[row, column] > 0.6 else "black",
        )
    axes.set_xlabel("judged")
    axes.set_ylabel("gold")
    axes.set_title(f"{results.judge.get('model')}: kappa {'n/a' if results.kappa is None else f'{results.kappa:.2f}'}")
    figure.colorbar(image, ax=axes, label="share of the gold row")
    figure.tight_layout()
    return figure


def write_audit_report(results: AuditResults, out: Path) -> None:
    """audit-confusion.png, audit.md, then audit.json into ``out``."""
    import io

    from gamut_hf.atomic import write_bytes, write_text

    figure = confusion_figure(results)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    write_bytes(out / CONFUSION_PNG, buffer.getvalue())
    write_text(out / AUDIT_MD, render_markdown(results) + "\n")
    save_audit_results(results, out)  # last: its presence means complete


def summary_lines(results: AuditResults) -> Sequence[str]:
    injection = results.injection
    lines = [
        f"judge audit: accuracy {results.shown('accuracy', '.1%')}, kappa {results.shown('kappa', '.3f')} over "
        f"{results.judged} checks ({results.errors} unreadable, {results.unfinished} not judged)",
        f"  question score MAE {results.shown('question_score_mae', '.3f')}, "
        f"Gamut MAE {results.shown('gamut_mae', '.1f', ' points')}",
    ]
    if injection is not None:
        lines.append(
            f"  injection flip rate {_flip_rate(results, 'injection', injection)}, "
            f"injected non-meets judged meets {results.shown('injection.false_meets_rate', '.1%')} "
            f"(base {results.shown('injection.base_false_meets_rate', '.1%')})"
        )
    for member in results.members:  # a panel's audit: each judge's own figures beside the panel's
        kappa = "n/a" if member.kappa is None else f"{member.kappa:.3f}"
        lines.append(
            f"  member {member.judge.get('model')} ({member.judge.get('backend')}): accuracy "
            f"{member.accuracy:.1%}, kappa {kappa} over {member.judged} checks ({member.errors} unreadable)"
        )
    return lines


def _flip_rate(results: AuditResults, figure: str, injection: InjectionFigures) -> str:
    """The flip rate and the checks it is over; an undefined one's reason already counts them."""
    shown = results.shown(f"{figure}.flip_rate", ".1%")
    if injection.flip_rate is None:
        return shown
    left_out = f", {injection.unreadable} with an unreadable verdict left out" if injection.unreadable else ""
    return f"{shown} of {injection.checks} checks{left_out}"
