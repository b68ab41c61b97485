"""Scripted candidates and judges behind the fake OpenAI-compatible endpoint (hosted APIs are the
boundary we fake): answers and verdicts that differ by candidate, judge and variant, so reports
and the Space have something real to separate.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from fake_endpoint import user_text

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.evaluation.judge import SYSTEM_PROMPT

JUDGE_MARK = SYSTEM_PROMPT.splitlines()[0][:40]


def _unit(*parts: str) -> float:
    return int(hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def is_judging(body: dict) -> bool:
    first = body["messages"][0]
    return first["role"] == "system" and first["content"].startswith(JUDGE_MARK)


def scripted(body: dict) -> str:
    """Candidates answer with their name (a 'good' one covers more); judges grade by a fixed draw per check.

    The lenient judge raises missing to partially_meets and partially_meets to meets; the
    image-less variant (no image in the request) is easier for every candidate.
    """
    text = user_text(body)
    if not is_judging(body):
        return f"Answer by {body['model']}: {text[:60]}"
    check = text.split("\n\nCheck: ", 1)[1].split("\n\n", 1)[0]
    response = text.split("\n\nCheck: ", 1)[0]
    quality = 0.55 if "good-model" in response else 0.25
    if "image_url" not in json.dumps(body["messages"]):
        quality += 0.15
    u = _unit(check, response.split(":", 1)[0])
    verdict = 0 if u < quality else 1 if u < quality + 0.15 else 2 if u < 0.93 else 3
    if body["model"] == "lenient-judge" and verdict in (1, 2):
        verdict -= 1
    if body.get("top_logprobs"):  # the verdict's token with its alternatives, as the server was asked
        sure = _unit(check, "sure")
        if "response_format" in body:  # a hosted API: JSON, the verdict its fourth token
            tokens = ['{"', "verdict", '":"', VERDICTS[verdict], '"}']
            return {"content": "".join(tokens), "logprobs": verdict_logprobs(tokens, 3, VERDICTS[verdict], sure)}
        # a vLLM server's choice: the bare word
        return {
            "content": VERDICTS[verdict],
            "logprobs": verdict_logprobs([VERDICTS[verdict]], 0, VERDICTS[verdict], sure),
        }
    return json.dumps({"verdict": VERDICTS[verdict]})


def verdict_logprobs(tokens: list[str], at: int, chosen: str, u: float) -> dict:
    """The logprobs of an answer's ``tokens``: at the verdict's token (``at``) ``chosen`` at a
    probability from 0.4 to 1 (by ``u``), the other verdicts sharing the rest (each one token)."""
    top = 0.4 + 0.6 * u
    rest = (1 - top) / (len(VERDICTS) - 1)
    alternatives = [{"token": v, "logprob": math.log(top if v == chosen else rest)} for v in VERDICTS]
    content = [{"token": token, "logprob": 0.0, "top_logprobs": []} for token in tokens]
    content[at] = {"token": chosen, "logprob": math.log(top), "top_logprobs": alternatives}
    return {"content": content}


def worker_args(requests: Path, results: Path, url: str, *options: str, judge: str = "strict-judge") -> list:
    """`gamut worker` over ``requests`` into ``results``, judged by the scripted ``judge`` behind ``url``."""
    return [
        "worker", "--requests", requests, "--results", results, *options,
        "--judge", judge, "--judge-backend", "openai", "--judge-base-url", url,
    ]  # fmt: skip


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def api_run(gamut, out: Path, url: str, model: str, judge: str, variant: str, limit: int = 10, *extra: str) -> Path:
    """One run through the real CLI, candidate and judge both behind ``url`` (``extra``: further options)."""
    done = gamut(
        "run",
        "--out",
        out,
        "--model",
        model,
        "--backend",
        "openai",
        "--base-url",
        url,
        "--judge",
        judge,
        "--judge-backend",
        "openai",
        "--judge-base-url",
        url,
        "--variant",
        variant,
        "--limit",
        str(limit),
        *extra,
    )
    assert done.code == 0, done.err
    return out
