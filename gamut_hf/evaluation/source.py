"""The questions a run plans with: a dataset's selected questions (:class:`QuestionSource`),
each a :class:`PlannedQuestion` whose image is fetched only when a stage needs it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

from gamut_hf.core.names import Variant
from gamut_hf.core.rubric import Check, parse_checks
from gamut_hf.evaluation.config import RunConfig
from gamut_hf.evaluation.store import StoredQuestion


@dataclass(frozen=True)
class PlannedQuestion:
    """A question as the pipeline plans with it; the image is fetched only when needed."""

    id: str
    domain: str
    prompt: str
    checks: list[Check]
    image_sha: str | None
    row: int  # index in the dataset, to fetch the image

    def stored(self, variant: str) -> StoredQuestion:
        checks = json.dumps([c.model_dump() for c in self.checks], ensure_ascii=False)
        return StoredQuestion(self.id, variant, self.domain, self.prompt, self.image_sha, checks)

    @classmethod
    def from_store(cls, row: StoredQuestion, position: int) -> PlannedQuestion:
        checks = parse_checks(json.loads(row.checks), question_id=row.question_id)
        return cls(row.question_id, row.domain, row.prompt, checks, row.image_sha, position)


class Questions(Protocol):
    """What the stages read of a run's questions: a dataset's (:class:`QuestionSource`) or the
    judge audit's responses (:mod:`gamut_hf.evaluation.audit`)."""

    questions: list[PlannedQuestion]

    @property
    def variant(self) -> Variant: ...

    def image(self, question: PlannedQuestion) -> Any: ...


class QuestionSource:
    """The selected questions of a dataset, with lazy images for the multimodal variant."""

    def __init__(self, config: RunConfig):
        import datasets

        from gamut_hf.dataset.loader import image_resolver, iter_questions, load_gamut, resolve_images
        from gamut_hf.files import InputError

        self.variant = config.variant
        data = load_gamut(config.dataset, config.variant, revision=config.revision)
        self.data = data
        self.resolver = None
        # The prompt is the variant's own column (multimodal: question; text_only: text_question,
        # the only question that configuration has). Images are left undecoded here ("text_only"
        # to iter_questions): they are hashed below and fetched when a request needs one.
        questions = [
            PlannedQuestion(q.id, q.domain, q.prompt(config.variant), q.checks, None, row)
            for row, q in enumerate(iter_questions(data, "text_only"))
        ]
        if config.question_ids:
            known = {q.id for q in questions}
            unknown = [qid for qid in config.question_ids if qid not in known]
            if unknown:
                raise InputError(f"{config.dataset}: no question {unknown[0]!r}")
            wanted = set(config.question_ids)
            questions = [q for q in questions if q.id in wanted]
        if config.limit is not None:
            questions = questions[: config.limit]
        if config.shard is not None:
            index, count = config.shard
            questions = questions[index::count]
        if config.variant == "multimodal":
            rows = data.select([q.row for q in questions])
            if isinstance(data.features.get("image"), datasets.Image):
                # Hash the stored bytes: no image is decoded until a request needs it.
                raw = rows.cast_column("image", datasets.Image(decode=False))["image"]
                shas = [hashlib.sha256(image["bytes"] or b"").hexdigest() if image else None for image in raw]
            else:
                if config.images is None:
                    raise InputError(
                        f"{config.dataset}: its images are referenced, not embedded; say where they "
                        "are with --images (crag-mm, crag-mm=PATH or a folder)"
                    )
                self.resolver = image_resolver(config.images, fetch_urls=config.fetch_image_urls)
                shas = resolve_images(rows, self.resolver, config.dataset, image_sha)
            questions = [replace(q, image_sha=sha) for q, sha in zip(questions, shas, strict=True)]
        self.questions = questions

    def _resolved_shas(self, config: RunConfig, ids: list[str], rows: Any) -> list[str]:
        """Every selected question's referenced photo, hashed; the questions without one are listed
        together (the multimodal variant cannot ask them), before any model is loaded."""
        from gamut_hf.dataset.loader import ImageNotFound
        from gamut_hf.files import InputError

        assert self.resolver is not None
        shas, missing = [], []
        for qid, row in zip(ids, rows, strict=True):
            try:
                shas.append(image_sha(self.resolver(row)))
            except (ImageNotFound, InputError) as error:
                missing.append((qid, str(error)))
        if missing:
            shown = "; ".join(reason for _, reason in missing[:3]) + (
                f"; and {len(missing) - 3} more" if len(missing) > 3 else ""
            )
            raise InputError(
                f"{config.dataset}: {len(missing)} of {len(ids)} questions have no usable photo for the multimodal "
                f"variant ({shown}); leave them out with --question-id, or run --variant text_only"
            )
        return shas

    def image(self, question: PlannedQuestion) -> Any:
        if self.variant != "multimodal":
            return None
        row = self.data[question.row]
        return self.resolver(row) if self.resolver is not None else row["image"]


def image_sha(image: Any) -> str:
    """A decoded image's content hash (mode, size and pixels), for images that are not stored bytes."""
    digest = hashlib.sha256(f"{image.mode}:{image.size}".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()
