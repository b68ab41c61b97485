"""Shared by the Space tests: result folders of the sample, a local launch, and the browser rule."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
HOSTILE = "<img src=x onerror=alert(1)>"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(config):
    """The Space app on 127.0.0.1 in this process; returns (app, url)."""
    from gamut_hf.leaderboard.space import build_app, launch_options

    app = build_app(config)
    app.launch(
        server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True, **launch_options()
    )
    return app, app.local_url


def sample_ids() -> list[str]:
    from gamut_hf.dataset.loader import iter_questions, load_gamut

    return [q.id for q in iter_questions(load_gamut("gamut-sample", "text_only"), "text_only")]


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def require_chromium():
    """Playwright with Debian's chromium; skip where absent, fail under GAMUT_REQUIRE_BROWSER=1 (CI)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        reason = f"playwright is not importable ({error})"
    else:
        if shutil.which(CHROMIUM) or Path(CHROMIUM).is_file():
            return
        reason = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("GAMUT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}, and GAMUT_REQUIRE_BROWSER=1 requires it", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
