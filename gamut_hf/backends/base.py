"""The one interface every model backend implements: a batch of chat requests in, texts out.

A backend knows nothing about rubrics: the candidate's answers and the judge's verdicts are
both ``complete`` calls, the judge's with a :class:`Choice` or :class:`JsonSchema` constraint.
A new backend is one new module with one subclass of :class:`Backend`, named in
``gamut_hf.backends.BACKENDS``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gamut_hf.backends.options import TransformersOptions
from gamut_hf.errors import GamutError

if TYPE_CHECKING:  # the core (the CLI included) must not import PIL
    from PIL import Image

    from gamut_hf.backends.batch import BatchAPI


@dataclass(frozen=True)
class ChatRequest:
    """One conversation turn: a system text, a user text and at most one image (shown first)."""

    user: str
    system: str | None = None
    image: Image.Image | None = None
    max_tokens: int = 1024
    # Requests with the same prefix_key differ only in the end of their user text (a
    # question's checks). Servers with a prefix cache find that themselves; a backend that
    # manages its own cache reuses the shared prefix within each run of equal keys.
    prefix_key: str | None = None
    # The image's content id (gamut_hf.backends.images.image_id): an engine that caches processed
    # images by content (vLLM's uuid) then skips hashing its pixels for every request.
    image_id: str | None = None

    def messages(self, image_part: Any = None) -> list[dict[str, Any]]:
        """OpenAI-style messages; ``image_part`` is the backend's encoding of the image."""
        out: list[dict[str, Any]] = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        if self.image is not None and image_part is not None:
            out.append({"role": "user", "content": [image_part, {"type": "text", "text": self.user}]})
        else:
            out.append({"role": "user", "content": self.user})
        return out


@dataclass(frozen=True)
class Choice:
    """The output must be exactly one of these strings."""

    options: tuple[str, ...]


# How many of the first token's most probable alternatives a choice asks for (vLLM's default
# maximum, which its server's top_logprobs also caps): under the grammar only tokens that begin an
# option are left, a few dozen at most for the verdicts.
CHOICE_LOGPROBS = 20


def choice_probabilities(first_tokens: Iterable[tuple[str, float]], options: Sequence[str]) -> dict[str, float] | None:
    """Each option's probability from the logprobs of the first token of a choice-constrained
    answer (``first_tokens``: each alternative's text and logprob; the grammar having masked every
    token that begins no option, they sum to about 1 where all allowed tokens are given); None where
    no alternative begins an option.

    A token that begins one option counts for it; one that begins several (``m`` before ``meets``
    and ``missing``) is split evenly among them, its continuation being unknown here."""
    shares = dict.fromkeys(options, 0.0)
    for text, logprob in first_tokens:
        begun = [option for option in options if text and option.startswith(text)]
        if not begun or not math.isfinite(logprob):
            continue
        for option in begun:
            shares[option] += math.exp(logprob) / len(begun)
    return shares if sum(shares.values()) > 0 else None


def most_probable(probabilities: Mapping[str, float]) -> str:
    """The option of highest probability (the first on a tie)."""
    return max(probabilities, key=lambda option: probabilities[option])


@dataclass(frozen=True)
class JsonSchema:
    """The output must be a JSON document that follows this schema."""

    schema: dict[str, Any]
    name: str = "output"


Constraint = Choice | JsonSchema | None


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None  # prompt tokens served from a prefix cache, where the engine says
    seconds: float = 0.0
    error: str | None = None  # the request failed for good (after retries); text is then empty
    # A thinking model's reasoning (its <think>...</think>), kept apart from the answer in text
    # (gamut_hf.backends.reasoning); never shown to the judge.
    reasoning: str | None = None
    reasoning_unclosed: bool = False  # the reasoning never closed (cut by max_tokens): text is ""
    # For a Choice: each option's probability at the answer's position, where the backend can
    # tell (logits, or the engine's logprobs); None where it cannot.
    option_probabilities: dict[str, float] | None = None


@dataclass
class BackendStats:
    """Counters a backend accumulates; the pipeline prints them per stage."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def add(self, completions: Sequence[Completion], seconds: float) -> None:
        self.requests += len(completions)
        self.prompt_tokens += sum(c.prompt_tokens for c in completions)
        self.completion_tokens += sum(c.completion_tokens for c in completions)
        self.cached_tokens += sum(c.cached_tokens or 0 for c in completions)
        self.seconds += seconds

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens and self.cached_tokens else None


# Options that change speed, memory or placement but never the output: left out of the
# fingerprint, so changing one reuses every stored answer and verdict. Every other option is part
# of it and a change makes a rerun generate (or judge) again: model, dtype, quantization,
# kv_cache_dtype (a quantised KV cache changes what attention reads), max_model_len (what fits in a
# sequence), max_pixels (what the model sees of an image), seed, choice_rule, structured, ...
VOLATILE_OPTIONS: frozenset[str] = frozenset(
    {
        # every backend
        "batch_size",
        "device",
        "device_map",
        "prefix_reuse",
        # OpenAI-compatible endpoints
        "concurrency",
        "timeout",
        "max_retries",
        "api_key_env",
        "batch_api",
        "base_url",
        "base_urls",
        # vLLM engines: parallelism, memory and scheduling
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "enable_expert_parallel",
        "distributed_executor_backend",
        "mm_encoder_tp_mode",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "async_scheduling",
        "enable_prefix_caching",
        "enforce_eager",
        "block_size",
    }
)


# Output-changing options a backend applies when none is given. They are part of the
# fingerprint either way, so changing a default never reuses outputs made under the old one.
# Taken from the options' declarations (options.py), so a fingerprint never imports torch or vllm.
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "transformers": {"choice_rule": TransformersOptions.model_fields["choice_rule"].default}
}


def model_fingerprint(backend: str, model: str, options: dict[str, Any]) -> dict[str, Any]:
    """What identifies a model's outputs, computable before loading it (so finished work is
    recognised without starting an engine)."""
    given = {**DEFAULT_OPTIONS.get(backend, {}), **options}
    kept = {name: value for name, value in sorted(given.items()) if name not in VOLATILE_OPTIONS}
    return {"backend": backend, "model": model, **kept}


class BackendError(GamutError, RuntimeError):
    """A backend that cannot start or serve (missing package, model not found, bad options)."""


class Backend(ABC):
    """A model that completes chat requests. Subclasses set ``name`` and implement ``complete``."""

    name: ClassVar[str]
    # Requests the pipeline hands over per call (and commits per transaction) by default.
    default_batch_size: ClassVar[int] = 64
    supports_images: ClassVar[bool] = True
    supports_json_schema: ClassVar[bool] = True

    def __init__(self, model: str, **options: Any):
        self.model = model
        self.options = options
        self.stats = BackendStats()

    @abstractmethod
    def complete(self, requests: Sequence[ChatRequest], constraint: Constraint = None) -> list[Completion]:
        """Complete every request (greedy), in order; one Completion per request."""

    def batch_api(self) -> BatchAPI | None:
        """The provider's batch API for this model (``--batch``), None where the backend has none."""
        return None

    def fingerprint(self) -> dict[str, Any]:
        """Everything that determines this backend's outputs: part of every cache key."""
        return model_fingerprint(self.name, self.model, self.options)

    def close(self) -> None:  # noqa: B027 - optional: a backend holding nothing has nothing to release
        """Release the model (memory, processes, connections)."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
