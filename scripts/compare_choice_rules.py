"""Which choice rule should the transformers judge use? Measure each on the judge audit.

The transformers backend scores each verdict word as a continuation of the judge's prompt
and keeps the best under its ``choice_rule``. This script scores every check of the audit
set once (the same prompts the pipeline sends, one prefix per response), then applies each
rule to the same log-probabilities, so the rules are compared on identical numbers, and
measures each against gold with :func:`gamut_hf.evaluation.audit.measure`.

    .venv/bin/python scripts/compare_choice_rules.py --json /tmp/choice_rules.json [--limit N]
        [--reuse EARLIER.json]

``--reuse`` takes the log-probabilities of an earlier run for every response whose text is
unchanged (a rebuilt audit set is scored only where it changed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import replace

from gamut_hf.backends import load_backend
from gamut_hf.backends.options import TRANSFORMERS_CHOICE_RULES
from gamut_hf.backends.transformers_backend import best_option
from gamut_hf.core.rubric import VERDICTS
from gamut_hf.evaluation.audit import AUDIT_FILE, load_audit_set, measure
from gamut_hf.evaluation.judge import judge_request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--limit", type=int, default=None, help="only the first N responses")
    parser.add_argument("--json", default=None, help="write the figures (and every option's log-probabilities) here")
    parser.add_argument("--reuse", default=None, help="an earlier --json output: its scores of unchanged responses")
    args = parser.parse_args()

    audit = load_audit_set(AUDIT_FILE)
    responses = audit.responses[: args.limit] if args.limit else audit.responses
    started = time.perf_counter()
    logprobs: dict[str, list[list[float]]] = {}
    digests = {r.id: hashlib.sha256(r.response.encode()).hexdigest() for r in responses}
    earlier: dict[str, list[list[float]]] = {}
    if args.reuse:
        with open(args.reuse, encoding="utf-8") as handle:
            before = json.load(handle)
        assert before["model"] == args.model, "--reuse: another model's scores"
        unchanged = {rid for rid, digest in before["response_digests"].items() if digests.get(rid) == digest}
        earlier = {key: value for key, value in before["logprobs"].items() if key.split("\t")[0] in unchanged}
    with load_backend("transformers", args.model) as backend:
        for number, response in enumerate(responses, 1):
            question = audit.questions[response.question_id]
            keys = [f"{response.id}\t{check.id}" for check in question.checks]
            if all(key in earlier for key in keys):
                logprobs.update({key: earlier[key] for key in keys})
                continue
            requests = [
                replace(
                    judge_request(question.prompt, None, response.response, check, rationale=False),
                    prefix_key=response.id,
                )
                for check in question.checks
            ]
            for check, scored in zip(question.checks, backend.option_logprobs(requests, VERDICTS), strict=True):
                logprobs[f"{response.id}\t{check.id}"] = scored.logprobs
            if number % 10 == 0:
                print(
                    f"{number}/{len(responses)} responses, {len(logprobs)} checks, "
                    f"{time.perf_counter() - started:.0f} s",
                    flush=True,
                )
    seconds = time.perf_counter() - started

    figures = {}
    for rule in TRANSFORMERS_CHOICE_RULES:
        judged = {key: VERDICTS[best_option(scores, rule)] for key, scores in logprobs.items()}
        measured = measure(audit, judged)
        figures[rule] = {
            "accuracy": measured["accuracy"],
            "kappa": measured["kappa"],
            "confusion": measured["confusion"],
            "question_score_mae": measured["question_score_mae"],
            "gamut_mae": measured["gamut_mae"],
            "flip_rate": measured["injection"].flip_rate if measured["injection"] else None,
            "false_meets_rate": measured["injection"].false_meets_rate if measured["injection"] else None,
            "judged_shares": {v: sum(1 for j in judged.values() if j == v) / len(judged) for v in VERDICTS},
        }
    scored = len(logprobs) - len(set(logprobs) & set(earlier))
    print(
        f"{scored} checks scored in {seconds:.0f} s ({scored / seconds:.2f} checks/s), "
        f"{len(logprobs) - scored} reused from --reuse"
    )
    print(
        "| rule | kappa | accuracy | question score MAE | Gamut MAE | flip rate | judged meets / partial / "
        "missing / contradicts |"
    )
    print("|---|---|---|---|---|---|---|")
    for rule, f in figures.items():
        shares = " / ".join(f"{100 * f['judged_shares'][v]:.0f}%" for v in VERDICTS)
        print(
            f"| {rule} | {f['kappa']:.3f} | {100 * f['accuracy']:.1f}% | {f['question_score_mae']:.3f} | "
            f"{f['gamut_mae']:.1f} | {100 * (f['flip_rate'] or 0):.1f}% | {shares} |"
        )
    best = max(figures, key=lambda rule: figures[rule]["kappa"])
    print(f"best by kappa: {best}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "model": args.model,
                    "checks": len(logprobs),
                    "seconds": seconds,
                    "best": best,
                    "rules": figures,
                    "response_digests": digests,
                    "logprobs": logprobs,
                },
                handle,
            )


if __name__ == "__main__":
    main()
