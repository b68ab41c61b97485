"""What a run would do, before it does it (`gamut run --dry-run`): the questions and checks, the
requests of each stage and how many are already stored, the prompt and output tokens they send
and receive, and with prices given, what they cost.

Nothing is loaded but the dataset and, where a model is local, its tokenizer; nothing is written.
The estimate is stated with its rules: a judge prompt is counted in its parts (the part every
check of a question shares, then each check), an answer not yet generated at ``--max-tokens``,
a verdict at the longest verdict word, and images not at all (their tokens depend on the
model's processor: the number of prompts carrying one is shown instead).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.evaluation.config import ModelSpec, RunConfig
from gamut_hf.evaluation.judge import (
    CHECK_REMINDER,
    RATIONALE_FORMAT,
    SYSTEM_PROMPT,
    VERDICT_ONLY_FORMAT,
    quote_response,
)
from gamut_hf.evaluation.prices import Price
from gamut_hf.evaluation.source import Questions

# Where no tokenizer is at hand: the usual rule of thumb for English text in BPE vocabularies.
CHARS_PER_TOKEN = 4
RATIONALE_TOKENS = 200  # the judge's cap on a rationale and its verdict (judge_request)

TokenCount = Callable[[str], int]


class StagePlan(BaseModel):
    stage: str
    requests: int  # still to send
    stored: int  # already in the run store: not sent again
    prompt_tokens: int
    output_tokens: int
    image_prompts: int
    cost: float | None = None


class RunPlan(BaseModel):
    questions: int
    checks: int
    stages: list[StagePlan]
    rules: list[str]  # how the tokens were counted, one line per model


def token_counter(spec: ModelSpec) -> tuple[TokenCount, str]:
    """Count tokens as ``spec``'s model does where its tokenizer is on this machine (a packaged
    model, a local folder, a hub id already downloaded), else by characters; with the rule."""
    tokenizer = _local_tokenizer(spec) if spec.backend != "openai" else None
    if tokenizer is None:
        return (lambda text: -(-len(text) // CHARS_PER_TOKEN)), f"{spec.name}: {CHARS_PER_TOKEN} characters per token"
    return (lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])), f"{spec.name}: its tokenizer"


def _local_tokenizer(spec: ModelSpec) -> Any:
    from transformers import AutoTokenizer

    from gamut_hf.backends.models import PACKAGED_MODELS, packaged_gguf

    try:
        if spec.name in PACKAGED_MODELS:  # read from the GGUF file: no weights are loaded
            gguf = packaged_gguf(spec.name)
            return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        return AutoTokenizer.from_pretrained(spec.name, local_files_only=True)
    except Exception:  # not on this machine, or no tokenizer transformers reads: count by characters
        return None


def _judge_prompt_tokens(
    count: TokenCount, question: str, answer: str | None, checks: Sequence[str], rationale: bool, max_tokens: int
) -> int:
    """The prompts of a question's checks, counted in parts: the shared part once per check, each check's own."""
    system = SYSTEM_PROMPT.format(output_format=RATIONALE_FORMAT if rationale else VERDICT_ONLY_FORMAT)
    shared = count(system) + count(f"Question: {question}\n\n{quote_response(answer or '')}\n\nCheck: ")
    if answer is None:  # not generated yet: counted at the candidate's cap
        shared += max_tokens
    return sum(shared + count(f"{check}\n\n{CHECK_REMINDER}") for check in checks)


def plan_run(
    config: RunConfig,
    source: Questions,
    stored: Callable[[], tuple[dict[str, str], set[str]]],
    stages: Sequence[str],
    prices: dict[str, Price | None],
) -> RunPlan:
    """The plan of ``stages`` over ``source``. ``stored()``: the answers already stored (without
    error) by their key, and the keys of the verdicts already stored."""
    from gamut_hf.evaluation.pipeline import generation_key

    if config.batch is not None:  # --batch: every price at the provider's batch rate
        prices = {role: None if price is None else price.batched() for role, price in prices.items()}
    questions = source.questions
    answers, judged = stored()
    plans = []
    count_candidate, candidate_rule = token_counter(config.candidate)
    rules = [candidate_rule]
    keys = {q.id: generation_key(config.candidate, q, config.variant, config.max_tokens) for q in questions}
    to_answer = [q for q in questions if keys[q.id] not in answers]
    image = config.variant == "multimodal"
    if "generate" in stages:
        prompt_tokens = sum(count_candidate(q.prompt) for q in to_answer)
        output_tokens = len(to_answer) * config.max_tokens
        price = prices.get("candidate")
        plans.append(
            StagePlan(
                stage="generate",
                requests=len(to_answer),
                stored=len(questions) - len(to_answer),
                prompt_tokens=prompt_tokens,
                output_tokens=output_tokens,
                image_prompts=len(to_answer) if image else 0,
                cost=price.cost(prompt_tokens, output_tokens) if price else None,
            )
        )
    if "judge" in stages:
        for position, member in enumerate(config.judges):
            stage = "judge" if not config.panel else f"judge {position + 1}"
            price = prices.get("judge" if position == 0 else f"judge {position + 1}")
            plan, rule = _judge_plan(config, member, questions, keys, answers, judged, stages, price, stage, image)
            plans.append(plan)
            if rule not in rules:
                rules.append(rule)
    return RunPlan(questions=len(questions), checks=sum(len(q.checks) for q in questions), stages=plans, rules=rules)


def _judge_plan(
    config: RunConfig,
    judge: ModelSpec,
    questions: Sequence[Any],
    keys: dict[str, str],
    answers: dict[str, str],
    judged: set[str],
    stages: Sequence[str],
    price: Price | None,
    stage: str,
    image: bool,
) -> tuple[StagePlan, str]:
    """One judge's stage: the checks it has not judged, their prompt tokens, and its rule for counting."""
    from gamut_hf.evaluation.pipeline import verdict_key
    from gamut_hf.evaluation.store import StoredGeneration

    count_judge, judge_rule = token_counter(judge)
    verdict_tokens = (
        RATIONALE_TOKENS if config.rationale else max(count_judge(v) for v in VERDICTS) + 1
    )  # + the end of the turn
    requests = stored_verdicts = prompt_tokens = 0
    for q in questions:
        answer = answers.get(keys[q.id])
        if answer is None and "generate" not in stages:
            continue  # `gamut judge` judges stored answers only
        todo = list(q.checks)
        if answer is not None:  # its verdicts may be stored already
            generation = StoredGeneration(keys[q.id], q.id, answer, None)
            todo = [c for c in q.checks if verdict_key(judge, generation, c, config.rationale) not in judged]
        stored_verdicts += len(q.checks) - len(todo)
        requests += len(todo)
        prompt_tokens += _judge_prompt_tokens(
            count_judge, q.prompt, answer, [c.text for c in todo], config.rationale, config.max_tokens
        )
    plan = StagePlan(
        stage=stage,
        requests=requests,
        stored=stored_verdicts,
        prompt_tokens=prompt_tokens,
        output_tokens=requests * verdict_tokens,
        image_prompts=requests if image else 0,
        cost=price.cost(prompt_tokens, requests * verdict_tokens) if price else None,
    )
    return plan, judge_rule


def stored_work(out: str | Path, retry_errors: bool) -> Callable[[], tuple[dict[str, str], set[str]]]:
    """What the run store in ``out`` already holds, read without writing (none where there is no store);
    ``retry_errors``: verdicts stored as error are to be sent again."""

    def read() -> tuple[dict[str, str], set[str]]:
        import sqlite3

        from gamut_hf.evaluation.store import STORE_FILE, read_only_store

        path = Path(out) / STORE_FILE
        if not path.is_file():
            return {}, set()
        try:
            with read_only_store(path) as db:
                answers = dict(db.execute("SELECT key, response FROM generations WHERE error IS NULL"))
                verdicts = {
                    key
                    for key, verdict in db.execute("SELECT key, verdict FROM verdicts")
                    if not (retry_errors and verdict == "error")
                }
        except sqlite3.Error:  # not a store this version reads: planned as a new run
            return {}, set()
        return answers, verdicts

    return read


def plan_lines(plan: RunPlan, config: RunConfig) -> list[str]:
    """The plan as printed: a table, then the rules it was counted by."""
    header = f"{'stage':<9} {'requests':>9} {'stored':>8} {'prompt tokens':>14} {'output tokens':>14} {'cost':>10}"
    lines = [
        f"dry run (nothing loaded, nothing written): {plan.questions} questions, {plan.checks} checks, {config.variant}",
        header,
    ]
    for stage in plan.stages:
        cost = f"${stage.cost:,.2f}" if stage.cost is not None else "-"
        lines.append(
            f"{stage.stage:<9} {stage.requests:>9,} {stage.stored:>8,} {stage.prompt_tokens:>14,} "
            f"{stage.output_tokens:>14,} {cost:>10}"
        )
    costs = [stage.cost for stage in plan.stages if stage.cost is not None]
    if costs:
        rate = " at the provider's batch rate" if config.batch is not None else ""
        lines.append(f"total cost: ${sum(costs):,.2f}{rate} (retries of failed requests not counted)")
    lines.append(
        "tokens counted with " + "; ".join(plan.rules) + ". A judge prompt is counted in its parts (what a "
        f"question's checks share, then each check); an answer not yet generated at --max-tokens "
        f"({config.max_tokens}); output: each answer at --max-tokens, each verdict at "
        + ("the rationale cap" if config.rationale else "the longest verdict word")
        + "."
    )
    images = sum(stage.image_prompts for stage in plan.stages)
    if images:
        lines.append(
            f"images not counted: {images:,} prompts carry the photo; add your model's tokens per image "
            "(a Qwen3-VL photo at max_pixels=1048576: up to 1,024 tokens)"
        )
    return lines
