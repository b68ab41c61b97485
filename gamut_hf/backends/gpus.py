"""What the machine's NVIDIA GPUs are: the driver version and each GPU's name and memory.

Read from ``nvidia-smi`` where it is on PATH (it ships with every driver), else through NVML
(``pynvml``, from the ``nvidia-ml-py`` package vLLM's GPU build installs). Both talk to the
driver itself, not to torch or vLLM, so the reading holds where those two disagree about the
machine or fail to start. This is the one place ``gamut doctor`` learns about GPUs: a test
hands it an old driver or a small GPU by putting its own ``nvidia-smi`` first on PATH.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

MIB = 1024**2
QUERY = "--query-gpu=driver_version,name,memory.total,memory.free"


@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class GPUReading:
    """The driver and GPUs found; ``source`` is how (``nvidia-smi``, ``nvml``) or ``None`` when
    neither is here (a machine without an NVIDIA driver), and ``error`` why a present reader failed."""

    driver: str | None = None
    gpus: list[GPU] = field(default_factory=list)
    source: str | None = None
    error: str | None = None

    @property
    def driver_major(self) -> int | None:
        head = (self.driver or "").split(".")[0]
        return int(head) if head.isdigit() else None


def read_gpus(timeout: float = 20.0) -> GPUReading:
    """The machine's NVIDIA driver and GPUs (none found is an empty reading, not an error)."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        reading = _from_nvidia_smi(smi, timeout)
        if reading.error is None:
            return reading
        nvml = _from_nvml()
        return nvml if nvml.source is not None and nvml.error is None else reading
    return _from_nvml()


def _from_nvidia_smi(smi: str, timeout: float) -> GPUReading:
    try:
        done = subprocess.run(
            [smi, QUERY, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return GPUReading(source="nvidia-smi", error=f"nvidia-smi did not answer ({error})")
    if done.returncode != 0:
        # "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" and the like.
        said = (done.stdout + done.stderr).strip().splitlines()
        return GPUReading(source="nvidia-smi", error=said[0] if said else f"nvidia-smi exited {done.returncode}")
    gpus, driver = [], None
    for index, line in enumerate(row for row in done.stdout.splitlines() if row.strip()):
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 4:
            return GPUReading(source="nvidia-smi", error=f"nvidia-smi printed {line!r}, not 4 fields")
        driver, name, total, free = parts
        try:
            gpus.append(GPU(index, name, int(float(total) * MIB), int(float(free) * MIB)))
        except ValueError:
            return GPUReading(source="nvidia-smi", error=f"nvidia-smi printed {line!r}: memory is not a number")
    return GPUReading(driver=driver, gpus=gpus, source="nvidia-smi")


def _from_nvml() -> GPUReading:
    try:
        import pynvml
    except ImportError:
        return GPUReading()
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound and kin: no driver, so no GPU
        return GPUReading()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(GPU(index, name.decode() if isinstance(name, bytes) else name, memory.total, memory.free))
        return GPUReading(driver=driver.decode() if isinstance(driver, bytes) else driver, gpus=gpus, source="nvml")
    except Exception as error:  # noqa: BLE001 - said in the doctor's report, never raised
        return GPUReading(source="nvml", error=f"NVML: {error}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down a reader that already failed
            pass
