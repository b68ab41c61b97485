"""The options each backend accepts (``--model-option K=V``, ``--judge-option K=V``), declared once.

A run may spend an hour generating before its judge starts, so an option the judge's backend does
not know, or a value of the wrong kind, is refused when the command starts, before any model
loads, in one line naming it and what the backend accepts. Each backend's constructor takes
exactly these keywords (a test holds the two together); this module imports only pydantic, so
the check costs nothing and never loads torch or vllm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    device: str = Field("auto", description="auto (a GPU when there is one), cpu, cuda, cuda:1 ...")
    dtype: str = Field("auto", description="auto (bfloat16 on a GPU, float32 on a CPU) or a torch dtype name")
    batch_size: int = Field(8, ge=1, description="answers per generate() call")
    prefix_reuse: bool = Field(True, description="prefill a question's shared prompt prefix once for its checks")
    choice_rule: ChoiceRule = Field("first_token", description="how the judge's verdict options are ranked")
    max_pixels: int | None = Field(None, ge=1, description="image budget, for processors that take one (Qwen)")


class VLLMOptions(BackendOptions):
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    distributed_executor_backend: str | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    max_pixels: int | None = Field(None, ge=1, description="image budget, for processors that take one (Qwen)")
    dtype: str = "auto"
    seed: int = 0
    block_size: int | None = Field(None, ge=1, description="KV-cache block size in tokens (engine default if unset)")


class OpenAIOptions(BackendOptions):
    base_url: str | None = None
    base_urls: list[str] | str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = Field(16, ge=1)
    timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(5, ge=0)
    structured: StructuredMode = "json_schema"


BACKEND_OPTIONS: dict[str, type[BackendOptions]] = {
    "transformers": TransformersOptions,
    "vllm": VLLMOptions,
    "openai": OpenAIOptions,
}


def check_options(backend: str, options: Mapping[str, Any]) -> None:
    """Refuse, in one line, an option ``backend`` does not accept or a value of the wrong kind."""
    declared = BACKEND_OPTIONS.get(backend)
    if declared is None:
        return  # not a model backend (submitted answers, audit sets): nothing runs
    accepted = ", ".join(declared.model_fields)
    unknown = sorted(set(options) - set(declared.model_fields))
    if unknown:
        raise OptionError(f"the {backend} backend has no option {unknown[0]!r}; it accepts: {accepted}")
    try:
        declared.model_validate(dict(options))
    except ValidationError as error:
        where, message = first_problem(error)
        name = where.split(".")[0]
        raise OptionError(f"the {backend} backend's option {name}={options.get(name)!r}: {message}") from None
