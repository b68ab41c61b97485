"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1.

The server is a fake chat endpoint that can also misbehave on cue (rate limits, server
errors, hangs, garbage): the network is the boundary, so everything on our side of it,
the openai client and its retries included, runs for real.
"""

from __future__ import annotations

import asyncio
import base64
import io
import socket
import time

import pytest

pytest.importorskip("openai")
from fake_endpoint import FakeEndpoint, user_text  # noqa: E402
from PIL import Image  # noqa: E402

from gamut_hf.backends import load_backend  # noqa: E402
from gamut_hf.backends.base import BackendError, ChatRequest, Choice, JsonSchema  # noqa: E402
from gamut_hf.backends.openai_backend import OpenAIBackend  # noqa: E402


@pytest.fixture(autouse=True)
def no_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def endpoint():
    server = FakeEndpoint()
    yield server
    server.stop()


def backend(*urls: str, **options) -> OpenAIBackend:
    options.setdefault("timeout", 5.0)
    options.setdefault("max_retries", 0)
    return OpenAIBackend("fake-model", base_urls=list(urls), **options)


def ask(*texts: str, **fields) -> list[ChatRequest]:
    return [ChatRequest(user=text, **fields) for text in texts]


# --- answers -------------------------------------------------------------------------------


def test_texts_come_back_in_order_with_usage_and_stats(endpoint):
    endpoint.delay = 0.05
    endpoint.faults["q0"] = ["sleep:0.3"]  # the first request finishes last
    model = backend(endpoint.url, concurrency=8)
    completions = model.complete(ask(*(f"q{i}" for i in range(20))))
    assert [c.text for c in completions] == [f"echo:q{i}" for i in range(20)]
    assert all(c.error is None for c in completions)
    assert completions[13].prompt_tokens == 3 and completions[13].completion_tokens == 3
    assert completions[13].cached_tokens == 2 and completions[13].seconds >= 0.05
    assert model.stats.requests == 20 and model.stats.completion_tokens == 60
    assert model.stats.cached_tokens == 40 and model.stats.seconds > 0
    assert model.complete([]) == []


def test_an_answer_without_usage_counts_nothing(endpoint):
    endpoint.faults["plain"] = ["bare"]
    [completion] = backend(endpoint.url).complete(ask("plain"))
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("hi", 0, 0)
    assert completion.cached_tokens is None and completion.error is None


def test_request_fields_are_sent_greedy_with_system_and_max_tokens(endpoint):
    backend(endpoint.url).complete([ChatRequest(user="hi", system="be brief", max_tokens=77)])
    body = endpoint.bodies[0]
    assert body["model"] == "fake-model" and body["temperature"] == 0 and body["max_tokens"] == 77
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert endpoint.headers[0]["authorization"] == "Bearer EMPTY"  # loopback without a key


THINKING = {
    # vllm serve --reasoning-parser (older releases, DeepSeek's API): reasoning_content beside the answer
    "parsed": {"reasoning_content": "Let me think. 2+2=4.", "content": "Four."},
    # newer vLLM and OpenRouter name the field reasoning
    "parsed-new": {"reasoning": "Let me think. 2+2=4.", "content": "Four."},
    # no parser on the server: the tags are in the content (the template opened the first one)
    "tagged": {"content": "<think>\nLet me think. 2+2=4.\n</think>\n\nFour."},
    "opened": {"content": "Let me think. 2+2=4.\n</think>\n\nFour."},
    # cut by max_tokens while reasoning: no content at all
    "cut": {"reasoning_content": "Let me think. 2+2=4.", "content": None, "finish_reason": "length"},
    "plain": {"content": "Four."},
}


def test_a_thinking_models_reasoning_is_kept_apart_from_its_answer():
    server = FakeEndpoint(responder=lambda body: THINKING[user_text(body)])
    try:
        completions = dict(zip(THINKING, backend(server.url).complete(ask(*THINKING)), strict=True))
    finally:
        server.stop()
    for name in ("parsed", "parsed-new", "tagged", "opened"):
        completion = completions[name]
        assert (completion.text, completion.reasoning, completion.reasoning_unclosed) == (
            "Four.",
            "Let me think. 2+2=4.",
            False,
        ), name
    cut = completions["cut"]
    assert (cut.text, cut.reasoning, cut.reasoning_unclosed, cut.error) == ("", "Let me think. 2+2=4.", True, None)
    assert (completions["plain"].text, completions["plain"].reasoning) == ("Four.", None)


def test_api_key_comes_from_the_named_variable(endpoint, monkeypatch):
    monkeypatch.setenv("MY_SERVER_KEY", "sk-local")
    backend(endpoint.url, api_key_env="MY_SERVER_KEY").complete(ask("hi"))
    assert endpoint.headers[0]["authorization"] == "Bearer sk-local"


def test_missing_key_for_a_remote_endpoint_names_the_variable():
    with pytest.raises(BackendError, match="MY_REMOTE_KEY"):
        OpenAIBackend("m", base_url="https://api.example.com/v1", api_key_env="MY_REMOTE_KEY")
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):  # OpenAI's own endpoint by default
        OpenAIBackend("m")
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):  # one remote among local ones is enough
        OpenAIBackend("m", base_urls="http://localhost:8000/v1,https://api.example.com/v1")
    OpenAIBackend("m", base_urls="http://localhost:8000/v1, http://127.0.0.2:8001/v1/")  # local: no key needed


def test_load_backend_and_fingerprint(endpoint):
    model = load_backend("openai", "fake-model", base_url=endpoint.url, structured="vllm", concurrency=3)
    assert isinstance(model, OpenAIBackend) and model.endpoints == [endpoint.url]
    assert model.fingerprint() == {"backend": "openai", "model": "fake-model", "structured": "vllm"}
    with pytest.raises(BackendError, match="structured"):
        OpenAIBackend("m", base_url=endpoint.url, structured="guided")


def test_complete_works_inside_a_running_event_loop(endpoint):
    async def main():
        return backend(endpoint.url).complete(ask("inside"))

    assert asyncio.run(main())[0].text == "echo:inside"


# --- structured output ---------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}},
    "required": ["verdict"],
    "additionalProperties": False,
}
CHOICE = Choice(("meets", "missing"))


def test_json_schema_mode(endpoint):
    model = backend(endpoint.url)
    model.complete(ask("a", max_tokens=8), CHOICE)
    model.complete(ask("b", max_tokens=200), JsonSchema(SCHEMA, name="rated"))
    choice, schema = endpoint.bodies
    assert choice["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"verdict": {"type": "string", "enum": ["meets", "missing"]}},
                "required": ["verdict"],
                "additionalProperties": False,
            },
        },
    }
    assert choice["max_tokens"] >= 32  # room for {"verdict": "..."}, not just the word
    assert schema["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "rated", "schema": SCHEMA, "strict": True},
    }
    assert schema["max_tokens"] == 200
    assert "structured_outputs" not in choice and "structured_outputs" not in schema


def test_vllm_mode(endpoint):
    model = backend(endpoint.url, structured="vllm")
    model.complete(ask("a", max_tokens=8), CHOICE)
    model.complete(ask("b"), JsonSchema(SCHEMA))
    choice, schema = endpoint.bodies
    assert choice["structured_outputs"] == {"choice": ["meets", "missing"]} and choice["max_tokens"] == 8
    assert schema["structured_outputs"] == {"json": SCHEMA}
    assert not any(key.startswith("guided") or key == "response_format" for body in endpoint.bodies for key in body)


def test_none_mode_sends_no_constraint(endpoint):
    model = backend(endpoint.url, structured="none")
    model.complete(ask("a"), CHOICE)
    model.complete(ask("b"), JsonSchema(SCHEMA))
    for body in endpoint.bodies:
        assert "response_format" not in body and "structured_outputs" not in body


# --- images --------------------------------------------------------------------------------


def decode_data_url(url: str) -> tuple[str, Image.Image]:
    header, data = url.split(",", 1)
    return header, Image.open(io.BytesIO(base64.b64decode(data)))


def test_images_arrive_as_data_urls_first(endpoint):
    small = Image.new("RGB", (32, 24), (200, 10, 10))
    photo = Image.new("RGB", (800, 600), (10, 200, 10))
    requests = [
        ChatRequest(user="small", image=small),
        ChatRequest(user="photo", image=photo),
        ChatRequest(user="again", image=small),
    ]
    completions = backend(endpoint.url).complete(requests)
    assert [c.text for c in completions] == ["echo:small", "echo:photo", "echo:again"]
    by_text = {user_text(body): body["messages"][-1]["content"] for body in endpoint.bodies}
    for text, expected_header, size in [
        ("small", "data:image/png;base64", (32, 24)),
        ("photo", "data:image/jpeg;base64", (800, 600)),
    ]:
        image_part, text_part = by_text[text]
        assert image_part["type"] == "image_url" and text_part == {"type": "text", "text": text}
        header, image = decode_data_url(image_part["image_url"]["url"])
        assert header == expected_header and image.size == size
    assert decode_data_url(by_text["small"][0]["image_url"]["url"])[1].getpixel((0, 0)) == (200, 10, 10)
    assert by_text["again"][0] == by_text["small"][0]


# --- retries and failures ------------------------------------------------------------------


def test_429_then_success_waits_for_retry_after(endpoint):
    endpoint.faults["limited"] = ["429:1", "ok"]
    start = time.perf_counter()
    [completion] = backend(endpoint.url, max_retries=2).complete(ask("limited"))
    elapsed = time.perf_counter() - start
    assert completion.text == "echo:limited" and completion.error is None
    assert endpoint.attempts["limited"] == 2
    assert 0.95 <= elapsed < 3  # the client's own first backoff would be 0.5 s at most
    assert completion.seconds >= 0.95


def test_retry_after_over_two_minutes_is_not_retried_at_all(endpoint):
    # The client honours Retry-After up to 120 s; a longer one fails at once (its choice).
    endpoint.faults["later"] = ["429:600", "ok"]
    [completion] = backend(endpoint.url, max_retries=3).complete(ask("later"))
    assert endpoint.attempts["later"] == 1
    assert completion.error == f"{endpoint.url}: HTTP 429: slow down"


def test_500_then_success(endpoint):
    endpoint.faults["flaky"] = ["500", "ok"]
    [completion] = backend(endpoint.url, max_retries=1).complete(ask("flaky"))
    assert completion.text == "echo:flaky" and endpoint.attempts["flaky"] == 2


def test_retries_are_bounded_and_end_in_an_error_not_an_exception(endpoint):
    endpoint.faults["broken"] = ["500"]
    model = backend(endpoint.url, max_retries=2)
    completions = model.complete(ask("fine", "broken"))
    assert completions[0].text == "echo:fine"
    broken = completions[1]
    assert endpoint.attempts["broken"] == 3  # one try and max_retries retries
    assert broken.text == "" and "\n" not in broken.error
    assert endpoint.url in broken.error and "500" in broken.error and "boom" in broken.error
    assert model.stats.requests == 2 and model.stats.extra["errors"] == 1


def test_client_errors_are_not_retried(endpoint):
    endpoint.faults["bad"] = ["400"]
    [completion] = backend(endpoint.url, max_retries=3).complete(ask("bad"))
    assert endpoint.attempts["bad"] == 1
    assert completion.error == f"{endpoint.url}: HTTP 400: bad model"


def test_a_hang_ends_by_timeout(endpoint):
    endpoint.faults["stuck"] = ["hang"]
    start = time.perf_counter()
    completions = backend(endpoint.url, timeout=0.3, max_retries=1).complete(ask("stuck", "fine"))
    assert time.perf_counter() - start < 3
    assert completions[1].text == "echo:fine"
    assert completions[0].text == "" and "timed out" in completions[0].error and endpoint.url in completions[0].error
    assert endpoint.attempts["stuck"] == 2  # a timeout is retried too


def test_garbage_is_an_error(endpoint):
    endpoint.faults["junk"] = ["garbage"]
    [completion] = backend(endpoint.url).complete(ask("junk"))
    assert completion.text == "" and endpoint.url in completion.error and "not a chat completion" in completion.error


def test_connection_refused_is_an_error():
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    [completion] = backend(url).complete(ask("anyone?"))
    assert completion.text == "" and completion.error.startswith(f"{url}: connection error")


# --- concurrency and endpoints -------------------------------------------------------------


def test_concurrency_limit_is_respected(endpoint):
    endpoint.delay = 0.1
    backend(endpoint.url, concurrency=3).complete(ask(*(f"q{i}" for i in range(12))))
    assert endpoint.max_in_flight == 3


def test_idle_endpoints_take_turns():
    first, second = FakeEndpoint(), FakeEndpoint()
    try:
        backend(first.url, second.url, concurrency=1).complete(ask(*(f"q{i}" for i in range(6))))
        assert first.requests == second.requests == 3
    finally:
        first.stop(), second.stop()


def test_the_least_busy_endpoint_gets_the_request():
    slow, fast = FakeEndpoint(delay=0.8), FakeEndpoint(delay=0.01)
    try:
        texts = [f"q{i}" for i in range(10)]
        completions = backend(slow.url, fast.url, concurrency=2).complete(ask(*texts))
        assert [c.text for c in completions] == [f"echo:{t}" for t in texts]
        # The first request goes to the slow one; it stays busy while the fast one does the rest.
        assert slow.requests == 1 and fast.requests == 9
    finally:
        slow.stop(), fast.stop()


def test_several_endpoints_share_the_load():
    servers = [FakeEndpoint(delay=0.05) for _ in range(3)]
    try:
        model = OpenAIBackend("fake-model", base_urls=",".join(s.url for s in servers), concurrency=6, timeout=5)
        model.complete(ask(*(f"q{i}" for i in range(30))))
        counts = [s.requests for s in servers]
        assert sum(counts) == 30 and max(counts) - min(counts) <= 2
        assert all(s.max_in_flight == 2 for s in servers)
    finally:
        for server in servers:
            server.stop()
