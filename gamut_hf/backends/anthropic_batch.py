"""Anthropic's Message Batches, through the ``anthropic`` client: each request a Messages API call
under its ``custom_id``, the results streamed back as JSONL in any order.

Anthropic serves an OpenAI-compatible chat endpoint (``https://api.anthropic.com/v1``), which the
openai backend asks synchronously; its batches are Anthropic's own API at the same host. The
verdict's constraint goes as Anthropic's structured output (``output_config.format``, a JSON
schema: the ``{"verdict": ...}`` object the judge's parser reads); Anthropic gives no logprobs.
Anthropic keeps no label on a batch, so a submission cut off before its id was stored cannot be
found again (the window is the one HTTP call that creates it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anthropic

from gamut_hf.backends.base import BackendError, ChatRequest, Choice, Completion, Constraint, JsonSchema
from gamut_hf.backends.batch import BatchAPI, BatchLimits, BatchStatus, UnknownBatch
from gamut_hf.backends.reasoning import split_text

if TYPE_CHECKING:
    from gamut_hf.backends.openai_backend import OpenAIBackend


class AnthropicBatch(BatchAPI):
    name = "anthropic"
    # Anthropic's limits per batch: 100,000 requests and 256 MB.
    limits = BatchLimits(requests=100_000, bytes=256 * 1024 * 1024)

    def __init__(self, backend: OpenAIBackend):
        # The OpenAI-compatible endpoint is .../v1; the Messages API's client adds /v1 itself.
        super().__init__(backend.endpoints[0].removesuffix("/v1"))
        self.backend = backend
        self.client = anthropic.Anthropic(
            api_key=backend.api_key, base_url=self.endpoint, timeout=backend.timeout, max_retries=backend.max_retries
        )

    def line(self, custom_id: str, request: ChatRequest, constraint: Constraint) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if request.image is not None:
            content.append(self.encoded_image(request.image, _image_block))
        content.append({"type": "text", "text": request.user})
        params: dict[str, Any] = {
            "model": self.backend.model,
            "max_tokens": self.backend._max_tokens(request, constraint),
            "temperature": 0,
            "messages": [{"role": "user", "content": content}],
        }
        if request.system:
            params["system"] = request.system
        schema = _schema(constraint) if self.backend.structured != "none" else None
        if schema is not None:
            params["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return {"custom_id": custom_id, "params": params}

    def submit(self, lines: Sequence[dict[str, Any]], tag: str) -> str:
        try:
            return self.client.messages.batches.create(requests=list(lines)).id  # type: ignore[arg-type]
        except anthropic.AnthropicError as error:
            raise BackendError(f"{self.endpoint}: the batch was not submitted: {_said(error)}") from None

    def find(self, tag: str) -> str | None:
        return None  # Anthropic keeps no label on a batch

    def status(self, batch_id: str) -> BatchStatus:
        batch = self._retrieve(batch_id)
        counts = batch.request_counts
        answered = counts.succeeded + counts.errored
        total = answered + counts.processing + counts.canceled + counts.expired
        if batch.processing_status != "ended":
            return BatchStatus(state="running", answered=answered, total=total)
        if counts.expired:
            return BatchStatus(
                state="expired", message=f"{counts.expired} requests expired", answered=answered, total=total
            )
        if counts.canceled:
            return BatchStatus(state="cancelled", answered=answered, total=total)
        return BatchStatus(state="ended", answered=answered, total=total)

    def results(self, batch_id: str, constraint: Constraint) -> dict[str, Completion]:
        self._retrieve(batch_id)
        answers: dict[str, Completion] = {}
        try:
            for entry in self.client.messages.batches.results(batch_id):
                if entry.custom_id in answers:
                    continue
                completion = self._completion(entry.result)
                if completion is not None:
                    answers[entry.custom_id] = completion
        except anthropic.AnthropicError as error:
            raise BackendError(f"{self.endpoint}: batch {batch_id}'s results: {_said(error)}") from None
        return answers

    def _completion(self, result: Any) -> Completion | None:
        """A result as a Completion; None for one never answered (expired, canceled)."""
        if result.type == "errored":
            error = getattr(result.error, "error", None)
            message = getattr(error, "message", None) or str(result.error)
            kind = getattr(error, "type", "error")
            return Completion(text="", error=f"{self.endpoint}: batch: {kind}: {message}")
        if result.type != "succeeded":
            return None
        message = result.message
        text = "".join(block.text for block in message.content if block.type == "text")
        split = split_text(text)
        usage = message.usage
        return Completion(
            text=split.answer,
            prompt_tokens=usage.input_tokens + (usage.cache_read_input_tokens or 0),
            completion_tokens=usage.output_tokens,
            cached_tokens=usage.cache_read_input_tokens,
            reasoning=split.reasoning,
            reasoning_unclosed=not split.closed,
        )

    def _retrieve(self, batch_id: str) -> Any:
        try:
            return self.client.messages.batches.retrieve(batch_id)
        except anthropic.NotFoundError as error:
            raise UnknownBatch(f"batch {batch_id} is unknown to {self.endpoint} ({_said(error)})") from None
        except anthropic.AnthropicError as error:
            raise BackendError(f"{self.endpoint}: batch {batch_id}: {_said(error)}") from None


def _image_block(image: Any) -> dict[str, Any]:
    """The image as a Messages API base64 image block."""
    from gamut_hf.backends.openai_backend import image_part_for

    url = image_part_for(image)["image_url"]["url"]  # data:image/jpeg;base64,...
    media_type, _, data = url.removeprefix("data:").partition(";base64,")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _schema(constraint: Constraint) -> dict[str, Any] | None:
    from gamut_hf.backends.openai_backend import choice_schema

    if isinstance(constraint, Choice):
        return choice_schema(constraint.options)
    if isinstance(constraint, JsonSchema):
        return constraint.schema
    return None


def _said(error: anthropic.AnthropicError) -> str:
    if isinstance(error, anthropic.APIStatusError):
        body = error.body
        inner = body.get("error") if isinstance(body, dict) else None
        message = inner.get("message") if isinstance(inner, dict) else body
        return f"HTTP {error.status_code}: {message or error.message}"
    return " ".join(str(error).split())[:200]
