"""`gamut doctor`, run as installed, on this CPU machine and on GPU machines it is handed at the
driver boundary: an `nvidia-smi` of our own first on PATH answers as an old driver, a small GPU or
a GPU another process fills would. Everything above that boundary (torch, vLLM, the checkpoint's
files, the option checks) is the real thing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gamut_hf.backends.doctor import estimated_parameters, weights_bytes

GAMUT = Path(sys.executable).parent / "gamut"
GIB = 1024**3


def doctor(*args: str, smi: str | None = None, tmp_path: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if smi is not None:
        assert tmp_path is not None
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        fake = bin_dir / "nvidia-smi"
        # What `nvidia-smi --query-gpu=driver_version,name,memory.total,memory.free --format=csv,noheader,nounits` prints.
        fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{smi}\nEOF\n", encoding="utf-8")
        fake.chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        [str(GAMUT), "doctor", *args], capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL
    )


def problems(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("gamut doctor: ")]


def checkpoint(folder: Path, total_bytes: int, **config) -> Path:
    """A model folder as a hub download leaves it before its shards: config and safetensors index."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16", **config}), encoding="utf-8")
    index = {
        "metadata": {"total_size": total_bytes},
        "weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"},
    }
    (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    return folder


def test_on_this_cpu_machine_the_doctor_reports_the_cpu_platform_and_exits_0():
    done = doctor()
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert "3.11" in lines["python"] or sys.version.split()[0] in lines["python"]
    assert "CUDA runtime" in lines["torch"]
    assert "no NVIDIA GPU here" in done.stdout
    if "vllm" in lines and "not installed" not in lines["vllm"]:
        assert "platform cpu" in lines["vllm"]
    assert "GiB free" in lines["hub"]
    assert done.stdout.rstrip().endswith("gamut doctor: ready") and not problems(done)


def test_a_gpu_job_on_the_cpu_is_refused_in_one_line_when_a_gpu_is_required():
    pytest.importorskip("vllm")
    done = doctor("--require-gpu")
    assert done.returncode == 2
    assert problems(done) == [
        "gamut doctor: vLLM runs on the cpu here (no GPU): a CPU rehearsal with small models is ALLOW_CPU=1"
    ]


def test_a_driver_older_than_torchs_cuda_is_named_with_the_torch_build_that_fits_it(tmp_path):
    """torch 2.13.0 from the package index is built for CUDA 13 (R580+); a 535 driver is common on
    H100 clusters, and vLLM would still say 'cuda' (it asks NVML only)."""
    import torch

    if not (torch.version.cuda or "").startswith("13"):
        pytest.skip(f"this torch is built for CUDA {torch.version.cuda}")
    done = doctor(smi="535.104.05, NVIDIA H100 80GB HBM3, 81559, 81000", tmp_path=tmp_path)
    assert done.returncode == 2
    assert (
        "535.104.05 (nvidia-smi), 1 GPU(s)" in done.stdout
        and "NVIDIA H100 80GB HBM3, 79.1 of 79.6 GiB free" in done.stdout
    )
    driver = [line for line in problems(done) if "NVIDIA driver" in line]
    assert driver == [
        "gamut doctor: the NVIDIA driver 535.104.05 is older than torch "
        f"{torch.__version__}'s CUDA {torch.version.cuda} needs (R580 or newer): install torch built for CUDA 12 "
        f"(cu126): pip install 'torch=={torch.__version__.split('+')[0]}' --index-url https://download.pytorch.org/whl/cu126, "
        "with vLLM's wheel for the same CUDA, or update the driver to R580+"
    ]
    # A 570 driver gets the CUDA 12.8 build instead.
    done = doctor(smi="570.86.15, NVIDIA H100 80GB HBM3, 81559, 81000", tmp_path=tmp_path)
    assert any("(cu128): pip install" in line for line in problems(done))
    # Each problem is one line; nothing else on stderr.
    assert all(line.startswith("gamut doctor: ") for line in done.stderr.splitlines())


def test_a_gpu_too_small_for_the_judges_weights_names_the_tensor_parallel_size_that_fits(tmp_path):
    judge = checkpoint(tmp_path / "Qwen3-VL-30B-A3B-Instruct", 62 * 10**9)
    smi = "580.65.06, NVIDIA A10, 23028, 22500"
    done = doctor("--judge", str(judge), smi=smi, tmp_path=tmp_path)
    assert done.returncode == 2
    assert f"{judge}: 57.7 GiB of weights (its safetensors index), 57.7 GiB per GPU at 1 GPU(s)" in done.stdout
    fit = [line for line in problems(done) if str(judge) in line]
    assert fit == [
        f"gamut doctor: {judge}: 57.7 GiB of weights per GPU do not fit GPU 0 (NVIDIA A10), which gives vLLM 20.7 GiB "
        "at gpu_memory_utilization 0.92: tensor_parallel_size=4 (this machine has 1 GPUs), or a quantised release (FP8)"
    ]
    # More GPUs than the machine has is said as such, before any engine tries.
    done = doctor("--judge", str(judge), "--judge-option", "tensor_parallel_size=8", smi=smi, tmp_path=tmp_path)
    assert any(
        "tensor_parallel_size x pipeline_parallel_size = 8 GPUs, but this machine has 1" in p for p in problems(done)
    )


def test_a_gpu_another_process_holds_is_named_with_its_free_memory(tmp_path):
    candidate = checkpoint(tmp_path / "small", 2 * 10**9)
    done = doctor("--model", str(candidate), smi="580.65.06, NVIDIA H100 80GB HBM3, 81559, 10240", tmp_path=tmp_path)
    assert done.returncode == 2
    assert any(
        "GPU 0 has 10.0 of 79.6 GiB free, but vLLM at gpu_memory_utilization 0.92 takes 73.3 GiB" in line
        for line in problems(done)
    )
    # The user's own share is what is checked.
    done = doctor(
        "--model", str(candidate), "--model-option", "gpu_memory_utilization=0.1",
        smi="580.65.06, NVIDIA H100 80GB HBM3, 81559, 10240", tmp_path=tmp_path,
    )  # fmt: skip
    assert not [line for line in problems(done) if "free" in line]


def test_a_misspelt_engine_option_is_refused_by_the_doctor_too():
    pytest.importorskip("vllm")
    done = doctor("--judge", "Qwen/Qwen3-VL-235B-A22B-Instruct", "--judge-option", "enable_expert_paralel=true")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "did you mean 'enable_expert_parallel'" in done.stderr


def test_weights_are_read_from_the_checkpoint_or_estimated_from_its_config(tmp_path):
    from tiny_models import tiny_model

    folder = tiny_model("qwen3_vl")
    size = weights_bytes(str(folder))
    assert size is not None
    on_disk = sum(path.stat().st_size for path in folder.glob("*.safetensors"))
    assert size[0] == on_disk and size[2] is True
    # Qwen3-VL-30B-A3B's text config: about 30 B parameters (31 B with the vision tower).
    config = {
        "text_config": {
            "hidden_size": 2048,
            "num_hidden_layers": 48,
            "vocab_size": 151936,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "intermediate_size": 6144,
            "num_experts": 128,
            "moe_intermediate_size": 768,
            "torch_dtype": "bfloat16",
        }
    }
    parameters = estimated_parameters(config)
    assert parameters is not None and 29e9 < parameters < 32e9
