"""The transformers judge's throughput on this machine: SmolLM2-135M on text-only checks and the
tiny Qwen3-VL (tests/tiny_models.py) on multimodal checks with the sample's photos.

    .venv/bin/python scripts/bench_transformers_judge.py [--checks 300] [--questions 3]
        [--option batch_size=8] [--json out.json] [--compare before.json]

Requests go to the backend as the pipeline sends them (whole questions, 64 checks a call). Printed
per model: checks/s, judging seconds and the share of prompt tokens served from the reused prefix.
``--json`` keeps the figures and every verdict; ``--compare`` reads such a file (an earlier run,
e.g. before a change) and prints the speed-up and the share of checks whose verdict is the same.
The tiny Qwen3-VL has random weights: its figure measures the machinery (prompts, image
processing, the cache), not a real model's compute. Run it alone: a second busy process on two
cores slows torch a hundredfold.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_architectures import workload  # noqa: E402
from bench_judge import batches, judge_requests  # noqa: E402
from tiny_models import tiny_model  # noqa: E402

from gamut_hf.backends import load_backend  # noqa: E402
from gamut_hf.backends.models import DEFAULT_MODEL  # noqa: E402
from gamut_hf.evaluation.judge import judge_constraint  # noqa: E402


def measure(model: str, requests: list, options: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    backend = load_backend("transformers", model, **options)
    start = time.perf_counter() - started
    constraint = judge_constraint(rationale=False)
    verdicts: list[str] = []
    prompt = cached = 0
    try:
        started = time.perf_counter()
        for batch in batches(requests, 64):
            for completion in backend.complete(batch, constraint):
                verdicts.append(completion.text)
                prompt += completion.prompt_tokens
                cached += completion.cached_tokens or 0
        seconds = time.perf_counter() - started
    finally:
        backend.close()
    return {
        "checks": len(verdicts),
        "seconds": round(seconds, 1),
        "checks_per_s": round(len(verdicts) / seconds, 2),
        "start_s": round(start, 1),
        "prompt_tokens": prompt,
        "cached_share": round(cached / prompt, 3) if prompt else 0.0,
        "verdicts": verdicts,
    }


def _option(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    return name, json.loads(value) if value[:1] in '0123456789-tf[{"' else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=300, help="SmolLM2's text-only checks (whole questions)")
    parser.add_argument("--questions", type=int, default=3, help="multimodal sample questions for the tiny Qwen3-VL")
    parser.add_argument("--option", action="append", default=[], help="a transformers option, K=V")
    parser.add_argument("--json", default=None)
    parser.add_argument("--compare", default=None, help="figures of an earlier run (--json) to compare with")
    args = parser.parse_args()
    options = dict(_option(o) for o in args.option)
    text_checks = judge_requests(args.checks)
    _, image_checks = workload(args.questions)
    print(f"{platform.machine()}, {date.today()}, options {options}", flush=True)
    figures = {
        "SmolLM2-135M (text_only)": measure(DEFAULT_MODEL, text_checks, options),
        "tiny Qwen3-VL (multimodal)": measure(str(tiny_model("qwen3_vl")), image_checks, options),
    }
    earlier = json.loads(Path(args.compare).read_text(encoding="utf-8")) if args.compare else {}
    print("\n| model | checks | checks/s | judging s | prompt tokens from the reused prefix |")
    print("|---|---|---|---|---|")
    for name, r in figures.items():
        print(f"| {name} | {r['checks']} | {r['checks_per_s']} | {r['seconds']} | {100 * r['cached_share']:.0f}% |")
    for name, r in figures.items():
        before = earlier.get(name)
        if before:
            same = sum(a == b for a, b in zip(before["verdicts"], r["verdicts"], strict=True)) / len(r["verdicts"])
            print(
                f"{name}: {r['checks_per_s'] / before['checks_per_s']:.2f}x the earlier {before['checks_per_s']} "
                f"checks/s; the same verdict on {100 * same:.1f}% of checks"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
