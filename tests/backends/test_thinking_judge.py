"""A thinking judge gives its verdict outside <think>: a template with Qwen3's enable_thinking
switch gets reasoning turned off for every constrained request (a verdict, a rationale), through
transformers' apply_chat_template, vLLM's LLM.chat and an OpenAI-compatible server's extra_body;
a candidate's free answer keeps the template's default (reasoning on, split off afterwards).

The model is the tiny random-weight Qwen3-VL with a thinking template of Qwen3's kind: the
assistant turn opens <think> unless enable_thinking is false, when it closes an empty one.
"""

from __future__ import annotations

import json
import shutil

import pytest
from tiny_models import tiny_model

from gamut_hf.backends import load_backend
from gamut_hf.backends.base import ChatRequest
from gamut_hf.core.rubric import VERDICTS, Check
from gamut_hf.evaluation.judge import judge_constraint, judge_request, parse_verdict

THINKING_END = (
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)
CHECKS = [
    Check(id=f"c{i}", item_id=f"i{i}", kind="fact", text=text, tier="answer_critical" if i < 2 else "valuable")
    for i, text in enumerate(
        ["Names the plant as a fiddle-leaf fig.", "Says to water less in winter.", "Mentions bright indirect light."]
    )
]
RESPONSE = "It is a fiddle-leaf fig: keep it in bright indirect light and water it less in winter."
QUESTION = "How should I care for this plant through winter?"


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models") / "tiny-qwen3-vl-thinking"
    shutil.copytree(tiny_model("qwen3_vl"), folder)
    template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    cut = template.index("{% if add_generation_prompt %}")
    (folder / "chat_template.jinja").write_text(template[:cut] + THINKING_END, encoding="utf-8")
    return folder


def judge_requests() -> list[ChatRequest]:
    return [judge_request(QUESTION, None, RESPONSE, check, rationale=False) for check in CHECKS]


def prompt_lengths(folder, request: ChatRequest) -> tuple[int, int]:
    """Tokens of the request's prompt with the template's default and with reasoning switched off."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(folder)
    messages = [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in request.messages()]
    lengths = []
    for variables in ({}, {"enable_thinking": False}):
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **variables)
        assert text.endswith("<think>\n\n</think>\n\n" if variables else "<think>\n")
        lengths.append(len(processor.tokenizer(text, add_special_tokens=False)["input_ids"]))
    assert lengths[0] != lengths[1]
    return lengths[0], lengths[1]


@pytest.mark.parametrize("backend_name", ["transformers", "vllm"])
def test_a_thinking_judge_gives_every_verdict_with_reasoning_off_and_a_candidate_keeps_it(backend_name, thinking_model):
    options: dict = {}
    if backend_name == "vllm":
        from vllm_support import CPU_GPU_MEMORY_UTILIZATION, on_cpu, require_vllm

        require_vllm()
        options = {"enforce_eager": True, "max_model_len": 4096}
        if on_cpu():
            options["gpu_memory_utilization"] = CPU_GPU_MEMORY_UTILIZATION
    requests = judge_requests()
    thinking, switched_off = prompt_lengths(thinking_model, requests[0])
    with load_backend(backend_name, str(thinking_model), **options) as backend:
        verdicts = backend.complete(requests, judge_constraint(False))
        assert [parse_verdict(v.text).verdict in VERDICTS for v in verdicts] == [True] * len(CHECKS)
        # The judge read the prompt with the empty <think></think> closed: its verdict is its first word.
        assert verdicts[0].prompt_tokens == switched_off, (verdicts[0].prompt_tokens, thinking, switched_off)
        # A rationale (JSON) is constrained too.
        rationale = backend.complete(
            [judge_request(QUESTION, None, RESPONSE, CHECKS[0], rationale=True)], judge_constraint(True)
        )[0]
        assert rationale.error is None and rationale.reasoning is None
        # A candidate's answer is free text: the template's default (thinking) stays.
        answer = backend.complete([ChatRequest(user=requests[0].user, system=requests[0].system, max_tokens=4)])[0]
        assert answer.prompt_tokens == thinking


def test_an_openai_compatible_judge_sends_the_switch_to_vllm_servers_only(scripted_endpoint):
    """Hosted APIs refuse fields they do not know: chat_template_kwargs goes to a server named as
    vLLM's (structured=vllm), or wherever the user sets the option, never unasked."""
    requests = judge_requests()[:1]
    sent = {}
    for name, options in {
        "hosted": {},
        "vllm server": {"structured": "vllm"},
        "asked": {"chat_template_kwargs": {"enable_thinking": False, "reasoning_effort": "low"}},
    }.items():
        scripted_endpoint.bodies.clear()
        with load_backend("openai", "judge-meets", base_url=scripted_endpoint.url, **options) as backend:
            verdict = backend.complete(requests, judge_constraint(False))[0]
            assert verdict.error is None and parse_verdict(verdict.text).verdict in VERDICTS, verdict
            backend.complete([ChatRequest(user="What is this?", max_tokens=8)])
        judged, answered = scripted_endpoint.bodies[:2]
        sent[name] = (judged.get("chat_template_kwargs"), answered.get("chat_template_kwargs"))
    assert sent["hosted"] == (None, None)
    assert sent["vllm server"] == ({"enable_thinking": False}, None)
    asked = {"enable_thinking": False, "reasoning_effort": "low"}
    assert sent["asked"] == (asked, asked)
    assert json.dumps(sent)  # plain JSON, as the server received it
