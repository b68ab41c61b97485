"""The Space through gradio_client against a local launch, and the submission queue with the real worker.

Result folders come from the real CLI with candidates and judges behind a scripted endpoint
(the hosted-API boundary); one worker test judges with the real SmolLM2 on the CPU.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_endpoint import FakeEndpoint
from scripted_api import api_run, is_judging, worker_args
from space_support import HOSTILE, launch, sample_ids, write_jsonl

from gamut_hf.leaderboard.space import SpaceConfig

QUESTIONS = 25  # the sample's questions: a run over all of them is complete


@pytest.fixture(scope="module")
def space(tmp_path_factory, scripted_endpoint):
    """Two scripted models on both variants under two judges (complete runs), a partial run of a
    few questions, and a malformed result folder; served with an empty queue."""
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("space")
    results, requests = root / "results", root / "requests"
    for model in ("good-model", "poor-model"):
        for variant in ("multimodal", "text_only"):
            # One run priced (its judge at a given price), to show what a row cost.
            priced = ("--judge-price", "2/8") if (model, variant) == ("good-model", "multimodal") else ()
            api_run(
                run_gamut,
                results / f"{model}-{variant}",
                scripted_endpoint.url,
                model,
                "strict-judge",
                variant,
                QUESTIONS,
                *priced,
            )
        api_run(
            run_gamut,
            results / f"{model}-lenient",
            scripted_endpoint.url,
            model,
            "lenient-judge",
            "multimodal",
            limit=QUESTIONS,
        )
    # The case: a run over a few questions scores above complete ones.
    api_run(
        run_gamut,
        results / "lucky-few",
        scripted_endpoint.url,
        "good-model-lucky",
        "strict-judge",
        "multimodal",
        limit=2,
    )
    # The strict judge's audit sits beside its runs; the lenient judge has none.
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
        results / "judge-audit-strict",
    )
    assert done.code == 0, done.err
    (results / "broken").mkdir()
    (results / "broken" / "results.json").write_text('{"model": {}}', encoding="utf-8")
    config = SpaceConfig(results=results, requests=requests, dataset="gamut-sample", login=False)
    app, url = launch(config)
    from gradio_client import Client

    yield Client(url, verbose=False), config
    app.close()


def rows(frame: dict) -> list[dict]:
    return [dict(zip(frame["headers"], row, strict=False)) for row in frame["data"]]


TYPES = ["open", "proprietary", "unknown"]
SIZES = ["under 10B", "10B to 100B", "over 100B", "unknown"]


def board(
    client, variant="multimodal", judge="strict-judge", columns=("rank", "variant", "judge", "Gamut"), types=TYPES
):
    """The leaderboard as /refresh shows it: (ranked rows, partial rows, the not-loaded note)."""
    ranked, partial, _, _, _, note = client.predict(types, variant, judge, SIZES, list(columns), api_name="/refresh")
    return rows(ranked), rows(partial), note


def test_each_row_shows_what_its_run_cost_where_it_was_priced(space):
    client, config = space
    ranked, _, _ = board(client, columns=["rank", "Gamut", "cost (US$)"])
    cost = {row["model"]: row["cost (US$)"] for row in ranked}
    usd = json.loads((config.results / "good-model-multimodal" / "results.json").read_text())["cost"]["judge"]["usd"]
    assert usd > 0 and cost["good-model"] == pytest.approx(usd)  # a number: the column sorts
    assert cost["poor-model"] is None or cost["poor-model"] != cost["poor-model"]  # unknown (NaN): not priced


def test_a_judges_audit_is_shown_beside_its_board(space):
    client, config = space
    audit = json.loads((config.results / "judge-audit-strict" / "audit.json").read_text(encoding="utf-8"))
    _, _, note, _, _, _ = client.predict(TYPES, "multimodal", "strict-judge", SIZES, ["Gamut"], api_name="/refresh")
    assert "Judge audit of strict-judge" in note and "`judge-audit-strict`" in note
    assert f"kappa {audit['kappa']:.3f}" in note and f"{audit['judged']} checks" in note
    _, _, note, _, _, _ = client.predict(TYPES, "multimodal", "lenient-judge", SIZES, ["Gamut"], api_name="/refresh")
    assert "none for lenient-judge" in note
    # The audit folder is no result folder: it is not listed as one that failed to load.
    assert "judge-audit-strict" not in board(client)[2]


def test_the_default_board_is_one_variant_under_the_primary_judge_ranked(space):
    """Issue 12.18: text-only and a second judge are not mixed into the default ranking."""
    client, _ = space
    config = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/refresh"]["parameters"]
    defaults = {p["parameter_name"]: p["parameter_default"] for p in config}
    assert defaults["variant_"] == "multimodal" and defaults["judge_"] == "strict-judge"  # judge of the most runs
    ranked, _, _ = board(client)
    assert [(r["rank"], r["model"], r["variant"], r["judge"]) for r in ranked] == [
        (1, "good-model", "multimodal", "strict-judge"),
        (2, "poor-model", "multimodal", "strict-judge"),
    ]
    text_only, _, _ = board(client, variant="text_only")  # one click away
    assert [r["variant"] for r in text_only] == ["text_only", "text_only"] and text_only[0]["rank"] == 1
    lenient, _, _ = board(client, judge="lenient-judge")
    assert {r["judge"] for r in lenient} == {"lenient-judge"} and len(lenient) == 2


def test_the_leaderboard_filters_and_orders_models(space):
    client, _ = space
    ranked, _, _ = board(client, columns=["Gamut", "Gamut 95% CI", "AC", "variant"])
    assert len(ranked) == 2 and set(ranked[0]) == {"model", "variant", "Gamut", "Gamut 95% CI", "AC"}
    assert [r["Gamut"] for r in ranked] == sorted((r["Gamut"] for r in ranked), reverse=True)
    assert ranked[0]["model"] == "good-model" and ranked[0]["Gamut 95% CI"].startswith("[")
    ranked, partial, _ = board(client, types=["proprietary"])
    assert ranked == [] and partial == []


def test_partial_runs_are_shown_apart_and_never_ranked(space):
    """Issue 12.6: a run over two questions that scores above complete runs does not top the board."""
    client, _ = space
    ranked, partial, _ = board(client)
    assert [r["model"] for r in partial] == ["good-model-lucky (partial)"]
    assert "rank" not in partial[0]
    assert partial[0]["Gamut"] > min(r["Gamut"] for r in ranked)  # it would have been ranked above a complete run
    assert all("lucky" not in r["model"] for r in ranked)


def test_a_malformed_result_folder_is_listed_as_not_loaded(space):
    """Issue 12.7: `{"model": {}}` as results.json used to stop the Space at start; the fixture's
    Space started with it, and names it with the reason."""
    client, _ = space
    ranked, _, note = board(client)
    assert len(ranked) == 2
    assert note.startswith("**Not loaded**") and "`broken`:" in note
    assert note.count("\n- ") == 1


def test_a_result_folder_without_its_responses_is_listed_as_not_loaded(space, tmp_path):
    """Issue 23.3: a folder without (or with an edited) responses.parquet made `gamut space` exit 2
    at start and every /refresh fail once it appeared: the failure index read responses outside the
    per-folder guard. It is listed as not loaded with its reason; the good folders keep serving."""
    import shutil

    from gamut_hf.leaderboard.space import SpaceData

    client, config = space
    good = config.results / "good-model-multimodal"
    missing, edited = config.results / "no-responses", config.results / "edited-responses"
    try:
        shutil.copytree(good, missing)
        (missing / "responses.parquet").unlink()
        shutil.copytree(good, edited)
        with (edited / "responses.parquet").open("ab") as handle:
            handle.write(b"\0")
        ranked, _, note = board(client)  # appeared while the Space runs
        assert [r["model"] for r in ranked] == ["good-model", "poor-model"]
        assert (
            "- `no-responses`: RunFolderError: no-responses: responses.parquet is missing; rewrite the folder "
            "with `gamut score no-responses`" in note
        )
        assert "- `edited-responses`: RunFolderError: edited-responses: responses.parquet is not the one" in note
        assert str(config.results) not in note
        table, _ = client.predict(["good-model-multimodal"], "any", "any", "any", "any", api_name="/questions")
        assert table["data"]
        # At start: the same folders beside a good one.
        results = tmp_path / "results"
        for folder in (good, missing, edited):
            shutil.copytree(folder, results / folder.name)
        data = SpaceData(SpaceConfig(results=results, requests=tmp_path / "requests", dataset=None, resamples=10))
        assert [entry.key for entry in data.entries] == ["good-model-multimodal"]
        assert sorted(data.not_loaded) == ["edited-responses", "no-responses"]
        assert data.index is not None and data.index.choices("entry") == ["good-model-multimodal"]
    finally:
        shutil.rmtree(missing, ignore_errors=True)
        shutil.rmtree(edited, ignore_errors=True)
    assert board(client)[2].count("\n- ") == 1  # only `broken` again


def test_the_failure_browser_lists_and_shows_questions(space):
    client, _ = space
    table, count = client.predict(["poor-model-multimodal"], "any", "any", "contradicts", "any", api_name="/questions")
    found = rows(table)
    assert found and "questions match" in count
    assert all(r["matching checks"] >= 1 for r in found)
    scores = [r["poor-model score"] for r in found]
    assert scores == sorted(scores)
    image, header, left, right = client.predict(
        found[0]["question"], ["poor-model-multimodal", "good-model-multimodal"], api_name="/question"
    )
    assert image and Path(image).is_file()
    assert "Text-only question:" in header
    assert "Answer by poor-model" in left and "Answer by good-model" in right
    assert "verdict-contradicts" in left and left.count("<li class='check") >= 5


def test_the_analysis_tab_builds_the_report(space):
    client, _ = space
    result = client.predict(api_name="/analysis")
    assert result[0].startswith("Analysis of the runs")
    assert "Judge robustness: see the section 'Judge robustness'" in result[0]  # two judges on the board
    assert any(isinstance(v, str) and "Text-only against multimodal" in v for v in result[1:])
    assert any(isinstance(v, str) and v.startswith("**Judge audit**") for v in result[1:])


def submit(client, path, name="acme/tiny-vl", variant="multimodal", partial=False, link="https://example.org/m"):
    from gradio_client import handle_file

    return client.predict(handle_file(str(path)), name, link, "open", 7, variant, partial, api_name="/submit")


def test_bad_and_hostile_uploads_are_refused_with_nothing_stored(space, tmp_path):
    client, config = space
    ids = sample_ids()
    before = sorted(config.requests.glob("*")) if config.requests.exists() else []
    bad = write_jsonl(
        tmp_path / "bad.jsonl", [{"question_id": "nope", "response": "x"}, {"question_id": ids[0], "response": 3}]
    )
    status, _ = submit(client, bad)
    assert status.startswith("Refused:") and "line 1: unknown question_id 'nope'" in status
    assert "line 2: response must be a string" in status
    good = write_jsonl(tmp_path / "good.jsonl", [{"question_id": q, "response": "x"} for q in ids])
    status, _ = submit(client, good, name=HOSTILE)
    assert status.startswith("Refused:") and "model name:" in status
    status, _ = submit(client, good, link="javascript:alert(1)")
    assert status.startswith("Refused:") and "model link:" in status
    scored = write_jsonl(tmp_path / "scored.jsonl", [{"question_id": q, "response": "x", "score": 100} for q in ids])
    status, _ = submit(client, scored)
    assert "scores are computed here" in status
    pickled = tmp_path / "evil.jsonl"
    pickled.write_bytes(b"\x80\x04\x95\x00cos\nsystem\n")
    status, _ = submit(client, pickled)
    assert status.startswith("Refused:") and "not UTF-8" in status
    assert (sorted(config.requests.glob("*")) if config.requests.exists() else []) == before


def test_a_size_of_zero_is_refused_and_an_empty_one_is_unknown(space, tmp_path):
    """Issue 24.14: "Parameters (billions)" defaulted to 0, and 0 was accepted."""
    from gradio_client import handle_file

    client, config = space
    ids = sample_ids()
    upload = write_jsonl(tmp_path / "one.jsonl", [{"question_id": ids[0], "response": "x"}])
    status, _ = client.predict(
        handle_file(str(upload)), "acme/zero", "", "open", "0", "text_only", True, api_name="/submit"
    )
    assert status.startswith("Refused:") and "parameters_billions: Input should be greater than 0" in status
    status, _ = client.predict(
        handle_file(str(upload)), "acme/unknown-size", "", "open", "", "text_only", True, api_name="/submit"
    )
    assert status.startswith("Accepted: acme/unknown-size"), status
    records = [json.loads(path.read_text()) for path in config.requests.glob("*.json")]
    [record] = [r for r in records if r["model"]["name"] == "acme/unknown-size"]
    assert record["model"]["parameters_billions"] is None
    for path in config.requests.glob(f"{record['key']}.*"):  # one waiting request per user: make way for the next tests
        path.unlink()


def test_a_lone_surrogate_in_a_response_is_refused_naming_its_question(space, tmp_path):
    """Issue 23.16: `"\\ud800"` passed validation, then storing it raised UnicodeEncodeError and the
    submitter saw gradio's generic error."""
    client, config = space
    ids = sample_ids()
    before = sorted(config.requests.glob("*")) if config.requests.exists() else []
    upload = write_jsonl(tmp_path / "r.jsonl", [{"question_id": ids[0], "response": "half a pair: \ud800"}])
    status, _ = submit(client, upload, name="acme/surrogate", partial=True)
    assert status.startswith("Refused:") and f"line 1: the response to {ids[0]!r} holds a lone surrogate" in status
    assert (sorted(config.requests.glob("*")) if config.requests.exists() else []) == before


def run_worker(gamut, config, url):
    done = gamut(
        *worker_args(config.requests, config.results, url, "--once"),
    )
    assert done.code == 0, done.err
    return done


def test_a_complete_submission_goes_from_pending_to_finished_and_is_ranked(space, scripted_endpoint, gamut, tmp_path):
    """Issue 12.2: every complete submission used to end FAILED (question_ids=None)."""
    client, config = space
    ids = sample_ids()
    assert len(ids) == QUESTIONS
    upload = write_jsonl(
        tmp_path / "submission.jsonl", [{"question_id": q, "response": f"Answer by good-model: about {q}"} for q in ids]
    )
    status, queue = submit(client, upload, name="acme/tiny-vl", partial=False)
    assert status.startswith(f"Accepted: acme/tiny-vl (multimodal), {QUESTIONS} answers"), status
    assert rows(queue)[0]["status"] == "PENDING"
    status, _ = submit(client, upload, name="acme/other")
    assert "you already have a submission waiting" in status

    done = run_worker(gamut, config, scripted_endpoint.url)
    assert "judging acme/tiny-vl" in done.err and "FINISHED" in done.err and "handled 1 submission" in done.out
    record = json.loads(next(config.requests.glob("*.json")).read_text())
    assert record["status"] == "FINISHED", record["reason"]
    assert record["submitted_by"] == "local"
    card = json.loads((config.results / record["key"] / "model.json").read_text())
    assert card["name"] == "acme/tiny-vl" and card["partial"] is False
    results = json.loads((config.results / record["key"] / "results.json").read_text())
    assert results["score"]["questions"] == QUESTIONS and results["score"]["gamut"] is not None

    assert rows(client.predict(api_name="/queue"))[0]["status"] == "FINISHED"
    ranked, partial, _ = board(client, columns=["rank", "type", "size (B)", "questions", "Gamut"])
    [mine] = [r for r in ranked if r["model"] == "acme/tiny-vl"]
    assert mine["type"] == "open" and mine["size (B)"] == 7 and mine["questions"] == QUESTIONS
    assert mine["rank"] in (1, 2)  # answers as good-model's, on the board beside it
    assert all("acme" not in r["model"] for r in partial)


def test_a_partial_submission_is_judged_and_listed_apart(space, scripted_endpoint, gamut, tmp_path):
    client, config = space
    ids = sample_ids()
    upload = write_jsonl(
        tmp_path / "submission.jsonl",
        [{"question_id": q, "response": f"Answer by good-model: about {q}"} for q in ids[:3]],
    )
    status, _ = submit(client, upload, name="acme/half-vl", partial=False)
    assert "questions have no response" in status  # 22 of 25 missing, not sent as partial
    status, _ = submit(client, upload, name="acme/half-vl", partial=True)
    assert status.startswith("Accepted: acme/half-vl (multimodal), 3 answers")
    run_worker(gamut, config, scripted_endpoint.url)
    ranked, partial, _ = board(client, columns=["type", "questions", "Gamut"])
    assert [r["questions"] for r in partial if r["model"] == "acme/half-vl (partial)"] == [3]
    assert all("half-vl" not in r["model"] for r in ranked)


def test_the_worker_fails_a_submission_the_judge_cannot_read(gamut, tmp_path):
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.submission import parse_submission

    garbled = FakeEndpoint(responder=lambda body: "Hmm, hard to say." if is_judging(body) else "x")
    try:
        ids = sample_ids()
        queue = RequestQueue(tmp_path / "requests")
        data = "".join(json.dumps({"question_id": q, "response": "an answer"}) + "\n" for q in ids[:1]).encode()
        queue.submit(
            parse_submission(data, {"name": "m", "access": "open", "variant": "text_only"}, ids, partial=True), "alice"
        )
        done = gamut(
            *worker_args(tmp_path / "requests", tmp_path / "results", garbled.url, "--once", judge="j"),
            "--retry-waits",
            "",  # no tries again: the judge's failure ends it at once
        )
        assert done.code == 0, done.err
        [record] = queue.records()
        assert record.status == "FAILED" and "unreadable" in record.reason and record.fault == "judge"
        assert record.reason.startswith("failed after 1 try: ") and "gamut worker --retry-failed" in record.reason
        assert not (tmp_path / "results" / record.key).exists()
    finally:
        garbled.stop()


def test_a_malformed_request_file_is_skipped_and_shown_as_unreadable(scripted_endpoint, gamut, tmp_path):
    """Issue 23.4: one malformed request file (`{"hello":1}`, a truncated request) ended every
    `gamut worker --once` with an internal error and broke the Space's /queue and /submit."""
    from gradio_client import Client

    from gamut_hf.leaderboard.queue import RequestQueue

    queue = RequestQueue(tmp_path / "requests")
    waiting = one_submission(queue, user="hank")
    (tmp_path / "requests" / "hello.json").write_text('{"hello":1}', encoding="utf-8")
    text = (tmp_path / "requests" / f"{waiting.key}.json").read_text(encoding="utf-8")
    (tmp_path / "requests" / "truncated.json").write_text(text[: len(text) // 2], encoding="utf-8")
    done = run_worker(
        gamut, SimpleNamespace(requests=tmp_path / "requests", results=tmp_path / "results"), scripted_endpoint.url
    )
    assert "handled 1 submission" in done.out and queue.get(waiting.key).status == "FINISHED"
    skipped = [line for line in done.err.splitlines() if line.startswith("skipping ")]
    assert len(skipped) == 2 and skipped[0].startswith("skipping hello.json: key: Field required")
    assert skipped[1].startswith("skipping truncated.json: ")
    assert str(tmp_path) not in done.err

    config = SpaceConfig(
        results=tmp_path / "results", requests=tmp_path / "requests", dataset="gamut-sample", login=False
    )
    app, url = launch(config)
    try:
        client = Client(url, verbose=False)
        shown = rows(client.predict(api_name="/queue"))
        assert [(r["model"], r["status"]) for r in shown] == [
            ("m", "FINISHED"),
            ("hello.json", "UNREADABLE"),
            ("truncated.json", "UNREADABLE"),
        ]
        assert shown[1]["reason"].startswith("key: Field required")
        upload = write_jsonl(tmp_path / "r.jsonl", [{"question_id": sample_ids()[0], "response": "an answer"}])
        status, queue_shown = submit(client, upload, name="acme/after", partial=True)
        assert status.startswith("Accepted: acme/after"), status
        assert rows(queue_shown)[0]["status"] == "PENDING"
    finally:
        app.close()


def test_a_failed_requests_reason_names_no_path_of_the_worker(gamut, tmp_path):
    """Issue 23.15: the FAILED reason showed in the public queue a FileNotFoundError naming the
    upload's full path on the worker's disk."""
    from gamut_hf.leaderboard.queue import RequestQueue

    queue = RequestQueue(tmp_path / "requests")
    record = one_submission(queue, user="iris")
    (tmp_path / "requests" / f"{record.key}.jsonl").unlink()
    done = gamut("worker", "--requests", tmp_path / "requests", "--results", tmp_path / "results", "--once")
    assert done.code == 0, done.err
    failed = queue.get(record.key)
    assert failed.status == "FAILED" and failed.reason == f"RequestFileError: {record.key}.jsonl: no such file"
    assert str(tmp_path) not in done.err


def test_public_reasons_keep_names_and_urls_but_no_absolute_paths(tmp_path):
    from gamut_hf.leaderboard.worker import public_reason

    folders = (tmp_path / "requests", tmp_path / "results")
    error = FileNotFoundError(2, "No such file or directory", str(tmp_path / "requests" / "k.jsonl"))
    assert public_reason(error, folders) == "FileNotFoundError: [Errno 2] No such file or directory: 'k.jsonl'"
    error = OSError(f"cannot load /home/worker/.cache/gamut-hf/models/judge/config.json from {tmp_path / 'results'}")
    assert public_reason(error, folders) == "OSError: cannot load config.json from results"
    error = ConnectionError("http://127.0.0.1:8000/v1/chat/completions refused\nsecond line")
    assert public_reason(error, folders) == "ConnectionError: http://127.0.0.1:8000/v1/chat/completions refused"


def test_the_worker_judges_with_a_real_model(gamut, tmp_path):
    """SmolLM2 (transformers, CPU) as the leaderboard's judge for a two-answer partial submission."""
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.submission import parse_submission

    ids = sample_ids()
    queue = RequestQueue(tmp_path / "requests")
    data = "".join(
        json.dumps({"question_id": q, "response": "Brush its teeth daily and see a vet yearly."}) + "\n"
        for q in ids[:2]
    ).encode()
    queue.submit(
        parse_submission(data, {"name": "vet-bot", "access": "proprietary", "variant": "text_only"}, ids, partial=True),
        "bob",
    )
    done = gamut("worker", "--requests", tmp_path / "requests", "--results", tmp_path / "results", "--once")
    assert done.code == 0, done.err
    [record] = queue.records()
    assert record.status == "FINISHED", record.reason
    results = json.loads((tmp_path / "results" / record.key / "results.json").read_text())
    assert results["judge"]["model"] == "smollm2-135m" and results["score"]["questions"] == 2


def one_submission(queue, user="erin", name="m", answers=1, **card):
    from gamut_hf.leaderboard.submission import parse_submission

    ids = sample_ids()
    data = "".join(json.dumps({"question_id": q, "response": "Answer by good-model"}) + "\n" for q in ids[:answers])
    return queue.submit(
        parse_submission(
            data.encode(), {"name": name, "access": "open", "variant": "text_only", **card}, ids, partial=True
        ),
        user,
    )


def test_queue_limits_and_claims(tmp_path):
    from datetime import UTC, datetime, timedelta

    from gamut_hf.leaderboard.queue import MAX_PER_DAY, RequestQueue
    from gamut_hf.leaderboard.submission import SubmissionError, parse_submission

    ids = ["q1", "q2"]
    queue = RequestQueue(tmp_path)
    data = b'{"question_id": "q1", "response": "a"}\n{"question_id": "q2", "response": "b"}\n'
    start = datetime(2026, 12, 1, tzinfo=UTC)
    for n in range(MAX_PER_DAY):
        sub = parse_submission(data, {"name": f"m{n}", "access": "open", "variant": "text_only"}, ids)
        record = queue.submit(sub, "carol", now=start + timedelta(hours=n))
        claimed = queue.claim("w1")
        assert claimed.key == record.key and claimed.status == "RUNNING" and claimed.worker == "w1"
        assert queue.claim("w2") is None  # the only request is taken, and its claim is fresh
        queue.finish(claimed, "FINISHED")
    with pytest.raises(SubmissionError, match="in the last 24 hours"):
        queue.submit(
            parse_submission(data, {"name": "late", "access": "open", "variant": "text_only"}, ids),
            "carol",
            now=start + timedelta(hours=5),
        )
    with pytest.raises(SubmissionError, match="already on the board"):
        queue.submit(parse_submission(data, {"name": "m0", "access": "open", "variant": "text_only"}, ids), "dave")
    assert queue.responses(record.key) == {"q1": "a", "q2": "b"}


class RecordingHub:
    """The hub's API as HubFolder uses it, over in-memory repositories: the one boundary faked here
    (the hub cannot be reached). Every commit is recorded; a snapshot writes the files of the
    commit asked for; a commit whose parent_commit is not the head is refused with 412, as the hub
    refuses it; ``fail`` makes the next commits fail as an unreachable hub does; ``before_commit``
    runs once just before the next commit lands (another party committing first)."""

    def __init__(self):
        self.commits: list[tuple[str, list[str], str]] = []
        self.pulls: list[str] = []
        self.history: dict[str, list[tuple[str, dict[str, bytes]]]] = {}
        self.fail = 0
        self.before_commit = None

    def _log(self, repo_id):
        return self.history.setdefault(repo_id, [("0" * 40, {})])

    def files(self, repo_id) -> dict[str, bytes]:
        return self._log(repo_id)[-1][1]

    def repo_info(self, repo_id, repo_type):
        assert repo_type == "dataset"
        return SimpleNamespace(sha=self._log(repo_id)[-1][0])

    def snapshot_download(self, repo_id, repo_type, local_dir, revision):
        self.pulls.append(repo_id)
        [files] = [files for oid, files in self._log(repo_id) if oid == revision]
        for name, data in files.items():
            (Path(local_dir) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(local_dir) / name).write_bytes(data)
        return str(local_dir)

    def create_commit(self, repo_id, repo_type, operations, commit_message, parent_commit=None):
        import httpx
        from huggingface_hub.errors import HfHubHTTPError

        assert repo_type == "dataset"
        if self.before_commit is not None:
            hook, self.before_commit = self.before_commit, None
            hook()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("Connection refused")
        log = self._log(repo_id)
        head, files = log[-1]
        if parent_commit is not None and parent_commit != head:
            response = httpx.Response(412, request=httpx.Request("POST", f"https://huggingface.co/api/{repo_id}"))
            raise HfHubHTTPError(
                "412 Client Error: Precondition Failed: A commit has happened since. Please refresh and try again.",
                response=response,
            )
        files = {**files, **{op.path_in_repo: Path(op.path_or_fileobj).read_bytes() for op in operations}}
        oid = hashlib.sha1(f"{repo_id}{len(log)}".encode()).hexdigest()
        log.append((oid, files))
        self.commits.append((repo_id, sorted(op.path_in_repo for op in operations), commit_message))
        return SimpleNamespace(oid=oid, commit_url=f"https://huggingface.co/datasets/{repo_id}/commit/{oid}")

    def record(self, repo_id, key) -> dict:
        return json.loads(self.files(repo_id)[f"{key}.json"])


def scripted_judge(url):
    from gamut_hf.evaluation.config import ModelSpec

    return ModelSpec(name="strict-judge", backend="openai", options={"base_url": url})


def test_hub_mirrors_carry_requests_and_results(scripted_endpoint, tmp_path):
    from gamut_hf.dataset.hub import HubFolder
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.worker import process_next

    api = RecordingHub()
    requests_hub = HubFolder("org/requests", tmp_path / "requests", api=api)
    results_hub = HubFolder("org/results", tmp_path / "results", api=api)
    queue = RequestQueue(tmp_path / "requests")
    record = one_submission(queue)
    requests_hub.push(queue.files(record.key), "submit")
    done = process_next(
        queue,
        tmp_path / "results",
        tmp_path / "work",
        "gamut-sample",
        scripted_judge(scripted_endpoint.url),
        echo=lambda _: None,
        requests_hub=requests_hub,
        results_hub=results_hub,
        worker="w1",
    )
    assert done.status == "FINISHED"
    assert api.pulls == ["org/requests"]
    assert [(repo, message) for repo, _, message in api.commits] == [
        ("org/requests", "submit"),
        ("org/requests", f"{record.key}: RUNNING (w1)"),
        ("org/results", f"results of {record.key}"),
        ("org/requests", f"{record.key}: FINISHED"),
    ]
    assert api.commits[0][1] == [f"{record.key}.json", f"{record.key}.jsonl"]
    assert api.commits[2][1] == sorted(
        f"{record.key}/{name}" for name in ("details.parquet", "model.json", "responses.parquet", "results.json")
    )
    assert api.record("org/requests", record.key)["status"] == "FINISHED"


def test_a_claim_left_by_a_dead_worker_is_taken_over(scripted_endpoint, gamut, tmp_path):
    """Issue 12.5: a worker that died after claiming left its request RUNNING forever."""
    from datetime import UTC, datetime, timedelta

    from gamut_hf.leaderboard.queue import RequestQueue

    queue = RequestQueue(tmp_path / "requests")
    dead = one_submission(queue, user="frank")
    queue.claim("dead-host:41", now=datetime.now(UTC) - timedelta(hours=1))  # then the process was killed
    alive = one_submission(queue, user="gina", name="m2")
    assert queue.claim("busy-host:7", lease=timedelta(days=1)).key == alive.key  # judging now, its heartbeat fresh
    worker = worker_args(tmp_path / "requests", tmp_path / "results", scripted_endpoint.url, "--once")
    done = gamut(*worker)
    assert done.code == 0, done.err
    assert f"{dead.key}: taking over from dead-host:41" in done.err and "handled 1 submission" in done.out
    assert queue.get(dead.key).status == "FINISHED" and (tmp_path / "results" / dead.key / "results.json").is_file()
    assert queue.get(alive.key).status == "RUNNING" and queue.get(alive.key).worker == "busy-host:7"
    assert not (tmp_path / "results" / alive.key).exists()


def test_two_workers_sharing_a_requests_repo_judge_a_request_once(tmp_path):
    """Issue 12.5: claims were local lock files, so a worker on another machine judged the same request."""
    from gamut_hf.dataset.hub import HubFolder
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.worker import claim_next

    api = RecordingHub()
    space_queue = RequestQueue(tmp_path / "space")
    record = one_submission(space_queue)
    HubFolder("org/requests", tmp_path / "space", api=api).push(space_queue.files(record.key), "submit")
    first, second = (RequestQueue(tmp_path / name) for name in ("first", "second"))
    first_hub, second_hub = (HubFolder("org/requests", q.folder, api=api) for q in (first, second))
    # The first worker's claim lands between the second one's read and its commit.
    api.before_commit = lambda: claim_next(first, "first:1", requests_hub=first_hub)
    said = []
    assert claim_next(second, "second:2", requests_hub=second_hub, echo=said.append) is None
    assert said == [f"{record.key}: the requests repo changed while claiming it; reading it again"]
    on_hub = api.record("org/requests", record.key)
    assert on_hub["status"] == "RUNNING" and on_hub["worker"] == "first:1"
    assert second.get(record.key).worker == "first:1"  # the second worker's copy is the hub's again
    assert [m for _, _, m in api.commits] == ["submit", f"{record.key}: RUNNING (first:1)"]


def test_a_claim_the_hub_does_not_take_is_given_back(scripted_endpoint, tmp_path):
    """Issue 12.5: the RUNNING push was outside the try: a hub failure there left the request RUNNING."""
    from gamut_hf.dataset.hub import HubFolder, PushError
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.worker import process_next

    api = RecordingHub()
    queue = RequestQueue(tmp_path / "requests")
    hub = HubFolder("org/requests", queue.folder, api=api)
    record = one_submission(queue)
    hub.push(queue.files(record.key), "submit")
    api.fail = 1
    with pytest.raises(PushError, match="cannot reach the hub to push org/requests"):
        process_next(
            queue,
            tmp_path / "results",
            tmp_path / "work",
            "gamut-sample",
            scripted_judge(scripted_endpoint.url),
            echo=lambda _: None,
            requests_hub=hub,
        )
    assert queue.get(record.key).status == "PENDING" and api.record("org/requests", record.key)["status"] == "PENDING"
    assert hub.unpushed == set()  # a claim that did not happen is not sent later


def test_the_heartbeat_renews_a_claim_and_stops_when_it_is_taken_over(tmp_path):
    import time
    from datetime import timedelta

    from gamut_hf.dataset.hub import HubFolder
    from gamut_hf.leaderboard.queue import RequestQueue, RequestRecord
    from gamut_hf.leaderboard.worker import Heartbeat, claim_next

    api = RecordingHub()
    queue = RequestQueue(tmp_path / "requests")
    hub = HubFolder("org/requests", queue.folder, api=api)
    record = one_submission(queue)
    hub.push(queue.files(record.key), "submit")
    claimed = claim_next(queue, "w1", requests_hub=hub)
    said = []
    heartbeat = Heartbeat(queue, claimed, timedelta(seconds=0.3), hub, said.append)
    heartbeat.start()
    deadline = time.monotonic() + 30
    while sum(m.endswith("heartbeat") for _, _, m in api.commits) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    on_hub = RequestRecord.model_validate(api.record("org/requests", record.key))
    assert on_hub.worker == "w1" and on_hub.heartbeat > claimed.heartbeat
    # Another worker takes the request over on the hub (as if this one had been silent too long).
    taken = queue.get(record.key).model_copy(update={"worker": "w2"})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / f"{record.key}.json").write_text(taken.model_dump_json())
    HubFolder("org/requests", tmp_path / "other", api=api).push([tmp_path / "other" / f"{record.key}.json"], "take")
    heartbeat.join(timeout=30)
    heartbeat.stop()
    assert heartbeat.lost is not None and "taken over (RUNNING by w2)" in said[-1]
    assert api.record("org/requests", record.key)["worker"] == "w2"


@pytest.fixture
def hub_space(tmp_path):
    """The Space with its queue mirrored through the recording hub, as space/app.py builds it."""
    from gradio_client import Client

    from gamut_hf.dataset.hub import HubFolder

    api = RecordingHub()
    (tmp_path / "results").mkdir()
    config = SpaceConfig(
        results=tmp_path / "results",
        requests=tmp_path / "space-requests",
        dataset="gamut-sample",
        login=False,
        requests_hub=HubFolder("org/requests", tmp_path / "space-requests", api=api),
    )
    app, url = launch(config)
    yield Client(url, verbose=False), config, api
    app.close()


def test_the_space_reads_the_queue_a_worker_elsewhere_changed(hub_space, scripted_endpoint, tmp_path):
    """Issue 12.4: the queue was read once at start: FINISHED elsewhere stayed PENDING, and its
    submitter was refused as already waiting."""
    from gamut_hf.dataset.hub import HubFolder
    from gamut_hf.leaderboard.queue import RequestQueue
    from gamut_hf.leaderboard.worker import process_next

    client, config, api = hub_space
    upload = write_jsonl(tmp_path / "r.jsonl", [{"question_id": sample_ids()[0], "response": "Answer by good-model"}])
    status, queue = submit(client, upload, name="acme/first", partial=True)
    assert status.startswith("Accepted: acme/first") and rows(queue)[0]["status"] == "PENDING"
    [key] = [name.removesuffix(".json") for name in api.files("org/requests") if name.endswith(".json")]

    elsewhere = RequestQueue(tmp_path / "worker-requests")  # the worker's machine
    done = process_next(
        elsewhere,
        tmp_path / "worker-results",
        tmp_path / "work",
        "gamut-sample",
        scripted_judge(scripted_endpoint.url),
        echo=lambda _: None,
        requests_hub=HubFolder("org/requests", elsewhere.folder, api=api),
    )
    assert done.key == key and done.status == "FINISHED"

    assert rows(client.predict(api_name="/queue"))[0]["status"] == "FINISHED"
    status, queue = submit(client, upload, name="acme/second", partial=True)
    assert status.startswith("Accepted: acme/second"), status


def test_a_request_the_hub_did_not_take_is_sent_again(hub_space, tmp_path):
    """Issue 12.4: a failed push was said to go "with the next push", but no later push carried it."""
    client, config, api = hub_space
    upload = write_jsonl(tmp_path / "r.jsonl", [{"question_id": sample_ids()[0], "response": "an answer"}])
    api.fail = 1
    status, _ = submit(client, upload, name="acme/lost", partial=True)
    assert "sending it to the hub failed" in status and "sent again with the next submission or queue refresh" in status
    assert api.files("org/requests") == {}
    assert rows(client.predict(api_name="/queue"))[0]["model"] == "acme/lost"
    [(repo, files, message)] = api.commits
    assert message == "requests not sent before" and len(files) == 2
    assert {
        json.loads(data)["model"]["name"] for name, data in api.files("org/requests").items() if name.endswith(".json")
    } == {"acme/lost"}


def serve_in_a_process(command: list[str], env: dict, port: int):
    """Start a server process and wait until it answers on ``port``."""
    import os
    import subprocess
    import time
    import urllib.request

    server = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            return server
        except OSError:
            if server.poll() is not None:
                pytest.fail(server.stderr.read())
            time.sleep(0.5)
    server.terminate()
    pytest.fail(f"nothing answered on port {port}")


def upload_status(url: str, size: int) -> int:
    import httpx

    files = {"files": ("responses.jsonl", b"x" * size, "application/octet-stream")}
    return httpx.post(f"{url}gradio_api/upload", files=files, timeout=60).status_code


def test_gamut_space_serves_the_sample_runs(space, tmp_path):
    """The command a user runs: `gamut space` in its own process, over the same result folders, on
    gradio's GRADIO_SERVER_PORT (issue 12.18: it always took 7860) and refusing an oversize upload
    at gradio's upload route (issue 12.16: the route took any size, and needs no sign-in)."""
    import sys
    import urllib.request

    from gradio_client import Client
    from space_support import free_port

    from gamut_hf.leaderboard.submission import MAX_UPLOAD_BYTES

    _, config = space
    port = free_port()
    server = serve_in_a_process(
        [
            sys.executable,
            "-m",
            "gamut_hf",
            "space",
            "--results",
            str(config.results),
            "--requests",
            str(tmp_path / "requests"),
        ],
        {"GRADIO_SERVER_PORT": str(port)},
        port,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        client = Client(url, verbose=False)
        assert client.predict(api_name="/queue")["data"] == []
        table, _ = client.predict(["good-model-multimodal"], "any", "any", "any", "any", api_name="/questions")
        assert table["data"]
        page = urllib.request.urlopen(url, timeout=5).read().decode()
        assert "GAMUT" in page
        assert upload_status(url, MAX_UPLOAD_BYTES + 1024) == 413
        assert upload_status(url, 1024) == 200
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_space_app_refuses_an_oversize_upload(tmp_path):
    """Issue 12.16 for space/app.py, run as a Space runs it (`python app.py`, no hub repositories)."""
    import sys

    from space_support import free_port

    from gamut_hf.leaderboard.submission import MAX_UPLOAD_BYTES

    port = free_port()
    app = Path(__file__).resolve().parents[2] / "space" / "app.py"
    server = serve_in_a_process(
        [sys.executable, str(app)],
        {
            "GAMUT_SPACE_DATA": str(tmp_path / "data"),
            "GRADIO_SERVER_PORT": str(port),
            "GRADIO_SERVER_NAME": "127.0.0.1",
        },
        port,
    )
    try:
        assert upload_status(f"http://127.0.0.1:{port}/", MAX_UPLOAD_BYTES + 1024) == 413
    finally:
        server.terminate()
        server.wait(timeout=30)
