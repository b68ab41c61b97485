"""Provider batch APIs: many requests sent as one job, answered within a day at about half the price.

A :class:`BatchAPI` only talks to the provider: it turns a request into one line of the
provider's batch format, submits lines as a batch, says how a batch stands and reads its answers.
It never waits. The waiting, and the rule that nothing is paid twice (each batch's id is in the
run store before anyone waits on it; a rerun re-attaches to it), belong to the pipeline
(:mod:`gamut_hf.evaluation.batches`). A backend offers a batch API through
:meth:`gamut_hf.backends.base.Backend.batch_api`; two providers exist, OpenAI's Batch API
(:mod:`gamut_hf.backends.openai_batch`) and Anthropic's Message Batches
(:mod:`gamut_hf.backends.anthropic_batch`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from gamut_hf.backends.base import BackendError, ChatRequest, Completion, Constraint

T = TypeVar("T")

# How a submitted batch stands: still answering, or done in one of four ways. A failed, expired or
# cancelled batch may still hold answers (an expired one holds those given before its window closed).
BatchState = Literal["running", "ended", "failed", "expired", "cancelled"]
FINISHED_STATES: frozenset[str] = frozenset({"ended", "failed", "expired", "cancelled"})


@dataclass(frozen=True)
class BatchStatus:
    state: BatchState
    message: str | None = None  # why a batch failed, as the provider says
    answered: int | None = None  # requests answered so far, where the provider says
    total: int | None = None


@dataclass(frozen=True)
class BatchLimits:
    """The most one batch may hold: requests, and bytes of its encoded lines."""

    requests: int
    bytes: int


class UnknownBatch(BackendError):
    """The provider does not know a batch id the run store holds (another key or endpoint, or deleted)."""


class BatchAPI(ABC):
    """One provider's batch API, for one model behind one endpoint."""

    name: ClassVar[str]
    limits: ClassVar[BatchLimits]

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self._image: tuple[int, Any] | None = None

    def encoded_image(self, image: Any, encode: Callable[[Any], T]) -> T:
        """``encode(image)``, once for a run of requests showing the same image (a question's checks)."""
        if self._image is None or self._image[0] != id(image):
            self._image = (id(image), encode(image))
        return self._image[1]

    @abstractmethod
    def line(self, custom_id: str, request: ChatRequest, constraint: Constraint) -> dict[str, Any]:
        """``request`` as one entry of this provider's batch, answered under ``custom_id``."""

    @abstractmethod
    def submit(self, lines: Sequence[dict[str, Any]], tag: str) -> str:
        """Send ``lines`` as one batch, labelled ``tag`` where the provider keeps labels; its id."""

    @abstractmethod
    def find(self, tag: str) -> str | None:
        """The id of a batch submitted with ``tag`` (a submission cut off before its id was stored),
        None where there is none or the provider keeps no labels."""

    @abstractmethod
    def status(self, batch_id: str) -> BatchStatus:
        """How the batch stands; :class:`UnknownBatch` where the provider does not know it."""

    @abstractmethod
    def results(self, batch_id: str, constraint: Constraint) -> dict[str, Completion]:
        """The batch's answers by custom_id, in whatever order the provider gives them: an answered
        request's Completion, or one with the provider's ``error``; requests it did not answer are
        absent. A custom_id given twice keeps its first answer."""


def encoded_line(line: dict[str, Any]) -> str:
    """One line of a batch's JSONL file, as it is uploaded (and measured against the limits)."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"


def within_limits(lines: Iterable[tuple[str, dict[str, Any]]], limits: BatchLimits) -> Iterator[list[tuple[str, dict]]]:
    """``(custom_id, line)`` pairs cut into batches that each keep within ``limits``, in order;
    a line too large for any batch is refused naming it."""
    batch: list[tuple[str, dict[str, Any]]] = []
    size = 0
    for custom_id, line in lines:
        length = len(encoded_line(line).encode())
        if length > limits.bytes:
            raise BackendError(
                f"request {custom_id[:12]} is {length:,} bytes, more than a batch may hold ({limits.bytes:,}): "
                "send it without --batch, or with a smaller max_pixels"
            )
        if batch and (len(batch) >= limits.requests or size + length > limits.bytes):
            yield batch
            batch, size = [], 0
        batch.append((custom_id, line))
        size += length
    if batch:
        yield batch
