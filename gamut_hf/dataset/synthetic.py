"""A full-size synthetic GAMUT for scale work: the paper's rubric statistics, synthetic content.

``write_synthetic`` writes an annotation folder (SPEC section 5) whose statistics match
:class:`SyntheticParams` (by default the paper's: 1,813 questions in 10 domains, 15.2 checks
per question split 5.9 / 5.8 / 3.5 by tier, the item-type shares of paper_tables.md) with
960x1280 JPEG images. Item-type shares are exact by construction (each type is assigned to
a fixed number of questions); tiers are chosen greedily so the per-tier check counts track
their targets. The facts are placeholders: this data is for timing and memory, not for
grading models.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from gamut_hf import atomic
from gamut_hf.core.compiler import compile_rubric
from gamut_hf.core.rubric import TIERS, parse_meta_rubric


class SyntheticParams(BaseModel):
    questions: int = 1813
    domains: dict[str, int] = Field(
        default_factory=lambda: {
            "Plants & Gardening": 300,
            "Local": 290,
            "Vehicle": 258,
            "Food": 244,
            "Everyday Objects": 196,
            "Animal": 140,
            "Shopping": 120,
            "Style & Fashion": 100,
            "Sports & Games": 90,
            "Book": 75,
        }
    )
    checks_mean: float = 15.2
    checks_max: int = 41
    tier_checks: dict[str, float] = Field(
        default_factory=lambda: {"answer_critical": 5.9, "valuable": 5.8, "context": 3.5}
    )
    share_flexible_list: float = 0.86
    share_strict_list: float = 0.49
    share_process: float = 0.17
    share_relationship: float = 0.06
    share_structured: float = 0.98
    share_meta_insight: float = 0.13
    meta_insights: int = 295
    evidence_per_rubric: float = 10.5
    distinct_pages: int = 9400
    share_process_mixed: float = 0.57
    image_width: int = 960
    image_height: int = 1280
    seed: int = 0


def _scaled_domains(params: SyntheticParams) -> list[str]:
    """One domain per question, in proportion to params.domains, summing to params.questions."""
    total = sum(params.domains.values())
    names = list(params.domains)
    counts = {d: math.floor(params.domains[d] * params.questions / total) for d in names}
    for d in sorted(names, key=lambda d: -params.domains[d])[: params.questions - sum(counts.values())]:
        counts[d] += 1
    return [d for d in names for _ in range(counts[d])]


def _target_counts(params: SyntheticParams, rng: random.Random) -> list[int]:
    n = params.questions
    counts = [min(params.checks_max - 1, max(6, round(rng.gauss(params.checks_mean, 4.0)))) for _ in range(n)]
    want = round(params.checks_mean * n)
    # The paper's largest rubric, where the other questions can make up the mean around it (at
    # their smallest, 6 checks each); a set of a few questions cannot, and would never balance.
    if params.checks_max + 6 * (n - 1) <= want:
        counts[rng.randrange(n)] = params.checks_max
    while sum(counts) != want:  # nudge random questions until the mean is exact
        i = rng.randrange(n)
        if sum(counts) > want and 6 < counts[i] < params.checks_max:
            counts[i] -= 1
        elif sum(counts) < want and counts[i] < params.checks_max - 1:
            counts[i] += 1
    return counts


def _fit_totals(targets: list[int], floors: list[int], want: int, rng: random.Random) -> list[int]:
    """Per-question check totals: at least what the structured items give, summing to ``want``."""
    totals = [max(t, f, 1) for t, f in zip(targets, floors, strict=False)]
    adjustable = [i for i in range(len(totals)) if totals[i] > max(floors[i], 1)]
    while sum(totals) > want and adjustable:
        i = rng.choice(adjustable)
        totals[i] -= 1
        if totals[i] <= max(floors[i], 1):
            adjustable.remove(i)
    return totals


def _pick(rng: random.Random, population: list[int], k: int) -> set[int]:
    return set(rng.sample(population, min(k, len(population))))


def _type_assignment(params: SyntheticParams, rng: random.Random) -> list[set[str]]:
    """Which structured item types each question gets, with exact shares."""
    n = params.questions
    everyone = list(range(n))
    structured = _pick(rng, everyone, round(params.share_structured * n))
    pool = sorted(structured)
    flexible = _pick(rng, pool, round(params.share_flexible_list * n))
    # Structured questions without a flexible list need another type: give them a strict list.
    needs_other = [i for i in pool if i not in flexible]
    strict = set(needs_other) | _pick(rng, sorted(flexible), round(params.share_strict_list * n) - len(needs_other))
    process = _pick(rng, pool, round(params.share_process * n))
    relationship = _pick(rng, pool, round(params.share_relationship * n))
    return [
        {
            kind
            for kind, members in (
                ("flexible_list", flexible),
                ("strict_list", strict),
                ("process", process),
                ("relationship", relationship),
            )
            if i in members
        }
        for i in everyone
    ]


class _TierBalancer:
    """Chooses item tiers so the running check counts per tier track the target shares."""

    def __init__(self, targets: dict[str, float], rng: random.Random):
        total = sum(targets.values())
        self.shares = {t: targets[t] / total for t in TIERS}
        self.totals = {t: 0 for t in TIERS}
        self.rng = rng

    def choose(self, item: dict[str, Any]) -> str:
        order = self.rng.sample(list(TIERS), len(TIERS))
        best, best_cost = order[0], math.inf
        for tier in order:
            counts = self._counts({**item, "tier": tier})
            after = {t: self.totals[t] + counts[t] for t in TIERS}
            size = sum(after.values())
            cost = sum((after[t] - self.shares[t] * size) ** 2 for t in TIERS)
            if cost < best_cost:
                best, best_cost = tier, cost
        self.add(self._counts({**item, "tier": best}))
        return best

    def add(self, counts: dict[str, int]) -> None:
        for t in TIERS:
            self.totals[t] += counts[t]

    @staticmethod
    def _counts(item: dict[str, Any]) -> dict[str, int]:
        checks = compile_rubric(parse_meta_rubric({"question_id": "x", "items": [item]}))
        return {t: sum(c.tier == t for c in checks) for t in TIERS}


def _words(rng: random.Random, stem: str, k: int) -> list[str]:
    return [f"{stem} {n + 1} ({rng.choice(['alpha', 'beta', 'gamma', 'delta', 'omega'])})" for n in range(k)]


def _structured_item(kind: str, item_id: str, rng: random.Random, mixed: bool = False) -> dict[str, Any]:
    item: dict[str, Any] = {"id": item_id, "type": kind, "label": f"synthetic {kind.replace('_', ' ')} {item_id}"}
    if kind == "flexible_list":
        n = rng.randint(8, 12) if rng.random() < 0.12 else rng.choice([2, 3, 3, 4, 4, 4, 5, 5, 6])
        item.update(options=_words(rng, "option", n), threshold=max(1, min(n, rng.choice([1, 2, 2, 3]))))
    elif kind == "strict_list":
        n = rng.choices([2, 3, 4], weights=[0.6, 0.25, 0.15])[0]
        item["elements"] = _words(rng, "element", n)
    elif kind == "process":
        n = rng.choice([3, 4, 4, 5])
        required = [True] * n
        if mixed:
            for k in rng.sample(range(1, n), rng.randint(1, max(1, n // 2))):
                required[k] = False
            item["grade_full_order"] = rng.random() < 0.5
        item["steps"] = [{"text": f"step {k + 1} of the procedure", "required": r} for k, r in enumerate(required)]
    else:
        item.update(
            subject="the pictured entity",
            relation=rng.choice(["is related to", "differs from"]),
            object=f"reference entity {rng.randint(1, 500)}",
        )
    return item


def _check_count(item: dict[str, Any]) -> int:
    return len(compile_rubric(parse_meta_rubric({"question_id": "x", "items": [{**item, "tier": "context"}]})))


def synthetic_questions(params: SyntheticParams = SyntheticParams()) -> list[dict[str, Any]]:
    """The question objects (questions.jsonl lines) of a synthetic dataset, without images."""
    rng = random.Random(params.seed)
    domains = _scaled_domains(params)
    rng.shuffle(domains)
    targets = _target_counts(params, rng)
    types = _type_assignment(params, rng)
    insight_questions = _pick(
        rng,
        [i for i, t in enumerate(types) if t - {"relationship"}],
        round(params.share_meta_insight * params.questions),
    )
    extra_insights = params.meta_insights - len(insight_questions)
    balancer = _TierBalancer(params.tier_checks, rng)
    with_process = [i for i, t in enumerate(types) if "process" in t]
    mixed_processes = _pick(rng, with_process, round(params.share_process_mixed * len(with_process)))
    structured: list[list[dict[str, Any]]] = []
    for index in range(params.questions):
        items = [
            _structured_item(kind, f"i{k + 1}", rng, mixed=index in mixed_processes)
            for k, kind in enumerate(sorted(types[index]))
        ]
        if index in insight_questions:
            listish = [it for it in items if it["type"] != "relationship"]
            count = 2 if extra_insights > 0 and len(listish) > 1 else 1
            extra_insights -= count - 1
            for it in listish[:count]:
                it["meta_insight"] = "A synthetic synthesis across the members of this item."
        structured.append(items)
    fixed = [sum(_check_count(it) for it in items) for items in structured]
    totals = _fit_totals(targets, fixed, round(params.checks_mean * params.questions), rng)
    out = []
    for index, items in enumerate(structured):
        qid = f"syn-{index + 1:05d}"
        while len(items) < 1 or fixed[index] < totals[index]:
            items.append(
                {
                    "id": f"i{len(items) + 1}",
                    "type": "knowledge",
                    "label": f"fact {len(items) + 1}",
                    "statement": f"Synthetic fact number {len(items) + 1} about question {qid}.",
                }
            )
            fixed[index] += 1
        for it in items:
            it["tier"] = balancer.choose(it)
            it["evidence"] = []
        domain = domains[index]
        out.append(
            {
                "id": qid,
                "domain": domain,
                "question": f"What should I know about this {domain.lower()} subject, step by step?",
                "text_question": f"What should I know about synthetic entity {index + 1} ({domain}), step by step?",
                "entity": f"synthetic entity {index + 1}",
                "image": f"images/{qid}.jpg",
                "image_source": "synthetic (gamut_hf.dataset.synthetic)",
                "image_license": "CC0-1.0",
                "meta_rubric": {"question_id": qid, "items": items},
            }
        )
    _add_evidence(out, params, rng)
    return out


def _add_evidence(questions: list[dict[str, Any]], params: SyntheticParams, rng: random.Random) -> None:
    """One snippet per item, then extra ones until the mean per rubric is reached; pages are
    drawn so that exactly ``distinct_pages`` distinct URLs are cited (when there are enough snippets)."""
    per_question = [len(q["meta_rubric"]["items"]) for q in questions]
    extra = round(params.evidence_per_rubric * len(questions)) - sum(per_question)
    for _ in range(max(0, extra)):
        per_question[rng.randrange(len(questions))] += 1
    total = sum(per_question)
    pages = list(range(min(params.distinct_pages, total)))
    pages += [rng.randrange(len(pages)) for _ in range(total - len(pages))]
    rng.shuffle(pages)
    cursor = 0
    for question, count in zip(questions, per_question, strict=False):
        items = question["meta_rubric"]["items"]
        for k in range(count):
            page = pages[cursor]
            cursor += 1
            items[k % len(items)]["evidence"].append(
                {
                    "text": f"Synthetic evidence snippet {k + 1}.",
                    "url": f"https://example.org/synthetic/{page}",
                    "title": f"Synthetic page {page}",
                }
            )


def synthetic_image(seed: int, width: int, height: int):
    """A random picture (gradient, shapes, sensor noise) whose JPEG is about a photo's size (~160 KB)."""
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack(
        [
            (rng.uniform(40, 200) + rng.uniform(-60, 60) * x / width + rng.uniform(-60, 60) * y / height)
            for _ in range(3)
        ],
        axis=-1,
    )
    image = Image.fromarray(np.clip(base, 0, 255).astype("uint8"), "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x0, y0 = rng.integers(0, width), rng.integers(0, height)
        x1, y1 = x0 + rng.integers(40, width // 2), y0 + rng.integers(40, height // 2)
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        box = [float(x0), float(y0), float(x1), float(y1)]
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=colour)
    # Sensor-like noise: without it the JPEGs compress to a fifth of a real photo's size.
    noisy = np.asarray(image, dtype=np.int16) + rng.normal(0, 6, (height, width, 3)).astype(np.int16)
    return Image.fromarray(np.clip(noisy, 0, 255).astype("uint8"), "RGB")


def write_synthetic(out: str | Path, params: SyntheticParams = SyntheticParams()) -> Path:
    """Write the synthetic annotation folder (questions.jsonl and JPEG images) to OUT.

    OUT may be new, empty or an earlier synthetic folder (its manifest, :class:`atomic.OwnedFolder`);
    a rerun replaces the files it wrote and leaves any other file alone."""
    out = Path(out)
    questions = synthetic_questions(params)
    with atomic.OwnedFolder(out, "synthetic", others_allowed=False, advice="write into a new or empty folder") as owned:
        owned.folder("images")
        for index, question in enumerate(questions):
            synthetic_image(params.seed * 1_000_003 + index, params.image_width, params.image_height).save(
                owned.path(question["image"]), "JPEG", quality=85
            )
        owned.write_text("questions.jsonl", "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    return out
