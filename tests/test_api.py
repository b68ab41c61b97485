"""gamut_hf's Python API on dataset rows exactly as ``datasets.load_dataset`` returns them: the
same checks as `gamut compile`, the same numbers as `gamut score`, the same judge requests and
verdicts as `gamut run`/`gamut judge`, and a run folder read back as DataFrames. The README's
"In a notebook" example runs as written (only its dataset path, endpoint and run folder swapped)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, run_gamut, write_json
from fake_endpoint import FakeEndpoint, user_text
from scripted_api import api_run, is_judging, scripted

import gamut_hf
from gamut_hf.core.rubric import VERDICTS, RubricError
from gamut_hf.core.scorer import ScoringError
from gamut_hf.dataset.loader import SAMPLE_NAME, SAMPLE_SOURCE, resolve_source
from gamut_hf.evaluation.run_folder import RunFolderError
from gamut_hf.files import InputError


@pytest.fixture(scope="module")
def built_sample() -> str:
    return resolve_source(SAMPLE_NAME)


@pytest.fixture(scope="module")
def rows(built_sample) -> dict[str, list[dict]]:
    """Both configurations of the built sample, as load_dataset gives them."""
    return {
        variant: list(datasets.load_dataset(built_sample, variant, split="test"))
        for variant in ("multimodal", "text_only")
    }


def mixed_verdicts(checks: list[dict]) -> dict[str, str]:
    """Every verdict in turn, so each tier gets a spread of them."""
    return {check["id"]: VERDICTS[i % len(VERDICTS)] for i, check in enumerate(checks)}


def judge_bodies(endpoint: FakeEndpoint) -> list[str]:
    return sorted(json.dumps(body, sort_keys=True) for body in endpoint.bodies if is_judging(body))


# -- compile and score -----------------------------------------------------------------------


def test_compile_rubric_takes_a_rows_meta_rubric_with_its_null_fields(rows):
    for variant, table in rows.items():
        for row in table:
            assert any(value is None for item in row["meta_rubric"] for value in item.values())
            checks = gamut_hf.compile_rubric(row["meta_rubric"])
            assert [check.model_dump() for check in checks] == row["binary_rubric"], (variant, row["id"])
            assert gamut_hf.compile_rubric(row) == checks


def test_compile_rubric_of_a_row_equals_gamut_compile_of_its_annotation(tmp_path, rows):
    annotation = json.loads((SAMPLE_SOURCE / "questions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    row = next(row for row in rows["text_only"] if row["id"] == annotation["id"])
    rubric = write_json(tmp_path / "rubric.json", annotation["meta_rubric"])
    done = run_gamut("compile", rubric)
    assert done.code == 0, done.err
    assert done.json() == [check.model_dump() for check in gamut_hf.compile_rubric(row["meta_rubric"])]


def test_score_question_on_a_rows_binary_rubric_prints_what_gamut_score_prints(tmp_path, rows):
    """The user's call that failed with AttributeError: 'dict' object has no attribute 'id'."""
    row = rows["multimodal"][0]
    verdicts = mixed_verdicts(row["binary_rubric"])
    result = gamut_hf.score_question(row["binary_rubric"], verdicts)
    done = run_gamut(
        "score", write_json(tmp_path / "checks.json", row["binary_rubric"]), write_json(tmp_path / "v.json", verdicts)
    )
    assert done.code == 0, done.err
    assert done.json() == {"score": result.score, "tiers": result.tiers, "counts": result.counts.model_dump()}
    assert -1 <= result.score <= 1
    assert gamut_hf.score_question(row, verdicts) == result  # the whole row: its released checks


def test_score_question_reproduces_the_specs_worked_examples():
    checks = [
        {"id": f"{tier[0]}{n}", "item_id": tier[0], "kind": "element", "tier": tier, "text": f"check {n}"}
        for tier, n in [("answer_critical", 1), ("answer_critical", 2), ("answer_critical", 3)]
        + [("valuable", 4), ("valuable", 5)]
    ]
    verdicts = {"a1": "meets", "a2": "meets", "a3": "missing", "v4": "partially_meets", "v5": "contradicts"}
    result = gamut_hf.score_question(checks, verdicts)
    assert result.score == pytest.approx(5 / 18)
    assert result.tiers == {"answer_critical": pytest.approx(2 / 3), "valuable": -0.5, "context": None}
    assert gamut_hf.score_question(checks, dict.fromkeys(verdicts, "contradicts")).score == -1.0


def test_score_question_refuses_what_gamut_score_refuses_in_one_line(rows):
    row = rows["text_only"][0]
    verdicts = mixed_verdicts(row["binary_rubric"])
    first = row["binary_rubric"][0]["id"]
    for bad, named in (
        ({**verdicts, "nope": "meets"}, "nope"),
        ({**verdicts, first: "great"}, "great"),
        ({k: v for k, v in verdicts.items() if k != first}, first),
    ):
        with pytest.raises(ScoringError) as caught:
            gamut_hf.score_question(row, bad)
        assert named in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ScoringError, match="expected a mapping"):
        gamut_hf.score_question(row, list(verdicts.items()))


def test_an_invalid_item_in_a_row_is_named_by_question_item_and_field(rows):
    row = rows["text_only"][0]
    broken = [{**row["meta_rubric"][0], "tier": "vital"}, *row["meta_rubric"][1:]]
    with pytest.raises(RubricError) as caught:
        gamut_hf.compile_rubric({**row, "meta_rubric": broken})
    assert f"question {row['id']}, item {broken[0]['id']}, field tier:" in str(caught.value)


# -- judging -----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["text_only", "multimodal"])
def test_judge_response_sends_and_reads_what_gamut_run_does(tmp_path, rows, variant):
    """The same requests (prompt, image, constraint) and the same verdicts as the CLI's judge."""
    endpoint = FakeEndpoint(responder=scripted)
    try:
        folder = api_run(run_gamut, tmp_path / "run", endpoint.url, "good-model", "strict-judge", variant, limit=1)
        cli_requests = judge_bodies(endpoint)
        details = pq.read_table(folder / "details.parquet").to_pandas()
        (question_id,) = set(details["question_id"])
        response = (
            pq.read_table(folder / "responses.parquet").to_pandas().set_index("question_id").response[question_id]
        )
        row = next(row for row in rows[variant] if row["id"] == question_id)
        endpoint.bodies.clear()
        judged = gamut_hf.judge_response(row, response, "strict-judge", "openai", base_url=endpoint.url)
    finally:
        endpoint.stop()
    assert judge_bodies(endpoint) == cli_requests
    assert dict(judged) == dict(zip(details["check_id"], details["verdict"], strict=True))
    assert list(judged) == [check["id"] for check in row["binary_rubric"]]
    expected = gamut_hf.score_question(row, dict(judged)).score
    assert gamut_hf.score_question(row, judged).score == expected


def test_judge_response_gives_each_verdicts_probabilities_where_the_backend_can(rows):
    """SmolLM2 on the transformers backend: the four probabilities of every check, the verdict the
    most probable; a JSON-answering API judge has none."""
    row = rows["text_only"][0]
    judged = gamut_hf.judge_response(row, "Water it less in winter.", "smollm2-135m", "transformers")
    assert set(judged.probabilities) == set(judged)
    for check_id, probabilities in judged.probabilities.items():
        assert probabilities is not None and sum(probabilities.values()) == pytest.approx(1.0)
        assert max(probabilities, key=probabilities.__getitem__) == judged[check_id]
    endpoint = FakeEndpoint(responder=scripted)
    try:
        api = gamut_hf.judge_response(row, "Water it less.", "strict-judge", "openai", base_url=endpoint.url)
    finally:
        endpoint.stop()
    assert set(api.probabilities.values()) == {None}


def test_an_unreadable_verdict_is_an_error_that_scoring_refuses_unless_counted_missing(rows):
    row = rows["text_only"][1]
    vague = row["binary_rubric"][0]

    def responder(body: dict) -> str:
        if is_judging(body) and f"Check: {vague['text']}\n" in user_text(body):
            return "I would say it meets the check."
        return scripted(body)

    endpoint = FakeEndpoint(responder=responder)
    try:
        judged = gamut_hf.judge_response(row, "A short answer.", "strict-judge", "openai", base_url=endpoint.url)
        attempts = sum(vague["text"] in user_text(body) for body in endpoint.bodies)
    finally:
        endpoint.stop()
    assert judged.errors == [vague["id"]]
    assert judged[vague["id"]] == "error"
    assert judged.raw[vague["id"]] == "I would say it meets the check."
    assert attempts == 3  # the first try and the two retries of `gamut judge`
    with pytest.raises(ScoringError, match=f"check {re.escape(vague['id'])}: .*errors_as_missing=True"):
        gamut_hf.score_question(row, judged)
    as_missing = gamut_hf.score_question(row, judged, errors_as_missing=True)
    assert as_missing == gamut_hf.score_question(row, {**judged, vague["id"]: "missing"})


def test_judge_response_refuses_a_multimodal_judgement_without_an_image(rows):
    endpoint = FakeEndpoint(responder=scripted)
    try:
        with pytest.raises(InputError, match="multimodal variant shows the judge the image"):
            gamut_hf.judge_response(
                rows["text_only"][0], "An answer.", "j", "openai", variant="multimodal", base_url=endpoint.url
            )
    finally:
        endpoint.stop()
    assert endpoint.requests == 0


def test_judge_response_names_an_unknown_backend_option(rows):
    from gamut_hf.backends.options import OptionError

    with pytest.raises(OptionError, match="no option 'base_uri'"):
        gamut_hf.judge_response(rows["text_only"][0], "An answer.", "j", "openai", base_uri="http://127.0.0.1:1/v1")


# -- run folders -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, scripted_endpoint) -> Path:
    out = tmp_path_factory.mktemp("api") / "run"
    return api_run(run_gamut, out, scripted_endpoint.url, "good-model", "strict-judge", "text_only", limit=2)


def test_load_run_gives_the_tables_and_the_gamut_score(run_folder):
    run = gamut_hf.load_run(run_folder)
    results = json.loads((run_folder / "results.json").read_text(encoding="utf-8"))
    assert run.gamut == results["score"]["gamut"] is not None
    assert run.why_no_gamut is None
    assert run.details.equals(pq.read_table(run_folder / "details.parquet").to_pandas())
    assert sorted(run.responses["question_id"]) == sorted(set(run.details["question_id"]))
    # The Gamut score is 100 x the mean of the question scores, each from that question's verdicts.
    scores = [
        gamut_hf.score_question(
            [
                {"id": r.check_id, "item_id": r.item_id, "kind": r.kind, "tier": r.tier, "text": r.check_text}
                for r in group.itertuples()
            ],
            dict(zip(group["check_id"], group["verdict"], strict=True)),
        ).score
        for _, group in run.details.groupby("question_id")
    ]
    assert run.gamut == pytest.approx(100 * sum(scores) / len(scores))


def test_load_run_says_why_a_run_has_no_gamut_score(tmp_path):
    def responder(body: dict) -> str:  # a judge that cannot grade facts
        return (
            "no idea"
            if is_judging(body) and "Check: The response states this fact" in user_text(body)
            else scripted(body)
        )

    endpoint = FakeEndpoint(responder=responder)
    try:
        folder = api_run(run_gamut, tmp_path / "run", endpoint.url, "good-model", "strict-judge", "text_only", limit=1)
    finally:
        endpoint.stop()
    run = gamut_hf.load_run(folder)
    errors = int((run.details["verdict"] == "error").sum())
    assert errors > 0
    assert run.gamut is None
    assert run.why_no_gamut.startswith(f"{errors} judge errors and 0 unjudged checks")
    assert "--errors-as-missing" in run.why_no_gamut


def test_load_run_refuses_a_folder_that_is_not_a_run_and_a_table_changed_by_hand(tmp_path, run_folder):
    with pytest.raises(RunFolderError, match="not a run folder"):
        gamut_hf.load_run(tmp_path)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("results.json", "details.parquet", "responses.parquet"):
        (copy / name).write_bytes((run_folder / name).read_bytes())
    (copy / "details.parquet").write_bytes((copy / "details.parquet").read_bytes() + b"\0")
    with pytest.raises(RunFolderError, match="details.parquet is not the one results.json was written with"):
        gamut_hf.load_run(copy)


# -- the package -------------------------------------------------------------------------------


def test_import_gamut_hf_stays_light_and_scoring_rows_needs_no_heavy_stack():
    checks = [{"id": "i1.fact", "item_id": "i1", "kind": "fact", "tier": "valuable", "text": "t"}]
    code = (
        "import sys, gamut_hf\n"
        "assert 'gamut_hf.api' not in sys.modules\n"
        f"print(gamut_hf.score_question({checks!r}, {{'i1.fact': 'partially_meets'}}).score)\n"
        "print(','.join(m for m in ('datasets', 'pyarrow', 'pandas', 'torch', 'PIL') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["0.5", ""]
    assert {"compile_rubric", "score_question", "judge_response", "load_run"} <= set(dir(gamut_hf))


def readme_notebook_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## In a notebook\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


def test_the_readme_notebook_example_runs(built_sample, run_folder, scripted_endpoint, capsys):
    code = readme_notebook_example()
    for placeholder, value in (
        ('"path/to/built"', repr(built_sample)),
        ('"http://127.0.0.1:8000/v1"', repr(scripted_endpoint.url)),
        ('"runs/default"', repr(str(run_folder))),
    ):
        assert code.count(placeholder) == 1, placeholder
        code = code.replace(placeholder, value)
    exec(compile(code, "README.md (In a notebook)", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].startswith("1.0 ")
    assert printed[3] == str(gamut_hf.load_run(run_folder).gamut)
