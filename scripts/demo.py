"""The core on the shipped examples: validate, compile and score each example meta-rubric,
then build the embedded sample dataset and print its rubric statistics.

    python scripts/demo.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "gamut_hf" / "examples"
GAMUT = [sys.executable, "-m", "gamut_hf"]


def gamut(*args: str) -> str:
    done = subprocess.run([*GAMUT, *map(str, args)], capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr.strip())
    return done.stdout


def main() -> None:
    rubrics = sorted((EXAMPLES / "rubrics").glob("*.json"))
    questions = json.loads((EXAMPLES / "questions.json").read_text())
    print(gamut("validate", "--release", *rubrics).strip())
    for rubric in rubrics:
        checks = json.loads(gamut("compile", rubric))
        result = json.loads(gamut("score", rubric, EXAMPLES / "verdicts" / rubric.name))
        qid = json.loads(rubric.read_text())["question_id"]
        tiers = ", ".join(f"{t} {'-' if s is None else f'{s:+.3f}'}" for t, s in result["tiers"].items())
        print(f"\n{questions[qid]}\n  {len(checks)} checks; score {result['score']:+.4f} ({tiers})")
        print("  verdicts: " + ", ".join(f"{k} {v}" for k, v in result["counts"].items()))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gamut-sample"
        print("\n" + gamut("build", EXAMPLES.parent / "data" / "gamut-sample", out).strip())
        print(gamut("stats", out))


if __name__ == "__main__":
    main()
