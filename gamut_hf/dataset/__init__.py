"""The dataset: annotation folders (:mod:`.annotations`), the columns of both configurations
(:mod:`.features`), building a hub-layout folder (:mod:`.build`) with its card (:mod:`.card`,
``card_template.md``), loading any source (:mod:`.loader`), the paper's rubric statistics
(:mod:`.stats`), full-size synthetic data (:mod:`.synthetic`) and the Hugging Face hub (:mod:`.hub`).

May import: :mod:`gamut_hf.core` and the foundation modules (errors, files, atomic).
"""

from gamut_hf._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AnnotatedQuestion": "annotations",
        "AnnotationError": "annotations",
        "read_annotations": "annotations",
        "gamut_features": "features",
        "build_dataset": "build",
        "render_card": "card",
        "GamutQuestion": "loader",
        "load_gamut": "loader",
        "iter_questions": "loader",
        "image_resolver": "loader",
        "SAMPLE_SOURCE": "loader",
        "rubric_stats": "stats",
        "write_synthetic": "synthetic",
        "HubFolder": "hub",
        "push_dataset": "hub",
        "PushError": "hub",
    },
)
