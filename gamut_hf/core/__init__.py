"""The rubric core, pure and without I/O: meta-rubric and check types (:mod:`.rubric`), the
compiler from meta-rubric to binary checks (:mod:`.compiler`, SPEC section 2) and the scorer from
verdicts to scores (:mod:`.scorer`, SPEC section 4).

May import: pydantic and :mod:`gamut_hf.errors`; nothing else of gamut_hf.
"""

from gamut_hf.core.compiler import CompileParams, compile_rubric
from gamut_hf.core.rubric import (
    TIERS,
    VERDICTS,
    Check,
    MetaRubric,
    RubricError,
    Tier,
    Verdict,
    parse_checks,
    parse_meta_rubric,
)
from gamut_hf.core.scorer import (
    QuestionScore,
    RunScore,
    ScoreParams,
    ScoringError,
    score_question,
    score_run,
)

__all__ = [
    "TIERS",
    "VERDICTS",
    "Check",
    "CompileParams",
    "MetaRubric",
    "QuestionScore",
    "RubricError",
    "RunScore",
    "ScoreParams",
    "ScoringError",
    "Tier",
    "Verdict",
    "compile_rubric",
    "parse_checks",
    "parse_meta_rubric",
    "score_question",
    "score_run",
]
