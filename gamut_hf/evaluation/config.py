"""A run's settings (:class:`RunConfig`, :class:`ModelSpec`) and the rules that resume one.

A run folder records its settings in its store. A command given the same folder again takes
every setting it is not given from there (:func:`resolve_run_config`) and names each one it
took (:func:`inherited_settings`), so a selection taken silently from an earlier run is never
missed; the two switches that act on one invocation only are never inherited.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gamut_hf.backends import check_options, load_backend
from gamut_hf.backends.base import Backend, model_fingerprint
from gamut_hf.backends.models import DEFAULT_MODEL
from gamut_hf.core.names import Variant
from gamut_hf.errors import first_problem
from gamut_hf.evaluation.store import RunStore
from gamut_hf.files import InputError

# The embedded default's answer length: a 135M model's answers past this are repetition, and it
# keeps the demo to minutes on a CPU.
EMBEDDED_MAX_TOKENS = 256


class ModelSpec(BaseModel):
    """A model and how to run it; ``options`` go to the backend's constructor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = DEFAULT_MODEL
    backend: str = "transformers"
    options: dict[str, Any] = Field(default_factory=dict)

    def fingerprint(self) -> dict[str, Any]:
        return model_fingerprint(self.backend, self.name, self.options)

    def load(self) -> Backend:
        return load_backend(self.backend, self.name, **self.options)


class Escalation(BaseModel):
    """Checks the judge was unsure of, asked again of a second judge whose verdict replaces the
    first: those whose most probable verdict is below ``below`` (and those the first judge could
    not answer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    below: float = Field(
        gt=0, le=1, description="the first judge's top verdict probability under which a check is escalated"
    )
    judge: ModelSpec


class BatchMode(BaseModel):
    """``--batch``: new requests go to the provider's batch API (about half the price, within a day)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fallback: Literal["resubmit", "sync"] = Field(
        "resubmit",
        description="what a batch that failed or expired leaves unanswered gets: one more batch, or synchronous calls",
    )
    poll: float = Field(30.0, gt=0, description="seconds before the first look at a batch; it grows to 10 minutes")
    forget_unknown: bool = Field(
        False, description="give up the stored batches the provider no longer knows and submit their requests again"
    )


# The candidate's answer length cap unless given (the leaderboard's too: the Submit tab says it).
DEFAULT_MAX_TOKENS = 1024


class RunConfig(BaseModel):
    """Everything a run needs; the defaults are the embedded default run."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = "gamut-sample"
    revision: str | None = None
    variant: Variant = "text_only"
    candidate: ModelSpec = ModelSpec()
    judge: ModelSpec = ModelSpec()
    limit: int | None = Field(None, ge=1, description="first N questions (after --question-id)")
    question_ids: tuple[str, ...] = ()
    images: str | None = Field(None, description="where referenced images are: crag-mm, crag-mm=PATH or a folder")
    fetch_image_urls: bool = Field(False, description="download CRAG-MM photos that are only referenced by URL")
    shard: tuple[int, int] | None = Field(None, description="(i, n): questions whose position is i mod n")
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=1, description="candidate answer length cap")
    rationale: bool = Field(False, description="judge writes a short rationale before its verdict")
    judge_retries: int = Field(2, ge=0, description="extra attempts for an unreadable verdict")
    batch_size: int | None = Field(None, ge=1, description="requests per backend call and per commit")
    judge_batch_size: int | None = Field(None, ge=1)
    # The panel's other judges, after ``judge`` (gamut_hf.evaluation.panel); empty: one judge.
    panel: tuple[ModelSpec, ...] = ()
    escalation: Escalation | None = None
    batch: BatchMode | None = Field(None, description="send new requests as provider batches (this invocation only)")
    retry_errors: bool = Field(False, description="judge again the checks stored as error")
    errors_as_missing: bool = Field(False, description="score errors and unfinished checks as missing")

    # What makes two runs the same run (shards of one run agree on these).
    IDENTITY: ClassVar[set[str]] = {
        "dataset",
        "revision",
        "variant",
        "candidate",
        "judge",
        "panel",
        "max_tokens",
        "rationale",
    }

    @property
    def judges(self) -> tuple[ModelSpec, ...]:
        """The run's judges: the judge, then the panel's others."""
        return (self.judge, *self.panel)


def stored_config(store: RunStore) -> RunConfig | None:
    """The settings of the run recorded in ``store``; None when none is. A config this version
    cannot read (another version's, or edited by hand) is the user's to fix, named in one line."""
    return _recorded_config(store.info(), store.path)


def _recorded_config(info: Mapping[str, Any], path: Path) -> RunConfig | None:
    if "config" not in info:
        return None
    try:
        return RunConfig.model_validate(info["config"])
    except ValidationError as error:
        where, message = first_problem(error)
        raise InputError(
            f"{path}: the recorded run settings are not usable ({where or 'config'}: {message}); "
            "start the run in a new folder"
        ) from None


# -- resuming ---------------------------------------------------------------------------------


def model_spec(
    base: ModelSpec,
    name: str | None,
    backend: str | None,
    extra: dict[str, Any],
    base_urls: tuple[str, ...] = (),
    concurrency: int | None = None,
    *,
    checked: bool = True,
) -> ModelSpec:
    """``base`` changed by what was given: a new name or backend starts from empty options; options
    alone are added to ``base``'s; endpoints and concurrency go into the options of an openai model.
    ``checked``: options the backend does not accept are refused (not for a what-if comparison)."""
    extra = dict(extra)
    if base_urls:
        extra["base_url" if len(base_urls) == 1 else "base_urls"] = (
            base_urls[0] if len(base_urls) == 1 else list(base_urls)
        )
    if name is None and backend is None and not extra:
        spec = base
    else:
        spec = ModelSpec(
            name=name or base.name,
            backend=backend or base.backend,
            options=extra if (name or backend) else {**base.options, **extra},
        )
    if concurrency is not None and spec.backend == "openai":
        spec = ModelSpec(name=spec.name, backend=spec.backend, options={**spec.options, "concurrency": concurrency})
    if checked:  # now, not when the model loads after another stage
        check_options(spec.backend, spec.options)
    return spec


def stored_run_config(out: str | Path, *, claim: bool = True) -> RunConfig | None:
    """The settings of the run already in ``out``, if any. ``claim``: make ``out`` a run folder
    first (:func:`~gamut_hf.evaluation.run_folder.claim_run_folder`); without, the store is read
    and nothing is written (a dry run)."""
    from gamut_hf.evaluation.run_folder import claim_run_folder
    from gamut_hf.evaluation.store import has_store

    if not has_store(out):
        return None
    if claim:
        claim_run_folder(out)  # before the store is opened: a folder of another's is not read as a run
    else:
        return _read_only_config(out)
    with RunStore(out) as store:
        return stored_config(store)


def _read_only_config(out: str | Path) -> RunConfig | None:
    from gamut_hf.evaluation.store import STORE_FILE, read_info

    info = read_info(out)  # None: not a store this version reads, planned as a new run
    return None if info is None else _recorded_config(info, Path(out) / STORE_FILE)


def resolve_run_config(options: Mapping[str, Any], stored: RunConfig | None, *, checked: bool = True) -> RunConfig:
    """The run's settings: the options given (``None``: not given; model and judge options as
    parsed KEY=VALUE dicts, shard as ``(i, n)``), the rest from ``stored`` (the run in the folder)
    or the defaults. ``checked``: backend options are checked against their declarations."""
    selection = [
        flag
        for flag, name in (("--limit", "limit"), ("--question-id", "question_ids"), ("--shard", "shard"))
        if options[name]
    ]
    if options["all_questions"] and selection:
        raise InputError(f"--all: every question, so not with {selection[0]}")
    base = stored or RunConfig()
    stored_variant = stored.variant if stored else None
    candidate = model_spec(
        base.candidate,
        options["model"],
        options["backend"],
        options["model_options"],
        options["base_urls"],
        options["concurrency"],
        checked=checked,
    )
    judge = model_spec(
        base.judge,
        options["judge"],
        options["judge_backend"],
        options["judge_options"],
        options["judge_base_urls"],
        options["concurrency"],
        checked=checked,
    )
    panel = base.panel
    if options["judge"] is not None:  # judges named anew: the panel is the ones named after the first
        panel = tuple(
            model_spec(ModelSpec(), name, backend, extra, tuple(urls), options["concurrency"], checked=checked)
            for name, backend, extra, urls in options.get("panel") or ()
        )
    escalation = _escalation(options, base.escalation, checked)
    variant = options["variant"] or stored_variant or ("text_only" if candidate.name == DEFAULT_MODEL else "multimodal")
    fields = {
        name: options[name]
        for name in (
            "dataset",
            "revision",
            "images",
            "fetch_image_urls",
            "limit",
            "max_tokens",
            "rationale",
            "judge_retries",
            "batch_size",
            "judge_batch_size",
        )
        if options[name] is not None
    }
    # These act on this invocation only; they are never inherited from the stored run.
    fields.update(
        retry_errors=bool(options["retry_errors"]),
        errors_as_missing=bool(options["errors_as_missing"]),
        batch=_batch_mode(options),
    )
    if options["max_tokens"] is None and candidate.name == DEFAULT_MODEL and base == RunConfig():
        # A 135M model's answers past this are repetition; it keeps the demo to minutes on a CPU.
        fields["max_tokens"] = EMBEDDED_MAX_TOKENS
    if options["question_ids"]:
        fields["question_ids"] = options["question_ids"]
    if options["shard"] is not None:
        fields["shard"] = options["shard"]
    if options["limit"] == 0 or options["all_questions"]:
        fields["limit"] = None
    if options["all_questions"]:
        fields.update(question_ids=(), shard=None)
    config = base.model_copy(
        update={
            "candidate": candidate,
            "judge": judge,
            "panel": panel,
            "variant": variant,
            "escalation": escalation,
            **fields,
        }
    )
    if checked:
        _check_panel(config)
        if config.escalation is not None:
            _check_escalation(config)
    return config


def check_distinct_judges(judges: Sequence[ModelSpec]) -> None:
    """A panel's judges differ (model, backend and options): the same judge twice would vote twice."""
    seen: set[str] = set()
    for member in judges:
        key = json.dumps(member.fingerprint(), sort_keys=True)
        if key in seen:
            raise InputError(f"--judge {member.name} ({member.backend}) is given twice: a panel's judges must differ")
        seen.add(key)


def _batch_mode(options: Mapping[str, Any]) -> BatchMode | None:
    """--batch and its settings; those settings without --batch are refused."""
    given = {
        name: options[flag]
        for name, flag in (
            ("fallback", "batch_fallback"),
            ("poll", "batch_poll"),
            ("forget_unknown", "batch_forget_unknown"),
        )
        if options.get(flag) not in (None, False)
    }
    if not options.get("batch"):
        if given:
            raise InputError(f"--batch-{next(iter(given)).replace('_', '-')} goes with --batch")
        return None
    return BatchMode(**given)


def check_batch(config: RunConfig, stages: Sequence[str]) -> None:
    """--batch goes to a provider's batch API: every model the stages ask must be behind the openai backend."""
    if config.batch is None:
        return
    asked = [("--model", config.candidate)] if "generate" in stages else []
    asked += [("--judge", judge) for judge in config.judges] if "judge" in stages else []
    for flag, spec in asked:
        if spec.backend != "openai":
            raise InputError(
                f"--batch: {flag} {spec.name} runs on the {spec.backend} backend, which has no batch API "
                "(the openai backend has: OpenAI's Batch API, Anthropic's Message Batches)"
            )
    if config.escalation is not None and "judge" in stages and config.escalation.judge.backend != "openai":
        raise InputError(f"--batch: --escalate-judge {config.escalation.judge.name} has no batch API (not openai)")


def _check_panel(config: RunConfig) -> None:
    """A panel's judges differ, and escalation takes one judge."""
    check_distinct_judges(config.judges)
    if config.panel and config.escalation is not None:
        raise InputError(
            "--escalate-below takes one judge, not a panel: the panel's majority is its own second opinion"
        )


ESCALATION_OPTIONS = (
    "escalate_below",
    "escalate_judge",
    "escalate_judge_backend",
    "escalate_judge_options",
    "escalate_judge_base_urls",
)


def _escalation(options: Mapping[str, Any], stored: Escalation | None, checked: bool) -> Escalation | None:
    """The escalation given (any --escalate-* option), else the stored run's."""
    if not any(options.get(name) not in (None, (), {}) for name in ESCALATION_OPTIONS):
        return stored
    below = options.get("escalate_below")
    below = stored.below if below is None and stored is not None else below
    if below is None:
        raise InputError("--escalate-judge goes with --escalate-below P: the top verdict probability to escalate under")
    if options.get("escalate_judge") is None and stored is None:
        raise InputError("--escalate-below needs --escalate-judge J: the judge that answers the unsure checks again")
    judge = model_spec(
        stored.judge if stored is not None else ModelSpec(),
        options.get("escalate_judge"),
        options.get("escalate_judge_backend"),
        options.get("escalate_judge_options") or {},
        tuple(options.get("escalate_judge_base_urls") or ()),
        options.get("concurrency"),
        checked=checked,
    )
    try:
        return Escalation(below=below, judge=judge)
    except ValidationError:
        raise InputError(f"--escalate-below: expected a probability above 0 and at most 1, got {below!r}") from None


def _check_escalation(config: RunConfig) -> None:
    """An escalation needs the first judge's verdict probabilities, and a second judge."""
    judge = config.judge
    gives = (
        judge.backend in ("transformers", "vllm")
        or judge.options.get("structured") == "vllm"
        or judge.options.get("logprobs") is True
    )
    if config.rationale or not gives:
        raise InputError(
            "--escalate-below needs the judge's verdict probabilities: a transformers or vllm judge, or an "
            "openai one with --judge-option structured=vllm (a vLLM server) or logprobs=true (a hosted API), "
            "and no --rationale"
        )
    assert config.escalation is not None
    if config.escalation.judge.fingerprint() == judge.fingerprint():
        raise InputError("--escalate-judge is the judge itself: it would answer the same; name a second judge")


# How an inherited setting is named on the command line.
RUN_FLAGS = {
    "dataset": "--dataset",
    "revision": "--revision",
    "variant": "--variant",
    "candidate": "--model",
    "judge": "--judge",
    "panel": "--judge",
    "limit": "--limit",
    "question_ids": "--question-id",
    "images": "--images",
    "fetch_image_urls": "--fetch-image-urls",
    "shard": "--shard",
    "max_tokens": "--max-tokens",
    "rationale": "--rationale",
    "judge_retries": "--judge-retries",
    "batch_size": "--batch-size",
    "judge_batch_size": "--judge-batch-size",
    "escalation": "--escalate-below",
}


def inherited_settings(options: Mapping[str, Any], config: RunConfig) -> dict[str, str]:
    """The settings taken from the stored run: where ``config`` differs from what the same
    options would give in an empty folder, each (by field) as the option that would set it."""
    fresh = resolve_run_config(options, None, checked=False)  # what-if: the same options in an empty folder
    named = {}
    for name, flag in RUN_FLAGS.items():
        value = getattr(config, name)
        if value == getattr(fresh, name):
            continue
        if name in ("candidate", "judge"):
            keys = f"; options {', '.join(sorted(value.options))}" if value.options else ""  # values may be secrets
            named[name] = f"{flag} {value.name} ({value.backend}{keys})"
        elif name == "question_ids":
            named[name] = f"{flag} " + " ".join(value[:5]) + (f" and {len(value) - 5} more" if len(value) > 5 else "")
        elif name == "shard":
            named[name] = f"{flag} {value[0]}/{value[1]}"
        elif name == "panel":
            named[name] = " ".join(f"{flag} {member.name} ({member.backend})" for member in value) or "one judge"
        elif name == "escalation" and value is not None:
            named[name] = f"{flag} {value.below:g} --escalate-judge {value.judge.name} ({value.judge.backend})"
        elif name == "rationale":
            named[name] = "--rationale" if value else "--no-rationale"
        else:
            named[name] = f"{flag} {'(none)' if value is None else value}"
    return named
