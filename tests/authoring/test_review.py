"""The review app: gradio_client for its endpoints, Playwright with Debian's chromium for the annotator's flow.

The workspace is drafted by the scripted authoring model (test_authoring.py); what is under
test is persistence: every edit in the store at once with who and when, surviving a reload,
the diff against the compiled rubric, the decision, and an export that `gamut build` takes.
"""

from __future__ import annotations

import json
import shutil

import pytest
from fake_endpoint import FakeEndpoint
from space_support import CHROMIUM, CHROMIUM_ARGS, free_port, require_chromium
from test_authoring import SAMPLE_IMAGES, author_model, planted, write_snippets

from gamut_hf.authoring.evidence import LocalSnippetStore
from gamut_hf.authoring.pipeline import draft
from gamut_hf.authoring.store import AuthoringStore
from gamut_hf.backends import load_backend

QID = "espresso"


@pytest.fixture
def workspace(tmp_path):
    server = FakeEndpoint(responder=author_model)
    try:
        with AuthoringStore(tmp_path / "work") as store:
            planted(store, QID, "")
            image = sorted(SAMPLE_IMAGES.iterdir())[0]
            shutil.copy2(image, store.folder / "images" / "x.png")
            backend = load_backend("openai", "author-model", base_url=server.url)
            retriever = LocalSnippetStore.open(write_snippets(tmp_path / "snippets.jsonl"))
            assert draft(store, retriever, backend, echo=lambda _: None) == {}
        yield tmp_path / "work"
    finally:
        server.stop()


@pytest.fixture
def review_app(workspace):
    from gamut_hf.authoring.review import build_review_app

    app = build_review_app(workspace)
    app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield app.local_url, workspace
    app.close()


def test_review_endpoints_save_each_edit_with_who_and_refuse_anonymous_ones(review_app):
    from gradio_client import Client

    url, workspace = review_app
    client = Client(url, verbose=False)
    shown = client.predict(QID, api_name="/view")
    assert shown[1].startswith("How should I make this drink?")
    assert "i1.fact" in shown[3] and "storage enemies" in shown[3]
    assert client.predict("", QID, "Edited question?", api_name="/edit_question") == "Not saved: enter your name first."
    assert (
        client.predict("ana", QID, "How should I make this drink at home?", api_name="/edit_question")
        == "Saved question (ana)."
    )
    assert (
        client.predict("ana", QID, "How should I make this drink at home, step by step?", api_name="/edit_question")
        == "Saved question (ana)."
    )
    checks = shown[4]
    checks["data"][0][4] = "The response says to use a burr grinder."
    message, diff = client.predict("ana", QID, checks, api_name="/edit_checks")
    assert message.startswith("Saved the binary rubric") and diff["data"][0][:2] == ["changed text", "i1.fact"]
    bad = json.loads(json.dumps(checks))
    bad["data"][1][3] = "urgent"
    message, _ = client.predict("ana", QID, bad, api_name="/edit_checks")
    assert message.startswith("Not saved: question espresso, field tier: check i2.coverage: 'urgent' is not allowed")
    message, *_ = client.predict("ben", QID, api_name="/rework")
    assert message == "espresso: rework (ben)."

    with AuthoringStore(workspace) as store:
        question = store.question(QID)
        assert question.question == "How should I make this drink at home, step by step?"
        assert question.binary_rubric[0]["text"] == "The response says to use a burr grinder."
        assert question.status == "rework"
        trail = store.edits(QID)
        # Two keystroke-level saves of the question coalesce into one entry that keeps the first value.
        assert [(e["who"], e["field"]) for e in trail] == [
            ("ana", "question"),
            ("ana", "binary_rubric"),
            ("ben", "status"),
        ]
        assert trail[0]["before"].startswith("How should I make this drink?")
        assert trail[0]["after"] == "How should I make this drink at home, step by step?"


def test_an_annotators_edits_survive_a_reload_and_export_builds(review_app, gamut, tmp_path):
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    url, workspace = review_app
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})

        def open_question():
            page.goto(url)
            page.locator("#review-question input").click()
            page.get_by_role("option", name=f"{QID} · drafted · ").first.click()
            expect(page.locator("#scaffold")).to_contain_text("storage enemies")

        open_question()
        page.locator("#annotator input, #annotator textarea").first.fill("ana")
        question = page.locator("#review-question-text input, #review-question-text textarea").first
        question.click()
        question.press("End")
        question.press_sequentially(" at home")  # typed like a person: one input event per key
        expect(page.locator("#review-message textarea")).to_have_value("Saved question (ana).")

        page.close()  # a closed tab loses nothing: the edit is already stored
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        open_question()
        expect(page.locator("#review-question-text input, #review-question-text textarea").first).to_have_value(
            "How should I make this drink? at home"
        )
        expect(page.locator("#trail")).to_contain_text("ana")
        page.locator("#annotator input, #annotator textarea").first.fill("ana")
        page.click("#accept")
        expect(page.locator("#review-message textarea")).to_have_value(f"{QID}: accepted (ana).")
        page.locator("#export-to input, #export-to textarea").first.fill("annotations")
        page.click("#export")
        exported = workspace / "exports" / "annotations"
        expect(page.locator("#review-message textarea")).to_have_value(
            f"Exported 1 accepted question(s) to {exported}; build it with `gamut build {exported} OUT`."
        )
        page.screenshot(path=str(workspace / "review.png"), full_page=True)
        browser.close()

    record = json.loads((exported / "questions.jsonl").read_text().splitlines()[0])
    assert record["question"] == "How should I make this drink? at home"
    done = gamut("build", exported, tmp_path / "built")
    assert done.code == 0, done.err


def test_export_endpoint_writes_only_under_the_workspace(review_app, tmp_path):
    """A path typed into the server's export box must not choose where the server writes."""
    from gradio_client import Client

    url, workspace = review_app
    client = Client(url, verbose=False)
    client.predict("ana", QID, api_name="/accepted")
    outside = tmp_path / "outside"
    for typed in (str(outside), "../outside", "..", ".hidden", "a/b", ""):
        message = client.predict(typed, api_name="/export")
        assert message.startswith("Not exported: export name"), (typed, message)
    assert not outside.exists() and not (workspace / "outside").exists()
    assert not (workspace / "exports").exists()
    message = client.predict("round-1", api_name="/export")
    assert message.startswith(f"Exported 1 accepted question(s) to {workspace / 'exports' / 'round-1'}")
    assert (workspace / "exports" / "round-1" / "questions.jsonl").is_file()


def test_concurrent_edits_from_many_threads_are_all_kept(workspace):
    """The app serves each request on a worker thread; 600 edits from 8 threads at once all land,
    and a failing edit on one thread (rolled back) never undoes another thread's edit."""
    import threading

    errors: list[BaseException] = []
    with AuthoringStore(workspace) as store:
        start = threading.Barrier(8)

        def annotate(thread: int) -> None:
            start.wait()
            for i in range(75):
                try:
                    field = ("question", "text_question")[i % 2]
                    store.edit(QID, f"t{thread}-{i}", field, f"thread {thread} edit {i}")
                    if i % 10 == 0:  # an edit that fails inside its transaction, rolled back
                        store.edit("no-such-question", f"t{thread}", "question", "lost")
                except KeyError:
                    pass
                except BaseException as error:  # noqa: BLE001 - collected and asserted below
                    errors.append(error)

        threads = [threading.Thread(target=annotate, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        trail = store.edits(QID)
        assert len(trail) == 600  # every edit recorded, none undone by another thread's rollback
        assert {e["who"] for e in trail} == {f"t{t}-{i}" for t in range(8) for i in range(75)}
        last = {
            field: [e for e in trail if e["field"] == field][-1]["after"] for field in ("question", "text_question")
        }
        question = store.question(QID)
        assert (question.question, question.text_question) == (last["question"], last["text_question"])


def test_cli_export_is_atomic_and_never_replaces_a_folder_that_is_not_an_export(workspace, gamut, tmp_path):
    with AuthoringStore(workspace) as store:
        store.edit(QID, "ana", "status", "accepted")
    notes = tmp_path / "project"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    done = gamut("author", "export", workspace, notes)
    assert done.code == 2 and "that gamut author export did not write (first: notes.txt)" in done.err
    assert (notes / "notes.txt").read_text() == "mine" and sorted(p.name for p in notes.iterdir()) == ["notes.txt"]

    out = tmp_path / "annotations"
    assert gamut("author", "export", workspace, out).code == 0
    first = (out / "questions.jsonl").read_text()
    with AuthoringStore(workspace) as store:
        store.edit(QID, "ana", "question", "How should I make this drink, exactly?")
    assert gamut("author", "export", workspace, out).code == 0  # a previous export's files are replaced
    second = (out / "questions.jsonl").read_text()
    assert second != first and "exactly?" in second
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".annotations")) == []


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_never_empties_a_hand_made_annotation_folder_and_a_rerun_replaces_only_its_own(
    workspace, gamut, tmp_path
):
    """Issue 23: an annotation folder (questions.jsonl + images/) not written by gamut is refused in
    one line, byte for byte untouched; an export's rerun replaces its own files and no one else's."""
    mine = tmp_path / "my-annotations"
    (mine / "images").mkdir(parents=True)
    (mine / "questions.jsonl").write_text('{"id": "hand-made"}\n')
    (mine / "images" / "photo.png").write_bytes(b"\x89PNG hand-made")
    before = _files(mine)
    for accepted in (False, True):  # no accepted question (it used to leave 0 bytes), then one
        if accepted:
            with AuthoringStore(workspace) as store:
                store.edit(QID, "ana", "status", "accepted")
        done = gamut("author", "export", workspace, mine)
        assert done.code == 2 and done.out == "", done.out
        assert done.err.strip().count("\n") == 0 and str(mine) in done.err
        assert "2 file(s) or folder(s) that gamut author export did not write (first: images)" in done.err
        assert "export into a new or empty folder" in done.err
        assert _files(mine) == before and sorted(p.name for p in mine.iterdir()) == ["images", "questions.jsonl"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".my-annotations")]

    out = tmp_path / "export"
    done = gamut("author", "export", workspace, out)
    assert done.code == 0 and "exported 1 accepted" in done.out, done.err
    manifest = json.loads((out / ".gamut-manifest.json").read_text())
    assert manifest["command"] == "author export"
    image = next(name for name in manifest["files"] if name.startswith("images/"))
    assert sorted(manifest["files"]) == [image, "questions.jsonl"]
    (out / "notes.txt").write_text("mine")  # a file of the user's beside the export
    with AuthoringStore(workspace) as store:
        store.edit(QID, "ana", "status", "rejected")
    done = gamut("author", "export", workspace, out)  # the rerun replaces its files, drops the stale image
    assert done.code == 0 and "exported 0 accepted" in done.out, done.err
    assert _files(out) == {
        ".gamut-manifest.json": (out / ".gamut-manifest.json").read_bytes(),
        "notes.txt": b"mine",
        "questions.jsonl": b"",
    }
    assert sorted(json.loads((out / ".gamut-manifest.json").read_text())["files"]) == ["questions.jsonl"]

    (out / "questions.jsonl").write_text("edited by hand\n")  # changed since the export wrote it: not its own now
    done = gamut("author", "export", workspace, out)
    assert (
        done.code == 2 and "questions.jsonl was not written by gamut author export (or was changed since)" in done.err
    )
    assert (out / "questions.jsonl").read_text() == "edited by hand\n" and (out / "notes.txt").read_text() == "mine"
