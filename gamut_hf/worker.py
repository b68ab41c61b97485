"""`gamut worker`: judge queued submissions and publish their results.

Takes the oldest PENDING request, marks it RUNNING, stores its responses as the candidate's
answers in a run store of its own, runs the judge stage and scoring of the pipeline, and
writes the result folder (results.json, details.parquet, responses.parquet, model.json) into
the results folder under the request's key. The request ends FINISHED, or FAILED with the
reason; a score is only ever computed here, from the judge's verdicts.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

from gamut_hf.hub import HubFolder
from gamut_hf.leaderboard import CARD_FILE
from gamut_hf.pipeline import (
    Echo,
    ModelSpec,
    QuestionSource,
    RunConfig,
    import_answers,
    judge,
    record_run,
    score,
)
from gamut_hf.request_files import RequestQueue, RequestRecord
from gamut_hf.run_folder import DETAILS_FILE, RESPONSES_FILE, RESULTS_FILE
from gamut_hf.store import RunStore

# A submission's answers are data, not a model: this backend name marks them and loads nothing.
SUBMITTED_BACKEND = "submitted"


def submission_config(record: RequestRecord, responses: dict[str, str], dataset: str, judge_spec: ModelSpec) -> RunConfig:
    upload = hashlib.sha256(json.dumps(responses, sort_keys=True).encode()).hexdigest()
    candidate = ModelSpec(name=record.model.name, backend=SUBMITTED_BACKEND, options={"upload": upload})
    return RunConfig(dataset=dataset, variant=record.model.variant, candidate=candidate, judge=judge_spec,
                     question_ids=sorted(responses) if record.partial else None)


def evaluate(record: RequestRecord, responses: dict[str, str], dataset: str, judge_spec: ModelSpec,
             work: Path, out: Path, echo: Echo = print) -> None:
    """Judge one submission into ``out``; raises with the reason when it cannot be scored."""
    config = submission_config(record, responses, dataset, judge_spec)
    source = QuestionSource(config)
    with RunStore(work) as store:
        record_run(config, source, store)
        import_answers(config, source, store, responses)
        judge(config, source, store, echo)
        results = score(store, work)
    if results.score.gamut is None:
        raise RuntimeError(f"the judge left {results.judge_errors} checks unreadable and {results.unfinished_checks} "
                           "unjudged; the submission is kept and can be judged again")
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in (DETAILS_FILE, RESPONSES_FILE, RESULTS_FILE):
        shutil.copy2(work / name, staging / name)
    card = {**record.model.model_dump(mode="json"), "partial": record.partial, "submitted_by": record.submitted_by,
            "submitted_at": record.submitted_at.isoformat(), "request": record.key}
    (staging / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)


def process_next(queue: RequestQueue, results: Path, work_root: Path, dataset: str, judge_spec: ModelSpec,
                 echo: Echo = print, *, requests_hub: HubFolder | None = None,
                 results_hub: HubFolder | None = None) -> RequestRecord | None:
    """Handle the oldest waiting request; None when there is none. With hub mirrors, every
    status change and the result folder are pushed as they happen."""
    if requests_hub is not None:
        requests_hub.pull()
    record = queue.claim()
    if record is None:
        return None
    if requests_hub is not None:
        requests_hub.push(queue.files(record.key)[:1], f"{record.key}: RUNNING")
    echo(f"judging {record.model.name} ({record.model.variant}, {record.questions} answers) for {record.submitted_by}")
    try:
        evaluate(record, queue.responses(record.key), dataset, judge_spec, work_root / record.key,
                 results / record.key, echo)
        if results_hub is not None:
            results_hub.push(sorted((results / record.key).iterdir()), f"results of {record.key}")
    except Exception as error:  # noqa: BLE001 - every failure becomes the request's reason, never a crash
        reason = f"{type(error).__name__}: {error}".splitlines()[0]
        echo(f"FAILED {record.key}: {reason}")
        record = queue.finish(record, "FAILED", reason)
    else:
        echo(f"FINISHED {record.key}")
        record = queue.finish(record, "FINISHED")
    if requests_hub is not None:
        requests_hub.push(queue.files(record.key)[:1], f"{record.key}: {record.status}")
    return record


def serve(queue: RequestQueue, results: Path, work_root: Path, dataset: str, judge_spec: ModelSpec, *,
          once: bool, poll: float, echo: Echo = print, requests_hub: HubFolder | None = None,
          results_hub: HubFolder | None = None) -> int:
    """Work through the queue; with ``once``, stop when it is empty. Returns how many were handled."""
    handled = 0
    while True:
        record = process_next(queue, results, work_root, dataset, judge_spec, echo,
                              requests_hub=requests_hub, results_hub=results_hub)
        if record is not None:
            handled += 1
            continue
        if once:
            return handled
        time.sleep(poll)
