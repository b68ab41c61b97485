from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = ROOT / "gamut_hf" / "examples" / "rubrics"


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


def run_gamut(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600) -> CliResult:
    """Run the real console entry point in a subprocess, as a user would."""
    done = subprocess.run(
        [sys.executable, "-m", "gamut_hf", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def error_lines(err: str) -> list[str]:
    """What a command said on stderr, less its progress bars (tqdm's lines, and the blank ones a
    closed bar leaves): a refusal is then one line."""
    return [line for line in err.splitlines() if line.strip() and "%|" not in line]


def assert_verdict_probabilities(folder: Path) -> None:
    """Every check of the run in ``folder`` has its four verdict probabilities in details.parquet,
    summing to about 1 (the judge could answer nothing else), the stored verdict the most probable."""
    import pyarrow.parquet as pq

    rows = pq.read_table(folder / "details.parquet").to_pylist()
    assert rows and all(row["verdict_probabilities"] is not None for row in rows)
    sums = [sum(row["verdict_probabilities"].values()) for row in rows]
    assert min(sums) > 0.95 and max(sums) < 1.0 + 1e-6, sums
    chosen = [max(row["verdict_probabilities"].items(), key=lambda item: item[1])[0] for row in rows]
    assert chosen == [row["verdict"] for row in rows]


@pytest.fixture
def gamut():
    return run_gamut


def write_json(path: Path, value) -> Path:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def scripted_endpoint():
    """The scripted candidates and judges of scripted_api.py behind a fake OpenAI-compatible endpoint."""
    from fake_endpoint import FakeEndpoint
    from scripted_api import scripted

    server = FakeEndpoint(responder=scripted)
    yield server
    server.stop()
