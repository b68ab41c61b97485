"""CPU throughput of every tiny architecture (tests/tiny_models.py) through both local backends.

    .venv/bin/python scripts/bench_architectures.py [--family qwen3_vl ...] [--questions 3]
        [--block-sizes 16,32,64,128] [--json out.json]

For each family and backend: the candidate answers the first N multimodal sample questions (the
photo and question, 32 new tokens each), then the judge grades every check of those questions
against a middling response, in the pipeline's batches (whole questions), so prompts have real
judge prompts' shape. Printed per cell: engine start, generations/s, checks/s and the share of
judge prompt tokens served from a prefix cache (transformers: the prefill it reuses; vLLM: its
automatic prefix cache). ``--block-sizes`` also measures vLLM's KV block size on the first family.
The models have random weights: the figures measure the machinery (prompt, image, cache), not a
real model's speed. Run it alone: a second busy process on two cores halves every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_judge import batches, middling_response  # noqa: E402
from tiny_models import FAMILIES, tiny_model  # noqa: E402

from gamut_hf.backends import load_backend  # noqa: E402
from gamut_hf.dataset.loader import iter_questions, load_gamut  # noqa: E402
from gamut_hf.evaluation.judge import generate_request, judge_constraint, judge_request  # noqa: E402

NEW_TOKENS = 32


def workload(questions: int) -> tuple[list, list]:
    """The candidate's requests and the judge's (checks of a question next to each other)."""
    rows = list(iter_questions(load_gamut("gamut-sample", "multimodal"), "multimodal"))[:questions]
    answers = [generate_request(q.question, q.image, NEW_TOKENS) for q in rows]
    checks = [
        dataclasses.replace(
            judge_request(q.question, q.image, middling_response(q), c, rationale=False), prefix_key=q.id
        )
        for q in rows
        for c in q.checks
    ]
    return answers, checks


def measure(backend_name: str, folder: str, options: dict[str, Any], answers: list, checks: list) -> dict[str, Any]:
    started = time.perf_counter()
    backend = load_backend(backend_name, folder, **options)
    start = time.perf_counter() - started
    try:
        started = time.perf_counter()
        generated = backend.complete(answers)
        generate_s = time.perf_counter() - started
        constraint = judge_constraint(rationale=False)
        prompt = cached = 0
        started = time.perf_counter()
        for batch in batches(checks, 64):
            for completion in backend.complete(batch, constraint):
                prompt += completion.prompt_tokens
                cached += completion.cached_tokens or 0
        judge_s = time.perf_counter() - started
    finally:
        backend.close()
    return {
        "start_s": round(start, 1),
        "generations_per_s": round(len(answers) / generate_s, 2),
        "output_tokens_per_s": round(sum(c.completion_tokens for c in generated) / generate_s, 1),
        "checks": len(checks),
        "checks_per_s": round(len(checks) / judge_s, 2),
        "judge_prompt_tokens": prompt,
        "cached_share": round(cached / prompt, 3) if prompt else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES), help="default: every family")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--block-sizes", default="", help="vLLM KV block sizes to compare, e.g. 16,32,64,128")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    families = args.family or sorted(FAMILIES)
    answers, checks = workload(args.questions)
    print(f"{len(answers)} answers, {len(checks)} checks; {platform.machine()}, {date.today()}", flush=True)
    figures: dict[str, Any] = {}
    for name in families:
        folder = str(tiny_model(name))
        for backend_name in ("transformers", "vllm"):
            if backend_name == "vllm" and FAMILIES[name].vllm_unsupported:
                continue
            options = {"enforce_eager": True, "max_model_len": 8192} if backend_name == "vllm" else {}
            result = measure(backend_name, folder, options, answers, checks)
            figures[f"{name}/{backend_name}"] = result
            print(f"{name:14} {backend_name:12} {json.dumps(result)}", flush=True)
    for size in [int(s) for s in args.block_sizes.split(",") if s]:
        options = {"enforce_eager": True, "max_model_len": 8192, "block_size": size}
        result = measure("vllm", str(tiny_model(families[0])), options, answers, checks)
        figures[f"{families[0]}/vllm/block_size={size}"] = result
        print(f"{families[0]:14} vllm block {size:<5} {json.dumps(result)}", flush=True)
    print(
        "\n| architecture | backend | engine start s | generations/s | output tok/s | checks/s | judge prompt tokens cached |"
    )
    print("|---|---|---|---|---|---|---|")
    for key, r in figures.items():
        family, backend_name = key.split("/", 1)
        print(
            f"| {family} | {backend_name} | {r['start_s']} | {r['generations_per_s']} | {r['output_tokens_per_s']} "
            f"| {r['checks_per_s']} | {100 * r['cached_share']:.0f}% |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
