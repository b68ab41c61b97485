"""The Space's main flows in a real browser: Playwright driving Debian's chromium, headless.

Search the leaderboard, open a failing question from a model's name, submit an invalid and a
valid file, and watch the submission finish after `gamut worker` runs (a partial one: listed
under the ranked board, not in it). An unreadable result folder is named under the board. Screenshots go to
screenshots/ (git-ignored) for a human to look at.

The tour of issue 24 (`gamut simulate sim`, then `gamut space --results sim`) on a laptop
(1400 x 900) and a phone (400 x 850): every tab checked for what a person notices (the top
score on the first screen, no sideways scrolling, no header broken inside a word, no blank
table), its screenshots kept under the test's tmp folder and in $GAMUT_SCREENSHOTS when set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from scripted_api import api_run, worker_args
from space_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    launch,
    require_chromium,
    sample_ids,
    write_jsonl,
)

from gamut_hf.core.names import MODEL_TYPES
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


def test_open_a_failing_question_from_a_models_name(page):
    page.get_by_role("tab", name="Leaderboard").click()
    row = table_rows(page, "leaderboard-table").filter(has_text="poor-model")
    row.locator("[data-testid^=cell-]").filter(has_text="poor-model").click()
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
        *worker_args(config.requests, config.results, scripted_endpoint.url, "--once"),
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
            handle_file(str(upload)), "acme/signed", "", "open", "", "text_only", False, api_name="/submit"
        )
        assert status == "Refused: sign in with Hugging Face first."

        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.get_by_role("tab", name="Submit").click()
        with page.expect_navigation():  # /login/huggingface -> /login/callback -> back to the app
            page.locator("button").filter(has_text="Sign in").first.click()
        # No result yet: the board's place says so.
        expect(page.locator("#board-caption")).to_contain_text("No result yet")
        page.reload()
        expect(page.locator("#board-caption")).to_contain_text("No result yet")
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


# -- the tour of issue 24: `gamut simulate`, then `gamut space`, on a laptop and on a phone ----

SCREENS = {"laptop": (1400, 900), "phone": (400, 850)}
TABS = ("Leaderboard", "Failures", "Analysis", "Submit")
ONE_DECIMAL = re.compile(r"^-?\d+\.\d$")


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    """`gamut simulate sim --questions 10` and `gamut space --results sim`, as the README's tour
    runs them (the CLI's defaults: the sample as --dataset, the queue in sim/../requests)."""
    from conftest import run_gamut

    root = tmp_path_factory.mktemp("tour")
    done = run_gamut("simulate", root / "sim", "--questions", "10")
    assert done.code == 0, done.err
    port = free_port()
    log = root / "space.log"  # a file, not a pipe: a pipe nobody reads fills up and stalls the server
    with log.open("w") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "gamut_hf", "space", "--results", str(root / "sim"), "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_served(server, url, log)
        yield url, tmp_path_factory.mktemp("screenshots")
    finally:
        server.terminate()
        server.wait(timeout=60)


def wait_until_served(server: subprocess.Popen, url: str, log: Path) -> None:
    """Until the Space answers (a few minutes at most); its output if it stops first."""
    for _ in range(240):
        if server.poll() is not None:
            raise AssertionError(f"gamut space stopped ({server.returncode}): {log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:  # not listening yet
            pass
        try:
            server.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    raise AssertionError(f"gamut space did not answer at {url}: {log.read_text()}")


def keep(page, shots: Path, name: str) -> None:
    """A full-page screenshot for a human, under the test's tmp folder and in $GAMUT_SCREENSHOTS."""
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("GAMUT_SCREENSHOTS"):
        kept = Path(os.environ["GAMUT_SCREENSHOTS"])
        kept.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, kept / path.name)


# Words of visible table headers that the browser laid out over more than one line ("ran k").
BROKEN_HEADER_WORDS = """() => {
    const broken = [];
    for (const cell of document.querySelectorAll("th")) {
        if (!cell.checkVisibility() || cell.closest("[aria-hidden=true]")) continue;
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const word of node.data.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, word.index);
                range.setEnd(node, word.index + word[0].length);
                const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
                if (lines.size > 1) broken.push(word[0]);
            }
        }
    }
    return broken;
}"""
# Visible tables (gradio's grids) without a row: a blank table says nothing.
BLANK_TABLES = """() => [...document.querySelectorAll("[role=grid]")]
    .filter(grid => grid.checkVisibility() && Number(grid.getAttribute("aria-rowcount")) <= 1)
    .map(grid => grid.closest("[id]")?.id || "a table")"""


def check_screen(page, where: str) -> None:
    """What a person notices on any tab, at any width."""
    width, inner = page.evaluate("[document.scrollingElement.scrollWidth, innerWidth]")
    assert width <= inner, f"{where}: the page scrolls sideways ({width} px wide in {inner})"
    assert page.evaluate(BROKEN_HEADER_WORDS) == [], f"{where}: a header word broken across lines"
    assert page.evaluate(BLANK_TABLES) == [], f"{where}: a table shown empty, without a word"


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not laid out"
    return found


def board_cell(page, row: int, column: str):
    headers = page.locator("#leaderboard-table th").all_inner_texts()
    index = [header.strip() for header in headers].index(column)
    return page.locator(f"#leaderboard-table .virtual-body [data-testid=cell-{row}-{index}]")


def choose(page, elem_id: str, label: str) -> None:
    page.locator(f"#{elem_id} label").filter(has_text=label).click()


@pytest.mark.parametrize("screen", list(SCREENS))
def test_the_simulate_tour_on_a_laptop_and_a_phone(tour, browser, screen):
    """Issue 24 items 1-4 and 6 where a person meets them, at each width."""
    url, shots = tour
    width, height = SCREENS[screen]
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        page.goto(url)
        rows = table_rows(page, "leaderboard-table")
        expect(rows).to_have_count(14)  # the paper's 14 models, multimodal, under its main judge
        for tab in TABS:  # every tab one tap away, none behind an overflow menu
            expect(page.get_by_role("tab", name=tab)).to_be_visible()

        # The board: the best model's score on the first screen, one decimal, the filters folded away.
        top = board_cell(page, 0, "Gamut")
        assert ONE_DECIMAL.match(top.inner_text().strip())
        found = box(top)
        assert 0 <= found["x"] and found["x"] + found["width"] <= width and found["y"] + found["height"] <= height
        assert all(ONE_DECIMAL.match(board_cell(page, n, "Gamut").inner_text().strip()) for n in range(14))
        assert page.locator("#leaderboard-table th").filter(has_text=re.compile(r"^(variant|judge)$")).count() == 0
        expect(page.locator("#leaderboard-table")).to_contain_text("14 complete runs of the multimodal variant")
        expect(page.locator("#filter-type")).to_be_hidden()
        expect(page.locator("#partial-table")).to_be_hidden()  # no partial run: no empty table
        if screen == "laptop":  # the whole board on the first screen, no scrolling inside it
            assert box(rows.nth(13))["y"] + box(rows.nth(13))["height"] <= height
        check_screen(page, f"{screen}, leaderboard")
        keep(page, shots, f"{screen}-leaderboard")

        # Only judges of the chosen variant are offered (the paper's second judge grades multimodal).
        choose(page, "filter-variant", "text_only")
        expect(page.locator("#filter-judge input[type=radio]")).to_have_count(1)
        expect(page.locator("#leaderboard-table")).to_contain_text("of the text_only variant judged by Gemini 3.1 Pro")
        choose(page, "filter-variant", "multimodal")
        expect(page.locator("#filter-judge input[type=radio]")).to_have_count(2)
        expect(rows).to_have_count(14)

        # No type ticked: a line saying so, not a blank table.
        page.locator("#board-filters").get_by_text("Filters").click()
        kinds = page.locator("#filter-type input[type=checkbox]")
        expect(kinds).to_have_count(len(MODEL_TYPES))  # the accordion's content appears once opened
        for n in range(len(MODEL_TYPES)):
            kinds.nth(n).uncheck()
        expect(page.locator("#board-caption")).to_have_text("No model type chosen: tick one under Filters.")
        expect(page.locator("#leaderboard-table")).to_be_hidden()
        check_screen(page, f"{screen}, no type chosen")
        keep(page, shots, f"{screen}-leaderboard-no-type")
        page.reload()  # the default board again (ticking the types back passes through other boards)
        expect(rows).to_have_count(14)

        # A number is for reading and copying; the model's name opens its failures.
        score = board_cell(page, 0, "Gamut")
        score.dblclick()
        assert page.evaluate("getSelection().toString().trim()") == score.inner_text().strip()
        expect(page.get_by_role("tab", name="Leaderboard")).to_have_attribute("aria-selected", "true")
        name = board_cell(page, 1, "model")
        model = name.inner_text().strip()
        name.click()
        expect(page.get_by_role("tab", name="Failures")).to_have_attribute("aria-selected", "true")
        expect(page.locator("#failure-models")).to_contain_text(model)

        # The failure browser: the simulated dataset's real questions and images, without a flag.
        expect(page.locator("#question-header")).to_contain_text("Question:")
        expect(page.locator("#question-header")).not_to_contain_text("not loaded")
        expect(page.locator("#answer-left li.check").first).to_be_visible()
        image = page.locator("#question-image img")
        expect(image).to_be_visible()
        assert image.evaluate("img => img.complete && img.naturalWidth > 0")
        page.locator("#failure-models input").fill("GPT-4o · multimodal · judge Gemini")  # a second one beside
        page.locator("#failure-models input").press("Enter")
        expect(page.locator("#answer-right h4")).to_contain_text("GPT-4o:")
        picture, text = box(page.locator("#question-image")), box(page.locator("#question-header"))
        left, right = box(page.locator("#answer-left")), box(page.locator("#answer-right"))
        if screen == "phone":  # one above the other, each the page's width
            assert picture["y"] + picture["height"] <= text["y"] and left["y"] + left["height"] <= right["y"]
            assert left["width"] > 0.8 * width
        else:  # side by side
            assert picture["x"] + picture["width"] <= text["x"] and left["x"] + left["width"] <= right["x"]
        check_screen(page, f"{screen}, failures")
        keep(page, shots, f"{screen}-failures")

        page.get_by_role("tab", name="Analysis").click()
        expect(page.locator("#analysis-note")).to_contain_text("Analysis of the runs", timeout=180_000)
        check_screen(page, f"{screen}, analysis")
        keep(page, shots, f"{screen}-analysis")

        page.get_by_role("tab", name="Submit").click()
        expect(page.locator("#queue-note")).to_contain_text("no submission yet")
        expect(page.locator("#requests-table")).to_be_hidden()
        check_screen(page, f"{screen}, submit")
        keep(page, shots, f"{screen}-submit")
    finally:
        page.close()
