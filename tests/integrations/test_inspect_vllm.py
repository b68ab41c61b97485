"""`inspect eval gamut_hf/gamut` against a real local model: SmolLM2-135M behind `vllm serve`, as
candidate and grader (one server start), then `gamut import-inspect` on its log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_gamut
from vllm_support import SERVED_MODEL_NAME, require_vllm, vllm_server

pytest.importorskip("inspect_ai")
require_vllm()

from gamut_hf.backends.base import model_fingerprint  # noqa: E402
from gamut_hf.backends.models import resolve_model  # noqa: E402
from gamut_hf.core.rubric import VERDICTS  # noqa: E402

INSPECT = str(Path(sys.executable).with_name("inspect"))


def test_inspect_eval_with_a_real_model_behind_vllm_serve(tmp_path):
    with vllm_server(resolve_model("smollm2-135m")) as url:
        model = f"openai-api/vllm/{SERVED_MODEL_NAME}"
        command = [
            INSPECT, "eval", "gamut_hf/gamut", "--model", model, "--model-base-url", url,
            "--model-role", f"grader={{model: {model}, model_args: {{base_url: '{url}'}}}}",
            "-T", "limit=1", "-T", "max_tokens=48", "-T", "structured=vllm",
            "--log-dir", str(tmp_path / "logs"), "--display", "plain",
        ]  # fmt: skip
        env = {**os.environ, "VLLM_API_KEY": "EMPTY", "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = (tmp_path / "logs").glob("*.eval")
    imported = run_gamut("import-inspect", log, "--out", tmp_path / "run")
    assert imported.code == 0, imported.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    # Constrained by vLLM's structured outputs, the small grader gives a verdict for every check.
    assert results["judge_errors"] == 0 and results["unfinished_checks"] == 0
    assert results["score"]["gamut"] is not None and -100 <= results["score"]["gamut"] <= 100
    # The judge as `gamut run --judge smollm2 --judge-backend openai --judge-base-url URL` names it.
    assert results["judge"] == model_fingerprint("openai", SERVED_MODEL_NAME, {"base_url": url})
    import pyarrow.parquet as pq

    verdicts = pq.read_table(tmp_path / "run" / "details.parquet", columns=["verdict"]).column("verdict").to_pylist()
    assert verdicts and set(verdicts) <= set(VERDICTS)


def test_inspect_eval_multimodal_with_the_judges_architecture_behind_vllm_serve(tmp_path):
    """The image as inspect image content reaches a Qwen3-VL (the tiny random-weight one) through
    inspect's OpenAI-compatible provider, as candidate and grader."""
    from tiny_models import tiny_model

    folder = tiny_model("qwen3_vl")
    pixels = '{"max_pixels": 65536}'  # a few dozen image tokens: the prefill stays quick on a CPU
    with vllm_server(folder, served_name="qwen3-vl-tiny", extra_args=["--mm-processor-kwargs", pixels]) as url:
        model = "openai-api/vllm/qwen3-vl-tiny"
        command = [
            INSPECT, "eval", "gamut_hf/gamut", "--model", model, "--model-base-url", url,
            "--model-role", f"grader={{model: {model}, model_args: {{base_url: '{url}'}}}}",
            "-T", "limit=1", "-T", "max_tokens=16", "-T", "structured=vllm", "-T", "variant=multimodal",
            "--log-dir", str(tmp_path / "logs"), "--display", "plain",
        ]  # fmt: skip
        env = {**os.environ, "VLLM_API_KEY": "EMPTY", "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = (tmp_path / "logs").glob("*.eval")
    from inspect_ai.log import read_eval_log
    from transformers import AutoTokenizer

    sample = read_eval_log(str(log)).samples[0]
    # The candidate's prompt held the image: more input tokens than its text alone.
    text_tokens = len(AutoTokenizer.from_pretrained(folder)(sample.metadata["prompt"])["input_ids"])
    candidate_usage = sample.model_usage[model]
    assert candidate_usage.input_tokens > text_tokens + 16, (candidate_usage, text_tokens)
    imported = run_gamut("import-inspect", log, "--out", tmp_path / "run")
    assert imported.code == 0, imported.err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["variant"] == "multimodal" and results["score"]["gamut"] is not None
    import pyarrow.parquet as pq

    verdicts = pq.read_table(tmp_path / "run" / "details.parquet", columns=["verdict"]).column("verdict").to_pylist()
    assert verdicts and set(verdicts) <= set(VERDICTS)  # vLLM's constraint holds for random weights too
