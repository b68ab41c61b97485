"""The same judge job through `gamut judge` and through `inspect eval gamut_hf/gamut`.

    .venv/bin/python scripts/bench_inspect.py [--concurrency 16] [--rounds 2] [--json out.json]

The job: the sample's checks (text_only) against stored answers, judged by SmolLM2-135M behind
one `vllm serve` (the project's CPU settings, verdicts constrained by vLLM's structured outputs),
at the same number of requests in flight. The answers are generated once by the same server
(`gamut generate`, 256 tokens) and every judge run starts from a copy of them; inspect reads them
through a task in this file that replays them instead of asking a candidate (``replayed_gamut``:
the project's samples and scorer, a solver that sets the stored answer).

Each job is timed three ways, each in its own process, with vLLM's prefix cache emptied before
each (otherwise a later run reads the earlier run's prompts from the cache):

- ``raw``: the very request bodies `gamut judge` sends, posted with httpx at the same
  concurrency, nothing else: the floor any harness stands on;
- ``gamut judge``: the stage's own time (its "judge: N checks in X s" line) and the command's;
- ``inspect eval``: from its log, the first sample's start to the last one's end, and the command's.

What a harness adds per check is (its stage time - raw) / checks. The same three then run
against the project's fake endpoint (tests/fake_endpoint.py), which answers at once, so the
harness's own cost is all there is. Prints a markdown table; ``--json`` keeps the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import date, datetime
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.model import ChatMessageAssistant, ModelOutput
from inspect_ai.solver import Generate, Solver, TaskState, solver

from gamut_hf.integrations.inspect_task import gamut_grader, gamut_samples

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the fake endpoint, its scripted judge and vllm serve, as the tests use them
from fake_endpoint import FakeEndpoint  # noqa: E402
from scripted_api import scripted, slug  # noqa: E402

BIN = Path(sys.executable).parent
JUDGE_NAME = "smollm2"  # the name `vllm serve` gives the model (tests/vllm_support.py)
STAGE_LINE = re.compile(r"judge: (\d+) checks in ([\d.]+) s")


# -- the task inspect runs: the project's samples and scorer, the stored answers replayed -------


@solver
def stored_answer(answers: dict[str, str]) -> Solver:
    """Sets the stored answer as the model's output, as the task's own solver leaves it."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        text = answers[str(state.sample_id)]
        state.output = ModelOutput.from_content(model="stored", content=text)
        state.messages.append(ChatMessageAssistant(content=text))
        state.metadata["answer"] = text
        return state

    return solve


@task
def replayed_gamut(answers: str, structured: str = "vllm") -> Task:
    """The sample's questions, answered from the run folder ``answers``, graded by the ``grader``."""
    from gamut_hf.evaluation.store import RunStore

    with RunStore.reading(answers) as store:
        stored = {row["question_id"]: row["response"] for row in store.rows("generations")}
    samples = [sample for sample in gamut_samples() if sample.id in stored]
    return Task(
        dataset=MemoryDataset(samples, name="gamut-sample"),
        solver=stored_answer(stored),
        scorer=gamut_grader(structured=structured),
    )


# -- the three clients --------------------------------------------------------------------------


def replay(bodies_path: Path, url: str, concurrency: int) -> None:
    """The floor: every body posted as it is, ``concurrency`` at a time; prints the seconds."""
    import httpx

    bodies = [json.loads(line) for line in bodies_path.read_text().splitlines()]

    async def main() -> float:
        gate = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

            async def post(body: dict) -> None:
                async with gate:
                    (await client.post("/chat/completions", json=body)).raise_for_status()

            started = time.perf_counter()
            await asyncio.gather(*(post(body) for body in bodies))
            return time.perf_counter() - started

    print(json.dumps({"seconds": asyncio.run(main()), "requests": len(bodies)}))


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{command[:3]} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds, done.stdout + done.stderr


def gamut_judge(answers: Path, out: Path, url: str, concurrency: int) -> dict:
    shutil.copytree(answers, out)
    wall, output = timed(
        [str(BIN / "gamut"), "judge", "--out", str(out), "--variant", "text_only", "--judge", JUDGE_NAME,
         "--judge-backend", "openai", "--judge-base-url", url, "--judge-option", "structured=vllm",
         "--concurrency", str(concurrency)]
    )  # fmt: skip
    match = STAGE_LINE.search(output)
    if not match:
        sys.exit(f"no judge stage line in gamut judge's output:\n{output[-2000:]}")
    return {"checks": int(match[1]), "stage_s": float(match[2]), "command_s": wall, "folder": str(out)}


def inspect_judge(answers: Path, logs: Path, url: str, concurrency: int) -> dict:
    from inspect_ai.log import read_eval_log

    grader = f"{{model: openai-api/bench/{JUDGE_NAME}, model_args: {{base_url: '{url}'}}}}"
    wall, _ = timed(
        [str(BIN / "inspect"), "eval", f"{Path(__file__).resolve()}@replayed_gamut", "--model", "mockllm/model",
         "-T", f"answers={answers}", "--model-role", f"grader={grader}", "--max-connections", str(concurrency),
         "--log-dir", str(logs), "--log-format", "eval", "--display", "none"],
        env={"BENCH_API_KEY": "EMPTY", "INSPECT_LOG_LEVEL": "warning"},
    )  # fmt: skip
    (log_path,) = logs.glob("*.eval")
    log = read_eval_log(str(log_path))
    samples = log.samples or []
    # The samples' span: the judging itself (the log's own times are whole seconds).
    started = min(datetime.fromisoformat(sample.started_at) for sample in samples)
    completed = max(datetime.fromisoformat(sample.completed_at) for sample in samples)
    checks = sum(len(sample.scores["gamut_grader"].metadata["verdicts"]) for sample in samples)
    return {"checks": checks, "stage_s": (completed - started).total_seconds(), "command_s": wall, "log": str(log_path)}


def raw_judge(bodies: Path, url: str, concurrency: int) -> dict:
    _, output = timed(
        [sys.executable, __file__, "--replay", str(bodies), "--url", url, "--concurrency", str(concurrency)]
    )
    result = json.loads(output.strip().splitlines()[-1])
    return {"checks": result["requests"], "stage_s": result["seconds"], "command_s": None}


# -- the orchestration --------------------------------------------------------------------------


def reset_prefix_cache(url: str) -> None:
    """Empty vLLM's prefix cache (a dev-mode route), so each run starts from the same state."""
    request = urllib.request.Request(url.removesuffix("/v1") + "/reset_prefix_cache", method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()


def verdict_agreement(run_folder: Path, log_path: Path) -> tuple[float, int]:
    """The share of checks given the same verdict by `gamut judge` (its details) and by inspect (its log)."""
    import pyarrow.parquet as pq
    from inspect_ai.log import read_eval_log

    rows = pq.read_table(run_folder / "details.parquet", columns=["question_id", "check_id", "verdict"]).to_pylist()
    ours = {(row["question_id"], row["check_id"]): row["verdict"] for row in rows}
    theirs = {
        (str(sample.id), verdict["check_id"]): verdict["verdict"]
        for sample in read_eval_log(str(log_path)).samples or []
        for verdict in sample.scores["gamut_grader"].metadata["verdicts"]
    }
    return sum(ours[key] == theirs.get(key) for key in ours) / len(ours), len(ours)


def one_endpoint(
    name: str, url: str, answers: Path, bodies: Path, work: Path, concurrency: int, rounds: int, endpoint=None
) -> list[dict]:
    """Every harness ``rounds`` times against ``url``, in turn (raw, gamut, inspect; then the
    other way round), vLLM's prefix cache emptied before each."""
    runs: list[dict] = []
    for round_ in range(rounds):
        for harness in ["raw", "gamut", "inspect"][:: 1 if round_ % 2 == 0 else -1]:
            if endpoint is None:
                reset_prefix_cache(url)
            else:
                endpoint.max_in_flight = 0
            folder = work / f"{slug(name)}-{harness}-{round_}"
            if harness == "gamut":
                result = gamut_judge(answers, folder, url, concurrency)
            elif harness == "inspect":
                result = inspect_judge(answers, folder, url, concurrency)
            else:
                result = raw_judge(bodies, url, concurrency)
            if endpoint is not None:
                result["max_in_flight"] = endpoint.max_in_flight
            result.update(endpoint=name, harness=harness, round=round_)
            print(json.dumps(result), file=sys.stderr)
            runs.append(result)
    return runs


def recorded_bodies(answers: Path, work: Path, concurrency: int) -> Path:
    """The bodies `gamut judge` sends for this job, recorded by the fake endpoint (the raw client
    posts these to vLLM, under vLLM's model name)."""
    endpoint = FakeEndpoint(responder=scripted)
    try:
        gamut_judge(answers, work / "recorded", endpoint.url, concurrency)
    finally:
        endpoint.stop()
    path = work / "bodies.jsonl"
    path.write_text("".join(json.dumps(body) + "\n" for body in endpoint.bodies))
    return path


def summary(runs: list[dict]) -> list[dict]:
    """The best of each (endpoint, harness) over the rounds, with checks/s and the added cost."""
    rows = []
    for endpoint in dict.fromkeys(run["endpoint"] for run in runs):
        best = {}
        for harness in ("raw", "gamut", "inspect"):
            mine = [run for run in runs if run["endpoint"] == endpoint and run["harness"] == harness]
            if mine:
                best[harness] = min(mine, key=lambda run: run["stage_s"]) | {
                    "all_stage_s": [round(run["stage_s"], 2) for run in mine]
                }
        for harness, run in best.items():
            added = (run["stage_s"] - best["raw"]["stage_s"]) / run["checks"] * 1000 if "raw" in best else None
            rows.append(
                run
                | {
                    "checks_per_s": run["checks"] / run["stage_s"],
                    "added_ms_per_check": None if harness == "raw" else added,
                }
            )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| endpoint | harness | checks | stage s (best; all rounds) | checks/s | added ms/check | command s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        added = "" if row["added_ms_per_check"] is None else f"{row['added_ms_per_check']:.1f}"
        command = "" if row["command_s"] is None else f"{row['command_s']:.1f}"
        rounds = ", ".join(f"{s:.1f}" for s in row["all_stage_s"])
        lines.append(
            f"| {row['endpoint']} | {row['harness']} | {row['checks']} | {row['stage_s']:.1f} ({rounds}) "
            f"| {row['checks_per_s']:.2f} | {added} | {command} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--work", type=Path, help="keep the run folders and logs here (default: a temporary folder)")
    parser.add_argument("--replay", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay:
        replay(args.replay, args.url, args.concurrency)
        return

    from vllm_support import vllm_server

    from gamut_hf.backends.models import resolve_model

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-inspect-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # the server's /reset_prefix_cache
    answers = work / "answers"
    runs: list[dict] = []
    with vllm_server(resolve_model("smollm2-135m")) as url:
        seconds, _ = timed(
            [str(BIN / "gamut"), "generate", "--out", str(answers), "--model", JUDGE_NAME, "--backend", "openai",
             "--base-url", url, "--variant", "text_only", "--max-tokens", "256", "--concurrency", str(args.concurrency)]
        )  # fmt: skip
        print(f"answers generated in {seconds:.1f} s", file=sys.stderr)
        bodies = recorded_bodies(answers, work, args.concurrency)
        runs += one_endpoint("vllm serve", url, answers, bodies, work, args.concurrency, args.rounds)
    endpoint = FakeEndpoint(responder=scripted)
    try:
        runs += one_endpoint(
            "fake (instant)", endpoint.url, answers, bodies, work, args.concurrency, args.rounds, endpoint=endpoint
        )
    finally:
        endpoint.stop()

    gamut_run = next(run for run in runs if run["endpoint"] == "vllm serve" and run["harness"] == "gamut")
    inspect_run = next(run for run in runs if run["endpoint"] == "vllm serve" and run["harness"] == "inspect")
    agreement, compared = verdict_agreement(Path(gamut_run["folder"]), Path(inspect_run["log"]))
    rows = summary(runs)
    print(table(rows))
    print(f"\nverdicts equal between the two harnesses (vllm serve, first rounds): {agreement:.1%} of {compared}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": date.today().isoformat(),
                    "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "concurrency": args.concurrency,
                    "runs": runs,
                    "summary": rows,
                    "verdict_agreement": agreement,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
