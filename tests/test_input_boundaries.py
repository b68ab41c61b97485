"""Bad input at every boundary: one line per problem naming file and line, exit 2, nothing written.

Each test reproduces a case of issue 12 (items 11-14) as a user meets it, through the
``gamut`` command (``cli.main``) or the upload parser the Space calls.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import DATA, EXAMPLES

from gamut_hf.authoring.evidence import read_snippets
from gamut_hf.cli import main
from gamut_hf.leaderboard.submission import SubmissionError, parse_responses

VALID = DATA / "annotations" / "valid_small"
INVALID = DATA / "annotations" / "invalid_many"
KNOWLEDGE = {"id": "i1", "tier": "answer_critical", "type": "knowledge", "label": "fact", "statement": "S."}


def gamut(capsys, *args) -> tuple[int, str, list[str]]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


def valid_rows() -> list[dict]:
    return [json.loads(line) for line in (VALID / "questions.jsonl").read_text().splitlines()]


def annotation_folder(folder: Path, rows: list[dict], *, ensure_ascii: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(VALID / "images", folder / "images", dirs_exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=ensure_ascii) + "\n" for row in rows)
    (folder / "questions.jsonl").write_text(text, encoding="utf-8")
    return folder


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (no pixel data needed to be refused)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


# -- item 11: sizes, devices, FIFOs, long integers, deep nesting, decompression bombs, links ------


def test_an_integer_of_5000_digits_names_file_and_line(tmp_path, capsys):
    rubric = tmp_path / "rubric.json"
    rubric.write_text('{"question_id": "q",\n "items": [%s]}' % ("9" * 5000))
    code, _, err = gamut(capsys, "validate", rubric)
    assert code == 2
    assert err == [f"{rubric}: integer too long at line 2 column 12 (the limit is 4,300 digits)"]


def test_build_reports_every_problem_past_a_long_integer_and_writes_nothing(tmp_path, capsys):
    rows = valid_rows()
    lines = [json.dumps(rows[0]), '{"id": %s}' % ("1" * 5000), json.dumps({**rows[2], "domain": "Astrology"})]
    source = tmp_path / "src"
    annotation_folder(source, [])
    (source / "questions.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    code, _, err = gamut(capsys, "build", source, out)
    assert code == 2
    assert err == [
        f"{source}/questions.jsonl:2: integer too long at column 8 (the limit is 4,300 digits)",
        f"{source}/questions.jsonl:3: question {rows[2]['id']}, field domain: unknown domain 'Astrology'",
        "gamut build: 2 problem(s); nothing written",
    ]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["src"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"question_id": "q1", "response": %s}' % ("[" * 5000 + "]" * 5000), "JSON nested too deeply"),
        ('{"question_id": "q1", "response": %s}' % ("[" * 100 + "]" * 100), "JSON nested too deeply"),
        ('{"question_id": "q1", "response": %s}' % ("7" * 5000), "integer too long at column 35"),
    ],
)
def test_uploads_with_deep_nesting_or_long_integers_get_their_line(line, reason):
    data = (json.dumps({"question_id": "q2", "response": "fine"}) + "\n" + line + "\n").encode()
    with pytest.raises(SubmissionError) as caught:
        parse_responses(data, ["q1", "q2"])
    assert len(caught.value.problems) == 1 and caught.value.problems[0].startswith(f"line 2: {reason}")


def test_an_image_claiming_30000_by_30000_pixels_is_a_problem_not_an_internal_error(tmp_path, capsys):
    rows = valid_rows()[:1]
    rows[0]["image"] = "images/bomb.png"
    source = annotation_folder(tmp_path / "src", rows)
    (source / "images" / "bomb.png").write_bytes(png_header(30000, 30000))
    out = tmp_path / "out"
    code, _, err = gamut(capsys, "build", source, out)
    assert code == 2
    assert err[0].startswith(
        f"{source}/questions.jsonl:1: question {rows[0]['id']}, field image: "
        "image 'images/bomb.png' is too large to decode (Image size (900000000 pixels) exceeds"
    )
    assert err[1:] == ["gamut build: 1 problem(s); nothing written"] and not out.exists()
    code, _, err = gamut(capsys, "validate", source / "questions.jsonl")
    assert code == 2 and "is too large to decode" in err[0] and len(err) == 1


def test_the_folder_image_resolver_refuses_a_bomb_with_one_line(tmp_path):
    from gamut_hf.dataset.loader import FolderImageResolver
    from gamut_hf.files import InputError

    (tmp_path / "q1.png").write_bytes(png_header(30000, 30000))
    with pytest.raises(InputError, match=r"q1.png: is too large to decode"):
        FolderImageResolver(tmp_path)({"id": "q1"})


@pytest.mark.parametrize("command", ["validate", "compile"])
def test_dev_zero_is_refused_not_read(command, capsys):
    code, _, err = gamut(capsys, command, "/dev/zero")
    prefix = "gamut: " if command == "compile" else ""  # validate lists problems; compile stops at one
    assert code == 2
    assert err == [f"{prefix}/dev/zero: is not a regular file (a device, FIFO or socket cannot be read as input)"]


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "rubric.json"
    os.mkfifo(fifo)
    for command in ("validate", "compile"):
        done = subprocess.run(
            [sys.executable, "-m", "gamut_hf", command, str(fifo)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2
        assert f"{fifo}: is not a regular file" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_fifo_in_place_of_a_run_folders_table_is_refused_without_hanging(tmp_path, scripted_endpoint):
    """Issue 23.6: `gamut report` read details.parquet without the input rules: a FIFO there hung it."""
    from conftest import error_lines, run_gamut
    from scripted_api import api_run

    run = api_run(run_gamut, tmp_path / "run", scripted_endpoint.url, "m", "j", "text_only", limit=1)
    details = run / "details.parquet"
    details.unlink()
    os.mkfifo(details)
    done = run_gamut("report", run, "--out", tmp_path / "report", timeout=60)
    assert done.code == 2
    assert error_lines(done.err) == [
        f"gamut: {details}: is not a regular file (a device, FIFO or socket cannot be read as input)"
    ]


def test_a_file_over_the_cap_is_refused_before_reading(tmp_path, capsys):
    from gamut_hf.files import MAX_JSON_BYTES

    big = tmp_path / "verdicts.json"
    with big.open("wb") as handle:  # sparse: costs no disk, and is never read
        handle.truncate(MAX_JSON_BYTES + 1)
    code, _, err = gamut(capsys, "validate", big)
    assert code == 2 and err == [f"{big}: is 256 MiB; the limit is 256 MiB"]


def test_an_image_link_leaving_the_folder_is_refused(tmp_path, capsys):
    outside = tmp_path / "elsewhere.png"
    shutil.copy(VALID / "images" / "cat.png", outside)
    rows = valid_rows()[:1]
    rows[0]["image"] = "images/linked.png"
    source = annotation_folder(tmp_path / "src", rows)
    (source / "images" / "linked.png").symlink_to(outside)
    code, _, err = gamut(capsys, "build", source, tmp_path / "out")
    assert code == 2
    assert err[0] == (
        f"{source}/questions.jsonl:1: question {rows[0]['id']}, field image: "
        "image 'images/linked.png' is a link to a file outside the annotation folder"
    )
    assert not (tmp_path / "out").exists()
    # A link that stays inside the folder is fine.
    (source / "images" / "linked.png").unlink()
    (source / "images" / "linked.png").symlink_to(source / "images" / "cat.png")
    assert gamut(capsys, "validate", source)[0] == 0


# -- item 12: JSONL lines end at \n only ---------------------------------------------------------


def test_line_separators_inside_json_strings_are_valid_jsonl(tmp_path, capsys):
    rows = valid_rows()
    rows[0]["question"] = "What is\u2028this\u2029cat\u0085doing?"  # what `gamut author export` writes raw
    source = annotation_folder(tmp_path / "src", rows, ensure_ascii=False)
    assert "\u2028" in (source / "questions.jsonl").read_text(encoding="utf-8")
    code, out, err = gamut(capsys, "validate", source / "questions.jsonl")
    assert (code, err) == (0, []) and out.strip() == "3 meta-rubrics valid"

    upload = json.dumps({"question_id": "q1", "response": "a\u2028b\u0085c"}, ensure_ascii=False) + "\r\n"
    assert parse_responses(upload.encode(), ["q1"]) == {"q1": "a\u2028b\u0085c"}

    snippets = tmp_path / "snippets.jsonl"
    snippets.write_text(
        json.dumps({"url": "https://x.org", "text": "one\u2028two", "retrieved": "2024-05-01"}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    assert [s.text for s in read_snippets(snippets)] == ["one\u2028two"]


# -- item 13: a key given twice is refused, never last-wins --------------------------------------


def test_a_verdict_named_twice_is_refused(tmp_path, capsys):
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps({"question_id": "q", "items": [KNOWLEDGE]}))
    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text('{\n  "i1.fact": "meets",\n  "i1.fact": "contradicts"\n}\n')
    code, out, err = gamut(capsys, "score", rubric, verdicts)
    assert (code, out) == (2, "")
    assert err == [f"gamut: {verdicts}: duplicate key 'i1.fact' at line 3 column 3"]


def test_duplicate_keys_in_rubrics_rows_and_uploads(tmp_path, capsys):
    rubric = tmp_path / "rubric.json"
    rubric.write_text(f'{{"question_id": "q", "question_id": "r", "items": [{json.dumps(KNOWLEDGE)}]}}')
    code, _, err = gamut(capsys, "compile", rubric)
    assert code == 2 and err == [f"gamut: {rubric}: duplicate key 'question_id' at column 22"]

    source = annotation_folder(tmp_path / "src", [])
    lines = [json.dumps(row) for row in valid_rows()]
    lines[1] = lines[1].replace('"domain": "Animal"', '"domain": "Animal", "domain": "Food"')
    (source / "questions.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = gamut(capsys, "validate", source / "questions.jsonl")
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"{source}/questions.jsonl:2: duplicate key 'domain' at column ")

    with pytest.raises(SubmissionError) as caught:
        parse_responses(b'{"question_id": "q1", "response": "a", "response": "b"}\n', ["q1"])
    assert caught.value.problems == ["line 1: duplicate key 'response' at column 40"]


# -- item 14: validate and build agree; a BOM is accepted everywhere -----------------------------


def test_validate_reports_exactly_what_build_reports(tmp_path, capsys):
    code, _, built = gamut(capsys, "build", INVALID, tmp_path / "out")
    assert code == 2 and built[-1].startswith("gamut build:")
    code, _, validated = gamut(capsys, "validate", INVALID / "questions.jsonl")
    assert code == 2 and validated == built[:-1]
    assert gamut(capsys, "validate", INVALID)[2] == built[:-1]  # the folder itself, likewise


def test_validate_applies_builds_evidence_rule_and_accepts_what_build_accepts(tmp_path, capsys):
    code, out, _ = gamut(capsys, "validate", VALID / "questions.jsonl")
    assert code == 0 and out.strip() == "3 meta-rubrics valid"
    rows = valid_rows()
    rows[0]["meta_rubric"]["items"][0].pop("evidence")
    source = annotation_folder(tmp_path / "src", rows)
    code, _, err = gamut(capsys, "validate", source / "questions.jsonl")
    assert code == 2 and err == [
        f"{source}/questions.jsonl:1: question {rows[0]['id']}, item i1, field evidence: "
        "a released rubric needs at least one evidence snippet per item"
    ]


def test_an_empty_questions_file_is_an_error(tmp_path, capsys):
    path = tmp_path / "questions.jsonl"
    path.write_text("\n\n")
    code, _, err = gamut(capsys, "validate", path)
    assert code == 2 and err == [f"{path}: no questions"]
    path.unlink()
    code, _, err = gamut(capsys, "validate", tmp_path)
    assert code == 2 and err == [f"{tmp_path}: no questions.jsonl in this folder"]


def test_a_byte_order_mark_is_accepted_by_the_cli_and_the_upload(tmp_path, capsys):
    rubric = tmp_path / "rubric.json"
    rubric.write_bytes(b"\xef\xbb\xbf" + (EXAMPLES / sorted(p.name for p in EXAMPLES.glob("*.json"))[0]).read_bytes())
    assert gamut(capsys, "validate", rubric)[0] == 0
    upload = b"\xef\xbb\xbf" + json.dumps({"question_id": "q1", "response": "a"}).encode() + b"\n"
    assert parse_responses(upload, ["q1"]) == {"q1": "a"}


def test_a_field_name_with_a_line_break_is_quoted_on_its_one_line(tmp_path, capsys):
    # Found by tests/test_fuzz.py: an unknown key "\r" split the problem over two lines.
    rows = valid_rows()[:1]
    rows[0]["\r"] = None
    rows[0]["meta_rubric"]["items"][0]["id\u2028"] = 1
    source = annotation_folder(tmp_path / "src", rows)
    code, _, err = gamut(capsys, "validate", source / "questions.jsonl")
    assert code == 2
    assert err == [f"{source}/questions.jsonl:1: question {rows[0]['id']}, field '\\r': unknown field"]
    rows[0].pop("\r")
    annotation_folder(source, rows)
    code, _, err = gamut(capsys, "validate", source / "questions.jsonl")
    assert code == 2
    assert err == [
        f"{source}/questions.jsonl:1: question {rows[0]['id']}, item i1, field 'id\\u2028': "
        "is not a field of this item type"
    ]


def test_a_truncated_jpeg_is_refused_by_validate_and_build_naming_it(tmp_path, capsys):
    """PIL's verify() passed a JPEG cut short; every multimodal run then ended in an internal
    error naming no image (issue 23, item 12). Validation decodes each image once."""
    import io

    from PIL import Image

    rows = valid_rows()[:1]
    rows[0]["image"] = "images/cut.jpg"
    source = annotation_folder(tmp_path / "src", rows)
    encoded = io.BytesIO()
    Image.effect_noise((256, 256), 64).convert("RGB").save(encoded, "JPEG")
    (source / "images" / "cut.jpg").write_bytes(encoded.getvalue()[: len(encoded.getvalue()) // 2])
    out = tmp_path / "out"
    code, _, err = gamut(capsys, "build", source, out)
    assert code == 2 and not out.exists()
    assert err[0].startswith(
        f"{source}/questions.jsonl:1: question {rows[0]['id']}, field image: image 'images/cut.jpg' is not a readable image"
    )
    code, _, err = gamut(capsys, "validate", source / "questions.jsonl")
    assert code == 2 and "'images/cut.jpg' is not a readable image" in err[0] and len(err) == 1
