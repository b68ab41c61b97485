"""The package's layers: every module imports only from its own layer or the ones below it
(the order the subpackages' docstrings state). Checked on the source, imports inside functions
included, so a lazy import cannot hide a wrong direction."""

from __future__ import annotations

import ast
from pathlib import Path

import gamut_hf

PACKAGE = Path(gamut_hf.__file__).resolve().parent

# Each layer may import itself and those listed; the foundation modules (errors, files, atomic,
# the lazy-export helper) may be imported by every layer and import only each other.
FOUNDATION = {"errors", "files", "atomic", "_exports"}
ALLOWED: dict[str, set[str]] = {
    "foundation": set(),
    "core": set(),
    "backends": {"core"},
    "dataset": {"core"},
    "evaluation": {"core", "backends", "dataset"},
    "reports": {"core", "backends", "dataset", "evaluation"},
    "leaderboard": {"core", "backends", "dataset", "evaluation", "reports"},
    "authoring": {"core", "backends", "dataset"},
    "cli": {"core", "backends", "dataset", "evaluation", "reports", "leaderboard", "authoring", "integrations"},
    # gamut_hf.integrations: GAMUT inside other harnesses (the inspect_ai task, its logs -> run folders).
    "integrations": {"core", "backends", "dataset", "evaluation", "reports"},
    # gamut_hf.api: the notebook functions over dataset rows and run folders.
    "api": {"core", "backends", "dataset", "evaluation"},
}
# The core imports nothing but pydantic (and the standard library) outside gamut_hf.
CORE_THIRD_PARTY = {"pydantic", "pydantic_core"}


def layer_of(module: str) -> str:
    """``gamut_hf.evaluation.store`` -> ``evaluation``; ``gamut_hf.errors`` -> ``foundation``."""
    parts = module.removesuffix(".__init__").split(".")
    if len(parts) == 1 or parts[1] in FOUNDATION:
        return "foundation"
    return "cli" if parts[1] == "__main__" else parts[1]


def imports(path: Path) -> list[tuple[int, str]]:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")[
                    : -node.level if path.name != "__init__.py" else len(module.split(".")) - node.level + 1
                ]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            if target == "gamut_hf":  # `from gamut_hf import atomic`
                found += [(node.lineno, f"gamut_hf.{alias.name}") for alias in node.names]
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_belongs_to_a_known_layer():
    for path in modules():
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        assert layer_of(module) in ALLOWED, module


def test_no_module_imports_from_a_layer_above_its_own():
    wrong = []
    for path in modules():
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        own = layer_of(module)
        for line, target in imports(path):
            if not target.startswith("gamut_hf.") or target == "gamut_hf":
                continue
            other = layer_of(target)
            if other == own or other == "foundation" and (own != "foundation" or target.split(".")[1] in FOUNDATION):
                continue
            if other not in ALLOWED[own]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {own} imports {target} ({other})")
    assert not wrong, "\n".join(wrong)


def test_the_core_imports_only_pydantic_and_the_standard_library():
    import sys

    outside = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        for line, target in imports(path):
            top = target.split(".")[0]
            if top in ("gamut_hf", "__future__") or top in sys.stdlib_module_names or top in CORE_THIRD_PARTY:
                continue
            outside.append(f"{path.name}:{line}: {target}")
    assert not outside, outside


def test_the_checker_sees_a_wrong_direction(tmp_path):
    """It can fail: a core module importing the evaluation engine is reported."""
    bad = tmp_path / "gamut_hf" / "core" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("def f():\n    from gamut_hf.evaluation.store import RunStore\n", encoding="utf-8")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "gamut_hf"
    try:
        try:
            test_no_module_imports_from_a_layer_above_its_own()
        except AssertionError as error:
            assert "core imports gamut_hf.evaluation.store (evaluation)" in str(error)
        else:
            raise AssertionError("the wrong import was not reported")
    finally:
        PACKAGE = saved
