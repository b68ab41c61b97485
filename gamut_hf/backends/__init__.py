"""Model backends behind one interface (:class:`gamut_hf.backends.base.Backend`).

Backends are imported only when asked for, so the heavy stacks (vllm, torch, openai) load
only in the runs that use them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from gamut_hf.backends.base import Backend, BackendError
from gamut_hf.backends.options import check_options

BACKENDS: dict[str, str] = {
    "transformers": "gamut_hf.backends.transformers_backend:TransformersBackend",
    "vllm": "gamut_hf.backends.vllm_backend:VLLMBackend",
    "openai": "gamut_hf.backends.openai_backend:OpenAIBackend",
}


def load_backend(name: str, model: str, **options: Any) -> Backend:
    """Start backend ``name`` serving ``model``."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    check_options(name, options)
    module_name, class_name = BACKENDS[name].split(":")
    try:
        module = import_module(module_name)
    except ImportError as error:
        raise BackendError(f"backend {name!r} needs a package that is not installed ({error.name})") from None
    return getattr(module, class_name)(model, **options)
