"""Benchmark: every Space interaction at full scale (1,813 questions x 14 models, ~386,000 verdicts).

Simulates the paper's 14 models under one judge (multimodal) unless the folder exists, starts
the Space on 127.0.0.1, then times each endpoint through gradio_client (the whole round trip:
HTTP, queue, handler, serialisation) and the main clicks in headless chromium (click to the
result on screen). Prints a markdown table for BENCHMARKS.md.

    .venv/bin/python scripts/bench_space.py [RESULTS_DIR]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from space_support import CHROMIUM, CHROMIUM_ARGS, launch  # noqa: E402

from gamut_hf.leaderboard.space import SpaceConfig  # noqa: E402
from gamut_hf.reports.simulate import SimulatedJudge, SimulationParams, simulate_runs  # noqa: E402

REPEATS = 5


def timed(fn, repeats: int = REPEATS) -> tuple[float, float]:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), max(runs)


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gamut-space-bench")
    if not any(results.glob("*/results.json")):
        simulate_runs(results, SimulationParams(judges=[SimulatedJudge(name="Gemini 3.1 Pro")], text_only_easing=None))
    start = time.perf_counter()
    app, url = launch(
        SpaceConfig(results=results, requests=results.parent / "bench-requests", dataset=None, login=False)
    )
    startup = time.perf_counter() - start
    from gradio_client import Client

    from gamut_hf.leaderboard.entries import load_entries

    keys = [e.key for e in load_entries(results)]
    client = Client(url, verbose=False)
    every = (
        ["open", "proprietary", "unknown"],
        ["multimodal", "text_only"],
        ["Gemini 3.1 Pro"],
        ["under 10B", "10B to 100B", "over 100B", "unknown"],
        ["Gamut", "Gamut 95% CI", "AC", "V", "Ctx"],
    )
    rows = [("start (load 14 runs, intervals, index)", startup, startup)]
    rows.append(
        ("leaderboard: filter / columns / refresh", *timed(lambda: client.predict(*every, api_name="/refresh")))
    )
    rows.append(
        (
            "failures: list, one model, no filter",
            *timed(lambda: client.predict(keys[:1], "any", "any", "any", "any", api_name="/questions")),
        )
    )
    rows.append(
        (
            "failures: list, two models, 4 filters",
            *timed(
                lambda: client.predict(keys[:2], "Food", "answer_critical", "missing", "process", api_name="/questions")
            ),
        )
    )
    table, _ = client.predict(keys[:1], "any", "any", "contradicts", "any", api_name="/questions")
    question = table["data"][0][0]
    rows.append(
        (
            "failures: one question, two models side by side",
            *timed(lambda: client.predict(question, keys[:2], api_name="/question")),
        )
    )
    # The report is built in the background from start; a visitor opening the tab later finds it ready.
    from gamut_hf.reports.report import build_report

    rows.append(("(background) report build, 14 runs", *timed(lambda: build_report([results / k for k in keys]), 1)))
    rows.append(("analysis: first open", *timed(lambda: client.predict(api_name="/analysis"), 1)))
    rows.append(("analysis: later opens", *timed(lambda: client.predict(api_name="/analysis"))))

    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#leaderboard-table table")
        table_rows = page.locator("#leaderboard-table .virtual-body [role=row]")

        def search():
            page.fill("#leaderboard-table input.search-input", "Llama 4")
            expect(table_rows).to_have_count(2)
            page.fill("#leaderboard-table input.search-input", "")
            expect(table_rows).to_have_count(14)

        rows.append(("browser: search the leaderboard (type, then clear)", *timed(search)))

        def open_model():
            page.get_by_role("tab", name="Leaderboard").click()
            table_rows.nth(3).locator("[data-testid^=cell-]").first.click()
            expect(page.get_by_role("tab", name="Failures")).to_have_attribute("aria-selected", "true")
            expect(page.locator("#failure-count")).to_contain_text("questions match")

        rows.append(("browser: click a model, failures listed", *timed(open_model)))

        def open_question():
            page.locator("#failure-questions .virtual-body [role=row]").nth(1).locator(
                "[data-testid^=cell-]"
            ).first.click()
            expect(page.locator("#answer-left li.check").first).to_be_visible()

        rows.append(("browser: click a question, checks shown", *timed(open_question)))
        browser.close()
    app.close()
    print("| interaction | median s | max s |\n|---|---|---|")
    for name, median, worst in rows:
        print(f"| {name} | {median:.3f} | {worst:.3f} |")
    import resource

    print(f"\npeak RSS of the Space process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
