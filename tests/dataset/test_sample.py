"""The embedded sample `gamut-sample`: real photos, careful rubrics, what the paper asks of a question."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from PIL import Image

from gamut_hf.dataset.annotations import KNOWN_DOMAINS, read_annotations
from gamut_hf.dataset.loader import SAMPLE_SOURCE

PAPER_DOMAINS = {
    "Plants & Gardening",
    "Local",
    "Vehicle",
    "Food",
    "Everyday Objects",
    "Animal",
    "Shopping",
    "Style & Fashion",
    "Sports & Games",
    "Book",
    "Math & Science",
    "Text Understanding",
}


@pytest.fixture(scope="module")
def sample():
    return read_annotations(SAMPLE_SOURCE)


def test_size_and_domains(sample):
    assert len(sample) >= 24
    domains = Counter(q.domain for q in sample)
    assert len(set(domains) & PAPER_DOMAINS) >= 8
    assert set(domains) <= set(KNOWN_DOMAINS)


def test_every_image_is_a_real_photo_with_origin_and_licence(sample):
    for question in sample:
        with Image.open(question.image_path) as image:
            assert min(image.size) >= 170
        assert question.image_source and question.image_license
        assert any(word in question.image_license for word in ("CC0", "CC-BY", "Public domain", "No known copyright"))


def test_rubrics_cover_every_item_type_and_meta_insights(sample):
    types = Counter(item.type for q in sample for item in q.meta_rubric.items)
    assert set(types) == {"knowledge", "strict_list", "flexible_list", "process", "relationship"}
    assert sum(1 for q in sample for i in q.meta_rubric.items if getattr(i, "meta_insight", None)) >= 5
    assert all(item.evidence for q in sample for item in q.meta_rubric.items)
    urls = [e.url for q in sample for item in q.meta_rubric.items for e in item.evidence]
    assert all(url.startswith(("https://", "http://")) for url in urls)


def test_questions_name_the_entity_only_generically(sample):
    for question in sample:
        assert question.question != question.text_question
        assert question.entity.lower() not in question.question.lower()
        assert (
            "this" in question.question.lower()
            or "these" in question.question.lower()
            or "like" in question.question.lower()
        )


def test_sample_file_is_one_object_per_line():
    lines = (SAMPLE_SOURCE / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids))


def test_sample_card_shows_its_statistics(tmp_path, sample):
    from gamut_hf.dataset.build import build_dataset
    from gamut_hf.dataset.stats import RubricRecord, rubric_stats, stats_markdown

    build_dataset(SAMPLE_SOURCE, tmp_path / "built")
    table = stats_markdown(rubric_stats(RubricRecord(q.domain, q.meta_rubric, q.checks) for q in sample))
    assert table in (tmp_path / "built" / "README.md").read_text()
