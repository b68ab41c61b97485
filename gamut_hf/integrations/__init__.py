"""GAMUT inside other evaluation harnesses: the outermost layer, beside the CLI.

- :mod:`gamut_hf.integrations.inspect_task`: the inspect_ai task ``gamut_hf/gamut``, its solver,
  scorer and metrics (registered through the ``inspect_ai`` entry point; imports inspect_ai);
- :mod:`gamut_hf.integrations.inspect_log`: an inspect log -> a run folder (`gamut import-inspect`).

Nothing here is imported by ``import gamut_hf``: inspect_ai is the optional extra ``inspect``.
"""
