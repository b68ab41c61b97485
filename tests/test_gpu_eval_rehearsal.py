"""scripts/gpu_eval.sh, the one-GPU job, rehearsed end to end on the CPU with the judge's own
architecture: tiny random-weight Qwen3-VL as candidate and judge through vLLM's CPU build, on the
packaged sample (multimodal), with small limits and eager engines. Everything a first GPU run
does happens: the judge's audit, generation with images, judging, scoring, the printed summary
(kappa, flip rate, per-stage throughput), then `gamut report` with the audit beside the run.
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


def test_gpu_eval_sh_runs_audit_run_summary_and_report_with_tiny_qwen3_vl(tmp_path):
    require_vllm()
    model = str(tiny_model("qwen3_vl"))
    out = tmp_path / "runs" / "tiny-qwen3-vl"
    env = {
        **os.environ,
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
        "GAMUT": str(Path(sys.executable).parent / "gamut"),
        "PYTHON": sys.executable,
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_eval.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    stdout = done.stdout
    assert "platform cpu" in stdout  # said before anything loads
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
