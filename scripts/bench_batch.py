"""One SmolLM2 judge stage asked synchronously (a real `vllm serve`) and as a provider batch (the
fake OpenAI Batch API of tests/fake_batch_api.py, whose batches `vllm run-batch` answers).

    .venv/bin/python scripts/bench_batch.py [--limit 1] [--judge-price 0.1/0.4]

The answers are generated once (the scripted candidate behind the fake endpoint) and each judge
run starts from a copy of them. Printed per way: requests the judge was asked (HTTP calls, or
requests submitted in batches), batches, the command's wall time (engine start included: `vllm
serve`'s start before the synchronous command is timed apart) and the stage's cost at the price
given (a batch at the batch rate). Run it alone: two busy processes on two cores slow both.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_batch_api import FakeOpenAIBatches  # noqa: E402
from fake_endpoint import FakeEndpoint  # noqa: E402
from scripted_api import scripted  # noqa: E402
from vllm_support import SERVED_MODEL_NAME, vllm_run_batch, vllm_server  # noqa: E402

from gamut_hf.backends.models import resolve_model  # noqa: E402


def gamut(*args: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gamut_hf", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"gamut {' '.join(args[:2])} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, done.stderr


def judged(folder: Path) -> tuple[int, float | None]:
    results = json.loads((folder / "results.json").read_text())
    cost = results.get("cost", {}).get("judge")
    return int(results["usage"]["judge"]["calls"]), None if cost is None else cost["usd"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=1)
    parser.add_argument("--judge-price", default="0.1/0.4")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    candidate = FakeEndpoint(responder=scripted)
    answers = work / "answers"
    gamut("generate", "--out", str(answers), "--model", "good-model", "--backend", "openai", "--base-url",
          candidate.url, "--limit", str(args.limit), "--variant", "text_only")  # fmt: skip
    candidate.stop()
    judge = ["--judge", SERVED_MODEL_NAME, "--judge-backend", "openai", "--judge-price", args.judge_price]
    rows = []

    sync = work / "sync"
    shutil.copytree(answers, sync)
    start = time.perf_counter()
    with vllm_server(resolve_model("smollm2-135m")) as url:
        started = time.perf_counter() - start
        seconds, _ = gamut("judge", "--out", str(sync), *judge, "--judge-base-url", url)
    calls, usd = judged(sync)
    rows.append(("synchronous, `vllm serve`", calls, calls, "-", f"{seconds:.1f} (+ {started:.1f} engine start)", usd))

    batch = work / "batch"
    shutil.copytree(answers, batch)
    fake = FakeOpenAIBatches(scripted, runner=vllm_run_batch, folder=work)
    try:
        seconds, _ = gamut("judge", "--out", str(batch), *judge, "--judge-base-url", fake.url, "--batch",
                           "--batch-poll", "1")  # fmt: skip
    finally:
        fake.stop()
    calls, usd = judged(batch)
    requests = sum(fake.submissions.values())
    rows.append(("`--batch`, fake Batch API + `vllm run-batch`", calls, requests, fake.created(),
                 f"{seconds:.1f} (engine start included)", usd))  # fmt: skip

    print(f"SmolLM2-135M judge, {args.limit} questions, judge price {args.judge_price} US$/M tokens\n")
    print("| way | verdicts stored | requests sent | batches | wall s | cost US$ |")
    print("|---|---|---|---|---|---|")
    for way, calls, requests, batches, wall, usd in rows:
        print(f"| {way} | {calls} | {requests} | {batches} | {wall} | {'-' if usd is None else f'{usd:.6f}'} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
