"""The core stays light: importing it pulls in none of the heavy stacks."""

import subprocess
import sys

CORE = [
    "gamut_hf",
    "gamut_hf.core.rubric",
    "gamut_hf.core.compiler",
    "gamut_hf.core.scorer",
    "gamut_hf.files",
    "gamut_hf.cli",
]
HEAVY = ["datasets", "torch", "gradio", "transformers", "vllm", "pyarrow", "PIL", "huggingface_hub", "inspect_ai"]


def test_core_modules_import_no_heavy_stack():
    code = f"import sys; import {', '.join(CORE)}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
