"""A backend for any OpenAI-compatible chat endpoint: OpenAI itself, vLLM, SGLang, TGI, llama.cpp.

Why it looks the way it does:

* A run sends thousands of small judge requests, so they go out concurrently (asyncio and
  ``AsyncOpenAI``), bounded by one semaphore (``concurrency``: requests in flight over all
  endpoints together). ``complete`` stays synchronous like every backend: it runs its own
  event loop, and makes and closes its clients inside it, because an async HTTP client
  cannot outlive the loop that opened its connections.
* Several servers of the same model (``base_urls``) act as one: each request goes to the
  endpoint with the fewest requests in flight (ties in turn), so a slow or stalled server
  gets less work instead of an equal share.
* Retries are the openai client's own (``max_retries``): exponential backoff with jitter on
  connection errors, timeouts, 408, 409, 429 and 5xx, honouring ``Retry-After`` and
  ``retry-after-ms``. ``timeout`` bounds each attempt. A request that still fails becomes a
  :class:`Completion` with an empty text and a one-line ``error``; ``complete`` never raises
  for one request, so one bad request cannot sink a batch.
* Constraints are sent in the dialect the server understands (``structured``):
  ``"json_schema"`` is OpenAI's strict ``response_format``, which has no "one of these
  strings", so a :class:`Choice` becomes an object ``{"verdict": <one of the options>}``
  (what :func:`gamut_hf.evaluation.judge.parse_verdict` reads); ``"vllm"`` is vLLM's
  ``structured_outputs`` (it silently ignores the older ``guided_*`` fields); ``"none"``
  sends no constraint and relies on the prompt.
* Greedy decoding (``temperature=0``), so that the cache key (:meth:`Backend.fingerprint`)
  determines the output as far as the server allows.
"""

from __future__ import annotations

import asyncio
import base64
import io
import ipaddress
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import openai

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
from gamut_hf.backends.options import STRUCTURED_MODES
from gamut_hf.backends.reasoning import THINKING_SWITCH, Split, split_text

if TYPE_CHECKING:  # a text-only run needs no Pillow
    from PIL import Image

    from gamut_hf.backends.batch import BatchAPI

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM and others) accept any key
JPEG_ABOVE_PIXELS = 512 * 512  # RGB images larger than this are sent as JPEG, smaller ones as PNG
# A Choice wrapped as {"verdict": "..."} costs about ten tokens more than the bare word; the
# schema bounds the output anyway, so a larger limit only prevents truncated JSON.
CHOICE_JSON_MIN_TOKENS = 32
MAX_ERROR_CHARS = 300
BATCH_PROVIDERS = ("openai", "anthropic")  # whose batch API --batch uses (batch_api)


class OpenAIBackend(Backend):
    name = "openai"
    # Each call ends with a tail of long answers while the other slots idle: bigger batches
    # keep the endpoints busy for a larger share of the time.
    default_batch_size = 256

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        base_urls: Sequence[str] | str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 16,
        timeout: float = 120.0,
        max_retries: int = 5,
        structured: str = "json_schema",
        chat_template_kwargs: dict[str, Any] | None = None,
        logprobs: bool = False,
        batch_api: str | None = None,
    ):
        # Given only when set: an option's absence keeps the fingerprints of runs made before it.
        template_options = {"chat_template_kwargs": chat_template_kwargs} if chat_template_kwargs is not None else {}
        if logprobs:
            template_options["logprobs"] = True
        if batch_api is not None:
            template_options["batch_api"] = batch_api
        super().__init__(
            model,
            base_url=base_url,
            base_urls=base_urls,
            api_key_env=api_key_env,
            concurrency=concurrency,
            timeout=timeout,
            max_retries=max_retries,
            structured=structured,
            **template_options,
        )
        if structured not in STRUCTURED_MODES:
            raise BackendError(f"structured must be one of {', '.join(STRUCTURED_MODES)}, not {structured!r}")
        if concurrency < 1:
            raise BackendError(f"concurrency must be at least 1, not {concurrency}")
        self.endpoints = _endpoints(base_url, base_urls)
        self.batch_provider = batch_api or (
            "anthropic" if (urlsplit(self.endpoints[0]).hostname or "").endswith("anthropic.com") else "openai"
        )
        if self.batch_provider not in BATCH_PROVIDERS:
            raise BackendError(f"batch_api must be one of {', '.join(BATCH_PROVIDERS)}, not {batch_api!r}")
        self.api_key = os.environ.get(api_key_env) or None
        if self.api_key is None:
            if not all(_is_loopback(url) for url in self.endpoints):
                raise BackendError(
                    f"no API key: set the environment variable {api_key_env} (needed for {', '.join(self.endpoints)})"
                )
            self.api_key = PLACEHOLDER_KEY
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.structured = structured
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.logprobs = logprobs

    def complete(self, requests: Sequence[ChatRequest], constraint: Constraint = None) -> list[Completion]:
        if not requests:
            return []
        start = time.perf_counter()
        completions = _run(self._complete_all(requests, constraint))
        self.stats.add(completions, time.perf_counter() - start)
        failed = sum(completion.error is not None for completion in completions)
        self.stats.extra["errors"] = self.stats.extra.get("errors", 0) + failed
        return completions

    async def _complete_all(self, requests: Sequence[ChatRequest], constraint: Constraint) -> list[Completion]:
        clients = [
            openai.AsyncOpenAI(api_key=self.api_key, base_url=url, timeout=self.timeout, max_retries=self.max_retries)
            for url in self.endpoints
        ]
        in_flight = [0] * len(self.endpoints)
        turn = 0  # where the search for the least busy endpoint starts: ties go round in turn
        semaphore = asyncio.Semaphore(self.concurrency)
        images: dict[int, asyncio.Future] = {}  # one encoding per image: a question's checks share it

        async def one(request: ChatRequest) -> Completion:
            nonlocal turn
            async with semaphore:
                order = [(turn + i) % len(clients) for i in range(len(clients))]
                index = min(order, key=lambda i: in_flight[i])
                turn = (index + 1) % len(clients)
                in_flight[index] += 1
                try:
                    return await self._complete_one(clients[index], self.endpoints[index], request, constraint, images)
                finally:
                    in_flight[index] -= 1

        try:
            return list(await asyncio.gather(*(one(request) for request in requests)))
        finally:
            for client in clients:
                await client.close()

    async def _complete_one(
        self,
        client: openai.AsyncOpenAI,
        endpoint: str,
        request: ChatRequest,
        constraint: Constraint,
        images: dict[int, asyncio.Future],
    ) -> Completion:
        start = time.perf_counter()
        try:
            image_part = None
            if request.image is not None:  # encoded once, off the event loop
                key = id(request.image)
                if key not in images:
                    images[key] = asyncio.ensure_future(asyncio.to_thread(image_part_for, request.image))
                image_part = await images[key]
            response = await client.chat.completions.create(
                model=self.model,
                messages=request.messages(image_part),
                temperature=0,
                max_tokens=self._max_tokens(request, constraint),
                **self._request_arguments(constraint),
            )
            return self.completion_from(response, constraint, time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 - every failure of one request becomes its Completion
            return Completion(
                text="", seconds=time.perf_counter() - start, error=_describe(error, endpoint, self.timeout)
            )

    def request_body(self, request: ChatRequest, constraint: Constraint, image_part: Any = None) -> dict[str, Any]:
        """The request as the JSON body of a POST to ``/chat/completions`` (a batch's line holds it):
        what ``chat.completions.create`` sends, its ``extra_body`` fields at the top level."""
        arguments = self._request_arguments(constraint)
        extra = arguments.pop("extra_body", {})
        return {
            "model": self.model,
            "messages": request.messages(image_part),
            "temperature": 0,
            "max_tokens": self._max_tokens(request, constraint),
            **arguments,
            **extra,
        }

    def completion_from(self, response: Any, constraint: Constraint, seconds: float = 0.0) -> Completion:
        """A chat completion (an answer of the endpoint, or a batch's) as a Completion; ValueError
        where it is not one or holds no text."""
        if not isinstance(response, openai.types.chat.ChatCompletion) or not response.choices:
            raise ValueError(f"the answer is not a chat completion: {str(response)[:100]!r}")
        choice = response.choices[0]
        split = _split_reasoning(choice.message, choice.finish_reason)
        if split is None:
            raise ValueError(f"no text in the answer (finish_reason={choice.finish_reason})")
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None)
        probabilities = _choice_probabilities(choice, constraint)
        answer = split.answer
        if probabilities and self.structured == "vllm":  # the most probable option, as the vllm backend takes it
            answer = most_probable(probabilities)
        return Completion(
            text=answer,
            prompt_tokens=(usage.prompt_tokens if usage else None) or 0,
            completion_tokens=(usage.completion_tokens if usage else None) or 0,
            cached_tokens=getattr(details, "cached_tokens", None),
            seconds=seconds,
            reasoning=split.reasoning,
            reasoning_unclosed=not split.closed,
            option_probabilities=probabilities,
        )

    def batch_api(self) -> BatchAPI:
        """The provider's batch API at this backend's (first) endpoint: OpenAI's Batch API, or
        Anthropic's Message Batches (``batch_api=anthropic``, the default for an anthropic.com endpoint)."""
        if self.batch_provider == "anthropic":
            from gamut_hf.backends.anthropic_batch import AnthropicBatch

            return AnthropicBatch(self)
        from gamut_hf.backends.openai_batch import OpenAIBatch

        return OpenAIBatch(self)

    def _max_tokens(self, request: ChatRequest, constraint: Constraint) -> int:
        if isinstance(constraint, Choice) and self.structured == "json_schema":
            return max(request.max_tokens, CHOICE_JSON_MIN_TOKENS)
        return request.max_tokens

    def _request_arguments(self, constraint: Constraint) -> dict[str, Any]:
        """The constraint's arguments, and the chat template's variables as ``extra_body`` (a field
        of vLLM's and SGLang's servers that hosted APIs refuse: sent only when asked for, or to a
        server the user named as vLLM's, where a verdict gets a thinking template's reasoning off)."""
        arguments = self._constraint_arguments(constraint)
        variables = dict(self.chat_template_kwargs)
        if constraint is not None and self.structured == "vllm":
            variables = {THINKING_SWITCH: False, **variables}  # the user's own value wins
        if variables:
            arguments["extra_body"] = {**arguments.get("extra_body", {}), "chat_template_kwargs": variables}
        return arguments

    def _constraint_arguments(self, constraint: Constraint) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` that impose ``constraint``."""
        if constraint is None or self.structured == "none":
            return {}
        if self.structured == "vllm":
            if isinstance(constraint, Choice):
                # The first token's alternatives under the grammar: each option's probability.
                return {
                    "extra_body": {"structured_outputs": {"choice": list(constraint.options)}},
                    "logprobs": True,
                    "top_logprobs": CHOICE_LOGPROBS,
                }
            return {"extra_body": {"structured_outputs": {"json": constraint.schema}}}
        probabilities = {}
        if isinstance(constraint, Choice):
            constraint = JsonSchema(choice_schema(constraint.options), name="verdict")
            if self.logprobs:  # the alternatives at the verdict's first token, inside the JSON
                probabilities = {"logprobs": True, "top_logprobs": CHOICE_LOGPROBS}
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": constraint.name, "schema": constraint.schema, "strict": True},
            },
            **probabilities,
        }

    def close(self) -> None:
        """Nothing is held between calls: each ``complete`` opens and closes its own clients."""


# Where a JSON verdict's value starts: the token after `{"verdict": "`.
VERDICT_VALUE = re.compile(r'"verdict"\s*:\s*"$')


def _verdict_position(content: Sequence[Any]) -> int | None:
    """The index of the answer's token where the verdict starts: the first for a bare verdict (a
    vLLM server's choice), the one after ``{"verdict": "`` in JSON; None where it is not found."""
    text = ""
    for position, token in enumerate(content):
        if position == 0 and not token.token.lstrip().startswith("{"):
            return 0
        if VERDICT_VALUE.search(text):
            return position
        text += token.token
    return None


def _choice_probabilities(choice: Any, constraint: Constraint) -> dict[str, float] | None:
    """A choice's option probabilities from the logprobs of the verdict's first token: a vLLM
    server's (computed after the grammar's mask, as in the vllm backend: they sum to about 1), or
    a hosted API's inside its JSON (``logprobs=true``; where the provider does not mask them, the
    verdicts' share of the mass is less than 1). None where none came back."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not isinstance(constraint, Choice) or not content:
        return None
    position = _verdict_position(content)
    if position is None:
        return None
    alternatives = content[position].top_logprobs or ()
    return choice_probabilities(((a.token, a.logprob) for a in alternatives), constraint.options)


def _split_reasoning(message: Any, finish_reason: str | None) -> Split | None:
    """The answer and the reasoning of a chat message; None if it has neither. A server that
    parses reasoning (``vllm serve --reasoning-parser``, hosted reasoning models) returns it as
    ``reasoning_content`` or ``reasoning`` beside the content; otherwise the content is split
    at its ``</think>``. A reasoning cut by max_tokens leaves no content, or an empty one."""
    content = message.content
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    if isinstance(reasoning, str) and reasoning:
        cut = not (content or "").strip() and finish_reason == "length"
        return Split("" if cut else content or "", reasoning.strip(), closed=not cut)
    return None if content is None else split_text(content)


def choice_schema(options: Sequence[str]) -> dict[str, Any]:
    """A JSON schema for "one of ``options``", as the object ``{"verdict": option}``."""
    return {
        "type": "object",
        "properties": {"verdict": {"type": "string", "enum": list(options)}},
        "required": ["verdict"],
        "additionalProperties": False,
    }


def image_part_for(image: Image.Image) -> dict[str, Any]:
    """The image as an OpenAI ``image_url`` content part with a base64 data URL."""
    if image.mode not in ("RGB", "RGBA", "L", "LA", "P", "1", "I", "I;16"):
        image = image.convert("RGB")
    as_jpeg = image.mode == "RGB" and image.width * image.height > JPEG_ABOVE_PIXELS
    buffer = io.BytesIO()
    if as_jpeg:
        image.save(buffer, format="JPEG", quality=90)
    else:
        image.save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/{'jpeg' if as_jpeg else 'png'};base64,{data}"}}


def _endpoints(base_url: str | None, base_urls: Sequence[str] | str | None) -> list[str]:
    """The endpoint URLs: ``base_urls`` (a list or a comma-separated string), else ``base_url``,
    else ``OPENAI_BASE_URL``, else OpenAI's own."""
    if isinstance(base_urls, str):
        base_urls = base_urls.split(",")
    urls = [url.strip().rstrip("/") for url in base_urls or [] if url.strip()]
    if base_url and not urls:
        urls = [base_url.strip().rstrip("/")]
    return urls or [os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL]


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _describe(error: Exception, endpoint: str, timeout: float) -> str:
    """One line naming the endpoint, the status (or kind of failure) and the message."""
    line = f"{endpoint}: {failure_text(error, timeout)}"
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


def failure_text(error: Exception, timeout: float) -> str:
    """A failed call of the openai client as one line: the status and the server's message, or the
    kind of failure (the synchronous calls' errors and the batch API's say it alike)."""
    if isinstance(error, openai.APIStatusError):
        body = error.body
        message = body.get("message") if isinstance(body, dict) else body
        line = f"HTTP {error.status_code}: {message or error.message}"
    elif isinstance(error, openai.APITimeoutError):
        line = f"timed out (no answer within {timeout:g} s, after the client's retries)"
    elif isinstance(error, openai.APIConnectionError):
        line = f"connection error: {error.__cause__ or error.message}"
    else:
        line = f"{type(error).__name__}: {error}"
    return " ".join(line.split())


def _run(coroutine: Any) -> Any:
    """``asyncio.run``, also from code that already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
