"""A photo as a backend is shown it: downscaled once to the run's image budget, and named by its
content so an engine that caches processed images (vLLM) hashes and preprocesses it once.

A smart-glasses photo is 4032 x 3024 (12.2 megapixels); a Qwen-style judge at
``max_pixels=1048576`` sees about one megapixel of it. Handing the full photo to every one of a
question's checks made the engine hash and resize 36 MB of pixels per check. Downscaling here, once
per question and before any backend, does that work once; the processor's own resize then only
rounds the size to its patch grid. The run's fingerprint keeps the original photo's hash, so the
stored answers and verdicts of a run do not depend on which engine ran it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image


def fit_to_budget(image: Image.Image, max_pixels: int | None) -> Image.Image:
    """``image`` scaled down (aspect kept, bicubic, as Qwen's processors resize) to at most
    ``max_pixels`` pixels; unchanged when it already fits or there is no budget."""
    if max_pixels is None or image.width * image.height <= max_pixels:
        return image
    from PIL import Image as PILImage

    scale = math.sqrt(max_pixels / (image.width * image.height))
    size = (max(1, math.floor(image.width * scale)), max(1, math.floor(image.height * scale)))
    return image.convert("RGB").resize(size, PILImage.Resampling.BICUBIC)


def image_id(content_sha: str | None, max_pixels: int | None) -> str | None:
    """The name of a photo as shown under ``max_pixels``: the original's content hash and the
    budget (one photo at two budgets is two images to an engine's cache)."""
    if content_sha is None:
        return None
    return content_sha if max_pixels is None else f"{content_sha}-max{max_pixels}"
