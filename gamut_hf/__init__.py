"""gamut-hf: the GAMUT benchmark (factual completeness of long answers) on the Hugging Face stack.

The core is pure and light: :mod:`gamut_hf.rubric` (types), :mod:`gamut_hf.compiler`
(meta-rubric -> binary checks) and :mod:`gamut_hf.scorer` (verdicts -> scores). Importing
the package imports none of datasets, torch or gradio.
"""

__version__ = "0.1.0"
