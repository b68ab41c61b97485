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

from gamut_hf.authoring import draft
from gamut_hf.authoring_store import AuthoringStore
from gamut_hf.backends import load_backend
from gamut_hf.evidence import LocalSnippetStore

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
    from gamut_hf.review import build_review_app

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
    assert client.predict("ana", QID, "How should I make this drink at home?", api_name="/edit_question") == \
        "Saved question (ana)."
    assert client.predict("ana", QID, "How should I make this drink at home, step by step?",
                          api_name="/edit_question") == "Saved question (ana)."
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
        assert [(e["who"], e["field"]) for e in trail] == [("ana", "question"), ("ana", "binary_rubric"),
                                                           ("ben", "status")]
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
            "How should I make this drink? at home")
        expect(page.locator("#trail")).to_contain_text("ana")
        page.locator("#annotator input, #annotator textarea").first.fill("ana")
        page.click("#accept")
        expect(page.locator("#review-message textarea")).to_have_value(f"{QID}: accepted (ana).")
        page.locator("#export-to input, #export-to textarea").first.fill(str(tmp_path / "annotations"))
        page.click("#export")
        expect(page.locator("#review-message textarea")).to_have_value(
            f"Exported 1 accepted question(s) to {tmp_path / 'annotations'}; build it with "
            f"`gamut build {tmp_path / 'annotations'} OUT`.")
        page.screenshot(path=str(workspace / "review.png"), full_page=True)
        browser.close()

    record = json.loads((tmp_path / "annotations" / "questions.jsonl").read_text().splitlines()[0])
    assert record["question"] == "How should I make this drink? at home"
    done = gamut("build", tmp_path / "annotations", tmp_path / "built")
    assert done.code == 0, done.err
