"""A real ``vllm serve`` (OpenAI-compatible) answering a constrained chat completion via ``openai``."""

from __future__ import annotations

import time

from vllm_support import SERVED_MODEL_NAME, require_vllm, vllm_server

require_vllm()

from gamut_hf.backends.models import resolve_model  # noqa: E402
from gamut_hf.core.rubric import Check  # noqa: E402
from gamut_hf.evaluation.judge import judge_request  # noqa: E402


def test_served_model_answers_a_choice_constrained_chat_completion():
    import openai

    started = time.perf_counter()
    with vllm_server(resolve_model("smollm2-135m")) as base_url:
        print(f"\n[vllm serve] healthy after {time.perf_counter() - started:.1f} s at {base_url}")
        client = openai.OpenAI(base_url=base_url, api_key="EMPTY", timeout=300, max_retries=0)
        check = Check(
            id="i1.fact",
            item_id="i1",
            kind="fact",
            tier="answer_critical",
            text="The response says to water the plant less in winter.",
        )
        # The real judge prompt: long enough (over 128 tokens, a CPU KV block) for the second
        # request to find its prefix in the server's prefix cache.
        messages = judge_request(
            "How should I care for this plant in winter?",
            None,
            "Water it less in winter and keep it away from cold drafts.",
            check,
            rationale=False,
        ).messages()
        for attempt in range(2):  # the second time the shared prefix comes from the prefix cache
            reply = client.chat.completions.create(
                model=SERVED_MODEL_NAME,
                messages=messages,
                temperature=0,
                max_tokens=8,
                extra_body={"structured_outputs": {"choice": ["meets", "missing"]}},
            )
            answer = reply.choices[0].message.content
            assert answer in ("meets", "missing"), answer
            usage = reply.usage
            assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
            details = usage.prompt_tokens_details
            cached = details.cached_tokens if details is not None else None
            print(
                f"[vllm serve] request {attempt + 1}: {answer!r}, prompt_tokens={usage.prompt_tokens}, "
                f"cached_tokens={cached}"
            )
