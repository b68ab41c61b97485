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
from conftest import error_lines
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
# Qwen3's Thinking-2507 kind: the assistant turn opens <think> whatever the variables say.
ALWAYS_THINKING_END = "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
RESPONSE = "It is a fiddle-leaf fig: keep it in bright indirect light and water it less in winter."
QUESTION = "How should I care for this plant through winter?"


def with_template_end(folder, end: str):
    """A copy of the tiny Qwen3-VL in ``folder`` whose chat template ends the prompt with ``end``."""
    shutil.copytree(tiny_model("qwen3_vl"), folder)
    template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    cut = template.index("{% if add_generation_prompt %}")
    (folder / "chat_template.jinja").write_text(template[:cut] + end, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory):
    return with_template_end(tmp_path_factory.mktemp("models") / "tiny-qwen3-vl-thinking", THINKING_END)


@pytest.fixture(scope="module")
def always_thinking_model(tmp_path_factory):
    return with_template_end(tmp_path_factory.mktemp("models") / "tiny-qwen3-vl-always-thinking", ALWAYS_THINKING_END)


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


def vllm_options() -> dict:
    from vllm_support import CPU_GPU_MEMORY_UTILIZATION, on_cpu, require_vllm

    require_vllm()
    options = {"enforce_eager": True, "max_model_len": 4096}
    if on_cpu():
        options["gpu_memory_utilization"] = CPU_GPU_MEMORY_UTILIZATION
    return options


@pytest.mark.parametrize("backend_name", ["transformers", "vllm"])
def test_a_thinking_judge_gives_every_verdict_with_reasoning_off_and_a_candidate_keeps_it(backend_name, thinking_model):
    options = vllm_options() if backend_name == "vllm" else {}
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


def test_a_judge_whose_template_always_thinks_is_refused_in_one_line_and_the_answers_stay(
    always_thinking_model, scripted_endpoint, gamut, tmp_path
):
    """From the installed command: the candidate answers, then the judge is refused before its
    first verdict, in one line naming the missing switch and what to use; the answers are kept."""
    out = tmp_path / "run"
    args = ["--model", "cand", "--backend", "openai", "--base-url", scripted_endpoint.url]
    judge = ["--judge", str(always_thinking_model), "--judge-backend", "transformers"]
    done = gamut("run", "--out", out, *args, *judge, "--variant", "text_only", "--limit", "1")
    assert done.code == 2, done.err
    *said, line = error_lines(done.err)  # what the run did, then the refusal
    assert line.startswith("gamut: ") and not any(s.startswith("gamut: ") for s in said), done.err
    assert "opens <think> before every answer" in line and "enable_thinking" in line and "Instruct" in line, line
    # The candidate's answers are stored: judging them with another judge asks the candidate nothing.
    answers = len(scripted_endpoint.bodies)
    judge = ["--judge", "judge-meets", "--judge-backend", "openai", "--judge-base-url", scripted_endpoint.url]
    rejudged = gamut("judge", "--out", out, *judge)
    assert rejudged.code == 0, rejudged.err
    assert all("response_format" in body for body in scripted_endpoint.bodies[answers:])  # verdicts only


def test_vllm_refuses_a_judge_whose_template_always_thinks_before_its_first_verdict(always_thinking_model):
    from gamut_hf.backends.base import BackendError

    with load_backend("vllm", str(always_thinking_model), **vllm_options()) as backend:
        with pytest.raises(BackendError, match="opens <think> before every answer"):
            backend.complete(judge_requests(), judge_constraint(False))
        # The same engine still answers as a candidate: reasoning and all.
        answer = backend.complete([ChatRequest(user=QUESTION, max_tokens=4)])[0]
        assert answer.error is None


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
