"""`inspect eval gamut_hf/gamut` against real local models behind `vllm serve`, each as candidate
and grader, then `gamut import-inspect` on its log: SmolLM2-135M (text), and the tiny Qwen3-VL, the
judge's architecture, on the multimodal variant."""

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
from gamut_hf.evaluation.store import RunStore  # noqa: E402

INSPECT = str(Path(sys.executable).with_name("inspect"))


def eval_and_import(url: str, model: str, tmp_path: Path, *task_args: str) -> tuple[Path, dict]:
    """One question through `inspect eval` (``model`` as candidate and grader, verdicts constrained
    by vLLM), its log imported: the log and the run's results.json, every verdict checked valid."""
    command = [
        INSPECT, "eval", "gamut_hf/gamut", "--model", model, "--model-base-url", url,
        "--model-role", f"grader={{model: {model}, model_args: {{base_url: '{url}'}}}}",
        "-T", "limit=1", "-T", "structured=vllm", *(arg for task_arg in task_args for arg in ("-T", task_arg)),
        "--log-dir", str(tmp_path / "logs"), "--display", "plain",
    ]  # fmt: skip
    env = {**os.environ, "VLLM_API_KEY": "EMPTY", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = (tmp_path / "logs").glob("*.eval")
    imported = run_gamut("import-inspect", log, "--out", tmp_path / "run")
    assert imported.code == 0, imported.err
    import pyarrow.parquet as pq

    verdicts = pq.read_table(tmp_path / "run" / "details.parquet", columns=["verdict"]).column("verdict").to_pylist()
    # Constrained by vLLM's structured outputs, even a small or random-weight grader gives a verdict.
    assert verdicts and set(verdicts) <= set(VERDICTS)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["judge_errors"] == 0 and results["unfinished_checks"] == 0
    assert results["score"]["gamut"] is not None and -100 <= results["score"]["gamut"] <= 100
    return log, results


def test_inspect_eval_with_a_real_model_behind_vllm_serve(tmp_path):
    with vllm_server(resolve_model("smollm2-135m")) as url:
        _, results = eval_and_import(url, f"openai-api/vllm/{SERVED_MODEL_NAME}", tmp_path, "max_tokens=48")
    # The judge as `gamut run --judge smollm2 --judge-backend openai --judge-base-url URL` names it.
    assert results["judge"] == model_fingerprint("openai", SERVED_MODEL_NAME, {"base_url": url})


def test_inspect_eval_multimodal_with_the_judges_architecture_behind_vllm_serve(tmp_path):
    """The image as inspect image content reaches a Qwen3-VL (the tiny random-weight one) through
    inspect's OpenAI-compatible provider."""
    from inspect_ai.log import read_eval_log
    from tiny_models import tiny_model
    from transformers import AutoTokenizer

    folder = tiny_model("qwen3_vl")
    pixels = '{"max_pixels": 65536}'  # 64 image tokens: the prefill stays quick on a CPU
    with vllm_server(folder, served_name="qwen3-vl-tiny", extra_args=["--mm-processor-kwargs", pixels]) as url:
        log, results = eval_and_import(
            url, "openai-api/vllm/qwen3-vl-tiny", tmp_path, "max_tokens=16", "variant=multimodal"
        )
    assert results["variant"] == "multimodal"
    # The candidate's prompt held the image: its own prompt tokens, as the import stores them (not
    # the grader's, though one model plays both), are the text's and the image's 64.
    prompt = read_eval_log(str(log)).samples[0].metadata["prompt"]
    text_tokens = len(AutoTokenizer.from_pretrained(folder)(prompt)["input_ids"])
    with RunStore.reading(tmp_path / "run") as store:
        [generation] = store.rows("generations")
    assert text_tokens + 64 < generation["prompt_tokens"] < text_tokens + 64 + 40, (generation, text_tokens)
    assert generation["completion_tokens"] <= 16
