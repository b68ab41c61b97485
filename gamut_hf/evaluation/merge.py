"""Joining the stores of shard runs (``--shard i/n``) into one run and scoring it (``gamut merge``).

All or nothing per source: an entry that two stores hold with different results is an error
(:class:`~gamut_hf.evaluation.store.StoreConflict`), never a silent overwrite; runs that differ
in more than their shard are refused once their rows are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from gamut_hf.evaluation.config import RunConfig, stored_config
from gamut_hf.evaluation.pipeline import score
from gamut_hf.evaluation.run_folder import RunResults, hold_run_folder
from gamut_hf.evaluation.store import RunStore, StoreConflict, has_store
from gamut_hf.files import InputError


def merge_runs(
    out: str | Path,
    sources: Sequence[str | Path],
    *,
    errors_as_missing: bool = False,
    echo: Callable[[str], None] = print,
) -> RunResults:
    """Merge each source's store into ``out``'s, then score ``out`` as one run."""
    for source in sources:  # before OUT is made: a typo in a source leaves nothing behind
        if not has_store(source):
            raise InputError(f"{source}: no run store here (store.sqlite)")
    configs = []
    fingerprint = None
    with hold_run_folder(out), RunStore(out) as target:
        for source in sources:
            with RunStore(source) as other:
                config = stored_config(other)
                if config is None:
                    raise InputError(f"{source}: the store records no run")
                try:
                    added = target.merge_from(other)
                except StoreConflict as error:
                    raise InputError(str(error)) from None
                configs.append(config)
                fingerprint = other.info().get("dataset_fingerprint")
            echo(f"merged {source}: " + ", ".join(f"{n} {t}" for t, n in added.items()))
        same = {c.model_dump_json(include=RunConfig.IDENTITY) for c in configs}
        if len(same) > 1:
            raise InputError(
                "the runs differ in more than their shard (model, judge, dataset or settings); "
                "merged rows are kept, but they do not make one run"
            )
        config = configs[0].model_copy(update={"shard": None, "errors_as_missing": errors_as_missing})
        ids = [q.question_id for q in target.questions(config.variant)]
        target.set_info(config=config.model_dump(mode="json"), question_ids=ids, dataset_fingerprint=fingerprint)
        return score(target, out, errors_as_missing=errors_as_missing)
