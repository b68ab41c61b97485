"""`gamut report`: statistics, sections, files, and the validation against the paper.

Runs come from the real CLI: candidates and judges behind a scripted OpenAI-compatible
scripted_endpoint on 127.0.0.1 (hosted APIs are the boundary we fake), plus a real SmolLM2 judge on
the CPU. The validation at the paper's scale, and the report as pages and figures, are in
test_paper_report.py.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scripted_api import api_run, slug

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.core.scorer import score_question
from gamut_hf.dataset.loader import iter_questions, load_gamut
from gamut_hf.reports.statistics import (
    Bootstrap,
    model_family,
    question_table,
    rank_agreement,
    verdict_agreement,
)

HOSTILE = "<img src=x onerror=alert(1)>"


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory, scripted_endpoint):
    """Three candidates (one with a hostile name) x two judges x both variants, through the real CLI."""
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("runs")
    folders = []
    for model in ("good-model", "poor-model", HOSTILE):
        for judge in ("strict-judge", "lenient-judge"):
            for variant in ("multimodal", "text_only"):
                name = f"{slug(model)}-{judge}-{variant}"
                folders.append(api_run(run_gamut, root / name, scripted_endpoint.url, model, judge, variant))
    for judge in ("strict-judge", "lenient-judge"):  # each judge's audit beside its runs
        done = run_gamut(
            "judge-audit",
            "--judge",
            judge,
            "--judge-backend",
            "openai",
            "--judge-base-url",
            scripted_endpoint.url,
            "--limit",
            "1",
            "--out",
            root / f"judge-audit-{judge}",
        )
        assert done.code == 0, done.err
    return root, folders


def test_a_report_on_real_runs_has_every_section_and_agrees_with_the_runs(gamut, real_runs, tmp_path):
    root, folders = real_runs
    out = tmp_path / "report"
    done = gamut("report", root, "--out", out, "--resamples", "1000")
    assert done.code == 0, done.err
    assert "left out" not in done.out
    markdown = (out / "report.md").read_text(encoding="utf-8")
    for title in (
        "## Leaderboard",
        "## Judge robustness",
        "## Judge audit",
        "## Text-only against multimodal",
        "## Breakdowns",
        "## The paper's claims on these runs",
    ):
        assert title in markdown

    # Each leaderboard row is its run's own score, and the order is by score.
    for variant in ("multimodal", "text_only"):
        for judge in ("strict-judge", "lenient-judge"):
            rows = read_csv(out / "tables" / f"leaderboard-{slug(variant)}-{judge}.csv")
            assert [float(r["gamut"]) for r in rows] == sorted((float(r["gamut"]) for r in rows), reverse=True)
            for row in rows:
                results = json.loads((root / row["run"] / "results.json").read_text())  # named from root
                assert float(row["gamut"]) == pytest.approx(results["score"]["gamut"], abs=1e-9)
                assert float(row["gamut_low"]) <= float(row["gamut"]) <= float(row["gamut_high"])
                assert float(row["meets"]) == pytest.approx(100 * results["score"]["verdict_shares"]["meets"])
            assert rows[0]["model"] == "good-model"

    # The lenient judge is reported as such, on every candidate.
    leniency = {
        (r["variant"], r["judge"]): float(r["mean offset"]) for r in read_csv(out / "tables" / "judge-leniency.csv")
    }
    assert leniency[("multimodal", "lenient-judge")] > 0 > leniency[("multimodal", "strict-judge")]
    assert (
        "Mean offset: lenient-judge scores" in markdown
        and "higher on 3 of 3 models: uniformly more lenient" in markdown
    )
    [confusion_csv] = (out / "tables").glob("confusion-multimodal-*.csv")
    confusion = pd.read_csv(confusion_csv, index_col=0)
    if "strict-judge: meets" not in confusion.index:
        confusion = confusion.T
    assert confusion.loc["strict-judge: contradicts", "lenient-judge: contradicts"] > 0
    assert confusion.loc["strict-judge: meets", "lenient-judge: missing"] == 0  # never stricter

    # Dropping the image helps every candidate (the scripted judge is kinder without one).
    gains = read_csv(out / "tables" / "variants-strict-judge.csv")
    assert len(gains) == 3 and all(float(r["gain"]) > 0 for r in gains)

    # Breakdowns cover the sample's domains and every item type present.
    domains = read_csv(out / "tables" / "domains-multimodal-strict-judge.csv")
    sample = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))[:10]
    assert set(domains[0]) - {"model"} == {q.domain for q in sample}
    kinds = read_csv(out / "tables" / "kind-multimodal-strict-judge.csv")
    assert {"fact", "coverage"} <= {r["kind"] for r in kinds}
    assert read_csv(out / "tables" / "hardest-multimodal-strict-judge.csv")

    # The HTML stands alone, and a hostile model name is text, not markup.
    page = (out / "report.html").read_text(encoding="utf-8")
    assert HOSTILE not in page and html_escaped(HOSTILE) in page
    assert HOSTILE not in markdown
    assert re.findall(r"<img [^>]*src='([^']*)'", page) and all(
        src.startswith("data:image/svg+xml;base64,") for src in re.findall(r"<img [^>]*src='([^']*)'", page)
    )
    assert "http://" not in page and "https://" not in page
    for png in (out / "figures").glob("*.png"):
        with Image.open(png) as image:
            assert image.size[0] > 200


def html_escaped(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_a_report_on_one_run_says_which_sections_it_left_out_and_why(gamut, real_runs, tmp_path):
    _, folders = real_runs
    done = gamut("report", folders[0], "--out", tmp_path / "one")
    assert done.code == 0, done.err
    assert "left out Judge robustness: needs two judges grading the same candidate" in done.out
    assert "left out Text-only against multimodal: needs the same candidate and judge on both variants" in done.out
    markdown = (tmp_path / "one" / "report.md").read_text()
    assert "Left out: Judge robustness" in markdown and "## Leaderboard" in markdown


def test_a_real_model_judge_joins_the_report(gamut, real_runs, tmp_path):
    """SmolLM2 (transformers, CPU) judges the stored answers of one scripted run: a second, real judge."""
    _, folders = real_runs
    strict_run = next(f for f in folders if f.name == "good-model-strict-judge-text_only")
    real = tmp_path / "smollm-judge"
    import shutil

    shutil.copytree(strict_run, real)
    done = gamut("judge", "--out", real, "--judge", "smollm2-135m", "--judge-backend", "transformers", "--limit", "2")
    assert done.code == 0, done.err
    # Issue 24.15: the judge's audit, shipped with the package, beside its score, and a plain warning.
    assert "judge audit (shipped with gamut-hf, measured with `gamut judge-audit" in done.out
    assert "warning: this judge's verdicts agree with known right verdicts barely above chance" in done.out
    done = gamut("report", real, strict_run, "--out", tmp_path / "report", "--resamples", "1000")
    assert done.code == 0, done.err
    markdown = (tmp_path / "report" / "report.md").read_text()
    leaderboard = markdown.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert "**Warning: smollm2-135m**: this judge's verdicts agree with known right verdicts barely" in leaderboard
    assert "shipped (" in markdown.split("## Judge audit", 1)[1].split("\n## ", 1)[0]
    assert "## Judge robustness" in markdown and "judge smollm2-135m" in markdown
    # The real judge graded 2 questions, the scripted one 10: the comparison says so.
    assert "over different questions (2 and 10)" in markdown
    agreement = re.search(r"Per-check agreement over (\d+) checks", markdown)
    assert agreement and 0 < int(agreement.group(1)) < 60


def test_bad_report_inputs_are_one_line_errors_and_unscored_runs_are_excluded(gamut, real_runs, tmp_path):
    _, folders = real_runs
    empty = tmp_path / "empty"
    empty.mkdir()
    done = gamut("report", empty, "--out", tmp_path / "r")
    assert done.code == 2 and done.err.count("\n") == 1 and "not a run folder" in done.err

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text('{"model": 3}')
    done = gamut("report", broken, "--out", tmp_path / "r")
    assert done.code == 2 and "results.json" in done.err and "Traceback" not in done.err

    blocked = tmp_path / "blocked"
    import shutil

    shutil.copytree(folders[0], blocked)
    results = json.loads((blocked / "results.json").read_text())
    results["score"]["gamut"] = None
    results["judge_errors"] = 3
    (blocked / "results.json").write_text(json.dumps(results))
    done = gamut("report", blocked, folders[2], "--out", tmp_path / "r")
    assert done.code == 0, done.err
    assert f"excluded {blocked}: no score: 3 judge errors" in done.err
    assert "1 of 2 runs scored" in done.out

    done = gamut("report", folders[0], folders[0], "--out", tmp_path / "r")
    assert done.code == 0  # the same folder twice is read once
    twin = tmp_path / "twin"
    shutil.copytree(folders[0], twin)
    done = gamut("report", folders[0], twin, "--out", tmp_path / "r")
    assert done.code == 2 and "a second run of" in done.err


# -- the statistics on their own -----------------------------------------------------------


def test_question_table_scores_every_question_as_the_scorer_does():
    questions = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))
    rng = np.random.default_rng(3)
    rows, expected = [], {}
    for q in questions:
        verdicts = {c.id: VERDICTS[rng.integers(4)] for c in q.checks}
        expected[q.id] = score_question(q.checks, verdicts)
        rows += [{"question_id": q.id, "domain": q.domain, "tier": c.tier, "verdict": verdicts[c.id]} for c in q.checks]
    table = question_table(pd.DataFrame(rows))
    assert list(table.index) == [q.id for q in questions]
    for qid, score in expected.items():
        assert table.loc[qid, "score"] == pytest.approx(score.score, abs=1e-12)
        for tier, value in score.tiers.items():
            assert np.isnan(table.loc[qid, tier]) if value is None else table.loc[qid, tier] == pytest.approx(value)


def test_bootstrap_intervals_are_seeded_and_paired_tests_see_real_differences():
    rng = np.random.default_rng(0)
    a = rng.normal(0.5, 0.3, 400)
    boot = Bootstrap(resamples=1000, seed=7)
    first = boot.intervals([a], lambda x, axis=-1: np.mean(x, axis=axis))[0]
    assert first == boot.intervals([a], lambda x, axis=-1: np.mean(x, axis=axis))[0]
    assert first.low < first.value < first.high
    assert boot.paired_difference(a + 0.05, a + rng.normal(0, 0.01, 400)).p_value < 0.01
    same = boot.paired_difference(a, a[rng.permutation(400)] * 0 + a)
    assert same.p_value == 1.0 and same.difference.value == 0


def test_agreement_statistics():
    perfect = verdict_agreement(["meets", "missing", "contradicts"] * 5, ["meets", "missing", "contradicts"] * 5)
    assert perfect.kappa == pytest.approx(1.0) and perfect.agreement == 1.0
    assert verdict_agreement(["missing"] * 6, ["missing"] * 6).kappa is None  # one verdict everywhere
    assert rank_agreement([3, 2, 1], [30, 20, 10]).kendall_tau == pytest.approx(1.0)
    assert rank_agreement([1, 2], [2, 1]).kendall_tau is None
    assert [
        model_family(n)
        for n in ("Qwen/Qwen3-VL-8B-Instruct", "GPT-5.4", "o3", "claude-opus-4-8", "Llama 4 Scout", "smollm2-135m")
    ] == ["qwen", "gpt", "gpt", "claude", "llama", "smollm"]


def test_a_report_writes_beside_a_users_files_and_a_rerun_removes_only_its_own_stale_outputs(gamut, tmp_path):
    """Issue 23: `report --out paper/` never deletes the user's files; a rerun replaces exactly its own."""
    runs, paper = tmp_path / "sim", tmp_path / "paper"
    assert gamut("simulate", runs, "--questions", "10", "--no-text-only").code == 0
    (paper / "tables").mkdir(parents=True)
    (paper / "tables" / "my-data.csv").write_text("x,y\n1,2\n")
    done = gamut("report", runs, "--out", paper, "--resamples", "1000")
    assert done.code == 0, done.err
    manifest = json.loads((paper / ".gamut-manifest.json").read_text())
    first = set(manifest["files"])
    assert manifest["command"] == "report" and {"report.md", "report.html"} <= first
    assert "tables/my-data.csv" not in first and any(name.startswith("figures/") for name in first)
    assert all((paper / name).is_file() for name in first)

    (paper / "notes.txt").write_text("my notes")
    one_run = sorted(p.parent for p in runs.rglob("results.json"))[0]
    done = gamut("report", one_run, "--out", paper, "--resamples", "1000")  # fewer runs: fewer tables and figures
    assert done.code == 0, done.err
    second = set(json.loads((paper / ".gamut-manifest.json").read_text())["files"])
    assert first - second  # the judges' comparisons and the like are not made for one run
    assert not [name for name in first - second if (paper / name).exists()]  # its stale outputs are gone
    assert all((paper / name).is_file() for name in second)
    assert (paper / "tables" / "my-data.csv").read_text() == "x,y\n1,2\n"
    assert (paper / "notes.txt").read_text() == "my notes"
    on_disk = {p.relative_to(paper).as_posix() for p in paper.rglob("*") if p.is_file()}
    assert on_disk == second | {".gamut-manifest.json", "tables/my-data.csv", "notes.txt"}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".paper")]
