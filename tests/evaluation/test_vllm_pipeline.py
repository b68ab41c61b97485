"""`gamut run` through real vLLM: the offline engine, and a real `vllm serve` behind the openai backend.

SmolLM2-135M on the CPU build of vLLM, text_only. Skipped where vLLM is absent, except under
GAMUT_REQUIRE_VLLM=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json

from conftest import assert_verdict_probabilities
from vllm_support import SERVED_MODEL_NAME, require_vllm, vllm_server

require_vllm()

from gamut_hf.backends.models import resolve_model  # noqa: E402

LIMIT = ("--limit", "2", "--max-tokens", "48", "--variant", "text_only")


def check_results(folder, expected_checks: int | None = None) -> dict:
    results = json.loads((folder / "results.json").read_text())
    score = results["score"]
    # Verdicts are constrained to the four words: a small judge never leaves an error.
    assert results["judge_errors"] == 0 and results["unfinished_checks"] == 0
    assert score["gamut"] is not None and -100 <= score["gamut"] <= 100
    assert abs(sum(score["verdict_shares"].values()) - 1) < 1e-9
    if expected_checks is not None:
        assert score["checks"] == expected_checks
    return results


def test_run_with_the_offline_engine_for_candidate_and_judge(gamut, tmp_path):
    eager = "enforce_eager=true"
    done = gamut(
        "run",
        "--out",
        tmp_path / "run",
        "--backend",
        "vllm",
        "--model",
        "smollm2-135m",
        "--model-option",
        eager,
        "--judge",
        "smollm2-135m",
        "--judge-backend",
        "vllm",
        "--judge-option",
        eager,
        *LIMIT,
    )
    assert done.code == 0, done.err[-3000:]
    results = check_results(tmp_path / "run")
    # Two engines, one after the other in one process; the judge's prefix cache is used.
    assert results["usage"]["judge"]["cached_tokens"] > 0
    assert "prefix cache" in done.err
    # Each verdict's probabilities from the engine's logprobs under the verdict grammar: they sum
    # to about 1, the stored verdict is the most probable, and the expected score is beside the score.
    assert_verdict_probabilities(tmp_path / "run")
    assert results["expected_gamut"] is not None and "expected score" in done.out


def test_run_through_a_real_vllm_server_with_the_openai_backend(gamut, tmp_path):
    with vllm_server(resolve_model("smollm2-135m")) as url:
        done = gamut(
            "run",
            "--out",
            tmp_path / "run",
            "--backend",
            "openai",
            "--model",
            SERVED_MODEL_NAME,
            "--base-url",
            url,
            "--judge",
            SERVED_MODEL_NAME,
            "--judge-backend",
            "openai",
            "--judge-base-url",
            url,
            "--judge-option",
            "structured=vllm",
            "--concurrency",
            "8",
            *LIMIT,
        )
        assert done.code == 0, done.err[-3000:]
        first = check_results(tmp_path / "run")
        # The server's prefix cache serves a question's later checks (their shared prompt prefix),
        # and the openai backend reads it from the usage vLLM reports.
        assert first["usage"]["judge"]["cached_tokens"] > 0
        # The server's logprobs of the verdict's first token give each verdict's probability.
        assert_verdict_probabilities(tmp_path / "run")
        # Rerun: everything is stored, the server is asked nothing and the results stand.
        again = gamut("run", "--out", tmp_path / "run")
        assert again.code == 0, again.err[-3000:]
    assert json.loads((tmp_path / "run" / "results.json").read_text())["score"] == first["score"]
