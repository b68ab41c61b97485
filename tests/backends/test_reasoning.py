"""A thinking candidate's reasoning, split from its answer by the post-processing each backend uses.

Random-weight and small models never emit the tags, so scripted outputs go through the same code:
the splitter on token ids of a real tokenizer (SmolLM2's, with ``<think>``/``</think>`` added as a
thinking model's tokenizer has them), the text-level fallback, and the transformers and vLLM
backends' ``complete`` with the model's or engine's output replaced by scripted token ids. The
openai backend's path is tested against the fake endpoint (test_openai_backend.py), the whole
run through the CLI in tests/evaluation/test_pipeline.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from gamut_hf.backends import load_backend
from gamut_hf.backends.base import BackendStats, ChatRequest, Choice
from gamut_hf.backends.models import resolve_model
from gamut_hf.backends.reasoning import Split, split_text, split_token_ids, think_token_ids

REASONING = "The user asks about Paris. Let me recall: capital of France."
ANSWER = "Paris is the capital of France."
# A chat template that opens the reasoning in the prompt, as Qwen3 Thinking's does.
OPENING_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


def smollm_tokenizer(tags: str | None):
    """SmolLM2's tokenizer; ``tags`` "special" or "plain" adds the think tags as single tokens of that kind."""
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))
    if tags == "special":
        tokenizer.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    elif tags == "plain":
        tokenizer.add_tokens(["<think>", "</think>"])
    return tokenizer


@pytest.fixture(scope="module")
def special():
    return smollm_tokenizer("special")


@pytest.fixture(scope="module")
def plain():
    return smollm_tokenizer("plain")


@pytest.fixture(scope="module")
def untagged():
    return smollm_tokenizer(None)


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


# -- text ------------------------------------------------------------------------------------------


def test_text_without_tags_is_the_answer_as_is():
    assert split_text("  An answer.\n") == Split("  An answer.\n", None, True)


@pytest.mark.parametrize(
    "text",
    [
        f"<think>\n{REASONING}\n</think>\n\n{ANSWER}",
        f"\n  <think>{REASONING}</think>{ANSWER}\n",
        f"{REASONING}\n</think>\n\n{ANSWER}",  # the template opened it: only the closing tag is generated
    ],
)
def test_text_is_split_at_the_closing_tag(text):
    assert split_text(text) == Split(ANSWER, REASONING, True)


def test_an_unclosed_reasoning_leaves_an_empty_answer():
    assert split_text(f"<think>\n{REASONING}") == Split("", REASONING, False)
    # Opened by the prompt and cut: no tag at all in the output.
    assert split_text(f"{REASONING} and so", opened=True) == Split("", f"{REASONING} and so", False)
    assert split_text(f"{REASONING}</think>{ANSWER}", opened=True) == Split(ANSWER, REASONING, True)


def test_only_the_first_closing_tag_splits():
    assert split_text(f"<think>r</think>{ANSWER} (a </think> in the answer)").answer == (
        f"{ANSWER} (a </think> in the answer)"
    )


# -- token ids -------------------------------------------------------------------------------------


def test_think_tags_are_found_as_single_tokens_only(special, plain, untagged):
    assert think_token_ids(special) == (
        special.convert_tokens_to_ids("<think>"),
        special.convert_tokens_to_ids("</think>"),
    )
    assert think_token_ids(plain) is not None
    # SmolLM2 spells </think> in several tokens (and maps the unknown tag to token 0): text level.
    assert think_token_ids(untagged) is None


def test_special_tags_are_split_before_decoding_drops_them(special):
    generated = ids(special, f"<think>\n{REASONING}\n</think>\n\n{ANSWER}") + [special.eos_token_id]
    # What decoding alone gives: the tags gone, the reasoning run into the answer.
    merged = special.decode(generated, skip_special_tokens=True)
    assert "<think>" not in merged and REASONING in merged and split_text(merged).reasoning is None
    assert split_token_ids(generated, special) == Split(ANSWER, REASONING, True)


@pytest.mark.parametrize("kind", ["special", "plain"])
def test_token_ids_split_like_the_text(kind, special, plain):
    tokenizer = special if kind == "special" else plain
    assert split_token_ids(ids(tokenizer, f"{REASONING}</think>{ANSWER}"), tokenizer) == Split(ANSWER, REASONING, True)
    assert split_token_ids(ids(tokenizer, f" <think>{REASONING}"), tokenizer) == Split("", REASONING, False)
    assert split_token_ids(ids(tokenizer, ANSWER), tokenizer) == Split(ANSWER, None, True)


def test_a_prompt_that_opens_the_reasoning_makes_an_untagged_output_a_cut_reasoning(special, untagged):
    for tokenizer in (special, untagged):  # by token, and by the decoded tail of the prompt
        opened = ids(tokenizer, "<|im_start|>user\nWhere?<|im_end|>\n<|im_start|>assistant\n<think>\n")
        cut = ids(tokenizer, REASONING)
        assert split_token_ids(cut, tokenizer, prompt_ids=opened) == Split("", REASONING, False)
        closed = ids(tokenizer, f"{REASONING}\n</think>\n\n{ANSWER}")
        assert split_token_ids(closed, tokenizer, prompt_ids=opened) == Split(ANSWER, REASONING, True)
    # Qwen3's non-thinking mode closes an empty reasoning in the prompt: the output is the answer.
    closed_prompt = ids(special, "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert split_token_ids(ids(special, ANSWER), special, prompt_ids=closed_prompt) == Split(ANSWER, None, True)
    # A user who writes <think> early in the question opens nothing.
    question = ids(special, "<|im_start|>user\nWhat does <think> do in Qwen3 chat templates?<|im_end|>\n")
    prompt = question + ids(special, "<|im_start|>assistant\n")
    assert split_token_ids(ids(special, ANSWER), special, prompt_ids=prompt) == Split(ANSWER, None, True)


def test_the_text_level_fallback_decodes_or_takes_the_engines_text(untagged):
    generated = ids(untagged, f"<think>{REASONING}</think>\n{ANSWER}")
    assert split_token_ids(generated, untagged) == Split(ANSWER, REASONING, True)
    assert split_token_ids(ids(untagged, ANSWER), untagged, text=" engine text") == Split(" engine text")


# -- the transformers backend's generate path --------------------------------------------------------


@pytest.fixture(scope="module")
def smollm_thinking():
    """SmolLM2 in the transformers backend, its tokenizer given special think tags; its generate
    is replaced per test by scripted continuations."""
    with load_backend("transformers", "smollm2-135m", batch_size=4) as backend:
        backend.tokenizer.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
        yield backend


def script_generate(monkeypatch, backend, continuations: list[str]) -> None:
    """``net.generate`` returns each prompt followed by its scripted continuation and end of turn,
    right-padded with end of turn as a batch is."""
    import torch

    scripted = [ids(backend.tokenizer, text) + [backend.end_of_turn] for text in continuations]
    width = max(map(len, scripted))

    def generate(input_ids, **_):
        rows = [row + [backend.end_of_turn] * (width - len(row)) for row in scripted]
        return torch.cat([input_ids, torch.tensor(rows, device=input_ids.device)], dim=1)

    monkeypatch.setattr(backend.net, "generate", generate)


def test_transformers_generate_keeps_the_reasoning_apart(smollm_thinking, monkeypatch):
    script_generate(
        monkeypatch,
        smollm_thinking,
        [f"<think>\n{REASONING}\n</think>\n\n{ANSWER}", f"<think>\n{REASONING} and then", ANSWER],
    )
    completions = smollm_thinking.complete([ChatRequest(user=f"question {i}") for i in range(3)])
    thought, cut, plain = completions
    assert (thought.text, thought.reasoning, thought.reasoning_unclosed) == (ANSWER, REASONING, False)
    assert (cut.text, cut.reasoning, cut.reasoning_unclosed) == ("", f"{REASONING} and then", True)
    assert (plain.text, plain.reasoning, plain.reasoning_unclosed) == (ANSWER, None, False)
    assert thought.completion_tokens == len(
        ids(smollm_thinking.tokenizer, f"<think>\n{REASONING}\n</think>\n\n{ANSWER}")
    )


def test_transformers_generate_under_a_template_that_opens_the_reasoning(smollm_thinking, monkeypatch):
    monkeypatch.setattr(smollm_thinking.tokenizer, "chat_template", OPENING_TEMPLATE)
    script_generate(monkeypatch, smollm_thinking, [f"{REASONING}\n</think>\n\n{ANSWER}", REASONING])
    thought, cut = smollm_thinking.complete([ChatRequest(user="a"), ChatRequest(user="b")])
    assert (thought.text, thought.reasoning, thought.reasoning_unclosed) == (ANSWER, REASONING, False)
    assert (cut.text, cut.reasoning, cut.reasoning_unclosed) == ("", REASONING, True)


# -- the vLLM backend's complete, its engine scripted ------------------------------------------------


def test_vllm_complete_splits_free_text_by_token_ids(special, monkeypatch):
    vllm_backend = pytest.importorskip("gamut_hf.backends.vllm_backend")
    texts = [f"<think>\n{REASONING}\n</think>\n\n{ANSWER}", f"<think>\n{REASONING}", ANSWER]
    prompt = ids(special, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n")

    def output(text: str):
        token_ids = ids(special, text) + [special.eos_token_id]
        # The engine's text has special tokens dropped, as vLLM's detokenizer does by default.
        generated = SimpleNamespace(
            text=special.decode(token_ids, skip_special_tokens=True), token_ids=token_ids, logprobs=None
        )
        return SimpleNamespace(outputs=[generated], prompt_token_ids=prompt, num_cached_tokens=0)

    engine = SimpleNamespace(chat=lambda *a, **k: [output(t) for t in texts], get_tokenizer=lambda: special)
    backend = object.__new__(vllm_backend.VLLMBackend)  # no engine started: its output is scripted
    backend.model, backend.multimodal, backend.stats, backend._llm = "scripted", False, BackendStats(), engine
    backend.verdict_template_kwargs = {}  # a template without a thinking switch
    backend._verdict_template_checked = False
    thought, cut, plain = backend.complete([ChatRequest(user=str(i)) for i in range(3)])
    assert (thought.text, thought.reasoning, thought.reasoning_unclosed) == (ANSWER, REASONING, False)
    assert (cut.text, cut.reasoning, cut.reasoning_unclosed) == ("", REASONING, True)
    assert (plain.text, plain.reasoning) == (ANSWER, None)
    # A constrained verdict is the engine's text as is.
    engine.chat = lambda *a, **k: [output("meets")]
    [verdict] = backend.complete([ChatRequest(user="check")], Choice(("meets", "missing")))
    assert (verdict.text, verdict.reasoning) == ("meets", None)
