"""gamut-hf: the GAMUT benchmark (factual completeness of long answers) on the Hugging Face stack.

The core is pure and light: :mod:`gamut_hf.core.rubric` (types), :mod:`gamut_hf.core.compiler`
(meta-rubric -> binary checks) and :mod:`gamut_hf.core.scorer` (verdicts -> scores). Importing
the package imports none of datasets, torch or gradio.

For notebooks, :mod:`gamut_hf.api` works on dataset rows as ``datasets.load_dataset`` returns
them, re-exported here and imported on first use: ``gamut_hf.compile_rubric(row)``,
``gamut_hf.score_question(row, verdicts)``, ``gamut_hf.judge_response(row, response, ...)`` and
``gamut_hf.load_run(folder)``.
"""

from gamut_hf._exports import lazy_exports

__version__ = "0.1.0"

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "compile_rubric": "api",
        "score_question": "api",
        "judge_response": "api",
        "load_run": "api",
        "JudgedResponse": "api",
        "RunOutputs": "api",
    },
)
