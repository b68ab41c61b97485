"""Benchmark the dataset path at full size: build, load and a full pass, each in its own process.

    python scripts/bench_dataset.py [--workdir /tmp/gamut-bench] [--questions 1813]

Each stage runs as a child process so its wall time and peak resident memory (ru_maxrss from
wait4) are its own. Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

LOAD = """
import sys, datasets
for config in ("multimodal", "text_only"):
    ds = datasets.load_dataset(sys.argv[1], config, split="test")
    print(config, len(ds))
"""

FULL_PASS = """
import sys
from gamut_hf.dataset.loader import iter_questions, load_gamut
ds = load_gamut(sys.argv[1], "multimodal")
rows = checks = pixels = 0
for q in iter_questions(ds, "multimodal"):
    q.image.load()
    rows += 1; checks += len(q.checks); pixels += q.image.width * q.image.height
print(rows, "rows", checks, "checks", pixels, "pixels decoded")
"""


def measure(name: str, argv: list[str], env: dict[str, str]) -> tuple[str, float, float]:
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{name} failed")
    return name, seconds, usage.ru_maxrss / 1024  # KiB -> MiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/gamut-bench")
    parser.add_argument("--questions", type=int, default=1813)
    args = parser.parse_args()
    work = Path(args.workdir)
    annotations, built, cache = work / "annotations", work / "built", work / "hf-cache"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(cache), "GAMUT_CACHE": str(work / "gamut")}
    shutil.rmtree(cache, ignore_errors=True)
    gamut = [sys.executable, "-m", "gamut_hf"]
    rows = []
    if not (annotations / "questions.jsonl").is_file():
        rows.append(
            measure(
                "generate synthetic", [*gamut, "synthetic", str(annotations), "--questions", str(args.questions)], env
            )
        )
    rows.append(measure("gamut build", [*gamut, "build", str(annotations), str(built), "--overwrite"], env))
    rows.append(measure("load_dataset, both configs (first load)", [sys.executable, "-c", LOAD, str(built)], env))
    rows.append(
        measure("full pass, multimodal (decode every image)", [sys.executable, "-c", FULL_PASS, str(built)], env)
    )
    size = sum(p.stat().st_size for p in built.rglob("*.parquet")) / 2**20
    print(
        f"\n{args.questions} questions; parquet {size:.0f} MiB; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores\n"
    )
    print("| stage | wall s | peak RSS MiB |\n|---|---|---|")
    for name, seconds, peak in rows:
        print(f"| {name} | {seconds:.1f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
