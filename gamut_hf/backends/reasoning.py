"""A thinking model's reasoning, split from its answer.

Thinking models (Qwen3 and Qwen3-VL Thinking, DeepSeek-R1, ...) write a reasoning between
``<think>`` and ``</think>`` before the answer; many chat templates end the prompt with the
opening tag, so only the closing one is generated. The judge grades the answer alone, so every
backend splits a candidate's output here and keeps the reasoning apart:

* by token ids (:func:`split_token_ids`) where the tags are single tokens of the tokenizer: they
  are often special tokens, which decoding with ``skip_special_tokens`` drops, so the split must
  come before the decoding;
* by text (:func:`split_text`) otherwise, and for servers that answer with text only.

No tag: the whole output is the answer and there is no reasoning. A reasoning that never closes
(cut by max_tokens) leaves an empty answer, with ``closed`` False, so a run can count such
answers instead of grading a reasoning as if it were the answer.

A *judge* must not think: its verdict is constrained to four words, and a grammar that starts
inside an opened ``<think>`` makes the verdict a cut reasoning. Templates with a switch (Qwen3's
``enable_thinking``) get it turned off for every constrained request
(:func:`verdict_template_kwargs`); a template that opens ``<think>`` whatever it is told (Qwen3's
Thinking-2507 releases, DeepSeek-R1's) cannot judge, and is refused in one line
(:func:`check_verdict_prompt`) before its first verdict.

Pure: nothing here imports torch or a tokenizer library; a tokenizer is any object with the
``convert_tokens_to_ids``, ``convert_ids_to_tokens`` and ``decode`` of transformers' (vLLM's
tokenizers have them too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gamut_hf.backends.base import BackendError

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# How many of the prompt's last tokens are searched for an opening tag left open by the chat
# template ("<|im_start|>assistant\n<think>\n"); further back it is the user's text, not a template's.
PROMPT_TAIL_TOKENS = 8


# The chat-template variable by which Qwen3-style templates switch reasoning off (they then close an
# empty <think></think> in the prompt, so the verdict is the first thing the model writes).
THINKING_SWITCH = "enable_thinking"


def verdict_template_kwargs(*templates: object) -> dict[str, Any]:
    """The chat template variables for a constrained answer (a verdict): reasoning switched off
    where one of ``templates`` (the model's chat template texts) reads the switch, else none, so a
    template without it renders exactly as before."""
    return {THINKING_SWITCH: False} if any(isinstance(t, str) and THINKING_SWITCH in t for t in templates) else {}


def opens_reasoning(prompt: str) -> bool:
    """Whether a rendered prompt ends inside an opened ``<think>``: the model's first words would
    be its reasoning."""
    return prompt.rstrip().endswith(THINK_OPEN)


def check_verdict_prompt(model: str, prompt: str) -> None:
    """Refuse a judge whose chat template, with reasoning switched off where it can be, still
    leaves the verdict's prompt inside ``<think>``: the verdict grammar would cut its reasoning
    and every verdict would be noise."""
    if opens_reasoning(prompt):
        raise BackendError(
            f"judge {model!r}: its chat template opens <think> before every answer and has no "
            f"{THINKING_SWITCH} switch to close it, so each verdict would be cut mid-reasoning; judge with "
            "the model's Instruct release, or give the model folder a chat template with the switch (Qwen3's)"
        )


def template_texts(template: object) -> list[str]:
    """The texts of a chat template as tokenizers keep it: a string, or named templates (a dict, or
    a list of ``{"name", "template"}``)."""
    if isinstance(template, str):
        return [template]
    if isinstance(template, dict):
        return [t for t in template.values() if isinstance(t, str)]
    if isinstance(template, list):
        return [t["template"] for t in template if isinstance(t, dict) and isinstance(t.get("template"), str)]
    return []


@dataclass(frozen=True)
class Split:
    """An output split into what a user would call the answer and the reasoning before it."""

    answer: str
    reasoning: str | None = None  # None: the output had no reasoning
    closed: bool = True  # False: the reasoning never closed (cut by max_tokens), so answer is ""


def split_text(text: str, *, opened: bool = False) -> Split:
    """Split a decoded output at its first ``</think>``. ``<think>`` at the start is optional,
    and implied by ``opened`` (the prompt ended with it). No tag: ``text`` is the answer, as is."""
    head = text.lstrip()
    if head.startswith(THINK_OPEN):
        text, opened = head[len(THINK_OPEN) :], True
    reasoning, closed, answer = text.partition(THINK_CLOSE)
    if closed:
        return Split(answer.strip(), reasoning.strip())
    if opened:
        return Split("", text.strip(), closed=False)
    return Split(text)


def _single_token(tokenizer: Any, tag: str) -> int | None:
    try:
        token_id = tokenizer.convert_tokens_to_ids(tag)
    except (KeyError, ValueError, TypeError):
        return None
    if not isinstance(token_id, int) or token_id < 0:
        return None
    # An unknown token maps to the unknown token's id (or 0): it must map back to the tag.
    return token_id if tokenizer.convert_ids_to_tokens([token_id]) == [tag] else None


def think_token_ids(tokenizer: Any) -> tuple[int | None, int] | None:
    """The ids of ``<think>`` (None if it is not one token) and ``</think>``, where ``</think>``
    is a single token of ``tokenizer``; None where it is not (the text-level split applies)."""
    close = _single_token(tokenizer, THINK_CLOSE)
    return None if close is None else (_single_token(tokenizer, THINK_OPEN), close)


def _blank(tokenizer: Any, ids: Sequence[int]) -> bool:
    return not ids or not tokenizer.decode(list(ids), skip_special_tokens=True).strip()


def split_token_ids(
    ids: Sequence[int], tokenizer: Any, *, prompt_ids: Sequence[int] = (), text: str | None = None
) -> Split:
    """Split generated token ids (the end-of-turn token already removed or special) at the first
    ``</think>`` token, then decode each part with ``skip_special_tokens``.

    ``prompt_ids``: the prompt, whose last tokens tell whether the chat template opened the
    reasoning. ``text``: the output as the engine decoded it, the answer where no reasoning is
    found (saves a decode and keeps the engine's detokenization). Where ``</think>`` is not one
    token, the decoded text is split instead.
    """
    ids = list(ids)
    tags = think_token_ids(tokenizer)
    if tags is None:
        tail = tokenizer.decode(list(prompt_ids[-PROMPT_TAIL_TOKENS:])) if prompt_ids else ""
        opened = tail.rstrip().endswith(THINK_OPEN)
        decoded = text if text is not None else tokenizer.decode(ids, skip_special_tokens=True)
        return split_text(decoded, opened=opened)
    open_id, close_id = tags
    tail = list(prompt_ids[-PROMPT_TAIL_TOKENS:])
    opened = False
    if open_id is not None and open_id in tail:
        last = len(tail) - 1 - tail[::-1].index(open_id)
        opened = close_id not in tail[last:] and _blank(tokenizer, tail[last + 1 :])
    if open_id is not None and open_id in ids:
        start = ids.index(open_id)
        if _blank(tokenizer, ids[:start]):  # an opening tag at the start (after blanks) only
            ids, opened = ids[start + 1 :], True
    if close_id in ids:
        end = ids.index(close_id)
        answer = tokenizer.decode(ids[end + 1 :], skip_special_tokens=True).strip()
        return Split(answer, tokenizer.decode(ids[:end], skip_special_tokens=True).strip())
    if opened:
        return Split("", tokenizer.decode(ids, skip_special_tokens=True).strip(), closed=False)
    return Split(text if text is not None else tokenizer.decode(ids, skip_special_tokens=True))
