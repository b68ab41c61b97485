"""The evaluation engine: run settings and resume rules (:mod:`.config`), the generate, judge and
score stages (:mod:`.pipeline`), the judge's prompt and verdict parser (:mod:`.judge`), the run
store (:mod:`.store`), provider batches (:mod:`.batches`), the run folder's files
(:mod:`.run_folder`, their only writer and reader),
merging shard runs (:mod:`.merge`) and the judge audit (:mod:`.audit`, :mod:`.injections`).

May import: :mod:`gamut_hf.backends`, :mod:`gamut_hf.dataset`, :mod:`gamut_hf.core` and the
foundation modules.
"""

from gamut_hf._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ModelSpec": "config",
        "RunConfig": "config",
        "BatchMode": "config",
        "run": "pipeline",
        "judge_request": "judge",
        "parse_verdict": "judge",
        "RunStore": "store",
        "RunResults": "run_folder",
        "read_run_folder": "run_folder",
        "merge_runs": "merge",
        "run_audit": "audit",
        "load_audit_set": "audit",
        "AuditResults": "audit",
    },
)
