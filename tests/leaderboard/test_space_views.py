"""What the Space shows of `gamut simulate`'s runs, without a browser (issue 24 items 2, 3, 5, 6).

The questions of a run's dataset lying beside the runs are loaded without a flag (and its folder
is no damaged entry); a path leading elsewhere is never read; the board offers only judges with
runs, says why a view is empty, shows the interval `gamut report` shows. The browser half is in
test_space_browser.py.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import run_gamut

from gamut_hf.core.names import MODEL_TYPES
from gamut_hf.leaderboard.space import SpaceConfig, SpaceData, filter_board
from gamut_hf.leaderboard.space.data import DEFAULT_COLUMNS, SIZE_BUCKETS, board_view, describe_board

QUESTIONS = 10
GPT4O = "gpt-4o__gemini-3-1-pro__multimodal"  # one simulated run: folder name


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> Path:
    """`gamut simulate OUT --questions 10`: the paper's 14 models under two judges, both variants."""
    out = tmp_path_factory.mktemp("views") / "sim"
    done = run_gamut("simulate", out, "--questions", str(QUESTIONS))
    assert done.code == 0, done.err
    return out


def copy_run(simulated: Path, results: Path, source: str, name: str = GPT4O) -> Path:
    """One simulated run in ``results``, its results.json naming ``source`` as its dataset."""
    run = shutil.copytree(simulated / name, results / name)
    recorded = json.loads((run / "results.json").read_text(encoding="utf-8"))
    recorded["dataset"]["source"] = source
    (run / "results.json").write_text(json.dumps(recorded, indent=2), encoding="utf-8")
    return run


def synthetic(folder: Path) -> Path:
    """The synthetic annotation folder the simulated runs answer (questions.jsonl and images)."""
    done = run_gamut("synthetic", folder, "--questions", str(QUESTIONS))
    assert done.code == 0, done.err
    return folder


def space(results: Path, tmp_path: Path, **options) -> SpaceData:
    config = SpaceConfig(results=results, requests=tmp_path / "requests", dataset=None, login=False, **options)
    return SpaceData(config)


def test_a_dataset_inside_the_results_folder_is_loaded_without_a_flag(simulated, tmp_path):
    """The issue's tour: questions were bare ids, "the dataset of this question is not loaded", and
    no image. A run naming "dataset" (a folder inside the results folder) now brings its questions,
    and that annotation folder is not listed among the damaged entries."""
    results = tmp_path / "results"
    copy_run(simulated, results, "dataset")
    synthetic(results / "dataset")
    data = space(results, tmp_path)
    assert data.not_loaded == {} and data.not_loaded_note() == ""
    assert [entry.key for entry in data.entries] == [GPT4O]
    assert data.index is not None
    header = data.index.question_header("syn-00001")
    assert "Question:</strong> What should I know about this food subject" in header
    assert "not loaded" not in header
    assert data.index.image("syn-00001").size == (960, 1280)
    # Complete over its own dataset's 10 questions, so ranked (not "(partial)").
    assert list(data.board["model"]) == ["GPT-4o"] and not data.board["partial"].any()


def test_a_dataset_beside_the_results_folder_is_loaded_too(simulated, tmp_path):
    """`gamut space --results OUT/runs` with the dataset in OUT/dataset."""
    copy_run(simulated, tmp_path / "out" / "runs", "dataset")
    synthetic(tmp_path / "out" / "dataset")
    data = space(tmp_path / "out" / "runs", tmp_path)
    assert data.index is not None and "not loaded" not in data.index.question_header("syn-00002")


@pytest.mark.parametrize("source", ["../../elsewhere", "ABSOLUTE", "dataset/../../elsewhere"])
def test_a_dataset_path_leading_out_of_the_results_is_never_read(simulated, tmp_path, source):
    """A result folder is not trusted to name the server's files: only a folder inside the results
    folder or beside it is read; the run still shows, with bare question ids."""
    synthetic(tmp_path / "elsewhere")
    results = tmp_path / "a" / "b" / "results"
    copy_run(simulated, results, str(tmp_path / "elsewhere") if source == "ABSOLUTE" else source)
    data = space(results, tmp_path)
    assert [entry.key for entry in data.entries] == [GPT4O] and data.run_datasets == {}
    assert data.index is not None and "not loaded" in data.index.question_header("syn-00001")


def test_a_damaged_dataset_beside_the_runs_is_named_under_the_board(simulated, tmp_path):
    results = tmp_path / "results"
    copy_run(simulated, results, "dataset")
    (results / "dataset").mkdir()
    (results / "dataset" / "questions.jsonl").write_text("{not json\n", encoding="utf-8")
    data = space(results, tmp_path)
    assert [entry.key for entry in data.entries] == [GPT4O]  # the run keeps its place
    note = data.not_loaded_note()
    assert note.count("\n- ") == 1 and "- `dataset`: the runs' dataset, not loaded: " in note
    assert str(tmp_path) not in note  # the server's paths are not the visitor's business
    # Fixed in place: taken in at the next refresh, the note gone.
    shutil.rmtree(results / "dataset")
    synthetic(results / "dataset")
    assert data.refresh() and data.not_loaded_note() == ""
    assert data.index is not None and "not loaded" not in data.index.question_header("syn-00003")


def test_the_board_shows_the_interval_gamut_report_shows(simulated, tmp_path):
    """Issue 24 item 5: 1,000 resamples here and 2,000 in the report gave the same run two
    intervals ([56.0, 59.8] against [56.0, 59.7]). Both now draw the report's default."""
    results = tmp_path / "results"
    copy_run(simulated, results, "dataset")
    done = run_gamut("report", results / GPT4O, "--out", tmp_path / "report")
    assert done.code == 0, done.err
    [table] = (tmp_path / "report" / "tables").glob("leaderboard-*.csv")
    [row] = csv.DictReader(table.open(encoding="utf-8"))
    reported = f"[{float(row['gamut_low']):.1f}, {float(row['gamut_high']):.1f}]"
    data = space(results, tmp_path)
    assert data.board.loc[0, "Gamut 95% CI"] == reported


def test_the_judges_on_offer_have_runs_of_the_variant_and_an_empty_view_says_why(simulated, tmp_path):
    """Issue 24 item 3: the judge radio offered a judge with no run of the chosen variant (a blank
    table), and unticking every type gave a blank table."""
    data = space(simulated, tmp_path, resamples=20)
    assert data.judges("multimodal") == ["Gemini 3.1 Pro", "Qwen3-VL 235B"]
    assert data.judges("text_only") == ["Gemini 3.1 Pro"]  # the paper's second judge grades one variant

    def caption(types, variant, judge, sizes):
        ranked, partial = filter_board(data.board, types, variant, judge, sizes, DEFAULT_COLUMNS)
        return describe_board(data.board, types, variant, judge, sizes, ranked, partial)

    every_type, every_size = list(MODEL_TYPES), list(SIZE_BUCKETS)
    assert caption(every_type, "multimodal", "Gemini 3.1 Pro", every_size).startswith(
        "14 complete runs of the multimodal variant judged by Gemini 3.1 Pro, ranked by Gamut."
    )
    assert caption([], "multimodal", "Gemini 3.1 Pro", every_size) == "No model type chosen: tick one under Filters."
    assert caption(every_type, "multimodal", "Gemini 3.1 Pro", []) == "No size chosen: tick one under Filters."
    assert caption(every_type, "text_only", "Qwen3-VL 235B", every_size) == (
        "Qwen3-VL 235B judged no text_only run: choose another judge."
    )


def test_scores_keep_one_decimal_and_the_variant_is_no_column(simulated, tmp_path):
    """Issue 24 item 2: "56" beside "56.8", and the chosen variant and judge on every row."""
    data = space(simulated, tmp_path, resamples=20)
    ranked, _ = filter_board(
        data.board, list(MODEL_TYPES), "multimodal", "Gemini 3.1 Pro", list(SIZE_BUCKETS), DEFAULT_COLUMNS
    )
    assert "variant" not in ranked and "judge" not in ranked
    assert list(ranked.columns[:4]) == ["rank", "model", "Gamut", "Gamut 95% CI"]  # scores first
    ranked.loc[0, "Gamut"] = 56.0
    ranked.loc[1, "AC"] = -0.04
    shown = board_view(ranked.drop(columns="key"))._translate(None, None)["body"]
    cells = [{cell["id"].split("_")[1]: cell["display_value"] for cell in row if cell["type"] == "td"} for row in shown]
    gamut, ac = (f"col{list(ranked.columns).index(name)}" for name in ("Gamut", "AC"))
    assert cells[0][gamut] == "56.0" and cells[1][ac] == "0.0"
    assert all(len(row[gamut].split(".")[1]) == 1 for row in cells)


def test_only_a_models_name_opens_its_failures(simulated, tmp_path):
    """Issue 24 item 4: a click on any cell (a number being selected or copied) jumped to the failure
    browser. The board's own click handler, as gradio calls it with the clicked cell."""
    import gradio as gr
    import pandas as pd

    from gamut_hf.leaderboard.failures import WORST_FIRST
    from gamut_hf.leaderboard.space import build_app

    config = SpaceConfig(results=simulated, requests=tmp_path / "requests", dataset=None, login=False, resamples=20)
    app = build_app(config)
    [handler] = [
        f
        for f in app.fns.values()
        if getattr(f.fn, "__name__", "") == "open_failures" and f.inputs[1].elem_id == "leaderboard-table"
    ]
    keys, shown = handler.inputs[0].value, handler.inputs[1].value
    board = pd.DataFrame(shown["data"], columns=shown["headers"])

    def click(row: int, column: str):
        cell = gr.SelectData(None, {"index": [row, list(board.columns).index(column)], "value": None})
        return handler.fn(keys, board, "", "any", "any", "any", "any", WORST_FIRST, event=cell)

    for column in ("rank", "Gamut", "Gamut 95% CI", "% missing"):
        assert all(update == gr.skip() for update in click(0, column)), column
    tabs, models, *_ = click(1, "model")
    assert tabs.selected == "failures" and models.value == [keys[1]]
    assert board.loc[1, "model"] == "Gemini 3 Flash" and keys[1] == "gemini-3-flash__gemini-3-1-pro__multimodal"


def test_a_judge_close_to_chance_is_named_beside_its_scores(simulated, tmp_path):
    """Issue 24.15: the board of a judge whose audit shows it close to chance (the default SmolLM2
    judge, whose audit ships with the package) warns beside the scores; another judge's does not."""
    from types import SimpleNamespace

    from gamut_hf.leaderboard.space.board_tab import board_of

    results = tmp_path / "results"
    run = copy_run(simulated, results, "dataset")
    synthetic(results / "dataset")
    recorded = json.loads((run / "results.json").read_text(encoding="utf-8"))
    recorded["judge"] = {"backend": "transformers", "model": "smollm2-135m", "choice_rule": "first_token"}
    (run / "results.json").write_text(json.dumps(recorded, indent=2), encoding="utf-8")
    copy_run(simulated, results, "dataset", "gpt-4o__qwen3-vl-235b__multimodal")
    data = space(results, tmp_path)
    ui = SimpleNamespace(data=data)  # board_of reads the data alone
    types, sizes = list(MODEL_TYPES), list(SIZE_BUCKETS)
    warned = board_of(ui, types, "multimodal", "smollm2-135m", sizes, DEFAULT_COLUMNS)
    assert "Warning: this judge's verdicts agree with known right verdicts barely above chance" in warned.caption
    assert "audit kappa 0.016" in warned.caption
    assert "shipped (smollm2-135m-transformers)" in data.audit_note("smollm2-135m")
    other = board_of(ui, types, "multimodal", "Qwen3-VL 235B", sizes, DEFAULT_COLUMNS)
    assert len(other.ranked) == 1 and "Warning" not in other.caption
