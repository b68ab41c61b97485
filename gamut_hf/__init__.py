"""gamut-hf: the GAMUT benchmark (factual completeness of long answers) on the Hugging Face stack.

The core is pure and light: :mod:`gamut_hf.core.rubric` (types), :mod:`gamut_hf.core.compiler`
(meta-rubric -> binary checks) and :mod:`gamut_hf.core.scorer` (verdicts -> scores). Importing
the package imports none of datasets, torch or gradio.
"""

__version__ = "0.1.0"
