"""The leaderboard and its Space: result folders as board entries (:mod:`.entries`), every
verdict indexed for the failure browser (:mod:`.failures`), upload validation
(:mod:`.submission`), the request-file queue (:mod:`.queue`), the worker that judges queued
uploads (:mod:`.worker`) and the Gradio app, one builder per tab (:mod:`.space`).

May import: :mod:`gamut_hf.reports`, :mod:`gamut_hf.evaluation`, :mod:`gamut_hf.dataset`,
:mod:`gamut_hf.core` and the foundation modules.
"""

from gamut_hf._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "load_entries": "entries",
        "leaderboard_table": "entries",
        "FailureIndex": "failures",
        "parse_submission": "submission",
        "RequestQueue": "queue",
        "serve": "worker",
        "SpaceConfig": "space",
        "build_app": "space",
    },
)
