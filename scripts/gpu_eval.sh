#!/usr/bin/env bash
# The GPU batch run a user launches on one H200 (141 GB): first the judge's audit (its verdicts
# on the packaged responses with known right verdicts: a few minutes), then the candidate through
# vLLM, then the Qwen3-VL judge through vLLM, on the full multimodal benchmark; the judge's kappa
# and injection flip rate and the per-stage throughput at the end.
#
#   CANDIDATE=Qwen/Qwen3-VL-8B-Instruct OUT=runs/qwen3-vl-8b scripts/gpu_eval.sh
#
# Everything is resumable: run the same line again after a crash or preemption and only the
# unfinished work is done. Environment (all optional):
#   CANDIDATE  candidate model (hub id or folder)     default Qwen/Qwen3-VL-8B-Instruct
#   JUDGE      judge model                            default Qwen/Qwen3-VL-30B-A3B-Instruct
#   DATASET    GAMUT source                           default facebook/GAMUT
#   VARIANT    multimodal | text_only                 default multimodal
#   OUT        run folder                             default runs/<candidate name>
#   AUDIT      judge audit folder (beside the run, so `gamut report` shows it)
#                                                     default <OUT's folder>/judge-audit-<judge name>-vllm
#   TP         tensor-parallel GPUs per engine         default 1
#   MAX_PIXELS image token budget (pixels)             default 1003520 (about 1,280 image tokens)
#   EXTRA      further `gamut run` options, e.g. "--limit 100" or "--shard 0/4"
set -euo pipefail
cd "$(dirname "$0")/.."

CANDIDATE=${CANDIDATE:-Qwen/Qwen3-VL-8B-Instruct}
JUDGE=${JUDGE:-Qwen/Qwen3-VL-30B-A3B-Instruct}
DATASET=${DATASET:-facebook/GAMUT}
VARIANT=${VARIANT:-multimodal}
OUT=${OUT:-runs/$(basename "$CANDIDATE")}
TP=${TP:-1}
MAX_PIXELS=${MAX_PIXELS:-1003520}
GAMUT=${GAMUT:-$(command -v gamut || echo ".venv/bin/gamut")}
AUDIT=${AUDIT:-$(dirname "$OUT")/judge-audit-$(basename "$JUDGE")-vllm}

# The judge first: a judge that cannot tell meets from missing makes every score after it noise.
# Resumable like the run; the audit is text only, so the image budget does not apply.
"$GAMUT" judge-audit --out "$AUDIT" --judge "$JUDGE" --judge-backend vllm \
  --judge-option tensor_parallel_size="$TP" --judge-option gpu_memory_utilization=0.90 \
  --judge-option max_model_len=16384 --judge-batch-size 4096

# One engine at a time: the candidate's engine is released before the judge's starts, so each
# may take most of the GPU. 1,813 answers go in batches of 512; checks in batches of ~4,096
# (whole questions), one transaction each, so a crash loses at most one batch.
"$GAMUT" run --out "$OUT" --dataset "$DATASET" --variant "$VARIANT" \
  --model "$CANDIDATE" --backend vllm \
  --model-option tensor_parallel_size="$TP" --model-option gpu_memory_utilization=0.90 \
  --model-option max_pixels="$MAX_PIXELS" --model-option max_model_len=16384 \
  --judge "$JUDGE" --judge-backend vllm \
  --judge-option tensor_parallel_size="$TP" --judge-option gpu_memory_utilization=0.90 \
  --judge-option max_pixels="$MAX_PIXELS" --judge-option max_model_len=16384 \
  --batch-size 512 --judge-batch-size 4096 --max-tokens 2048 \
  ${EXTRA:-}

# The judge's audit, then per-stage throughput of this invocation, from audit.json and results.json.
"${PYTHON:-python3}" - "$OUT/results.json" "$AUDIT/audit.json" <<'EOF'
import json, sys
results = json.load(open(sys.argv[1]))
audit = json.load(open(sys.argv[2]))
flip = audit["injection"]["flip_rate"] if audit["injection"] else float("nan")
print(f"judge audit: kappa {audit['kappa']:.3f}, accuracy {100 * audit['accuracy']:.1f}%, injection flip rate "
      f"{100 * flip:.1f}%, Gamut error {audit['gamut_mae']:.1f} points ({audit['judged']} checks, "
      f"{audit['errors']} unreadable)")
stages = [dict(audit["stage"], stage="audit")] if audit.get("stage") else []
for stage in stages + results["stages"]:
    unit = "generations" if stage["stage"] == "generate" else "checks"
    s = stage["seconds"] or float("nan")
    cached = stage["cached_tokens"] / stage["prompt_tokens"] if stage["prompt_tokens"] else 0.0
    print(f"{stage['stage']:9} {stage['done_now'] / s:8.2f} {unit}/s  {stage['prompt_tokens'] / s:10.0f} prompt tok/s  "
          f"{stage['completion_tokens'] / s:8.0f} output tok/s  prefix-cache hit {100 * cached:5.1f}%  "
          f"({stage['done_now']} new, {stage['done_before']} reused, {s:.0f} s)")
score = results["score"]
print("Gamut", "none (errors: see above)" if score["gamut"] is None else f"{score['gamut']:.1f}",
      "| judge errors", results["judge_errors"], "| unfinished", results["unfinished_checks"])
EOF
