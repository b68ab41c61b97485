"""Issue 24.10: the README in the order a user needs it, and nothing in it pointing outside the repository."""

from __future__ import annotations

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_user_sections_come_first_in_the_order_a_user_needs_them():
    headings = re.findall(r"(?m)^(#{1,2} .+)$", README)
    wanted = [
        "## Two commands for a fresh machine (Python 3.11)",
        "## The paper",
        "## Install",
        "## Load the dataset",
        "## Run a model on a GPU with a local judge",
        "## Submit to the leaderboard",
        "## Browse",
        "# Reference",
        "# Architecture",
    ]
    assert [h for h in headings if h in wanted] == wanted
    assert headings.index("# Architecture") > headings.index("## Command line") > headings.index("# Reference")
    opening = README.split("## Two commands", 1)[0]
    assert "[-1, 1]" in opening and "100 times the mean" in opening
    two = README.split("## Two commands for a fresh machine (Python 3.11)\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"(?m)^make \w+", two) == ["make demo", "make test"]


def test_every_link_of_the_readme_is_inside_the_repository_and_exists():
    assert "shared/" not in README and "SPEC.md" not in README
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target
    assert (
        "--judge-backend vllm" in README.split("## Run a model on a GPU with a local judge", 1)[1].split("\n## ", 1)[0]
    )
