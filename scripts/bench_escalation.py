"""Escalation on the judge audit set: SmolLM2-135M judges first, and every check whose top verdict
probability is under P goes to a second judge that answers the gold verdict (the only strong judge
this machine has). Per P: the share of checks escalated, the kappa against the gold verdicts, and
what the second judge's calls would cost at a stated price.

    .venv/bin/python scripts/bench_escalation.py [--limit 5] [--out runs/escalation-audit]
        [--price 5/25] [--thresholds 0.5,0.6,...]

The first judge's verdicts and probabilities come from `gamut judge-audit`'s own machinery
(stored in --out, so a second call reuses them); the second judge is not called: its verdict is
the gold one by construction, as `--escalate-below` would store it. Its cost counts each escalated
check's prompt at the first judge's token count (another tokenizer counts a little differently)
and a verdict of two tokens. The figure shows the mechanism, not a real judge's value: a real
second judge is wrong sometimes, and SmolLM2's probabilities are close to uniform.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import date
from pathlib import Path

from gamut_hf.evaluation.audit import audit_config, load_audit_set, measure, run_audit, stored_audit_verdicts
from gamut_hf.evaluation.config import ModelSpec
from gamut_hf.evaluation.pipeline import is_unsure
from gamut_hf.evaluation.prices import Price
from gamut_hf.evaluation.store import RunStore

VERDICT_TOKENS = 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=5, help="audit questions (all their responses)")
    parser.add_argument("--out", default="runs/escalation-audit", help="the first judge's audit folder")
    parser.add_argument("--price", default="5/25", help="the second judge's US$ per M prompt/output tokens")
    parser.add_argument("--thresholds", default="0.7,0.75,0.78,0.8,0.82,0.84,0.86,0.9,1.0")
    parser.add_argument("--json", help="write the table here too")
    args = parser.parse_args()
    prompt_price, output_price = (float(x) for x in args.price.split("/"))
    price = Price(prompt=prompt_price, output=output_price)
    judge = ModelSpec()  # the embedded SmolLM2 on the transformers backend

    started = time.perf_counter()
    run_audit(judge, args.out, limit=args.limit)
    seconds = time.perf_counter() - started
    audit = load_audit_set().first_questions(args.limit)
    config = audit_config(judge, audit)
    with RunStore(args.out) as store:
        stored = stored_audit_verdicts(config, audit, store)
    gold = {f"{r.id}\t{check}": verdict for r in audit.responses for check, verdict in r.gold.items()}
    rows = []
    for below in (float(t) for t in args.thresholds.split(",")):
        outcomes, escalated, prompt_tokens = {}, 0, 0
        for key, verdict in stored.items():
            if is_unsure(verdict, below):
                escalated += 1
                prompt_tokens += verdict.prompt_tokens or 0
                outcomes[key] = gold[key]
            else:
                outcomes[key] = verdict.verdict
        figures = measure(audit, outcomes)
        rows.append(
            {
                "below": below,
                "escalated": escalated,
                "checks": len(stored),
                "escalated_share": escalated / len(stored),
                "kappa": figures["kappa"],
                "accuracy": figures["accuracy"],
                "cost_usd": price.cost(prompt_tokens, escalated * VERDICT_TOKENS),
            }
        )
    print(f"first judge: SmolLM2-135M (transformers) on {len(stored)} audit checks, judged in {seconds:.0f} s")
    print(f"second judge: answers the gold verdict, priced at ${args.price} per M tokens")
    print("| below P | escalated | share | kappa | accuracy | second judge's cost (US$) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['below']:g} | {row['escalated']} of {row['checks']} | {100 * row['escalated_share']:.1f}% | "
            f"{row['kappa']:.3f} | {100 * row['accuracy']:.1f}% | {row['cost_usd']:.4f} |"
        )
    if args.json:
        meta = {"machine": platform.processor() or platform.machine(), "date": date.today().isoformat()}
        Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
