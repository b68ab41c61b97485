#!/usr/bin/env bash
# The transformers backend on a real GPU, in one prepared call of under 8 minutes: for a session
# lent a GPU machine (the `device` tool; such a machine has torch and transformers but no vLLM, no
# weights and no network). Not part of CI.
#
#   scripts/device_check.sh            # on the GPU machine, from the repository root
#
# It runs `gamut doctor`; builds the tiny random-weight Qwen3-VL MoE (tests/tiny_models.py, from a
# config: nothing is downloaded); loads it as `gamut run` would with device=cuda, device_map=auto
# and bf16, printing where its weights went; then runs `gamut run --variant multimodal --limit 4`
# with it as candidate and judge on the transformers backend, and prints each stage's throughput.
# Each step has its own time limit and the script goes on after a failed one, so one call shows
# everything. Record what it printed in BENCHMARKS.md with the card's name.
# Environment: PYTHON (default python3), OUT (default a new temporary folder), BACKEND_OPTIONS
# (default "device=cuda device_map=auto dtype=bfloat16"; "device=cpu" rehearses the script here).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d)}
# The checkout, not an installed copy; the hub is never asked for anything.
export PYTHONPATH="$PWD:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
read -r -a OPTIONS <<< "${BACKEND_OPTIONS:-device=cuda device_map=auto dtype=bfloat16}"
failed=0

step() {  # step NAME SECONDS COMMAND...: run it under a limit, say how it ended
    local name=$1 seconds=$2
    shift 2
    echo "== $name"
    local started=$SECONDS
    timeout "$seconds" "$@"
    local code=$?
    echo "== $name: exit $code in $((SECONDS - started)) s"
    [ "$code" -eq 0 ] || failed=1
    return "$code"
}

step "machine" 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 || echo "no nvidia-smi"'
step "gamut doctor" 60 "$PYTHON" -m gamut_hf doctor
MODEL="$OUT/tiny-qwen3-vl-moe"
step "build the tiny Qwen3-VL MoE" 120 "$PYTHON" -c "
import shutil, sys
from tiny_models import tiny_model
shutil.copytree(tiny_model('qwen3_vl_moe'), sys.argv[1])
print(sys.argv[1])" "$MODEL"
step "placement" 90 "$PYTHON" -c "
import sys, torch
from gamut_hf.backends import load_backend
options = dict(item.split('=', 1) for item in sys.argv[2:])
with load_backend('transformers', sys.argv[1], **options) as backend:
    print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')
    print('inputs on', backend.device, '| dtype', backend.net.dtype, '| device map', getattr(backend.net, 'hf_device_map', None))
    print('weights on the GPU:', torch.cuda.memory_allocated() / 2**20 if torch.cuda.is_available() else 0, 'MiB')" \
    "$MODEL" "${OPTIONS[@]}"

run_options=()
for option in "${OPTIONS[@]}"; do run_options+=(--model-option "$option" --judge-option "$option"); done
LOG="$OUT/run.log"
step "gamut run (multimodal, 4 questions, transformers: ${OPTIONS[*]})" 300 bash -c 'set -o pipefail; "$@" 2>&1 | tee "$0"' "$LOG" \
    "$PYTHON" -m gamut_hf run --out "$OUT/run" --dataset gamut-sample --variant multimodal --limit 4 \
    --model "$MODEL" --backend transformers --judge "$MODEL" --judge-backend transformers "${run_options[@]}"
echo "== per-stage throughput"
grep -E "^(generate|judge): [0-9]+ " "$LOG" || echo "(no stage summary: see the run's output above)"
echo "== GPU after the run"
nvidia-smi --query-gpu=name,memory.used --format=csv 2>&1 || true
echo "== device check $([ "$failed" -eq 0 ] && echo passed || echo "FAILED: a step above did not exit 0"); folder $OUT"
exit "$failed"
