"""A small dataset in the official release's layout (facebook/GAMUT as published) and a CRAG-MM-shaped
table for its photos, both written straight with pyarrow: nothing here goes through gamut-hf's builder,
so the readers are tested on files the project did not write.

The release (as far as public code that loads it shows): one configuration, ``data/test-*.parquet``
(multimodal, photos not embedded) and ``data/test_text_only-*.parquet``; a row has ``session_id``,
``question`` and ``rubrics``, a struct of per-tier lists of elements ``{Handle, Ingredient, Specifics}``
plus ``Snippets`` ``{id, Title, Text}``. Both spellings of the first tier are used, one handle repeats,
one citation names no snippet, one element is a process's relative-order check.

CRAG-MM: ``session_id``, ``image`` (a struct of bytes and path, or null) and ``image_url``, with
integer-coded categorical columns. The third question's photo is there only as a URL; the fourth has none.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SAMPLE_IMAGES = Path(__file__).resolve().parents[1] / "gamut_hf" / "data" / "gamut-sample" / "images"


def _element(handle: str, ingredient: str, *citations: str) -> dict:
    return {"Handle": handle, "Ingredient": ingredient, "Specifics": [{"Citation": c} for c in citations]}


# (session id, photo in the sample, multimodal question, text-only question, rubrics)
QUESTIONS = [
    (
        "sess-cat-01",
        "chelsea.png",
        "How should I look after this cat's teeth at home?",
        "How should I look after a domestic tabby cat's teeth at home?",
        {
            "Answer_Critical": [
                _element("Daily brushing", "The response recommends brushing the cat's teeth daily.", "s1"),
                _element(
                    "Brushing order",
                    "Evaluate the relative order of the matching mandatory steps against this master list: "
                    "1. Let the cat lick pet toothpaste. 2. Touch the gums with a finger. 3. Brush with a soft brush. "
                    "Missing steps or extra unlisted steps do not fail this element.",
                    "s1",
                    "s2",
                ),
            ],
            "Valuable": [
                _element("Cat toothpaste", "The response says to use toothpaste made for cats, not for people.", "s2"),
                _element("Warning signs", "The response lists bad breath or red gums as signs of dental disease."),
            ],
            "Context": [_element("Vet cleaning", "The response mentions professional cleaning by a vet.", "s9")],
            "Snippets": [
                {"id": "s1", "Title": "Cornell Feline Health Center", "Text": "Brush your cat's teeth daily."},
                {"id": "s2", "Title": "ASPCA", "Text": "Never use human toothpaste on cats."},
            ],
        },
    ),
    (
        "sess-coffee-02",
        "coffee.png",
        "How do I make a good cup from beans like these?",
        "How do I make a good cup of coffee from freshly roasted arabica beans?",
        {
            "Answer Critical": [
                _element("Grind fresh", "The response says to grind the beans just before brewing.", "c1"),
                _element("Ratio", "The response gives a ratio of about 1 g of coffee to 15-17 g of water.", "c1"),
            ],
            "Valuable": [
                _element("Water temperature", "The response says the water should be about 90-96 C.", "c2"),
                _element("Water temperature", "The response warns against boiling water scorching the grounds."),
            ],
            "Context": [_element("Storage", "The response says to store beans airtight, away from light.")],
            "Snippets": [
                {"id": "c1", "Title": "SCA brewing guide", "Text": "Grind immediately before brewing."},
                {"id": "c2", "Title": "National Coffee Association", "Text": "Water between 195 and 205 F."},
            ],
        },
    ),
    (
        "sess-astronaut-03",
        "astronaut.png",
        "What training did this person need for the job?",
        "What training did a NASA astronaut of the 1990s need for the job?",
        {
            "Answer_Critical": [_element("Flight training", "The response mentions jet flight training.", "a1")],
            "Valuable": [_element("Survival training", "The response mentions water and land survival training.")],
            "Snippets": [{"id": "a1", "Title": "NASA", "Text": "Candidates complete T-38 flight training."}],
        },
    ),
    (
        "sess-rocket-04",
        None,
        "How does this rocket reach orbit?",
        "How does a Saturn V rocket reach orbit?",
        {
            "Answer_Critical": [_element("Stages", "The response says the rocket drops stages as they burn out.")],
            "Snippets": [],
        },
    ),
]

# The card the hub shows for the release: one configuration with a split per variant.
RELEASE_CARD = """---
license: cc-by-nc-4.0
configs:
- config_name: default
  data_files:
  - split: test
    path: data/test-*.parquet
  - split: test_text_only
    path: data/test_text_only-*.parquet
---
# GAMUT (release layout, test fixture)
"""


def release_table(variant: str, questions=QUESTIONS) -> pa.Table:
    """One split of the release, as pyarrow infers it from plain Python objects (rubrics a struct
    whose fields are every row's keys, null where a row has none)."""
    column = 2 if variant == "multimodal" else 3
    return pa.table(
        {
            "session_id": [q[0] for q in questions],
            "question": [q[column] for q in questions],
            "rubrics": pa.array([q[4] for q in questions]),
        }
    )


def write_release(folder: Path, *, card: bool = True, questions=QUESTIONS) -> Path:
    """A hub-style folder in the release's layout: data/test-*.parquet, data/test_text_only-*.parquet."""
    (folder / "data").mkdir(parents=True)
    pq.write_table(release_table("multimodal", questions), folder / "data" / "test-00000-of-00001.parquet")
    pq.write_table(release_table("text_only", questions), folder / "data" / "test_text_only-00000-of-00001.parquet")
    if card:
        (folder / "README.md").write_text(RELEASE_CARD, encoding="utf-8")
    return folder


def write_crag_mm(path: Path, url_of: dict[str, str] | None = None) -> Path:
    """A CRAG-MM-shaped parquet file: the fixture's photos embedded as image structs, the third
    question's only as ``image_url`` (``url_of`` gives it; a placeholder otherwise), the fourth absent."""
    url_of = url_of or {}
    sessions, images, urls = [], [], []
    for session, photo, *_ in QUESTIONS[:3]:
        sessions.append(session)
        if session == "sess-astronaut-03":
            images.append(None)
            urls.append(url_of.get(session, "https://example.invalid/astronaut.png"))
        else:
            images.append({"bytes": (SAMPLE_IMAGES / photo).read_bytes(), "path": photo})
            urls.append(None)
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "session_id": sessions,
            "image": pa.array(images, type=image_type),
            "image_url": pa.array(urls, type=pa.string()),
            # Integer-coded class labels, as the real set has them.
            "domain": pa.array([3, 7, 1], type=pa.int64()),
            "query_category": pa.array([0, 2, 1], type=pa.int64()),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path
