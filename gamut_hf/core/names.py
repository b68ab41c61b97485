"""Names used across the package, declared once: the dataset's two variants and the types of model
a leaderboard entry can have. (Tiers and verdicts, with their order, are in :mod:`.rubric`; the
run folder's file names in :mod:`gamut_hf.evaluation.run_folder`.)"""

from __future__ import annotations

from typing import Literal

Variant = Literal["multimodal", "text_only"]
VARIANTS: tuple[Variant, ...] = ("multimodal", "text_only")
# The paper's main setting; the board opens on it.
DEFAULT_VARIANT: Variant = "multimodal"

ModelAccess = Literal["open", "proprietary"]
MODEL_ACCESS: tuple[ModelAccess, ...] = ("open", "proprietary")
# "unknown": a run without a submitter's card.
MODEL_TYPES: tuple[str, ...] = (*MODEL_ACCESS, "unknown")
