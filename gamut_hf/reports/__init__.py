"""Reports: per-question statistics, bootstrap intervals and agreement (:mod:`.statistics`); a
report (:mod:`.report`) made of the runs it reads (:mod:`.runs`), its sections (:mod:`.sections`)
and their rendering to markdown and HTML (:mod:`.render`); figures (:mod:`.figures`), the judge
audit's page (:mod:`.audit_report`) and the paper's runs simulated at full scale (:mod:`.simulate`).

May import: :mod:`gamut_hf.evaluation` (run folders), :mod:`gamut_hf.dataset`, :mod:`gamut_hf.core`
and the foundation modules.
"""

from gamut_hf._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Bootstrap": "statistics",
        "build_report": "report",
        "write_report": "report",
        "find_run_folders": "runs",
        "write_audit_report": "audit_report",
        "simulate_runs": "simulate",
    },
)
