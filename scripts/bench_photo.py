"""Judge seconds per question with a full-size smart-glasses photo (4032 x 3024 JPEG), the photo as
the judge stage used to pass it (full size, no content id) and as it passes it now (downscaled once
to the run's max_pixels, named by its content hash so vLLM hashes and processes it once).

    .venv/bin/python scripts/bench_photo.py [--questions 3] [--max-pixels 1048576] [--json out.json]

The judge is the tiny Qwen3-VL (tests/tiny_models.py) through vLLM and through transformers, each
started once; every multimodal sample question's checks are judged against a middling response,
one question per call, as the judge stage sends them. The photo is the first sample question's, scaled
to 4032 x 3024 and saved as a JPEG (quality 90), decoded afresh for each question as the dataset
decodes it. Random weights: the figure is the image path's cost (decode, hash, resize, process),
which does not depend on the model's size. Run it alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_judge import middling_response  # noqa: E402
from PIL import Image  # noqa: E402
from tiny_models import tiny_model  # noqa: E402

from gamut_hf.backends import load_backend  # noqa: E402
from gamut_hf.backends.images import fit_to_budget, image_id  # noqa: E402
from gamut_hf.dataset.loader import iter_questions, load_gamut  # noqa: E402
from gamut_hf.evaluation.judge import judge_constraint, judge_request  # noqa: E402

SIZE = (4032, 3024)


def glasses_jpeg(photo: Image.Image) -> bytes:
    photo = photo.convert("RGB").resize(SIZE, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    photo.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def seconds_per_question(backend, questions, jpeg: bytes, max_pixels: int, fitted: bool) -> float:
    sha = hashlib.sha256(jpeg).hexdigest()
    constraint = judge_constraint(rationale=False)
    started = time.perf_counter()
    for round_, q in enumerate(questions):
        image = Image.open(io.BytesIO(jpeg))
        shown = fit_to_budget(image, max_pixels) if fitted else image
        # Each round a new id: what is measured is one question's first sight of its photo.
        name = image_id(f"{sha}-{round_}-{fitted}", max_pixels) if fitted else None
        requests = [
            dataclasses.replace(
                judge_request(q.question, shown, middling_response(q), c, rationale=False),
                prefix_key=q.id,
                image_id=name,
            )
            for c in q.checks
        ]
        backend.complete(requests, constraint)
    return (time.perf_counter() - started) / len(questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--max-pixels", type=int, default=1_048_576)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    questions = list(iter_questions(load_gamut("gamut-sample", "multimodal"), "multimodal"))[: args.questions]
    checks = sum(len(q.checks) for q in questions)
    jpeg = glasses_jpeg(questions[0].image)
    print(
        f"{len(questions)} questions, {checks} checks, a {SIZE[0]}x{SIZE[1]} JPEG of {len(jpeg)} bytes; "
        f"max_pixels {args.max_pixels}; {platform.machine()}, {date.today()}",
        flush=True,
    )
    folder = str(tiny_model("qwen3_vl"))
    figures = {}
    for backend_name, options in (
        ("vllm", {"enforce_eager": True, "max_model_len": 8192}),
        ("transformers", {}),
    ):
        backend = load_backend(backend_name, folder, max_pixels=args.max_pixels, **options)
        try:
            seconds_per_question(backend, questions[:1], jpeg, args.max_pixels, fitted=True)  # warm up
            for fitted in (False, True):
                label = "downscaled once, named" if fitted else "full size, unnamed"
                figures[f"{backend_name}, {label}"] = round(
                    seconds_per_question(backend, questions, jpeg, args.max_pixels, fitted), 2
                )
                print(
                    f"{backend_name:12} {label:24} {figures[f'{backend_name}, {label}']:6.2f} s a question", flush=True
                )
        finally:
            backend.close()
    print("\n| judge backend | photo as the judge gets it | judge s a question |")
    print("|---|---|---|")
    for key, value in figures.items():
        backend_name, label = key.split(", ", 1)
        print(f"| {backend_name} | {label} | {value} |")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
