"""The Space never goes blank (issue 23 items 5 and 18, and the Space half of the fault injection).

Every kind of damaged entry in the results folder and every bad request file is listed with its
reason while the good runs keep serving, through the running server's HTTP API; two runs of one
model, judge and variant no longer empty the Analysis tab; a --results that names no folder of
result folders is refused at start. Run folders come from the real CLI with the candidate and
judge behind the scripted endpoint.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from scripted_api import api_run
from space_support import launch

from gamut_hf.cli import main
from gamut_hf.leaderboard.space import SpaceConfig, SpaceData

QUESTIONS = 25  # the sample's questions: a run over all of them is complete and ranked
TYPES = ["open", "proprietary", "unknown"]
SIZES = ["under 10B", "10B to 100B", "over 100B", "unknown"]
GOOD = ("good-model-multimodal", "poor-model-multimodal")


@pytest.fixture(scope="module")
def made(tmp_path_factory, scripted_endpoint):
    """Two complete runs under one judge, a partial run of the first model, and the judge's audit."""
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("made")
    for key in GOOD:
        api_run(
            run_gamut,
            root / key,
            scripted_endpoint.url,
            key.split("-multimodal")[0],
            "strict-judge",
            "multimodal",
            QUESTIONS,
        )
    api_run(run_gamut, root / "good-model-shard", scripted_endpoint.url, "good-model", "strict-judge", "multimodal", 3)
    done = run_gamut(
        "judge-audit",
        "--judge",
        "strict-judge",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        scripted_endpoint.url,
        "--limit",
        "2",
        "--out",
        root / "judge-audit-strict",
    )
    assert done.code == 0, done.err
    return root


def result_folder(made: Path, results: Path, name: str, source: str = GOOD[0]) -> Path:
    """A copy of a made run (without its store: a leaderboard folder has none)."""
    folder = results / name
    shutil.copytree(made / source, folder, ignore=shutil.ignore_patterns("store.sqlite*"))
    return folder


def rows(frame: dict) -> list[dict]:
    return [dict(zip(frame["headers"], row, strict=False)) for row in frame["data"]]


def refreshed(client):
    """/refresh as the Refresh button calls it: (ranked rows, the audit note, the not-loaded note)."""
    ranked, _, audit_note, _, _, note = client.predict(
        TYPES, "multimodal", "strict-judge", SIZES, ["Gamut"], api_name="/refresh"
    )
    return rows(ranked), audit_note, note


def test_every_damaged_entry_is_listed_and_the_good_runs_keep_serving(made, tmp_path):
    from gradio_client import Client

    results, requests = tmp_path / "results", tmp_path / "requests"
    for key in GOOD:
        result_folder(made, results, key, key)
    shutil.copytree(made / "judge-audit-strict", results / "judge-audit-strict")

    (result_folder(made, results, "no-responses") / "responses.parquet").unlink()
    with (result_folder(made, results, "edited-responses") / "responses.parquet").open("ab") as handle:
        handle.write(b"\0")
    fifo = result_folder(made, results, "fifo-details") / "details.parquet"
    fifo.unlink()
    os.mkfifo(fifo)  # read, it would block the refresh forever
    (result_folder(made, results, "not-json") / "results.json").write_text("{not json", encoding="utf-8")
    twice = result_folder(made, results, "duplicate-keys") / "results.json"
    twice.write_text('{"variant": "text_only", ' + twice.read_text(encoding="utf-8")[1:], encoding="utf-8")
    audit = results / "judge-audit-nulls"
    shutil.copytree(made / "judge-audit-strict", audit)
    figures = json.loads((audit / "audit.json").read_text(encoding="utf-8"))
    figures.update(kappa=None, accuracy=None, gamut_mae=None, question_score_mae=None)
    (audit / "audit.json").write_text(json.dumps(figures), encoding="utf-8")
    (results / "empty").mkdir()
    (results / "stray.json").write_text("{}", encoding="utf-8")
    (results / "linked").symlink_to(result_folder(made, tmp_path / "elsewhere", "outside"), target_is_directory=True)

    requests.mkdir()
    (requests / "hello.json").write_text('{"hello":1}', encoding="utf-8")
    (requests / "truncated.json").write_text('{"key": "truncated", "model": {"name": "acme', encoding="utf-8")

    app, url = launch(SpaceConfig(results=results, requests=requests, dataset="gamut-sample", login=False))
    try:
        client = Client(url, verbose=False)
        ranked, audit_note, note = refreshed(client)
        assert [r["model"] for r in ranked] == ["good-model", "poor-model"]
        listed = dict(line[2:].split(": ", 1) for line in note.splitlines()[1:])
        reasons = {
            "`no-responses`": "RunFolderError: no-responses: responses.parquet is missing; rewrite the folder",
            "`edited-responses`": "RunFolderError: edited-responses: responses.parquet is not the one results.json",
            "`fifo-details`": "RunFolderError: details.parquet: is not a regular file (a device, FIFO",
            "`not-json`": "RunFolderError: results.json: not valid JSON (",
            "`duplicate-keys`": "RunFolderError: results.json: duplicate key 'variant' at line ",
            "`empty`": "RunFolderError: empty: not a run folder (no results.json)",
            "`stray.json`": "InputError: stray.json: not a folder",
            "`linked`": "InputError: linked: a link, not a folder; the Space reads only folders inside",
        }
        for name, reason in reasons.items():
            assert listed.get(name, "").startswith(reason), (name, note)
        # The audit with null figures: shown with its figures, or listed with why they cannot be read.
        assert "`judge-audit-nulls`" in audit_note or listed.get("`judge-audit-nulls`")
        assert "Judge audit of strict-judge" in audit_note and "`judge-audit-strict`" in audit_note
        assert str(tmp_path) not in note + audit_note  # the server's paths are nobody's business

        for key in GOOD:  # the failure browser serves both good runs
            table, count = client.predict([key], "any", "any", "any", "any", api_name="/questions")
            assert rows(table) and "questions match" in count
        question = rows(table)[0]["question"]
        image, header, left, right = client.predict(question, list(GOOD), api_name="/question")
        assert "Answer by good-model" in left and "Answer by poor-model" in right

        queue = rows(client.predict(api_name="/queue"))
        assert [(r["model"], r["status"]) for r in queue] == [
            ("hello.json", "UNREADABLE"),
            ("truncated.json", "UNREADABLE"),
        ]
        assert queue[0]["reason"].startswith("key: Field required")
        assert "JSON" in queue[1]["reason"]  # whatever the JSON parser says of a cut file

        assert client.predict(api_name="/analysis")[0].startswith("Analysis of the runs")

        # Another damaged folder appears while the Space runs: a card that is no JSON object
        # (read outside the per-folder guard, it failed every /refresh from then on).
        (result_folder(made, results, "list-card") / "model.json").write_text("[1, 2]", encoding="utf-8")
        ranked, _, note = refreshed(client)
        assert [r["model"] for r in ranked] == ["good-model", "poor-model"]
        assert "- `list-card`: InputError: model.json: expected a JSON object (the model's card), found list" in note
        assert all(name in note for name in reasons)
    finally:
        app.close()


def test_an_unreadable_folder_is_listed_as_not_loaded(made, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads a folder whatever its permissions")
    results = tmp_path / "results"
    result_folder(made, results, GOOD[0])
    locked = result_folder(made, results, "locked")
    locked.chmod(0)
    try:
        data = SpaceData(SpaceConfig(results=results, requests=tmp_path / "requests", dataset=None, resamples=10))
        assert [entry.key for entry in data.entries] == [GOOD[0]]
        assert data.not_loaded == {"locked": "InputError: locked: cannot be read (permission denied)"}
        locked.chmod(0o755)
        assert data.refresh() and sorted(entry.key for entry in data.entries) == [GOOD[0], "locked"]
    finally:
        locked.chmod(0o755)


def test_a_folder_left_out_is_read_again_only_once_it_changes(made, tmp_path, capsys):
    """Issue 23 item 5's aside: every refresh read every folder that had failed, and said so in
    the log again, although nothing had changed; fixing the folder brings it onto the board."""
    results = tmp_path / "results"
    result_folder(made, results, GOOD[0])
    missing = result_folder(made, results, "no-responses")
    (missing / "responses.parquet").unlink()
    data = SpaceData(SpaceConfig(results=results, requests=tmp_path / "requests", dataset=None, resamples=10))
    assert list(data.not_loaded) == ["no-responses"]
    assert capsys.readouterr().out.count("result folder no-responses not loaded") == 1
    assert not data.refresh() and not data.refresh()  # nothing changed: nothing read again
    assert capsys.readouterr().out == "" and list(data.not_loaded) == ["no-responses"]
    shutil.copy2(made / GOOD[0] / "responses.parquet", missing / "responses.parquet")
    assert data.refresh()
    assert sorted(entry.key for entry in data.entries) == [GOOD[0], "no-responses"] and data.not_loaded == {}


def test_the_analysis_shows_the_rest_and_names_second_runs(made, tmp_path):
    """Issue 23 item 5: a shard beside its merge, or a copied folder (same model, judge and
    variant), killed the analysis thread: the tab stayed empty. The run over the most questions is
    kept, the others are named in one line each, as `gamut report` names them."""
    from gradio_client import Client

    results = tmp_path / "results"
    for key in GOOD:
        result_folder(made, results, key, key)
    result_folder(made, results, "good-model-multimodal-copy")
    result_folder(made, results, "good-model-shard", "good-model-shard")
    app, url = launch(SpaceConfig(results=results, requests=tmp_path / "requests", dataset=None, login=False))
    try:
        note, *blocks = Client(url, verbose=False).predict(api_name="/analysis")
    finally:
        app.close()
    assert note.startswith("Analysis of the runs on the leaderboard")
    second = (
        "a second run of good-model judged by strict-judge (multimodal); report each combination once "
        "(merge shards with `gamut merge`)"
    )
    assert f"- `good-model-multimodal-copy`: {second}" in note.splitlines()
    assert f"- `good-model-shard`: {second}" in note.splitlines()
    assert "`good-model-multimodal`:" not in note and "`poor-model-multimodal`" not in note
    assert any(isinstance(block, str) and block.startswith("**Leaderboard**") for block in blocks)


def gamut(capsys, *args) -> tuple[int, list[str]]:
    """The `gamut` command's entry point: (exit status, its lines on standard error)."""
    code = main([str(arg) for arg in args])
    return code, capsys.readouterr().err.strip().splitlines()


def test_gamut_space_refuses_a_results_that_is_no_folder_of_runs(made, tmp_path, capsys, monkeypatch):
    """Issue 23 item 18: --results naming a file served an empty board and created ../requests
    beside it; naming a folder that does not exist served an empty board without a word."""
    import gradio

    def serve(*args, **kwargs):
        pytest.fail("gamut space started serving instead of refusing")

    monkeypatch.setattr(gradio.Blocks, "launch", serve)
    stray = tmp_path / "given" / "runs.txt"
    stray.parent.mkdir()
    stray.write_text("{}", encoding="utf-8")
    code, err = gamut(capsys, "space", "--results", stray)
    assert (code, err) == (2, [f"gamut: {stray}: not a folder; give --results the folder holding your result folders"])
    missing = tmp_path / "given" / "nowhere"
    code, err = gamut(capsys, "space", "--results", missing)
    assert (code, err) == (
        2,
        [f"gamut: {missing}: no such folder; give --results the folder holding your result folders"],
    )
    run = result_folder(made, tmp_path / "given", "a-run")
    code, err = gamut(capsys, "space", "--results", run)
    assert code == 2 and err == [
        f"gamut: {run}: a run folder itself; give --results the folder holding it ({run.parent})"
    ]
    queue = tmp_path / "queue-file"
    queue.write_text("", encoding="utf-8")
    code, err = gamut(capsys, "space", "--results", tmp_path / "given", "--requests", queue)
    assert (code, err) == (2, [f"gamut: {queue}: not a folder; give --requests a folder for the request files"])
    assert sorted(p.name for p in (tmp_path / "given").iterdir()) == ["a-run", "runs.txt"]  # nothing created
    assert not (tmp_path / "requests").exists() and queue.read_text() == ""


def test_a_results_json_with_a_key_twice_is_refused_naming_it(made, tmp_path, capsys):
    """json.loads kept the last of two equal keys, so a figure pasted in beside the written one
    was read without a word."""
    run = result_folder(made, tmp_path, "twice")
    written = (run / "results.json").read_text(encoding="utf-8")
    (run / "results.json").write_text(written.replace('"variant"', '"variant": "text_only",\n  "variant"', 1))
    code, err = gamut(capsys, "report", run, "--out", tmp_path / "report")
    line = written[: written.index('"variant"')].count("\n") + 1
    # The refusal is the last line (after the report's progress on stderr) and the only error line.
    assert code == 2 and [e for e in err if e.startswith("gamut:")] == err[-1:]
    assert err[-1] == f"gamut: {run / 'results.json'}: duplicate key 'variant' at line {line + 1} column 3"
    assert not (tmp_path / "report").exists()
