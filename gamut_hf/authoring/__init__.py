"""Authoring new questions, the paper's construction pipeline: propose, draft, refine and export
(:mod:`.pipeline`), their SQLite store (:mod:`.store`), evidence retrieval (:mod:`.evidence`) and
the annotators' review app (:mod:`.review`).

May import: :mod:`gamut_hf.backends`, :mod:`gamut_hf.dataset`, :mod:`gamut_hf.core` and the
foundation modules.
"""

from gamut_hf._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "propose": "pipeline",
        "draft": "pipeline",
        "refine": "pipeline",
        "export": "pipeline",
        "AuthoringStore": "store",
        "read_snippets": "evidence",
        "build_review_app": "review",
    },
)
