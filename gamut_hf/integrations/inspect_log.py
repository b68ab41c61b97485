"""An inspect log of the task ``gamut_hf/gamut`` -> a run folder (`gamut import-inspect`).

The run folder is what `gamut run` writes (results.json, details.parquet, responses.parquet with
their digests) and its store.sqlite, keyed as `gamut run` keys it: the inspect model names become
the project's model specs (:func:`model_spec_of`), so the answers and verdicts land under the
keys `gamut run` would give them, `gamut score` rescores the folder, `gamut judge --judge J`
judges its answers with another judge, `gamut merge` combines it, and reports and the Space
group its judge with the same judge's other runs.

Several logs of one run (an eval and its eval-retry) are read in order: a question's answer is
the first one that succeeded. inspect_ai is imported only here, when a log is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gamut_hf.evaluation.config import ModelSpec, RunConfig
from gamut_hf.files import InputError

TASK_NAME = "gamut_hf/gamut"
SCORER_NAME = "gamut_grader"  # gamut_hf.integrations.inspect_task.SCORER_NAME (not imported: it imports inspect_ai)
# The verdicts the store keeps; "unjudged" (the grader was not reached) is left out, so a rerun
# of `gamut judge` on the folder asks again, as for a request `gamut judge` could not complete.
STORED_OUTCOMES = ("meets", "partially_meets", "missing", "contradicts", "error")
# The task's parameters that are RunConfig fields of the same name.
RUN_ARGS = ("dataset", "revision", "variant", "limit", "images", "max_tokens", "rationale", "judge_retries")


class InspectLogError(InputError):
    """A file that is not a readable inspect log of the GAMUT task."""


def model_spec_of(model: str, base_url: str | None, args: Mapping[str, Any] | None = None) -> ModelSpec:
    """The project's model spec for an inspect model, as `gamut run` would name the same model:

    - ``openai/NAME`` and ``openai-api/SERVICE/NAME`` (OpenAI-compatible endpoints, vLLM's
      ``vllm serve`` among them) -> ``NAME`` on the ``openai`` backend at the same base URL;
    - ``vllm/NAME`` (inspect starts vLLM itself) -> ``NAME`` on the ``vllm`` backend;
    - ``hf/NAME`` (transformers in process) -> ``NAME`` on the ``transformers`` backend;
    - any other provider (``anthropic/...``, ``google/...``) -> the inspect name itself on the
      ``openai`` backend: a hosted model, named as inspect names it.
    """
    provider, _, name = model.partition("/")
    if provider == "openai-api":
        name = name.partition("/")[2] or name
    options: dict[str, Any] = {}
    if provider in ("openai", "openai-api"):
        backend = "openai"
        if base_url:
            options["base_url"] = base_url
    elif provider == "vllm":
        backend = "vllm"
    elif provider == "hf":
        backend = "transformers"
    else:
        backend, name = "openai", model
    del args  # provider arguments (keys, clients) do not change which model answers
    return ModelSpec(name=name, backend=backend, options=options)


@dataclass(frozen=True)
class ImportedRun:
    config: RunConfig
    answers: dict[str, dict[str, Any]]  # question id -> the sample's answer fields
    verdicts: dict[str, list[dict[str, Any]]]  # question id -> its checks' verdicts


def _read_log(path: Path) -> Any:
    from inspect_ai.log import read_eval_log

    if not path.is_file():
        raise InspectLogError(f"{path}: no such inspect log")
    try:
        log = read_eval_log(str(path))
    except Exception as error:  # inspect raises many kinds for a file that is not its log
        raise InspectLogError(f"{path}: not an inspect log ({type(error).__name__}: {error})") from None
    if log.eval.task_registry_name != TASK_NAME and log.eval.task not in (TASK_NAME, "gamut"):
        raise InspectLogError(f"{path}: a log of task {log.eval.task!r}, not {TASK_NAME}")
    if not log.samples:
        raise InspectLogError(f"{path}: the log has no samples (was it written with --no-log-samples?)")
    return log


def run_config_of(log: Any, path: Path) -> RunConfig:
    """The RunConfig `gamut run` would have used for the run this log records."""
    args = dict(log.eval.task_args)
    question_ids = args.get("question_ids")
    if isinstance(question_ids, str):
        question_ids = [part.strip() for part in question_ids.split(",") if part.strip()]
    roles = log.eval.model_roles or {}
    grader = roles.get("grader")
    if isinstance(grader, list):
        grader = grader[0] if grader else None
    if grader is None and not args.get("grader_fallback"):
        raise InspectLogError(f"{path}: the log names no grader model (--model-role grader=...)")
    candidate = model_spec_of(log.eval.model, log.eval.model_base_url, log.eval.model_args)
    judge = model_spec_of(grader.model, grader.base_url, grader.args) if grader is not None else candidate
    return RunConfig.model_validate(
        {
            **{name: args[name] for name in RUN_ARGS if args.get(name) is not None},
            "question_ids": tuple(question_ids or ()),
            "candidate": candidate,
            "judge": judge,
            "errors_as_missing": bool(args.get("errors_as_missing")),
        }
    )


def _candidate_tokens(sample: Any) -> tuple[int, int]:
    """The candidate's prompt and output tokens: its own model calls (the grader's carry the role
    ``grader``; the sample's model_usage sums both where one model plays both parts). inspect
    counts prompt tokens read from a cache apart; `gamut run` counts them in the prompt."""
    prompt = output = 0
    for event in sample.events or []:
        if event.event == "model" and event.role is None and event.output.usage is not None:
            usage = event.output.usage
            prompt += usage.input_tokens + (usage.input_tokens_cache_read or 0)
            output += usage.output_tokens
    return prompt, output


def _answer_of(sample: Any) -> dict[str, Any]:
    metadata = sample.metadata or {}
    answered = sample.error is None and "answer" in metadata
    prompt_tokens, completion_tokens = _candidate_tokens(sample)
    return {
        "response": metadata.get("answer", "") if answered else "",
        "error": None if answered else _error_line(sample),
        "reasoning": metadata.get("reasoning"),
        "reasoning_unclosed": bool(metadata.get("reasoning_unclosed")),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "seconds": sample.working_time or 0.0,
    }


def _error_line(sample: Any) -> str:
    message = sample.error.message if sample.error is not None else "no answer"
    return (message.strip().splitlines() or ["no answer"])[0]


def read_inspect_logs(paths: Sequence[str | Path]) -> ImportedRun:
    """The run the logs record, refused in one line when they are not of one GAMUT run."""
    config: RunConfig | None = None
    answers: dict[str, dict[str, Any]] = {}
    verdicts: dict[str, list[dict[str, Any]]] = {}
    for raw_path in paths:
        path = Path(raw_path)
        log = _read_log(path)
        this = run_config_of(log, path)
        if config is None:
            config = this
        elif this.model_dump(include=RunConfig.IDENTITY) != config.model_dump(include=RunConfig.IDENTITY):
            raise InspectLogError(f"{path}: a log of another run (another model, judge, dataset or variant)")
        for sample in log.samples:
            question_id = str(sample.id)
            if question_id in answers and answers[question_id]["error"] is None:
                continue  # an earlier log answered it
            answers[question_id] = _answer_of(sample)
            score = (sample.scores or {}).get(SCORER_NAME)
            verdicts[question_id] = list((score.metadata or {}).get("verdicts", [])) if score is not None else []
    assert config is not None, "click asks for at least one log"
    return ImportedRun(config, answers, verdicts)


def import_inspect(paths: Sequence[str | Path], out: str | Path) -> Any:
    """Write the run folder ``out`` from inspect logs; its RunResults (as `gamut score` prints)."""
    from gamut_hf.evaluation.config import stored_config
    from gamut_hf.evaluation.pipeline import generation_key, record_run, score, verdict_key
    from gamut_hf.evaluation.run_folder import hold_run_folder
    from gamut_hf.evaluation.source import QuestionSource
    from gamut_hf.evaluation.store import RunStore

    imported = read_inspect_logs(paths)
    config = imported.config
    source = QuestionSource(config)
    planned = {q.id: q for q in source.questions}
    unknown = sorted(set(imported.answers) - set(planned))
    if unknown:
        raise InspectLogError(
            f"{paths[0]}: question {unknown[0]!r} is not among the run's questions in {config.dataset}"
        )
    with hold_run_folder(out), RunStore(out) as store:
        stored = stored_config(store)
        if stored is not None and stored.model_dump(include=RunConfig.IDENTITY) != config.model_dump(
            include=RunConfig.IDENTITY
        ):
            raise InspectLogError(
                f"{out}: holds another run (another model, judge, dataset or variant); give --out a new folder"
            )
        record_run(config, source, store)
        candidate = json.dumps(config.candidate.fingerprint(), sort_keys=True)
        keys = {}
        rows = []
        for question_id, answer in imported.answers.items():
            question = planned[question_id]
            keys[question_id] = generation_key(config.candidate, question, config.variant, config.max_tokens)
            rows.append(
                {"key": keys[question_id], "question_id": question_id, "variant": config.variant, "model": candidate}
                | answer
            )
        store.add_generations(rows)
        generations = store.generations(keys.values())
        judge = json.dumps(config.judge.fingerprint(), sort_keys=True)
        verdict_rows = []
        for question_id, judged in imported.verdicts.items():
            generation = generations[keys[question_id]]
            if generation.error is not None:
                continue
            checks = {check.id: check for check in planned[question_id].checks}
            for entry in judged:
                check = checks.get(entry["check_id"])
                if check is None or entry["verdict"] not in STORED_OUTCOMES:
                    continue
                verdict_rows.append(
                    {
                        "key": verdict_key(config.judge, generation, check, config.rationale),
                        "generation_key": generation.key,
                        "question_id": question_id,
                        "check_id": check.id,
                        "judge": judge,
                        "verdict": entry["verdict"],
                        "rationale": entry.get("rationale"),
                        "raw": entry.get("raw"),
                        "attempts": entry.get("attempts") or 1,
                        "prompt_tokens": None,
                        "completion_tokens": None,
                        "cached_tokens": None,
                        "seconds": None,
                    }
                )
        store.add_verdicts(verdict_rows)
        return score(store, out, errors_as_missing=config.errors_as_missing, stages=[])
