"""The authoring pipeline: propose -> draft -> refine -> review -> export -> `gamut build`, on CPU.

The authoring model is a scripted API model behind the fake OpenAI-compatible endpoint (hosted
APIs are the boundary we fake): it proposes, screens, drafts and audits deterministically, and
plants errors on cue. Real small models run the same stages where they can on two cores:
SmolLM2 drafts (and fails the repair loop) and audits; the tiny LLaVA proposes.
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest
from fake_endpoint import FakeEndpoint, user_text

from gamut_hf.authoring.evidence import Snippet
from gamut_hf.authoring.pipeline import (
    AUDIT_SYSTEM,
    DRAFT_SYSTEM,
    PROPOSE_SYSTEM,
    SCREEN_SYSTEM,
)
from gamut_hf.authoring.store import AuthoredQuestion, AuthoringStore

SAMPLE_IMAGES = Path(__file__).resolve().parents[2] / "gamut_hf" / "data" / "gamut-sample" / "images"
WORDS = re.compile(r"[a-z]{4,}")

SNIPPETS = [
    (
        "https://example.org/espresso",
        "Espresso grind",
        "Espresso needs a fine, uniform grind from a burr grinder; "
        "blade grinders give uneven particles and sour shots.",
    ),
    (
        "https://example.org/beans",
        "Storing beans",
        "Keep roasted coffee beans in an airtight opaque container away "
        "from heat, light and moisture; buy small amounts every two weeks.",
    ),
    (
        "https://example.org/rest",
        "Resting beans",
        "Freshly roasted beans release carbon dioxide; espresso is best "
        "brewed after the beans rest one to two weeks after roasting.",
    ),
    (
        "https://example.org/cat-teeth",
        "Cat dental care",
        "Brush a cat's teeth daily with a pet toothpaste; human toothpaste contains fluoride that is toxic to cats.",
    ),
    (
        "https://example.org/cat-disease",
        "Feline dental disease",
        "Older cats often develop periodontal disease and "
        "tooth resorption; yearly veterinary dental checks catch them early.",
    ),
    (
        "https://example.org/rocket-fuel",
        "Rocket propellants",
        "Liquid rocket engines burn a fuel with an oxidiser "
        "such as liquid oxygen; the propellant choice sets the specific impulse.",
    ),
]


def write_snippets(path: Path) -> Path:
    lines = [Snippet(url=u, title=t, text=x, retrieved=date(2026, 11, 30)).model_dump_json() for u, t, x in SNIPPETS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _words(text: str) -> set[str]:
    return set(WORDS.findall(text.lower()))


def _draft_for(text: str, attempt: int) -> dict:
    """A rubric citing the first snippets offered; planted errors by cue words in the question."""
    ids = re.findall(r"\[(s-[0-9a-f]{10})\]", text)
    first, second = (ids + ids)[:2] if ids else ("s-0000000000", "s-0000000000")
    items = [
        {
            "id": "i1",
            "tier": "answer_critical",
            "type": "knowledge",
            "label": "grind",
            "statement": "Espresso needs a fine uniform grind from a burr grinder.",
            "evidence": [first],
        },
        {
            "id": "i2",
            "tier": "valuable",
            "type": "flexible_list",
            "label": "storage enemies",
            "options": ["heat", "light", "moisture"],
            "threshold": 2,
            "evidence": [second],
        },
    ]
    if "PLANT-THRESHOLD" in text and "It failed validation" not in text:
        items[1]["threshold"] = 9  # above the pool of 3: caught, repaired in the next round
    if "PLANT-PROCESS" in text:  # a process with no required step, every round: the draft fails
        items.append(
            {
                "id": "i3",
                "tier": "valuable",
                "type": "process",
                "label": "brew",
                "steps": [{"text": "grind", "required": False}, {"text": "tamp", "required": False}],
                "evidence": [first],
            }
        )
    if "PLANT-UNSUPPORTED" in text:  # valid, but its cited snippet says nothing of it: caught by the audit
        items.append(
            {
                "id": "i3",
                "tier": "context",
                "type": "knowledge",
                "label": "moon",
                "statement": "The moon orbits the earth every twenty seven days.",
                "evidence": [first],
            }
        )
    return {"question_id": "ignored", "items": items}


def author_model(body: dict) -> str:
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    text = user_text(body)
    if system == PROPOSE_SYSTEM:
        return json.dumps(
            {
                "candidates": [
                    {
                        "question": "Isn't this obviously the best way to make coffee?",
                        "text_question": "Isn't espresso best?",
                        "entity": "espresso",
                        "domain": "Food",
                        "research_steps": [],
                    },
                    {
                        "question": "How do I brew espresso like this at home?",
                        "text_question": "How do I brew espresso at home?",
                        "entity": "espresso",
                        "domain": "Food",
                        "research_steps": ["grind"],
                    },
                    {
                        "question": "What grind and beans make a drink like this at home, and how should I store the beans?",
                        "text_question": "What grind and beans make espresso at home, and how should I store coffee beans?",
                        "entity": "espresso",
                        "domain": "Food",
                        "research_steps": ["grind", "beans", "storage"],
                    },
                    {
                        "question": "How should I store the beans for this drink?",
                        "text_question": "How should I store coffee beans for espresso?",
                        "entity": "espresso",
                        "domain": "Food",
                        "research_steps": ["storage"],
                    },
                    {
                        "question": "Where did my friend buy this drink, and what did they pay for it?",
                        "text_question": "Where did my friend buy this espresso?",
                        "entity": "espresso",
                        "domain": "Food",
                        "research_steps": [],
                    },
                ]
            }
        )
    if system == SCREEN_SYSTEM:
        leading = "obviously" in text
        return json.dumps(
            {
                "leading": leading,
                "open_ended": True,
                "needs_research": True,
                "stranger_test": "my " not in text,
                "research_intensity": 5 if "grind and beans" in text else 2,
                "reason": "scripted",
            }
        )
    if system == DRAFT_SYSTEM:
        return json.dumps(_draft_for(text, 0))
    if system == AUDIT_SYSTEM:
        claim, evidence = text.split("\n\nEvidence:\n", 1)
        shared = _words(claim) & _words(evidence)
        return json.dumps({"verdict": "supported" if len(shared) >= 3 else "unsupported"})
    return "?"


@pytest.fixture(scope="module")
def author_endpoint():
    server = FakeEndpoint(responder=author_model)
    yield server
    server.stop()


def api(url: str) -> list[str]:
    return ["--model", "author-model", "--backend", "openai", "--base-url", url]


def test_propose_draft_refine_review_export_build(gamut, author_endpoint, tmp_path):
    work, snippets = tmp_path / "work", write_snippets(tmp_path / "snippets.jsonl")
    images = [SAMPLE_IMAGES / name for name in sorted(p.name for p in SAMPLE_IMAGES.iterdir())[:2]]
    done = gamut("author", "propose", *images, "--out", work, *api(author_endpoint.url))
    assert done.code == 0, done.err
    assert done.out.startswith("10 candidates for 2 images: 2 chosen, 6 rejected")
    with AuthoringStore(work) as store:
        proposals = store.proposals()
        reasons = {p["question"]: p["reasons"] for p in proposals if p["image"] == images[0].name}
        assert any("leading" in r for r in reasons["Isn't this obviously the best way to make coffee?"])
        assert any("names the entity" in r for r in reasons["How do I brew espresso like this at home?"])
        assert any(
            "stranger test" in r for r in reasons["Where did my friend buy this drink, and what did they pay for it?"]
        )
        chosen = [p for p in proposals if p["status"] == "selected"]
        assert {p["question"] for p in chosen} == {
            "What grind and beans make a drink like this at home, and how should I store the beans?"
        }
        assert all("most research-intensive" in p["reasons"][0] for p in chosen)
        assert [p["status"] for p in proposals].count("kept") == 2  # the storage question: kept, not chosen
        ids = [q.id for q in store.questions()]
    assert len(ids) == 2

    done = gamut("author", "draft", work, "--snippets", snippets, *api(author_endpoint.url))
    assert done.code == 0, done.err
    done = gamut("author", "refine", work, "--snippets", snippets, *api(author_endpoint.url))
    assert done.code == 0, done.err
    assert (work / "rubrics" / f"{ids[0]}.audit.json").is_file()

    with AuthoringStore(work) as store:
        for qid in ids:
            store.edit(qid, "ana", "status", "accepted")
        first = store.question(ids[0])
        edited = [dict(c, text=c["text"] + " (checked by ana)") if c["id"] == "i1.fact" else c for c in compiled(first)]
        store.edit(ids[0], "ana", "binary_rubric", edited)
    done = gamut("author", "export", work, tmp_path / "annotations")
    assert done.code == 0 and "exported 2 accepted" in done.out
    done = gamut("build", tmp_path / "annotations", tmp_path / "built")
    assert done.code == 0, done.err
    import datasets

    built = datasets.load_dataset(str(tmp_path / "built"), "multimodal", split="test")
    assert len(built) == 2
    row = next(r for r in built if r["id"] == ids[0])
    texts = {c["id"]: c["text"] for c in row["binary_rubric"]}
    assert texts["i1.fact"].endswith("(checked by ana)")
    assert row["meta_rubric"][0]["evidence"][0]["url"].startswith("https://example.org/")


def compiled(question: AuthoredQuestion) -> list[dict]:
    from gamut_hf.authoring.review import compiled_checks

    return compiled_checks(question.meta_rubric, question.id)


def planted(store: AuthoringStore, qid: str, cue: str) -> None:
    store.put_question(
        AuthoredQuestion(
            id=qid,
            image="x.png",
            domain="Food",
            question=f"How should I make this drink? {cue}".strip(),
            text_question=f"How should I grind and store espresso coffee beans? {cue}".strip(),
            entity="espresso",
            meta_rubric=None,
            binary_rubric=None,
            stage="proposed",
            status="open",
            updated_at="",
        )
    )


def test_planted_errors_are_caught_at_the_right_stage(gamut, author_endpoint, tmp_path):
    work, snippets = tmp_path / "work", write_snippets(tmp_path / "snippets.jsonl")
    with AuthoringStore(work) as store:
        planted(store, "plant-threshold", "PLANT-THRESHOLD")
        planted(store, "plant-process", "PLANT-PROCESS")
        planted(store, "plant-unsupported", "PLANT-UNSUPPORTED")

    done = gamut("author", "draft", work, "--snippets", snippets, "--rounds", "3", *api(author_endpoint.url))
    assert done.code == 2
    with AuthoringStore(work) as store:
        # Threshold above the pool: caught by validation in round 1, sent back, repaired in round 2.
        rounds = store.rounds("plant-threshold")
        assert [len(errors) > 0 for _, _, errors in rounds] == [True, False]
        assert any("item i2" in e and "threshold" in e for e in rounds[0][2])
        assert store.question("plant-threshold").stage == "drafted"
        # A process without a required step: never repaired, so no draft after 3 rounds; the schema held.
        assert len(store.rounds("plant-process")) == 3
        assert store.question("plant-process").stage == "draft_failed"
    failing = [line for line in done.out.splitlines() if line.startswith("plant-process:")]
    assert failing and all("question plant-process, item i3, field steps" in line for line in failing)

    done = gamut("author", "refine", work, "--snippets", snippets, *api(author_endpoint.url))
    assert done.code == 0, done.err
    assert "plant-unsupported: item i3: removed: unsupported by its cited snippets and by a new search" in done.out
    audit = json.loads((work / "rubrics" / "plant-unsupported.audit.json").read_text())
    verdicts = {f["item_id"]: f["verdict"] for f in audit["items"]}
    assert verdicts["i3"] == "removed" and verdicts["i1"] == "supported"
    assert verdicts["i2"] in ("supported", "re-grounded")  # re-grounded: a better snippet was found for it
    with AuthoringStore(work) as store:
        assert [i["id"] for i in store.question("plant-unsupported").meta_rubric["items"]] == ["i1", "i2"]


def test_bad_authoring_inputs_are_one_line_errors(gamut, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"url": "https://x", "text": "t", "retrieved": "2026-11-30"}\n{"url": "", "text": "t"}\n')
    (tmp_path / "work").mkdir()
    done = gamut("author", "draft", tmp_path / "work", "--snippets", bad)
    assert done.code == 2 and done.err.count("\n") == 1 and f"{bad}:2:" in done.err
    done = gamut("author", "draft", tmp_path / "work")
    assert done.code == 2 and "--snippets FILE" in done.err
    done = gamut(
        "author", "propose", SAMPLE_IMAGES / sorted(p.name for p in SAMPLE_IMAGES.iterdir())[0], "--out", tmp_path / "w"
    )
    assert done.code == 2 and "needs a multimodal model" in done.err
    done = gamut("author", "export", tmp_path / "nowhere", tmp_path / "out")
    assert done.code == 2 and "no authoring workspace" in done.err


def test_a_real_small_model_drafts_through_the_repair_loop_and_audits(gamut, author_endpoint, tmp_path):
    """SmolLM2 on the CPU: its drafts (free text under transformers) fail validation, go back with the
    errors, and the question ends draft_failed with every round stored; its audit verdicts (scored
    choices) decide a scripted draft's items."""
    work, snippets = tmp_path / "work", write_snippets(tmp_path / "snippets.jsonl")
    with AuthoringStore(work) as store:
        planted(store, "real", "")
    done = gamut(
        "author",
        "draft",
        work,
        "--snippets",
        snippets,
        "--rounds",
        "2",
        "--model",
        "smollm2-135m",
        "--max-tokens",
        "120",
    )
    assert done.code in (0, 2), done.err
    with AuthoringStore(work) as store:
        rounds = store.rounds("real")
        assert 1 <= len(rounds) <= 2
        if done.code == 2:
            assert len(rounds) == 2 and rounds[0][2] and "question real" in rounds[1][2][0]
            assert "Your previous draft" not in rounds[0][1]
        store.put_question(AuthoredQuestion(**{**store.question("real").__dict__, "stage": "proposed"}))
    done = gamut("author", "draft", work, "--snippets", snippets, *api(author_endpoint.url))
    assert done.code == 0, done.err
    done = gamut("author", "refine", work, "--snippets", snippets, "--model", "smollm2-135m")
    assert done.code == 0, done.err
    audit = json.loads((work / "rubrics" / "real.audit.json").read_text())
    assert {f["item_id"] for f in audit["items"]} >= {"i1", "i2"}
    assert all(f["verdict"] in ("supported", "partially", "re-grounded", "removed", "flagged") for f in audit["items"])


def test_searxng_adapter_cites_stable_ids(tmp_path):
    """The web-search adapter against a local server speaking SearxNG's JSON API (the network is the boundary)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gamut_hf.authoring.evidence import (
        LocalSnippetStore,
        SearxngRetriever,
        snippet_id,
    )

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"results": [{"url": u, "title": t, "content": x} for u, t, x in SNIPPETS[:3]]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cache = LocalSnippetStore.open(tmp_path / "cache.jsonl")
        found = SearxngRetriever(f"http://127.0.0.1:{server.server_address[1]}", cache).search("espresso grind")
        assert [s.id for s in found] == [snippet_id(u, x) for u, _, x in SNIPPETS[:3]]
        again = LocalSnippetStore.open(tmp_path / "cache.jsonl")
        assert set(again.get([s.id for s in found])) == {s.id for s in found}
        assert again.search("burr grinder espresso")[0].url == "https://example.org/espresso"
    finally:
        server.shutdown()


def test_a_real_multimodal_model_proposes_and_its_unusable_answer_is_kept_with_the_reason(gamut, tmp_path):
    """The tiny random-weight LLaVA (real LLaVA code paths, random answers) through the transformers
    backend: its output is no candidate list, and the workspace records exactly that."""
    from tiny_models import build_tiny_llava

    model = build_tiny_llava(tmp_path / "tiny-llava")
    image = sorted(SAMPLE_IMAGES.iterdir())[0]
    done = gamut(
        "author", "propose", image, "--out", tmp_path / "work", "--model", str(model), "--backend", "transformers"
    )
    assert done.code == 0, done.err
    assert done.out.startswith("1 candidates for 1 images: 0 chosen, 1 rejected")
    with AuthoringStore(tmp_path / "work") as store:
        [row] = store.proposals()
        assert row["status"] == "rejected" and row["reasons"][0].startswith(
            "the model's answer is not a candidate list"
        )
        assert store.questions() == []
        assert (store.folder / "images" / image.name).is_file()
