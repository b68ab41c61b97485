"""The official release's layout (facebook/GAMUT as published), read by its columns from files the
project did not write (tests/release_fixture.py, straight pyarrow), with its photos joined from a
CRAG-MM-shaped table by session_id: the readers, the one-line refusals, `gamut convert`, and the
commands a user reaches it through (run, stats, compile, report, the Space, inspect eval).
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_gamut
from fake_endpoint import FakeEndpoint
from release_fixture import QUESTIONS, SAMPLE_IMAGES, release_table, write_crag_mm, write_release
from scripted_api import scripted

from gamut_hf.dataset.loader import CragMMImageResolver, UnknownLayout, iter_questions, load_gamut
from gamut_hf.dataset.release import released_rubric

CHECK_COLUMNS = ["question_id", "check_id", "tier", "kind", "check_text", "verdict"]


@pytest.fixture(scope="module")
def endpoint():
    server = FakeEndpoint(responder=scripted)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[Path, Path]:
    """The release-layout folder and the CRAG-MM parquet file."""
    root = tmp_path_factory.mktemp("release")
    return write_release(root / "GAMUT"), write_crag_mm(root / "crag-mm" / "validation.parquet")


def api(url: str, *extra) -> list:
    return [
        "--model", "good-model", "--backend", "openai", "--base-url", url,
        "--judge", "strict-judge", "--judge-backend", "openai", "--judge-base-url", url, *extra,
    ]  # fmt: skip


def refusal(done) -> str:
    """The one error line of a refused command (the pipeline's start line before it aside)."""
    assert done.code == 2, done.err
    lines = [line for line in done.err.splitlines() if line.startswith("gamut: ")]
    assert len(lines) == 1, done.err
    return lines[0]


def details(run: Path) -> list[dict]:
    return pq.read_table(run / "details.parquet", columns=CHECK_COLUMNS).to_pylist()


def results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


# -- the reader ------------------------------------------------------------------------------


def test_release_rows_read_through_load_dataset_parquet_become_checks(release):
    folder, _ = release
    data = datasets.load_dataset(
        "parquet", data_files=str(folder / "data" / "test_text_only-00000-of-00001.parquet"), split="train"
    )
    questions = list(iter_questions(data, "text_only"))
    assert [q.id for q in questions] == [q[0] for q in QUESTIONS]
    cat, coffee = questions[0], questions[1]
    assert cat.text_question == QUESTIONS[0][3] and cat.meta_rubric is None and cat.domain == "unknown"
    assert [(c.id, c.tier, c.kind) for c in cat.checks] == [
        ("Daily brushing", "answer_critical", "unspecified"),
        ("Brushing order", "answer_critical", "order"),  # "Evaluate the relative order ..."
        ("Cat toothpaste", "valuable", "unspecified"),
        ("Warning signs", "valuable", "unspecified"),
        ("Vet cleaning", "context", "unspecified"),
    ]
    assert cat.checks[0].text == "The response recommends brushing the cat's teeth daily."
    # "Answer Critical" (with a space) is the same tier; tiers in order whatever the struct's field order.
    assert [(c.id, c.tier) for c in coffee.checks] == [
        ("Grind fresh", "answer_critical"),
        ("Ratio", "answer_critical"),
        ("Water temperature", "valuable"),
        ("Water temperature.2", "valuable"),  # a repeated handle made unique within the question
        ("Storage", "context"),
    ]
    # Citations resolved against the question's snippets; one naming no snippet kept and counted.
    assert [(s.citation, s.title) for s in cat.evidence["Brushing order"]] == [
        ("s1", "Cornell Feline Health Center"),
        ("s2", "ASPCA"),
    ]
    assert cat.evidence["Vet cleaning"][0].dangling and "Warning signs" not in cat.evidence
    assert released_rubric(cat.id, QUESTIONS[0][4]).dangling_citations == 1


def test_a_hub_folder_in_the_release_layout_loads_each_variant_with_or_without_its_card(release, tmp_path):
    folder, _ = release
    bare = write_release(tmp_path / "no-card", card=False)
    for source in (folder, bare):
        multimodal, text_only = load_gamut(source, "multimodal"), load_gamut(source, "text_only")
        asked = [q.prompt("multimodal") for q in iter_questions(multimodal, "text_only")]
        assert asked == [q[2] for q in QUESTIONS]  # the generic question, beside the photo
        assert [q.prompt("text_only") for q in iter_questions(text_only, "text_only")] == [q[3] for q in QUESTIONS]


def test_rubrics_stored_as_json_text_read_the_same(tmp_path):
    table = release_table("text_only")
    as_text = table.set_column(2, "rubrics", pa.array([json.dumps(q[4]) for q in QUESTIONS]))
    pq.write_table(as_text, tmp_path / "text.parquet")
    from_text = list(iter_questions(load_gamut(tmp_path / "text.parquet", "text_only"), "text_only"))
    pq.write_table(table, tmp_path / "struct.parquet")
    from_struct = list(iter_questions(load_gamut(tmp_path / "struct.parquet", "text_only"), "text_only"))
    assert [q.checks for q in from_text] == [q.checks for q in from_struct]


def test_photos_come_from_crag_mm_by_session_id_image_first_then_a_url_when_allowed(release, tmp_path):
    folder, _ = release
    served = tmp_path / "served"
    served.mkdir()
    (served / "astronaut.png").write_bytes((SAMPLE_IMAGES / "astronaut.png").read_bytes())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        crag = write_crag_mm(tmp_path / "crag.parquet", {"sess-astronaut-03": f"{base}/astronaut.png"})
        rows = load_gamut(folder, "multimodal")
        from PIL import Image

        fetched = CragMMImageResolver(crag, fetch_urls=True)
        assert fetched(rows[0]).size == Image.open(SAMPLE_IMAGES / "chelsea.png").size  # the embedded bytes
        assert fetched(rows[2]).size == Image.open(SAMPLE_IMAGES / "astronaut.png").size  # downloaded
        with pytest.raises(Exception, match="sess-astronaut-03.*add --fetch-image-urls"):
            CragMMImageResolver(crag)(rows[2])
        with pytest.raises(Exception, match="question sess-rocket-04: session_id 'sess-rocket-04' not found"):
            fetched(rows[3])
        gone = write_crag_mm(tmp_path / "gone.parquet", {"sess-astronaut-03": f"{base}/nothing.png"})
        with pytest.raises(Exception, match="question sess-astronaut-03: .* answered HTTP 404"):
            CragMMImageResolver(gone, fetch_urls=True)(rows[2])
    finally:
        server.shutdown()


# -- one line, nothing written ----------------------------------------------------------------


def test_a_table_in_neither_layout_is_one_line_naming_its_columns(endpoint, tmp_path):
    pq.write_table(pa.table({"qid": ["a"], "question": ["q?"], "checks": ["[]"]}), tmp_path / "other.parquet")
    with pytest.raises(UnknownLayout):
        load_gamut(tmp_path / "other.parquet", "text_only")
    line = refusal(run_gamut("run", "--out", tmp_path / "run", "--dataset", tmp_path / "other.parquet",
                             "--variant", "text_only", *api(endpoint.url)))  # fmt: skip
    assert "columns qid, question, checks match no layout" in line
    assert "the official release's (session_id, question, rubrics) lacks session_id, rubrics" in line
    assert "gamut-hf's (id, domain, text_question, meta_rubric, binary_rubric) lacks id" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda r: r["Valuable"][0].pop("Ingredient"),
            "question sess-cat-01, item Cat toothpaste, field rubrics.Valuable[1].Ingredient: required field is missing",
        ),
        (
            lambda r: r.update(Bonus=[{"Handle": "x", "Ingredient": "y", "Specifics": []}]),
            "question sess-cat-01, field rubrics.Bonus: unknown tier; expected Answer_Critical, Answer Critical",
        ),
    ],
    ids=["no-ingredient", "unknown-tier"],
)
def test_a_bad_element_is_one_line_naming_question_and_field(endpoint, tmp_path, change, words):
    questions = json.loads(json.dumps(QUESTIONS))
    change(questions[0][4])
    folder = write_release(tmp_path / "bad", questions=questions)
    line = refusal(run_gamut("run", "--out", tmp_path / "run", "--dataset", folder, "--variant", "text_only",
                             *api(endpoint.url)))  # fmt: skip
    assert words in line
    assert not (tmp_path / "run").exists()


def test_questions_without_a_photo_are_named_together_and_nothing_is_written(release, endpoint, tmp_path):
    folder, crag = release
    line = refusal(run_gamut("run", "--out", tmp_path / "run", "--dataset", folder, "--variant", "multimodal",
                             "--images", f"crag-mm={crag}", *api(endpoint.url)))  # fmt: skip
    assert "2 of 4 questions have no usable photo" in line
    assert "question sess-astronaut-03: CRAG-MM holds only a URL" in line and "question sess-rocket-04" in line
    assert not (tmp_path / "run").exists()


# -- the commands ----------------------------------------------------------------------------


def test_stats_and_compile_say_in_one_line_that_the_release_has_no_meta_rubric(release):
    folder, _ = release
    shown = run_gamut("stats", folder)
    assert shown.code == 0, shown.err
    assert "| Questions | 4 |" in shown.out and "| Checks per question | mean 3.2, median 3.5, max 5 |" in shown.out
    assert "| Meta-rubric structure | n/a: this dataset has no typed meta-rubric" in shown.out
    assert "Flexible lists" not in shown.out
    line = refusal(run_gamut("compile", folder, "--question-id", "sess-cat-01"))
    assert line == (
        "gamut: question sess-cat-01: gamut compile needs a typed meta-rubric, and this dataset has none (the "
        "official release publishes its checks already compiled); everything else (run, judge, score, report, "
        "the Space) works on its checks"
    )


def test_convert_writes_the_project_layout_and_scores_equal_the_releases(release, endpoint, tmp_path):
    folder, crag = release
    out = tmp_path / "converted"
    refused = run_gamut("convert", folder, out, "--images", f"crag-mm={crag}")
    assert "or --skip-missing-photos leaves them out" in refusal(refused) and not out.exists()
    done = run_gamut("convert", folder, out, "--images", f"crag-mm={crag}", "--skip-missing-photos")
    assert done.code == 0, done.err
    assert done.out.startswith(f"converted {folder} into {out}: multimodal 2 questions, text_only 4")
    assert done.err.count("left out of multimodal: question sess-") == 2

    text_only = datasets.load_dataset(str(out), "text_only", split="test")
    multimodal = datasets.load_dataset(str(out), "multimodal", split="test")
    assert text_only[0]["meta_rubric"] == [] and text_only[0]["binary_rubric"][1]["kind"] == "order"
    assert multimodal["id"] == ["sess-cat-01", "sess-coffee-02"]
    assert multimodal[0]["text_question"] == QUESTIONS[0][3]  # joined from the text-only split
    from PIL import Image

    original = Image.open(SAMPLE_IMAGES / "chelsea.png")
    assert multimodal[0]["image"].tobytes() == original.tobytes()  # PNG: the very pixels
    cited = [e for e in text_only[0]["check_evidence"] if e["check_id"] == "Vet cleaning"]
    assert cited == [{"check_id": "Vet cleaning", "citation": "s9", "title": None, "text": None}]
    assert "**The meta-rubric is empty.**" in (out / "README.md").read_text()

    # The same checks in either layout: the same verdicts and score.
    for variant, extra in (("text_only", ()), ("multimodal", ("--images", f"crag-mm={crag}", "--limit", "2"))):
        ran = {}
        for name, source in (("release", folder), ("converted", out)):
            ran[name] = tmp_path / f"{name}-{variant}"
            given = extra if name == "release" else extra[2:]
            done = run_gamut("run", "--out", ran[name], "--dataset", source, "--variant", variant, *given,
                             *api(endpoint.url))  # fmt: skip
            assert done.code == 0, done.err
        assert details(ran["release"]) == details(ran["converted"])
        assert results(ran["release"])["score"] == results(ran["converted"])["score"]

    # A rerun replaces only its own files; a folder of another's is refused untouched.
    again = run_gamut("convert", folder, out, "--images", f"crag-mm={crag}", "--skip-missing-photos")
    assert again.code == 0, again.err
    stranger = tmp_path / "desk"
    stranger.mkdir()
    (stranger / "thesis.tex").write_text("mine")
    assert refusal(run_gamut("convert", folder, stranger, "--images", f"crag-mm={crag}", "--skip-missing-photos"))
    assert sorted(p.name for p in stranger.iterdir()) == ["thesis.tex"]


def test_a_release_run_reaches_the_report_and_the_spaces_board_and_failure_browser(release, endpoint, tmp_path):
    from gamut_hf.leaderboard.space.data import SpaceConfig, SpaceData

    folder, crag = release
    results_folder = tmp_path / "results"
    run = results_folder / "good-model-text-only"
    done = run_gamut("run", "--out", run, "--dataset", folder, "--variant", "text_only", *api(endpoint.url))
    assert done.code == 0, done.err
    score = results(run)["score"]["gamut"]
    report = run_gamut("report", run, "--out", tmp_path / "report", "--resamples", "1000")
    assert report.code == 0, report.err
    assert f"| good-model | {score:.1f} [" in (tmp_path / "report" / "report.md").read_text()

    data = SpaceData(SpaceConfig(results_folder, tmp_path / "requests", dataset=str(folder), login=False, resamples=10))
    assert data.not_loaded == {}
    assert list(data.board["model"]) == ["good-model"] and data.index is not None
    key = data.index.choices("entry")[0]
    page = data.index.answer_html("sess-cat-01", key)
    assert "No meta-rubric view: this dataset has no typed meta-rubric" in page
    assert "Brushing order" in page and "ASPCA" in page and "cites no snippet of this question" in page
    assert "How should I look after this cat" in data.index.question_header("sess-cat-01")


def test_the_release_runs_end_to_end_with_the_models_users_run(release, tmp_path):
    """SmolLM2 (the embedded default) on the text-only split; the multimodal split, photos joined from
    CRAG-MM, with the tiny random-weight Qwen3-VL (the default judge's architecture) as candidate and
    judge, since SmolLM2 takes no images. Two questions each, then both in one report."""
    from tiny_models import tiny_model

    folder, crag = release
    text_run, photo_run = tmp_path / "smollm2", tmp_path / "qwen3-vl"
    done = run_gamut("run", "--out", text_run, "--dataset", folder, "--variant", "text_only", "--limit", "2",
                     "--max-tokens", "32")  # fmt: skip
    assert done.code == 0, done.err
    qwen = str(tiny_model("qwen3_vl"))
    done = run_gamut("run", "--out", photo_run, "--dataset", folder, "--variant", "multimodal",
                     "--images", f"crag-mm={crag}", "--limit", "2", "--max-tokens", "16",
                     "--model", qwen, "--backend", "transformers", "--judge", qwen,
                     "--judge-backend", "transformers")  # fmt: skip
    assert done.code == 0, done.err
    for run in (text_run, photo_run):
        rows = details(run)
        assert {r["question_id"] for r in rows} == {"sess-cat-01", "sess-coffee-02"} and len(rows) == 10
        assert all(r["verdict"] in ("meets", "partially_meets", "missing", "contradicts", "error") for r in rows)
        assert results(run)["score"]["questions"] == 2
    report = run_gamut("report", text_run, photo_run, "--out", tmp_path / "report")
    assert report.code == 0, report.err
    assert "smollm2-135m" in (tmp_path / "report" / "report.md").read_text()
