"""scripts/gpu_eval.sh, the one-GPU job, rehearsed end to end on the CPU with the judge's own
architecture: tiny random-weight Qwen3-VL as candidate and judge through vLLM's CPU build, on the
packaged sample (multimodal), with small limits and eager engines. Everything a first GPU run
does happens: `gamut doctor`, generation with images, the judge's audit and then judging in the
same engine, scoring, the printed summary (kappa, flip rate, per-stage throughput), then `gamut
report` with the audit beside the run. The documented presets for real judges are rehearsed
through DRY_RUN=1: every check, nothing loaded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tiny_models import tiny_model
from vllm_support import require_vllm

ROOT = Path(__file__).resolve().parents[1]


def gpu_eval(env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_eval.sh")],
        env={
            **os.environ,
            "GAMUT": str(Path(sys.executable).parent / "gamut"),
            "PYTHON": sys.executable,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_gpu_eval_sh_runs_audit_run_summary_and_report_with_tiny_qwen3_vl(tmp_path):
    require_vllm()
    model = str(tiny_model("qwen3_vl"))
    out = tmp_path / "runs" / "tiny-qwen3-vl"
    env = {
        "CANDIDATE": model,
        "JUDGE": model,
        "DATASET": "gamut-sample",
        "VARIANT": "multimodal",
        "OUT": str(out),
        "ALLOW_CPU": "1",
        "EAGER": "1",
        "LIMIT": "2",
        "AUDIT_LIMIT": "1",
        "MAX_TOKENS": "16",
        "MAX_MODEL_LEN": "8192",
    }
    done = gpu_eval(env)
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    stdout = done.stdout
    doctor = stdout[: stdout.index("gamut doctor: ready")]  # before anything loads
    assert "platform cpu" in doctor and "Initializing" not in doctor
    # Two engines: the candidate's, then one judge engine for the audit and the run.
    assert (stdout + done.stderr).count("Initializing a V1 LLM engine") == 2
    # Inside each engine call, vLLM's own bar counts finished requests, with a rate and tokens/s.
    assert "Processed prompts" in done.stderr and "toks/s" in done.stderr
    summary = stdout[stdout.rindex("judge audit: kappa") :]  # the script's own summary, after the commands' output
    assert "kappa" in summary and "injection flip rate" in summary
    for stage, unit in (("audit", "checks/s"), ("generate", "generations/s"), ("judge", "checks/s")):
        line = next((line for line in summary.splitlines() if re.match(rf"{stage} +[\d.]+ {unit}", line)), summary)
        assert "prefix-cache hit" in line, line
    assert "Gamut" in summary
    assert (out / "results.json").is_file() and (out / "details.parquet").is_file()
    # The audit sits beside the run under the same judge fingerprint, so the report shows it.
    audit = out.parent / f"judge-audit-{Path(model).name}-vllm"
    assert (audit / "audit.json").is_file()
    report = (Path(f"{out}-report") / "report.md").read_text(encoding="utf-8")
    audit_section = report[report.index("Judge audit") :]
    assert Path(model).name in audit_section and "kappa" in audit_section.lower()
    assert "warning" not in summary.lower(), summary


PRESETS = {
    "235B judge on 8 GPUs": {
        "JUDGE": "Qwen/Qwen3-VL-235B-A22B-Instruct",
        "TP": "8",
        "JUDGE_ENGINE_OPTIONS": "enable_expert_parallel=true mm_encoder_tp_mode=data",
    },
    "30B-A3B FP8 judge on one H100": {
        "JUDGE": "Qwen/Qwen3-VL-30B-A3B-Instruct-FP8",
        "ENGINE_OPTIONS": "max_num_seqs=256",
    },
}


def test_the_documented_presets_pass_every_check_in_a_dry_run(tmp_path):
    """What the script's header documents runs as written: the doctor passes it (on this CPU), every
    engine option is one of vLLM's, and `gamut run --dry-run` plans it; nothing is loaded or written."""
    require_vllm()
    for name, preset in PRESETS.items():
        out = tmp_path / name.replace(" ", "-") / "run"
        done = gpu_eval({**preset, "DATASET": "gamut-sample", "OUT": str(out), "ALLOW_CPU": "1", "DRY_RUN": "1"}, 600)
        assert done.returncode == 0, f"{name}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        would = next(line for line in done.stdout.splitlines() if line.startswith("gpu_eval.sh: would run:"))
        assert f"--judge {preset['JUDGE']} --judge-backend vllm" in would and "--audit --audit-out" in would
        for option in preset.get("JUDGE_ENGINE_OPTIONS", preset.get("ENGINE_OPTIONS", "")).split():
            assert f"--judge-option {option}" in would, (name, would)
        assert (
            "dry run (nothing loaded, nothing written)" in done.stdout and "then the judge's audit into" in done.stdout
        )
        assert "Initializing" not in done.stdout + done.stderr and not out.parent.exists()


def test_a_misspelt_engine_option_stops_the_script_before_anything_loads(tmp_path):
    require_vllm()
    out = tmp_path / "runs" / "q"
    done = gpu_eval(
        {"DATASET": "gamut-sample", "OUT": str(out), "ALLOW_CPU": "1", "ENGINE_OPTIONS": "max_num_seq=64"}, 600
    )
    assert done.returncode == 2
    assert "did you mean 'max_num_seqs'" in done.stderr and "Initializing" not in done.stdout + done.stderr
    assert not out.parent.exists()
