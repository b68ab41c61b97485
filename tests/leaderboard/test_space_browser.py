"""The Space's main flows in a real browser: Playwright driving Debian's chromium, headless.

Search the leaderboard, open a failing question from a model's row, submit an invalid and a
valid file, and watch the submission finish after `gamut worker` runs (a partial one: listed
under the ranked board, not in it). An unreadable result folder is named under the board. Screenshots go to
screenshots/ (git-ignored) for a human to look at.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scripted_api import api_run
from space_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    launch,
    require_chromium,
    sample_ids,
    write_jsonl,
)

from gamut_hf.leaderboard.space import SpaceConfig

require_chromium()

from playwright.sync_api import expect, sync_playwright  # noqa: E402

SHOTS = Path(__file__).resolve().parents[2] / "screenshots"
SNEAKY = '<img src=x onerror="window.__xss=1">'


@pytest.fixture(scope="module")
def site(tmp_path_factory, scripted_endpoint):
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("browser")
    results = root / "results"
    for n, model in enumerate(("good-model", "poor-model", SNEAKY)):  # complete runs: ranked
        api_run(run_gamut, results / f"run-{n}", scripted_endpoint.url, model, "strict-judge", "multimodal", limit=25)
    (results / "broken").mkdir()
    (results / "broken" / "results.json").write_text('{"model": {}}', encoding="utf-8")
    config = SpaceConfig(results=results, requests=root / "requests", dataset="gamut-sample", login=False)
    app, url = launch(config)
    yield url, config
    app.close()


@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(browser, site):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(site[0])
    page.wait_for_selector("#leaderboard-table table")
    return page


def table_rows(page, elem_id: str):
    return page.locator(f"#{elem_id} .virtual-body [role=row]")


def test_search_the_leaderboard_and_names_stay_text(page):
    expect(table_rows(page, "leaderboard-table")).to_have_count(3)
    expect(page.locator("#not-loaded")).to_contain_text("broken")
    page.fill("#leaderboard-table input.search-input", "poor")
    expect(table_rows(page, "leaderboard-table")).to_have_count(1)
    page.screenshot(path=str(SHOTS / "leaderboard-search.png"))
    page.fill("#leaderboard-table input.search-input", "onerror")
    expect(table_rows(page, "leaderboard-table")).to_have_count(1)
    expect(table_rows(page, "leaderboard-table").first).to_contain_text(SNEAKY)
    assert page.evaluate("window.__xss") is None
    page.fill("#leaderboard-table input.search-input", "")


def test_open_a_failing_question_from_a_models_row(page):
    page.get_by_role("tab", name="Leaderboard").click()
    row = table_rows(page, "leaderboard-table").filter(has_text="poor-model")
    row.locator("[data-testid^=cell-]").first.click()
    expect(page.get_by_role("tab", name="Failures")).to_have_attribute("aria-selected", "true")
    expect(table_rows(page, "failure-questions").first).to_be_visible()
    table_rows(page, "failure-questions").first.locator("[data-testid^=cell-]").first.click()
    expect(page.locator("#answer-left li.check").first).to_be_visible()
    assert page.locator("#answer-left li.check").count() >= 5
    expect(page.locator("#answer-left")).to_contain_text("Answer by poor-model")
    expect(page.locator("#question-header")).to_contain_text("Text-only question:")
    page.screenshot(path=str(SHOTS / "failure-question.png"), full_page=True)
    assert page.evaluate("window.__xss") is None


def fill(page, elem_id: str, value: str):
    page.locator(f"#{elem_id} textarea, #{elem_id} input").first.fill(value)


def test_submit_an_invalid_then_a_valid_file_and_see_it_finish(page, site, scripted_endpoint, gamut, tmp_path):
    url, config = site
    ids = sample_ids()
    page.get_by_role("tab", name="Submit").click()
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question_id": "nope", "response": "x"}])
    page.locator("#upload input[type=file]").set_input_files(str(bad))
    fill(page, "model-name", "acme/browser-vl")
    fill(page, "model-link", "https://example.org/browser-vl")
    page.locator("#partial input").check()
    page.click("#send")
    expect(page.locator("#submit-status textarea")).to_have_value("Refused:\nline 1: unknown question_id 'nope'")
    assert not config.requests.exists() or not list(config.requests.glob("*.json"))

    good = write_jsonl(
        tmp_path / "good.jsonl", [{"question_id": q, "response": f"Answer by good-model on {q}"} for q in ids[:2]]
    )
    page.locator("#upload button[aria-label='Clear'], #upload button[aria-label='Remove this file']").first.click()
    page.locator("#upload input[type=file]").set_input_files(str(good))
    page.click("#send")
    expect(page.locator("#submit-status textarea")).to_have_value(
        re.compile(r"^Accepted: acme/browser-vl \(multimodal\), 2 answers")
    )
    expect(page.locator("#requests-table")).to_contain_text("PENDING")
    page.screenshot(path=str(SHOTS / "submit-pending.png"), full_page=True)

    done = gamut(
        "worker",
        "--requests",
        config.requests,
        "--results",
        config.results,
        "--once",
        "--judge",
        "strict-judge",
        "--judge-backend",
        "openai",
        "--judge-base-url",
        scripted_endpoint.url,
    )
    assert done.code == 0, done.err
    page.click("#requests-refresh")
    expect(page.locator("#requests-table")).to_contain_text("FINISHED")
    page.get_by_role("tab", name="Leaderboard").click()
    page.click("#refresh")
    expect(page.locator("#partial-table")).to_contain_text("acme/browser-vl (partial)")
    expect(page.locator("#leaderboard-table")).not_to_contain_text("acme/browser-vl")
    page.screenshot(path=str(SHOTS / "leaderboard-after-submission.png"), full_page=True)
    [record] = [json.loads(p.read_text()) for p in config.requests.glob("*.json")]
    assert record["status"] == "FINISHED"


def test_in_a_space_submissions_need_a_signed_in_user(browser, tmp_path, monkeypatch):
    """The Space build (login on): gradio's local stand-in for Hugging Face OAuth is given a user,
    since the hub cannot be reached; sign-in, the session cookie and OAuthProfile are gradio's own."""
    import time

    import gradio.oauth
    from gradio_client import Client, handle_file

    monkeypatch.setattr(
        gradio.oauth,
        "_get_mocked_oauth_info",
        lambda: {
            "access_token": "not-a-token",
            "token_type": "bearer",
            "expires_in": 3600,
            "scope": "openid profile",
            "expires_at": int(time.time()) + 3600,
            "userinfo": {
                "sub": "1",
                "name": "Test User",
                "preferred_username": "tester",
                "profile": "https://huggingface.co/tester",
                "picture": "",
            },
        },
    )
    (tmp_path / "results").mkdir()
    config = SpaceConfig(
        results=tmp_path / "results", requests=tmp_path / "requests", dataset="gamut-sample", login=True
    )
    app, url = launch(config)
    try:
        upload = write_jsonl(tmp_path / "r.jsonl", [{"question_id": q, "response": "an answer"} for q in sample_ids()])
        status, _ = Client(url, verbose=False).predict(
            handle_file(str(upload)), "acme/signed", "", "open", 0, "text_only", False, api_name="/submit"
        )
        assert status == "Refused: sign in with Hugging Face first."

        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.get_by_role("tab", name="Submit").click()
        with page.expect_navigation():  # /login/huggingface -> /login/callback -> back to the app
            page.locator("button").filter(has_text="Sign in").first.click()
        page.wait_for_selector("#leaderboard-table")
        page.reload()
        page.wait_for_selector("#leaderboard-table")
        page.get_by_role("tab", name="Submit").click()
        page.screenshot(path=str(SHOTS / "signed-in.png"), full_page=True)
        expect(page.locator("button").filter(has_text="Logout (tester)")).to_be_visible()
        page.locator("#upload input[type=file]").set_input_files(str(upload))
        fill(page, "model-name", "acme/signed")
        page.click("#send")
        expect(page.locator("#submit-status textarea")).to_have_value(re.compile(r"^Accepted: acme/signed"))
        [record] = [json.loads(p.read_text()) for p in config.requests.glob("*.json")]
        assert record["submitted_by"] == "tester"
        page.close()
    finally:
        app.close()
