"""A photo is downscaled once to the run's image budget before any backend, and named by content."""

from __future__ import annotations

import hashlib
import io

from PIL import Image

from gamut_hf.backends.images import fit_to_budget, image_id
from gamut_hf.evaluation.config import ModelSpec
from gamut_hf.evaluation.pipeline import shown_image
from gamut_hf.evaluation.source import PlannedQuestion

GLASSES = (4032, 3024)  # a smart-glasses camera's full frame


def test_a_full_size_photo_is_fitted_to_the_budget_with_its_aspect():
    photo = Image.new("RGB", GLASSES, (120, 80, 40))
    fitted = fit_to_budget(photo, 1_048_576)
    assert fitted.width * fitted.height <= 1_048_576
    assert fitted.width * fitted.height > 0.99 * 1_048_576
    assert abs(fitted.width / fitted.height - 4 / 3) < 0.01
    assert fit_to_budget(photo, None) is photo  # no budget: the engine's own
    small = Image.new("RGB", (640, 480))
    assert fit_to_budget(small, 1_048_576) is small  # already fits: untouched


def test_the_stage_shows_the_fitted_photo_under_the_originals_name():
    buffer = io.BytesIO()
    Image.new("RGB", GLASSES, (10, 200, 30)).save(buffer, format="JPEG", quality=90)
    original_sha = hashlib.sha256(buffer.getvalue()).hexdigest()

    class OnePhoto:
        variant = "multimodal"
        questions: list = []

        def image(self, question):
            return Image.open(io.BytesIO(buffer.getvalue()))

    question = PlannedQuestion("q1", "Plants", "What is this?", [], original_sha, 0)
    judge = ModelSpec(name="m", backend="vllm", options={"max_pixels": 262_144})
    image, name = shown_image(OnePhoto(), question, judge)
    assert image.width * image.height <= 262_144
    # The id is the stored photo's hash (the fingerprint's) with the budget: two budgets, two images.
    assert name == f"{original_sha}-max262144" == image_id(original_sha, 262_144)
    unbudgeted, plain_name = shown_image(OnePhoto(), question, ModelSpec(name="m", backend="vllm"))
    assert unbudgeted.size == GLASSES and plain_name == original_sha
