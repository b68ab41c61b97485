"""A panel of judges (`--judge` repeated): every member's verdicts stored, the panel's majority
scored, each member's own score and the members' agreement in results.json and the summary; a
member added later is the only one asked.

The judges are scripted API judges behind the fake endpoint (the hosted-API boundary): the strict
and the third judge draw the same verdicts, the lenient one raises missing to partially_meets and
partially_meets to meets, so the three agree on some checks and not on others.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from conftest import error_lines
from scripted_api import is_judging
from sklearn.metrics import cohen_kappa_score

from gamut_hf.evaluation.panel import panel_verdict

RUN = ("--limit", "2", "--variant", "text_only", "--max-tokens", "32")


@pytest.fixture
def endpoint(scripted_endpoint):
    return scripted_endpoint


def run_args(url: str, *judges: str) -> list[str]:
    args = ["--model", "good-model", "--backend", "openai", "--base-url", url, "--judge-backend", "openai"]
    args += ["--judge-base-url", url]
    for judge in judges:
        args += ["--judge", judge]
    return [*args, *RUN]


def asked(endpoint, judge: str) -> int:
    return sum(1 for body in endpoint.bodies if is_judging(body) and body["model"] == judge)


def test_a_panel_scores_its_majority_and_a_third_judge_is_the_only_one_asked(gamut, endpoint, tmp_path):
    out = tmp_path / "run"
    two = gamut("run", "--out", out, *run_args(endpoint.url, "strict-judge", "lenient-judge"), "--judge-price", "2/8")
    assert two.code == 0, two.err
    results = json.loads((out / "results.json").read_text())
    # Each judge at its own price over its own calls: the first at the price given, the second unlisted.
    assert results["usage"]["judge 1"]["calls"] == results["usage"]["judge 2"]["calls"] == results["score"]["checks"]
    assert set(results["cost"]) == {"judge 1"} and results["cost"]["judge 1"]["price"]["source"] == "--judge-price"
    assert "judge 2 not priced" in two.out
    checks = results["score"]["checks"]
    assert asked(endpoint, "strict-judge") == asked(endpoint, "lenient-judge") == checks
    assert results["judge"]["model"] == "panel of strict-judge, lenient-judge"
    rows = pq.read_table(out / "details.parquet").to_pylist()
    assert all(
        len(row["panel_verdicts"]) == 2 and row["verdict"] == panel_verdict(row["panel_verdicts"]) for row in rows
    )
    members = results["panel"]["members"]
    assert [m["judge"]["model"] for m in members] == ["strict-judge", "lenient-judge"]
    assert members[1]["gamut"] > members[0]["gamut"]  # the lenient judge alone scores higher
    strict, lenient = zip(*(row["panel_verdicts"] for row in rows), strict=True)
    [pair] = results["panel"]["pairwise_kappa"]
    assert pair["kappa"] == pytest.approx(cohen_kappa_score(strict, lenient))
    assert "panel of 2 judges, each alone" in two.out and "Krippendorff's alpha" in two.out

    # A third judge: its dry run plans its checks only, priced from the list (gpt-4o is listed).
    planned = gamut(
        "run", "--out", out, *run_args(endpoint.url, "strict-judge", "lenient-judge", "gpt-4o"), "--dry-run"
    )
    assert planned.code == 0, planned.err
    rows = {
        line.split()[0] + " " + line.split()[1]: line.split()
        for line in planned.out.splitlines()
        if line.startswith("judge ")
    }
    assert rows["judge 1"][2] == rows["judge 2"][2] == "0" and rows["judge 3"][2] == str(checks)  # requests
    assert rows["judge 3"][-1].startswith("$") and rows["judge 2"][-1] == "-"
    # A third judge: only it is asked; the two stored members' verdicts stand.
    three = gamut("run", "--out", out, *run_args(endpoint.url, "strict-judge", "lenient-judge", "third-judge"))
    assert three.code == 0, three.err
    assert (
        asked(endpoint, "strict-judge") == asked(endpoint, "lenient-judge") == asked(endpoint, "third-judge") == checks
    )
    again = json.loads((out / "results.json").read_text())
    assert len(again["panel"]["members"]) == 3 and len(again["panel"]["pairwise_kappa"]) == 3
    rows = pq.read_table(out / "details.parquet").to_pylist()
    # strict and third draw alike: with three judges, the majority is theirs wherever they agree.
    assert all(
        row["verdict"] == row["panel_verdicts"][0]
        for row in rows
        if row["panel_verdicts"][0] == row["panel_verdicts"][2]
    )
    # A rerun without --judge keeps the panel (named as taken from the run) and asks nothing.
    rerun = gamut("run", "--out", out)
    assert rerun.code == 0, rerun.err
    assert "--judge lenient-judge (openai) --judge third-judge (openai)" in rerun.err
    assert asked(endpoint, "third-judge") == checks
    assert json.loads((out / "results.json").read_text())["score"] == again["score"]

    # The report and the Space name the panel as the run's judge.
    panel = "panel of strict-judge, lenient-judge, third-judge"
    reported = gamut("report", out, "--out", tmp_path / "report")
    assert reported.code == 0, reported.err
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert panel in markdown and "Judge panel of good-model: each judge alone" in markdown
    alpha = again["panel"]["krippendorff_alpha"]
    assert f"Krippendorff's alpha {alpha:.3f}" in markdown
    from gamut_hf.leaderboard.space import SpaceConfig, SpaceData

    data = SpaceData(SpaceConfig(results=tmp_path, requests=tmp_path / "requests", dataset=None, login=False))
    assert list(data.board["judge"]) == [panel]
    note = data.audit_note(panel)
    assert note.startswith("**A panel of judges**") and f"Krippendorff's alpha {alpha:.3f}" in note
    for member in again["panel"]["members"]:
        assert f"{member['judge']['model']} {member['gamut']:.1f}" in note


@pytest.mark.parametrize(
    ("votes", "verdict"),
    [
        (["meets", "meets", "missing"], "meets"),
        (["meets", "missing", "contradicts"], "missing"),  # no majority: the median
        (["meets", "missing"], "missing"),  # a tie of two: the less favourable middle
        (["meets", "partially_meets", "partially_meets", "meets"], "partially_meets"),
        (["error", "contradicts", "meets", "meets"], "meets"),  # an unreadable vote is left out
        (["error", "error"], "error"),
    ],
)
def test_the_panels_verdict_is_the_majority_and_a_tie_the_lower_median(votes, verdict):
    assert panel_verdict(votes) == verdict


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--judge", "a", "--judge", "a"], "--judge a (openai) is given twice"),
        (
            ["--judge", "a", "--judge", "b", *["--judge-backend", "openai"] * 3],
            "--judge-backend given 3 times for 2 judges",
        ),
        (["--judge", "a", "--judge", "b", "--judge-option", "3:timeout=5"], "there is no judge 3"),
        (
            ["--judge", "a", "--judge", "b", "--escalate-below", "0.5", "--escalate-judge", "c"],
            "--escalate-below takes one judge, not a panel",
        ),
    ],
)  # fmt: skip
def test_a_bad_panel_is_one_line_before_anything_runs(gamut, tmp_path, extra, message):
    out = tmp_path / "run"
    backend = [] if "--judge-backend" in extra else ["--judge-backend", "openai"]
    refused = gamut("run", "--out", out, "--judge-base-url", "http://127.0.0.1:9/v1", *backend, *extra, *RUN)
    assert refused.code == 2, refused.err
    *said, line = error_lines(refused.err)
    assert line.startswith("gamut: ") and message in line, refused.err
    assert not out.exists()


def audit_panel(gamut, url: str, out):
    judges = ["--judge", "strict-judge", "--judge", "lenient-judge", "--judge", "third-judge"]
    return gamut(
        "judge-audit", *judges, "--judge-backend", "openai", "--judge-base-url", url, "--limit", "1", "--out", out
    )


def test_a_panels_audit_measures_its_majority_with_each_members_figures_beside(gamut, endpoint, tmp_path):
    out = tmp_path / "audit"
    done = audit_panel(gamut, endpoint.url, out)
    assert done.code == 0, done.err
    audit = json.loads((out / "audit.json").read_text())
    assert audit["judge"]["model"] == "panel of strict-judge, lenient-judge, third-judge"
    members = {m["judge"]["model"]: m for m in audit["members"]}
    assert set(members) == {"strict-judge", "lenient-judge", "third-judge"}
    assert all(m["judged"] == audit["judged"] for m in members.values())
    # strict and third draw alike, so the panel's majority is theirs: its accuracy is theirs.
    assert audit["accuracy"] == pytest.approx(members["strict-judge"]["accuracy"])
    assert members["strict-judge"]["accuracy"] == pytest.approx(members["third-judge"]["accuracy"])
    assert "member lenient-judge (openai): accuracy" in done.out
    # A judge of the panel asked again is not: its verdicts are in the audit's store.
    before = asked(endpoint, "strict-judge")
    again = audit_panel(gamut, endpoint.url, out)
    assert again.code == 0, again.err
    assert asked(endpoint, "strict-judge") == before


def test_run_audit_takes_one_judge_not_a_panel(gamut, tmp_path):
    refused = gamut(
        "run", "--out", tmp_path / "run", "--judge", "a", "--judge", "b", "--judge-backend", "openai",
        "--judge-base-url", "http://127.0.0.1:9/v1", "--audit", *RUN,
    )  # fmt: skip
    assert refused.code == 2 and "audit a panel with `gamut judge-audit" in error_lines(refused.err)[-1]
