"""``gamut doctor``: what a run on this machine depends on, and what would stop it, before anything loads.

A first GPU job tends to fail minutes in and far from its cause: torch built for a newer CUDA than
the driver runs (vLLM reads its platform from NVML and says "cuda" all the same), ``import vllm``
broken by a torchaudio built for another torch, a judge whose weights cannot fit the GPUs at the
chosen tensor parallel size, another process holding GPU memory. The doctor reads each of these
directly (the driver and GPUs through :mod:`gamut_hf.backends.gpus`, the checkpoint's size from its files)
and turns each blocking one into one line saying what and how to fix it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gamut_hf.backends.gpus import GPUReading, read_gpus

GIB = 1024**3
# vLLM 0.32's own default share of each GPU's memory (vllm/config/cache.py), used when none is given.
VLLM_GPU_MEMORY_UTILIZATION = 0.92
# The oldest driver branch each CUDA major release runs on (CUDA's minor-version compatibility:
# any 12.x runtime on an R525+ driver; CUDA 13 needs R580).
MINIMUM_DRIVER = {11: 450, 12: 525, 13: 580}
TORCH_INDEX = "https://download.pytorch.org/whl"
BYTES_PER_PARAMETER = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "float8": 1}


@dataclass(frozen=True)
class Finding:
    """One thing read off the machine (``what``: ``value``) and, where it blocks the job, ``problem``:
    one line naming what is wrong and how to fix it."""

    what: str
    value: str
    problem: str | None = None


@dataclass(frozen=True)
class ModelPlan:
    """A model the job will load, with the engine options it will load under."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def parallel(self) -> int:
        return int(self.options.get("tensor_parallel_size", 1)) * int(self.options.get("pipeline_parallel_size", 1))

    @property
    def memory_share(self) -> float:
        value = self.options.get("gpu_memory_utilization")
        return float(value) if value is not None else VLLM_GPU_MEMORY_UTILIZATION


@dataclass
class Diagnosis:
    findings: list[Finding]

    @property
    def problems(self) -> list[str]:
        return [finding.problem for finding in self.findings if finding.problem]


def diagnose(models: Sequence[ModelPlan] = (), *, require_gpu: bool = False) -> Diagnosis:
    """Everything ``gamut doctor`` reports; ``require_gpu``: vLLM on the CPU is a problem too."""
    findings = [Finding("python", f"{sys.version.split()[0]} ({sys.executable})")]
    gpus = read_gpus()
    torch_cuda, torch_sees_gpu = _torch(findings, gpus)
    findings.append(_driver(gpus, torch_cuda))
    findings.extend(
        Finding(f"GPU {gpu.index}", f"{gpu.name}, {gpu.free_bytes / GIB:.1f} of {gpu.total_bytes / GIB:.1f} GiB free")
        for gpu in gpus.gpus
    )
    _vllm(findings, gpus, torch_sees_gpu, require_gpu)
    findings.append(_package("transformers"))
    cache, cache_free = _hub_cache()
    findings.append(Finding("hub cache", f"{cache}, {cache_free / GIB:.1f} GiB free" if cache_free else str(cache)))
    findings.extend(_model(model, gpus, cache_free) for model in models)
    return Diagnosis(findings)


def _torch(findings: list[Finding], gpus: GPUReading) -> tuple[str | None, bool]:
    """torch's version and CUDA runtime; returns (CUDA version, whether torch sees a GPU)."""
    try:
        import torch
    except Exception as error:  # noqa: BLE001 - a broken install is what the doctor is for
        findings.append(Finding("torch", "does not import", f"torch does not import ({_said(error)}): reinstall it"))
        return None, False
    cuda = torch.version.cuda
    sees = bool(cuda) and torch.cuda.is_available()
    value = f"{torch.__version__}, CUDA runtime {cuda or 'none (a CPU build)'}"
    problem = None
    if gpus.gpus and not cuda:
        problem = (
            f"torch {torch.__version__} is a CPU build but this machine has {len(gpus.gpus)} NVIDIA GPU(s): "
            "install a CUDA build (make install-gpu)"
        )
    elif cuda:
        value += f", sees {torch.cuda.device_count()} GPU(s)" if sees else ", sees no GPU"
        if gpus.gpus and not sees and not _driver_too_old(gpus, cuda):
            problem = (
                f"torch {torch.__version__} sees no GPU though the driver lists {len(gpus.gpus)}: {_cuda_init_error()}"
            )
    findings.append(Finding("torch", value, problem))
    return cuda, sees


def _cuda_init_error() -> str:
    import torch

    try:
        torch.cuda.init()
    except Exception as error:  # noqa: BLE001 - the reason is what the user needs
        return _said(error)
    return "CUDA_VISIBLE_DEVICES may hide them"


def _driver_too_old(gpus: GPUReading, cuda: str) -> int | None:
    """The driver branch CUDA ``cuda`` needs, where the installed driver is older; else None."""
    major = gpus.driver_major
    needed = MINIMUM_DRIVER.get(int(cuda.split(".")[0])) if cuda.split(".")[0].isdigit() else None
    return needed if major is not None and needed is not None and major < needed else None


def _driver(gpus: GPUReading, torch_cuda: str | None) -> Finding:
    if gpus.source is None:
        return Finding("NVIDIA driver", "none (no nvidia-smi, no NVML): no NVIDIA GPU here")
    if gpus.error is not None:
        return Finding("NVIDIA driver", "unreadable", f"the NVIDIA driver does not answer ({gpus.error})")
    value = f"{gpus.driver} ({gpus.source}), {len(gpus.gpus)} GPU(s)"
    needed = _driver_too_old(gpus, torch_cuda) if torch_cuda else None
    if needed is None:
        return Finding("NVIDIA driver", value)
    import torch

    major = gpus.driver_major or 0
    fits = "cu128" if major >= 570 else "cu126" if major >= 525 else None
    build = (
        f"install torch built for CUDA 12 ({fits}): pip install 'torch=={torch.__version__.split('+')[0]}' "
        f"--index-url {TORCH_INDEX}/{fits}, with vLLM's wheel for the same CUDA, or "
        if fits
        else ""
    )
    return Finding(
        "NVIDIA driver",
        value,
        f"the NVIDIA driver {gpus.driver} is older than torch {torch.__version__}'s CUDA {torch_cuda} needs "
        f"(R{needed} or newer): {build}update the driver to R{needed}+",
    )


def _vllm(findings: list[Finding], gpus: GPUReading, torch_sees_gpu: bool, require_gpu: bool) -> None:
    """vLLM's version and platform, and whether it imports."""
    if importlib.util.find_spec("vllm") is None:
        findings.append(Finding("vllm", "not installed (the vllm backend needs it: make install-gpu)"))
        return
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # no engine log lines in the report
    try:
        import vllm
        from vllm.platforms import current_platform
    except Exception as error:  # noqa: BLE001 - any import failure is the finding
        said = _said(error)
        fix = (
            "pip uninstall torchaudio (vLLM loads it only for audio models) and run again"
            if "torchaudio" in said
            else "reinstall vLLM with the torch it pins (make install-gpu)"
        )
        findings.append(Finding("vllm", "does not import", f"import vllm fails ({said}): {fix}"))
        return
    platform = current_platform.device_type or "none"
    problem = None
    if platform == "cuda" and not torch_sees_gpu:
        # vLLM reads its platform from NVML alone; the cause (an old driver...) is named above if found.
        if not any(finding.problem for finding in findings):
            problem = "vLLM's platform is cuda (read from NVML) but torch cannot use a GPU: its engine would not start"
    elif platform in ("cpu", "none") and gpus.gpus:
        problem = (
            f"vLLM runs on the {platform} here (its CPU build) but this machine has {len(gpus.gpus)} NVIDIA GPU(s): "
            "make install-gpu, and run .venv-gpu/bin/gamut"
        )
    elif platform in ("cpu", "none") and require_gpu:
        problem = f"vLLM runs on the {platform} here (no GPU): a CPU rehearsal with small models is ALLOW_CPU=1"
    findings.append(Finding("vllm", f"{vllm.__version__}, platform {platform}", problem))


def _package(name: str) -> Finding:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return Finding(name, version(name))
    except PackageNotFoundError:
        return Finding(name, "not installed")


def _hub_cache() -> tuple[Path, int | None]:
    from huggingface_hub import constants

    cache = Path(constants.HF_HUB_CACHE)
    existing = cache
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        return cache, shutil.disk_usage(existing).free
    except OSError:
        return cache, None


def _model(model: ModelPlan, gpus: GPUReading, cache_free: int | None) -> Finding:
    # The job runs on the GPUs the driver lists (vLLM's CPU build beside them is a problem of its own).
    on_gpus = bool(gpus.gpus)
    parallel = model.parallel
    if on_gpus and parallel > len(gpus.gpus):
        return Finding(
            "model",
            model.name,
            f"{model.name}: tensor_parallel_size x pipeline_parallel_size = {parallel} GPUs, "
            f"but this machine has {len(gpus.gpus)}",
        )
    size = weights_bytes(model.name, str(model.options.get("dtype", "auto")))
    if size is None:
        return Finding(
            "model", f"{model.name}: weights' size unknown (neither a local checkpoint nor in the hub cache)"
        )
    nbytes, source, local = size
    value = f"{model.name}: {nbytes / GIB:.1f} GiB of weights ({source})"
    if not local and cache_free is not None and nbytes > cache_free:
        return Finding(
            "model",
            value,
            f"{model.name}: its {nbytes / GIB:.1f} GiB of weights do not fit the {cache_free / GIB:.1f} GiB free in the "
            "hub cache: free disk there, or set HF_HOME to a larger disk",
        )
    if not on_gpus:
        return Finding("model", value)
    used = gpus.gpus[:parallel]
    smallest = min(used, key=lambda gpu: gpu.total_bytes)
    budget = smallest.total_bytes * model.memory_share
    per_gpu = nbytes / parallel
    value += f", {per_gpu / GIB:.1f} GiB per GPU at {parallel} GPU(s) of {budget / GIB:.1f} GiB for vLLM"
    if per_gpu >= budget:
        needed = 2 ** math.ceil(math.log2(max(2, math.ceil(nbytes / budget))))
        more = f"tensor_parallel_size={needed}" + (
            f" (this machine has {len(gpus.gpus)} GPUs)" if needed > len(gpus.gpus) else ""
        )
        return Finding(
            "model",
            value,
            f"{model.name}: {per_gpu / GIB:.1f} GiB of weights per GPU do not fit GPU {smallest.index} ({smallest.name}), "
            f"which gives vLLM {budget / GIB:.1f} GiB at gpu_memory_utilization {model.memory_share}: {more}, "
            "or a quantised release (FP8)",
        )
    for gpu in used:
        wanted = gpu.total_bytes * model.memory_share
        if gpu.free_bytes < wanted:
            return Finding(
                "model",
                value,
                f"GPU {gpu.index} has {gpu.free_bytes / GIB:.1f} of {gpu.total_bytes / GIB:.1f} GiB free, but vLLM at "
                f"gpu_memory_utilization {model.memory_share} takes {wanted / GIB:.1f} GiB: another process holds "
                "the rest (nvidia-smi names it); stop it or lower gpu_memory_utilization",
            )
    return Finding("model", value)


def weights_bytes(name: str, dtype: str = "auto") -> tuple[int, str, bool] | None:
    """(bytes, where that was read, whether the weights are already on disk) for a model folder or
    hub id; None where nothing about it is here. The checkpoint's safetensors index (or its files)
    where local, else a parameter count estimated from its config.json."""
    folder = Path(name)
    files: dict[str, Path] = {}
    local = folder.is_dir()
    if local:
        files = {path.name: path for path in folder.iterdir() if path.is_file()}
    else:
        files = _hub_cached(name)
    index = files.get("model.safetensors.index.json")
    stored_dtype = None
    config = _read_json(files.get("config.json"))
    if config is not None:
        stored_dtype = str(
            _text_config(config).get("torch_dtype") or config.get("torch_dtype") or config.get("dtype") or ""
        )
    scale = _dtype_scale(stored_dtype, dtype)
    shards = [path for key, path in files.items() if key.endswith(".safetensors")]
    if index is not None:
        total = (_read_json(index) or {}).get("metadata", {}).get("total_size")
        if isinstance(total, int | float) and total > 0:
            return int(total * scale), "its safetensors index", local and bool(shards)
    if local and shards:
        return int(sum(path.stat().st_size for path in shards) * scale), "its safetensors files", True
    if config is not None:
        parameters = estimated_parameters(config)
        if parameters:
            quantised = "quantization_config" in config
            width = 1 if quantised else BYTES_PER_PARAMETER.get(dtype if dtype != "auto" else stored_dtype or "", 2)
            return parameters * width, f"about {parameters / 1e9:.1f} B parameters, from config.json", False
    return None


def _hub_cached(repo_id: str) -> dict[str, Path]:
    """The files of ``repo_id`` already in the hub cache (none is downloaded)."""
    if repo_id.count("/") != 1:
        return {}
    from huggingface_hub import try_to_load_from_cache

    found = {}
    for filename in ("config.json", "model.safetensors.index.json"):
        try:
            path = try_to_load_from_cache(repo_id, filename)
        except Exception:  # noqa: BLE001, S112 - an id the hub library refuses is simply not cached
            continue
        if isinstance(path, str):
            found[filename] = Path(path)
    return found


def _read_json(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def _dtype_scale(stored: str | None, wanted: str) -> float:
    """How much larger the weights are in memory than on disk (float32 checkpoints cast to bf16...)."""
    if wanted == "auto" or not stored:
        return 1.0
    return BYTES_PER_PARAMETER.get(wanted, 2) / BYTES_PER_PARAMETER.get(stored, 2)


def estimated_parameters(config: dict[str, Any]) -> int | None:
    """A decoder's parameter count from its config (embeddings, attention, dense or expert MLPs);
    a vision tower adds a few percent, left out."""
    text = _text_config(config)
    try:
        hidden = int(text["hidden_size"])
        layers = int(text["num_hidden_layers"])
        vocab = int(text.get("vocab_size", 0))
        heads = int(text.get("num_attention_heads", 1))
        kv_heads = int(text.get("num_key_value_heads", heads))
        head_dim = int(text.get("head_dim") or hidden // heads)
        intermediate = int(text.get("intermediate_size", 4 * hidden))
    except (KeyError, TypeError, ValueError):
        return None
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    experts = int(text.get("num_experts") or text.get("n_routed_experts") or 0)
    if experts:
        expert_width = int(text.get("moe_intermediate_size") or intermediate)
        mlp = experts * 3 * hidden * expert_width + hidden * experts
    else:
        mlp = 3 * hidden * intermediate
    embeddings = vocab * hidden * (1 if text.get("tie_word_embeddings", config.get("tie_word_embeddings")) else 2)
    return layers * (attention + mlp) + embeddings


def _said(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
