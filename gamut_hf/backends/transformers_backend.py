"""Local models through transformers, on CPU or GPU: the backend with no server at all.

Free text (a candidate's answer) is batched greedy ``generate``. A :class:`Choice` (the
judge's verdict) is not generated but *scored*: each option plus the end-of-turn token is a
continuation of the prompt, and the option the ``choice_rule`` ranks first wins, so even a
135M-parameter judge always yields one valid verdict. The rules: ``summed`` (the option's
total log-probability, which favours options of fewer tokens: "missing" is one token,
"partially_meets" five), ``mean`` (per token) and ``first_token`` (only the token that tells
the options apart, as a constrained decoder's first step would); the default is the one with
the best kappa on the judge audit (BENCHMARKS.md). A question's checks share
everything but their last words, so within each run of requests with one ``prefix_key`` the
longest common token prefix is computed once and its KV cache reused for every check.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import torch
from jinja2.exceptions import TemplateError
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
    DynamicCache,
)

from gamut_hf.backends.base import (
    DEFAULT_OPTIONS,
    Backend,
    BackendError,
    ChatRequest,
    Choice,
    Completion,
    Constraint,
)
from gamut_hf.backends.models import resolve_model
from gamut_hf.backends.options import TRANSFORMERS_CHOICE_RULES
from gamut_hf.backends.reasoning import (
    check_verdict_prompt,
    split_token_ids,
    template_texts,
    verdict_template_kwargs,
)


def rank_option(token_logprobs: Sequence[float], rule: str) -> float:
    """An option's score under a choice rule, from the log-probabilities of its tokens (the
    option's own, then end-of-turn)."""
    if rule == "summed":
        return sum(token_logprobs)
    if rule == "mean":
        return sum(token_logprobs) / len(token_logprobs)
    return token_logprobs[0]


def best_option(logprobs: Sequence[Sequence[float]], rule: str) -> int:
    """The index of the option ``rule`` ranks first, from each option's token log-probabilities
    (the first on a tie, as ``max`` breaks them)."""
    return max(range(len(logprobs)), key=lambda j: rank_option(logprobs[j], rule))


def option_probabilities(logprobs: Sequence[Sequence[float]], options: Sequence[str], rule: str) -> dict[str, float]:
    """Each option's probability given that the answer is one of them: the softmax of the rule's
    ranks (first_token: the first tokens' probabilities renormalised over the options; summed: each
    option's whole probability renormalised), so the ranked-first option is the most probable."""
    ranks = [rank_option(option, rule) for option in logprobs]
    top = max(ranks)
    weights = [math.exp(rank - top) for rank in ranks]
    total = sum(weights)
    return {option: weight / total for option, weight in zip(options, weights, strict=True)}


def _common_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    first = sequences[0]
    length = min(len(s) for s in sequences)
    for position in range(length):
        token = first[position]
        if any(s[position] != token for s in sequences):
            return position
    return length


def _image_keywords(processor: Any) -> set[str]:
    """The per-call keywords a processor's image processor takes (its declared kwargs)."""
    declared = getattr(getattr(processor, "image_processor", None), "valid_kwargs", None)
    return set(getattr(declared, "__annotations__", {}))


def _text_of(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content if p["type"] == "text")


def _prepend_text(content: str | list[dict[str, Any]], text: str) -> str | list[dict[str, Any]]:
    """``content`` with ``text`` (and a blank line) before its own text, images kept in place."""
    if isinstance(content, str):
        return f"{text}\n\n{content}"
    parts = list(content)
    first_text = next((i for i, part in enumerate(parts) if part["type"] == "text"), len(parts))
    if first_text < len(parts):
        parts[first_text] = {"type": "text", "text": f"{text}\n\n{parts[first_text]['text']}"}
    else:
        parts.append({"type": "text", "text": text})
    return parts


def _checkpoint_dtype(config: Any) -> torch.dtype | None:
    """The dtype the checkpoint's weights are stored in, as its config says (a VLM's may say it
    on the text model's config only)."""
    for source in (config, getattr(config, "text_config", None)):
        value = getattr(source, "dtype", None) or getattr(source, "torch_dtype", None)
        value = getattr(torch, value, None) if isinstance(value, str) else value
        if isinstance(value, torch.dtype):
            return value
    return None


def _placement(device: str, device_map: str | None, dtype: str, config: Any) -> tuple[dict[str, Any], torch.dtype]:
    """Where the weights load (``from_pretrained``'s device_map) and in which dtype.

    With a GPU the weights go straight onto it through accelerate's device map, never through host
    RAM first; ``device_map="auto"`` (the default on a GPU machine) spreads a model larger than one
    GPU over every visible GPU. On a CPU they stay on the CPU. ``dtype="auto"`` is the checkpoint's
    own half precision on a GPU (bfloat16 when the checkpoint is stored in float32) and float32 on a
    CPU, where half precision is emulated and slower.
    """
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BackendError(
            f"transformers: device={device} but torch sees no GPU (torch.cuda.is_available() is False): "
            "leave device out to run on the CPU, or run `gamut doctor` to see why the GPU is not found"
        )
    if device == "cpu" and device_map not in (None, "auto", "cpu"):
        raise BackendError(
            f"transformers: device_map={device_map} places weights over GPUs and this run is on the CPU: "
            "leave device_map out (or auto)"
        )
    # A named device holds the whole model; on "cuda", "auto" spreads it over every visible GPU.
    where = "cpu" if device == "cpu" else device_map or ("auto" if device == "cuda" else device)
    placement = {} if where == "cpu" else {"device_map": where}
    if dtype != "auto":
        chosen = getattr(torch, dtype, None)
        if not isinstance(chosen, torch.dtype):
            raise BackendError(f"transformers: dtype {dtype!r} is not a torch dtype (bfloat16, float16, float32)")
        return placement, chosen
    if device == "cpu":
        return placement, torch.float32
    stored = _checkpoint_dtype(config)
    return placement, stored if stored in (torch.bfloat16, torch.float16) else torch.bfloat16


@dataclass
class PromptInputs:
    """One encoded prompt: its token ids and every other processor output, split by kind.

    Processor outputs come in two kinds. Per-token ones (``attention_mask``, Qwen's
    ``mm_token_type_ids``, Gemma's ``token_type_ids``, Mllama's ``cross_attention_mask``) are
    shaped ``(1, length, ...)`` like the ids and are cut where the ids are cut; the rest (pixels,
    grids, aspect ratios) belong to the image and go in with the part that holds it. Nothing here
    names a family: a new processor output is carried by its shape.
    """

    ids: list[int]
    per_token: dict[str, torch.Tensor]
    per_image: dict[str, torch.Tensor]
    device: torch.device

    @classmethod
    def of(cls, encoded: dict[str, torch.Tensor]) -> PromptInputs:
        ids = encoded["input_ids"]
        per_token: dict[str, torch.Tensor] = {}
        per_image: dict[str, torch.Tensor] = {}
        for name, value in encoded.items():
            if name in ("input_ids", "attention_mask"):
                continue  # one unpadded sequence: the mask is all ones, and positions follow the cache
            aligned = value.dim() >= 2 and value.shape[0] == 1 and value.shape[1] == ids.shape[1]
            (per_token if aligned else per_image)[name] = value
        return cls(ids[0].tolist(), per_token, per_image, ids.device)

    def part(self, start: int, end: int | None, *, with_images: bool) -> dict[str, Any]:
        """Model inputs for the tokens ``start:end``, with the image's inputs if asked."""
        inputs: dict[str, Any] = {"input_ids": torch.tensor([self.ids[start:end]], device=self.device)}
        inputs.update({name: value[:, start:end] for name, value in self.per_token.items()})
        if with_images:
            inputs.update(self.per_image)
        return inputs

    def per_token_span(self, start: int, width: int) -> dict[str, torch.Tensor]:
        """Per-token inputs for ``width`` positions from ``start``: the prompt's own values while
        they last, then its last value (text after text, as ``generate`` extends them)."""
        span = {}
        for name, value in self.per_token.items():
            own = value[:, start : start + width]
            more = width - own.shape[1]
            span[name] = torch.cat([own, value[:, -1:].expand(1, more, *value.shape[2:])], dim=1) if more else own
        return span


@dataclass
class ScoredOptions:
    """One prompt's options, scored: ``logprobs[j]`` are option j's tokens' log-probabilities."""

    logprobs: list[list[float]]
    prompt_tokens: int
    cached_tokens: int
    seconds: float = 0.0


class TransformersBackend(Backend):
    name = "transformers"
    # One generate() batch per commit; for the judge, about one question per commit.
    default_batch_size = 8

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        device_map: str | None = None,
        dtype: str = "auto",
        batch_size: int = 8,
        prefix_reuse: bool = True,
        choice_rule: str = DEFAULT_OPTIONS["transformers"]["choice_rule"],
        max_pixels: int | None = None,
    ):
        if choice_rule not in TRANSFORMERS_CHOICE_RULES:
            raise BackendError(
                f"transformers: choice_rule must be one of {', '.join(TRANSFORMERS_CHOICE_RULES)}, not {choice_rule!r}"
            )
        options: dict[str, Any] = {"max_pixels": max_pixels} if max_pixels is not None else {}
        super().__init__(
            model,
            device=device,
            device_map=device_map,
            dtype=dtype,
            batch_size=batch_size,
            prefix_reuse=prefix_reuse,
            choice_rule=choice_rule,
            **options,
        )
        self.choice_rule = choice_rule
        path = resolve_model(model)
        try:
            config = AutoConfig.from_pretrained(path)
        except (OSError, ValueError) as error:
            raise BackendError(f"transformers: cannot load model {model!r}: {str(error).splitlines()[0]}") from None
        placement, torch_dtype = _placement(device, device_map, dtype, config)
        self.multimodal = getattr(config, "vision_config", None) is not None
        # Per-call processor options (Qwen's image budget), applied to every image: the same
        # keyword vLLM passes as mm_processor_kwargs, so both count the same image tokens.
        self.image_options: dict[str, Any] = {"max_pixels": max_pixels} if max_pixels is not None else {}
        if self.multimodal:
            self.processor = AutoProcessor.from_pretrained(path)
            self.tokenizer = self.processor.tokenizer
            if self.image_options and "max_pixels" not in _image_keywords(self.processor):
                raise BackendError(
                    f"transformers: {model}'s {type(self.processor).__name__} takes no max_pixels (its image budget is "
                    "fixed or tiled); leave the option out"
                )
            self.net = AutoModelForImageTextToText.from_pretrained(path, dtype=torch_dtype, **placement)
        elif self.image_options:
            raise BackendError(f"transformers: max_pixels applies to vision-language models; {model} takes no images")
        else:
            self.processor = None
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.net = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, **placement)
        self.net.eval()
        # Inputs go where the embeddings are: with a device map, the first GPU the model spans.
        self.device: torch.device = self.net.get_input_embeddings().weight.device
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        eos = self.net.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        # Every token that ends a turn stops generation (Gemma: <eos> and <end_of_turn>; Llama:
        # <|eot|>, <|eom|>, <|end_of_text|>); the one the chat template writes after an assistant
        # message is what a verdict option ends with.
        self.stop_tokens: list[int] = list(eos) if isinstance(eos, list) else [eos]
        self.end_of_turn: int = self._template_turn_end() or self.stop_tokens[0]
        if self.end_of_turn not in self.stop_tokens:
            self.stop_tokens.append(self.end_of_turn)
        self.batch_size = batch_size
        self.prefix_reuse = prefix_reuse
        # Whether the model computes logits for chosen positions only (most of transformers' do).
        self.keeps_logits = "logits_to_keep" in inspect.signature(self.net.forward).parameters
        # A verdict (or rationale) is rendered with a thinking template's reasoning switched off.
        self.verdict_template_kwargs = verdict_template_kwargs(
            *template_texts(getattr(self.processor, "chat_template", None)),
            *template_texts(getattr(self.tokenizer, "chat_template", None)),
        )
        # The token an image expands into (Gemma's soft tokens, Llama 4's patches), which the
        # config names; a processor's own image_token may be the marker around them instead.
        self.image_token_id = (
            getattr(config, "image_token_id", None)
            or getattr(config, "image_token_index", None)
            or getattr(self.processor, "image_token_id", None)
        )

    # -- prompts --------------------------------------------------------------------------

    def _messages(self, request: ChatRequest) -> list[dict[str, Any]]:
        if request.image is not None and not self.multimodal:
            raise BackendError(f"transformers: {self.model} takes no images; use the text_only variant")
        image_part = {"type": "image"} if self.multimodal else None
        messages = request.messages(image_part)
        if self.multimodal:  # processors' templates want every content as a list of parts
            for message in messages:
                if isinstance(message["content"], str):
                    message["content"] = [{"type": "text", "text": message["content"]}]
        return messages

    def _render(
        self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True, constrained: bool = False
    ) -> str:
        """The chat template's text (``constrained``: for a verdict, reasoning switched off). A
        template that refuses a system turn beside an image (Llama 3.2 Vision's) gets the system
        text at the start of the user turn instead."""
        template = self.processor or self.tokenizer
        variables = self.verdict_template_kwargs if constrained else {}
        try:
            text = template.apply_chat_template(
                messages, add_generation_prompt=add_generation_prompt, tokenize=False, **variables
            )
        except TemplateError:
            if messages[0]["role"] != "system" or len(messages) < 2:
                raise
            system, user = messages[0], messages[1]
            folded = {**user, "content": _prepend_text(user["content"], _text_of(system["content"]))}
            text = template.apply_chat_template(
                [folded, *messages[2:]], add_generation_prompt=add_generation_prompt, tokenize=False, **variables
            )
        if constrained:
            check_verdict_prompt(self.model, text)
        return text

    def _template_turn_end(self) -> int | None:
        """The token the chat template writes right after an assistant message, if it writes one."""
        marker = "Zq7"
        turn: list[dict[str, Any]] = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": marker},
        ]
        if self.multimodal:
            turn = [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in turn]
        try:
            text = self._render(turn, add_generation_prompt=False)
        except (TemplateError, ValueError, TypeError):
            return None
        after = text[text.rfind(marker) + len(marker) :] if marker in text else ""
        ids = self.tokenizer(after, add_special_tokens=False)["input_ids"]
        return ids[0] if ids and ids[0] in self.tokenizer.all_special_ids + self.stop_tokens else None

    def _encode(
        self, requests: Sequence[ChatRequest], *, padding: bool, constrained: bool = False
    ) -> dict[str, torch.Tensor]:
        # The template writes the special tokens (<bos> included); the tokenizer adds none of its own.
        texts = [self._render(self._messages(r), constrained=constrained) for r in requests]
        images = [r.image.convert("RGB") for r in requests if r.image is not None]
        if self.processor is not None and images:
            if len(images) != len(requests):
                raise BackendError("transformers: a batch mixes requests with and without an image")
            encoded = self.processor(
                text=texts,
                images=[[image] for image in images],  # per text: flat lists confuse tiled processors
                padding=padding,
                return_tensors="pt",
                add_special_tokens=False,
                **self.image_options,
            )
        else:
            encoded = self.tokenizer(texts, padding=padding, return_tensors="pt", add_special_tokens=False)
        # Pixel values in the model's dtype (Llama 4's processor returns bfloat16 whatever the model).
        return {
            name: value.to(self.device, dtype=self.net.dtype) if value.is_floating_point() else value.to(self.device)
            for name, value in encoded.items()
        }

    # -- completing -----------------------------------------------------------------------

    @torch.inference_mode()
    def complete(self, requests: Sequence[ChatRequest], constraint: Constraint = None) -> list[Completion]:
        started = time.perf_counter()
        if isinstance(constraint, Choice):
            completions = []
            for _, group in groupby(requests, key=lambda r: r.prefix_key or object()):
                completions.extend(self._choose(list(group), constraint.options))
        else:
            # A JSON schema cannot be imposed here; the judge's parser reads what comes out
            # and a malformed answer becomes a retried, then stored, error.
            completions = []
            for start in range(0, len(requests), self.batch_size):
                completions.extend(self._generate(requests[start : start + self.batch_size], constraint is not None))
        self.stats.add(completions, time.perf_counter() - started)
        return completions

    def _generate(self, batch: Sequence[ChatRequest], constrained: bool = False) -> list[Completion]:
        started = time.perf_counter()
        inputs = self._encode(batch, padding=True, constrained=constrained)
        output = self.net.generate(
            **inputs,
            max_new_tokens=max(r.max_tokens for r in batch),
            do_sample=False,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.stop_tokens,
        )
        seconds = (time.perf_counter() - started) / len(batch)
        completions = []
        prompt_width = inputs["input_ids"].shape[1]
        for row, request in enumerate(batch):
            new = output[row, prompt_width:].tolist()
            stop = next((i for i, token in enumerate(new) if token in self.stop_tokens), len(new))
            new = new[:stop]
            new = new[: request.max_tokens]
            # A thinking model's <think>...</think> is split off by token before decoding drops
            # special tokens; the prompt's end tells whether the chat template opened it.
            split = split_token_ids(new, self.tokenizer, prompt_ids=inputs["input_ids"][row].tolist())
            completions.append(
                Completion(
                    text=split.answer.strip(),
                    prompt_tokens=int(inputs["attention_mask"][row].sum()),
                    completion_tokens=len(new),
                    seconds=seconds,
                    reasoning=split.reasoning,
                    reasoning_unclosed=not split.closed,
                )
            )
        return completions

    def _option_ids(self, options: Sequence[str]) -> list[list[int]]:
        return [
            self.tokenizer(option, add_special_tokens=False)["input_ids"] + [self.end_of_turn] for option in options
        ]

    def _choose(self, group: list[ChatRequest], options: Sequence[str]) -> list[Completion]:
        """Each request's option ranked first by the choice rule."""
        option_ids = self._option_ids(options)
        if self.choice_rule == "first_token" and len({ids[0] for ids in option_ids}) < len(options):
            raise BackendError(
                f"transformers: choice_rule first_token needs options whose first tokens differ: {', '.join(options)}"
            )
        completions = []
        for scored in self.option_logprobs(group, options):
            best = best_option(scored.logprobs, self.choice_rule)
            completions.append(
                Completion(
                    text=options[best],
                    prompt_tokens=scored.prompt_tokens,
                    completion_tokens=len(option_ids[best]),
                    cached_tokens=scored.cached_tokens,
                    seconds=scored.seconds,
                    option_probabilities=option_probabilities(scored.logprobs, options, self.choice_rule),
                )
            )
        return completions

    def _encode_group(self, group: Sequence[ChatRequest]) -> list[PromptInputs]:
        """Each request's prompt, with a photo the requests share processed once.

        A question's checks carry one photo. The processor runs on the first request only; the
        others are tokenised as text, where the image is still its one placeholder token, and their
        own ending is put after the first's expanded prefix. Tokens never merge across a special
        token, so this gives the ids the processor would; where it does not (the image after the
        point the prompts part, a processor that rewrites text), each request is processed whole.
        """
        one = [PromptInputs.of(self._encode(group[:1], padding=False, constrained=True))]
        image = group[0].image
        if len(group) == 1 or image is None or any(r.image is not image for r in group):
            return one + [PromptInputs.of(self._encode([r], padding=False, constrained=True)) for r in group[1:]]
        full = one[0]
        texts = [self._render(self._messages(r), constrained=True) for r in group]
        plain = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        common = _common_prefix_length(plain)
        expanded = common + len(full.ids) - len(plain[0])  # where the first prompt's own ending starts
        if (
            expanded < common
            or full.ids[expanded:] != plain[0][common:]
            or self.image_token_id is None
            or self.image_token_id not in full.ids[:expanded]
        ):
            return one + [PromptInputs.of(self._encode([r], padding=False, constrained=True)) for r in group[1:]]
        prompts = [full]
        for ids in plain[1:]:
            own = full.ids[:expanded] + ids[common:]
            prompts.append(PromptInputs(own, full.per_token_span(0, len(own)), full.per_image, full.device))
        return prompts

    @torch.inference_mode()
    def option_logprobs(self, group: Sequence[ChatRequest], options: Sequence[str]) -> list[ScoredOptions]:
        """Score every option as a continuation of each prompt: per request, per option, the
        log-probability of each of its tokens (``first_token``: of its first token only).

        Requests of one prefix_key share everything but their last words: that prefix (the photo
        included) is prefilled once, and the checks' own endings run on top of its KV cache
        ``batch_size`` rows per forward pass, each row right-padded, so a row's padding comes after
        every token it is scored on and (attention being causal) never changes its scores. A row is
        a check's ending (first_token) or its ending followed by one option (the other rules).
        """
        started = time.perf_counter()
        prompts = self._encode_group(group)
        shared = _common_prefix_length([p.ids for p in prompts]) if self.prefix_reuse and len(group) > 1 else 0
        shared = min(shared, min(len(p.ids) for p in prompts) - 1)  # each prompt keeps >= 1 token of its own
        if self.image_token_id is not None and self.image_token_id in prompts[0].ids[shared:]:
            shared = 0  # the image goes in with the prefill, so every image token must fall inside it
        option_ids = self._option_ids(options)
        # Without a shared prefix each prompt is its own group: all but its last token prefilled.
        everyone = list(range(len(prompts)))
        groups = [(everyone, shared)] if shared else [([i], len(prompts[i].ids) - 1) for i in everyone]
        rows_each = 1 if self.choice_rule == "first_token" else len(option_ids)
        step = max(1, self.batch_size // rows_each)
        scored: dict[int, ScoredOptions] = {}
        for members, prefix in groups:
            cache = self._fresh_cache()
            self.net(**prompts[members[0]].part(0, prefix, with_images=True), past_key_values=cache, use_cache=True)
            # Endings of like length share a pass: less padding to compute.
            members = sorted(members, key=lambda i: len(prompts[i].ids))
            for start in range(0, len(members), step):
                picked = members[start : start + step]
                results = self._score_rows([prompts[i] for i in picked], prefix, option_ids, cache)
                for i, logprobs in zip(picked, results, strict=True):
                    scored[i] = ScoredOptions(logprobs, len(prompts[i].ids), cached_tokens=shared)
                cache.crop(prefix - cache.get_seq_length())  # back to the prefix, one row
                cache.batch_select_indices(torch.tensor([0], device=self.device))
        seconds = (time.perf_counter() - started) / len(group)
        for entry in scored.values():
            entry.seconds = seconds
        return [scored[i] for i in everyone]

    def _score_rows(
        self, chunk: Sequence[PromptInputs], prefix: int, option_ids: list[list[int]], cache: DynamicCache
    ) -> list[list[list[float]]]:
        """One forward pass over ``chunk``'s endings after the cached ``prefix``: per prompt, per
        option, its tokens' log-probabilities."""
        first_only = self.choice_rule == "first_token"
        rows: list[tuple[int, list[int], list[int]]] = []  # (prompt, tokens, option or [])
        for index, prompt in enumerate(chunk):
            ending = prompt.ids[prefix:]
            for ids in [[]] if first_only else option_ids:
                rows.append((index, ending + ids, ids))
        width = max(len(tokens) for _, tokens, _ in rows)
        inputs: dict[str, Any] = {
            "input_ids": torch.tensor(
                [tokens + [self.end_of_turn] * (width - len(tokens)) for _, tokens, _ in rows], device=self.device
            )
        }
        for name in chunk[0].per_token:
            inputs[name] = torch.cat([chunk[i].per_token_span(prefix, width)[name] for i, _, _ in rows])
        # Logits only where a row is scored: a check's last token (its options' first tokens) and,
        # for the other rules, each option token before the last. The vocabulary projection of
        # every other position is a fifth of a small judge's compute.
        spans = [
            range(len(chunk[i].ids) - prefix - 1, len(chunk[i].ids) - prefix - 1 + max(len(ids), 1))
            for i, _, ids in rows
        ]
        kept = sorted({position for span in spans for position in span})
        column = {position: k for k, position in enumerate(kept)} if self.keeps_logits else {p: p for p in kept}
        if self.keeps_logits:
            inputs["logits_to_keep"] = torch.tensor(kept, device=self.device)
        cache.batch_repeat_interleave(len(rows))
        logits = self.net(**inputs, past_key_values=cache, use_cache=True).logits
        out: list[list[list[float]]] = [[] for _ in chunk]
        for row, ((index, _, ids), span) in enumerate(zip(rows, spans, strict=True)):
            scores = torch.log_softmax(logits[row, [column[p] for p in span]].float(), dim=-1)
            if first_only:
                out[index] = [[scores[0, option[0]].item()] for option in option_ids]
            else:
                out[index].append([scores[k, token].item() for k, token in enumerate(ids)])
        return out

    def _fresh_cache(self) -> DynamicCache:
        """An empty KV cache, and a model that forgets the last sequence: multimodal position
        schemes keep per-sequence state on the model (Qwen's M-RoPE offsets, ``rope_deltas``),
        which would otherwise carry over from an image prompt to the next, text-only one."""
        for module in self.net.modules():
            if getattr(module, "rope_deltas", None) is not None:
                module.rope_deltas = None
        return DynamicCache()

    def close(self) -> None:
        del self.net
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
