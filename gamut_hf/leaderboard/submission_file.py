"""A run's answers as the file the leaderboard takes (`gamut submission RUN_DIR OUT.jsonl`).

A submitter generates with `gamut generate` (the prompt the leaderboard expects: the question, and
the photo for the multimodal variant, nothing else), then turns the run store's answers into the
upload: one ``{"question_id", "response"}`` per line, checked by the Space's own reader before it
is written, so what is written is what the Space accepts. Only the answer goes in: a thinking
model's reasoning is kept in the run store, never submitted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gamut_hf.evaluation.config import stored_config
from gamut_hf.evaluation.pipeline import generation_key
from gamut_hf.evaluation.source import PlannedQuestion
from gamut_hf.evaluation.store import RunStore, has_store
from gamut_hf.files import InputError
from gamut_hf.leaderboard.submission import parse_responses


@dataclass(frozen=True)
class SubmissionFile:
    """What a run's answers make: the file's bytes, and what the form needs to be told."""

    data: bytes
    variant: str
    answered: int
    questions: int
    failed: int  # questions whose generation failed (rerun `gamut generate` to retry them)
    model: str
    max_tokens: int

    @property
    def partial(self) -> bool:
        return self.answered < self.questions


def submission_file(run: str | Path) -> SubmissionFile:
    """The answers stored in the run folder ``run``, as an upload; read only, nothing written."""
    if not has_store(run):
        raise InputError(f"{run}: no run store here (store.sqlite); generate the answers with `gamut generate`")
    with RunStore.reading(run) as store:
        config = stored_config(store)
        if config is None:
            raise InputError(f"{run}: the store records no run; generate the answers with `gamut generate`")
        selected = store.info().get("question_ids")
        questions = [PlannedQuestion.from_store(row, i) for i, row in enumerate(store.questions(config.variant))]
        if selected is not None:
            questions = [q for q in questions if q.id in set(selected)]
        keys = {q.id: generation_key(config.candidate, q, config.variant, config.max_tokens) for q in questions}
        stored = store.generations(keys.values())
    answers = {qid: stored[key] for qid, key in keys.items() if key in stored}
    responses = {qid: g.response for qid, g in answers.items() if g.error is None}
    if not responses:
        raise InputError(f"{run}: no answer stored yet; run `gamut generate --out {run}` first")
    data = "".join(
        json.dumps({"question_id": q, "response": r}, ensure_ascii=False) + "\n" for q, r in responses.items()
    )
    parse_responses(data.encode(), [q.id for q in questions], partial=True)  # what the Space would refuse, refused here
    return SubmissionFile(
        data=data.encode(),
        variant=config.variant,
        answered=len(responses),
        questions=len(questions),
        failed=sum(g.error is not None for g in answers.values()),
        model=config.candidate.name,
        max_tokens=config.max_tokens,
    )
