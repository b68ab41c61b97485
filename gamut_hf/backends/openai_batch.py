"""OpenAI's Batch API: a JSONL file of chat requests uploaded (``/v1/files``), run as a batch
(``/v1/batches``, a 24-hour window), its output and error files read back by ``custom_id``.

Each line's body is exactly what the synchronous backend would POST to ``/chat/completions``
(:meth:`OpenAIBackend.request_body`), so a batch's answers are the same answers and are stored
under the same keys; the answers are read by the same code (:meth:`OpenAIBackend.completion_from`).
The same file is what ``vllm run-batch`` reads, so a local engine can answer it too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Final

import openai

from gamut_hf.backends.base import BackendError, ChatRequest, Completion, Constraint
from gamut_hf.backends.batch import BatchAPI, BatchLimits, BatchState, BatchStatus, UnknownBatch, encoded_line
from gamut_hf.backends.openai_backend import OpenAIBackend, failure_text, image_part_for

CHAT_COMPLETIONS: Final = "/v1/chat/completions"
TAG_FIELD = "gamut_submission"  # the batch's metadata field naming its submission (find)
# How far back a cut-off submission is looked for among the account's batches.
FIND_WITHIN_SECONDS = 2 * 24 * 3600

# The Batch API's states, as this project's.
STATES: dict[str, BatchState] = {
    "validating": "running",
    "in_progress": "running",
    "finalizing": "running",
    "cancelling": "running",
    "completed": "ended",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}


class OpenAIBatch(BatchAPI):
    name = "openai"
    # OpenAI's limits per batch: 50,000 requests and an input file of at most 200 MB.
    limits = BatchLimits(requests=50_000, bytes=200 * 1024 * 1024)

    def __init__(self, backend: OpenAIBackend):
        super().__init__(backend.endpoints[0])
        self.backend = backend
        self.client = openai.OpenAI(
            api_key=backend.api_key, base_url=self.endpoint, timeout=backend.timeout, max_retries=backend.max_retries
        )

    def line(self, custom_id: str, request: ChatRequest, constraint: Constraint) -> dict[str, Any]:
        image_part = None if request.image is None else self.encoded_image(request.image, image_part_for)
        body = self.backend.request_body(request, constraint, image_part)
        return {"custom_id": custom_id, "method": "POST", "url": CHAT_COMPLETIONS, "body": body}

    def submit(self, lines: Sequence[dict[str, Any]], tag: str) -> str:
        data = "".join(encoded_line(line) for line in lines)
        try:
            upload = self.client.files.create(file=("gamut-batch.jsonl", data.encode()), purpose="batch")
            batch = self.client.batches.create(
                input_file_id=upload.id,
                endpoint=CHAT_COMPLETIONS,
                completion_window="24h",
                metadata={TAG_FIELD: tag},
            )
        except openai.OpenAIError as error:
            raise BackendError(f"{self.endpoint}: the batch was not submitted: {self._said(error)}") from None
        return batch.id

    def find(self, tag: str) -> str | None:
        since = time.time() - FIND_WITHIN_SECONDS
        try:
            for batch in self.client.batches.list(limit=100):
                if (batch.metadata or {}).get(TAG_FIELD) == tag:
                    return batch.id
                if batch.created_at < since:  # newest first: older ones cannot be this submission's
                    break
        except openai.OpenAIError as error:
            raise BackendError(
                f"{self.endpoint}: the account's batches cannot be listed: {self._said(error)}"
            ) from None
        return None

    def status(self, batch_id: str) -> BatchStatus:
        batch = self._retrieve(batch_id)
        errors = getattr(batch.errors, "data", None) or []
        message = "; ".join(e.message or e.code or "" for e in errors) or None
        counts = batch.request_counts
        return BatchStatus(
            state=STATES.get(batch.status, "running"),
            message=message,
            answered=None if counts is None else counts.completed + counts.failed,
            total=None if counts is None else counts.total,
        )

    def results(self, batch_id: str, constraint: Constraint) -> dict[str, Completion]:
        batch = self._retrieve(batch_id)
        answers: dict[str, Completion] = {}
        # The error file first: a request listed in both is the output's (it was answered).
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            try:
                text = self.client.files.content(file_id).text
            except openai.OpenAIError as error:
                raise BackendError(f"{self.endpoint}: batch {batch_id}'s file {file_id}: {self._said(error)}") from None
            for number, raw in enumerate(text.splitlines(), 1):
                if not raw.strip():
                    continue
                custom_id, completion = self._answer(raw, constraint, f"batch {batch_id} line {number}")
                if custom_id is not None and custom_id not in answers:
                    answers[custom_id] = completion
        return answers

    def _answer(self, raw: str, constraint: Constraint, where: str) -> tuple[str | None, Completion]:
        """One output line as its custom_id and Completion (an error line's, with the provider's message)."""
        try:
            line = json.loads(raw)
            custom_id = line["custom_id"]
        except (ValueError, KeyError, TypeError):
            return None, Completion(text="", error=f"{where}: not a batch output line: {raw[:80]!r}")
        response = line.get("response") or {}
        status = response.get("status_code")
        body = response.get("body")
        if line.get("error") or status != 200 or not isinstance(body, dict):
            error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
            message = error.get("message") if isinstance(error, dict) else str(error)
            return custom_id, Completion(text="", error=f"{self.endpoint}: batch: HTTP {status}: {message}")
        try:
            chat = openai.types.chat.ChatCompletion.model_validate(body)
            return custom_id, self.backend.completion_from(chat, constraint)
        except (ValueError, openai.OpenAIError) as error:
            return custom_id, Completion(text="", error=f"{self.endpoint}: batch: {' '.join(str(error).split())[:200]}")

    def _said(self, error: Exception) -> str:
        return failure_text(error, self.backend.timeout)

    def _retrieve(self, batch_id: str) -> Any:
        try:
            return self.client.batches.retrieve(batch_id)
        except openai.NotFoundError as error:
            raise UnknownBatch(f"batch {batch_id} is unknown to {self.endpoint} ({self._said(error)})") from None
        except openai.OpenAIError as error:
            raise BackendError(f"{self.endpoint}: batch {batch_id}: {self._said(error)}") from None
