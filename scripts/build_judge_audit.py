"""Build the judge audit set, gamut_hf/data/judge-audit/audit.jsonl, from the sample's meta-rubrics.

    .venv/bin/python scripts/build_judge_audit.py          # rewrite the shipped file
    .venv/bin/python scripts/build_judge_audit.py --check  # exit 1 if the shipped file differs

Deterministic: every choice is drawn from a generator seeded by the question id and the
response's name, so the same sample gives the same file byte for byte. Each response is
written item by item from the meta-rubric, and each item's state fixes the gold verdict of
every check it compiles to (the rules are in gamut_hf/data/judge-audit/README.md). The
hand-written natural-prose responses come from scripts/judge_audit_prose.json, labelled by
hand. Every base response of a question gets its injected twins (gamut_hf/injections.py);
their gold is the base's.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from gamut_hf.core.rubric import (
    FlexibleListItem,
    KnowledgeItem,
    ProcessItem,
    RelationshipItem,
    StrictListItem,
)
from gamut_hf.core.scorer import score_question
from gamut_hf.dataset.annotations import AnnotatedQuestion, read_annotations
from gamut_hf.dataset.loader import SAMPLE_SOURCE
from gamut_hf.evaluation.audit import AUDIT_FILE, load_audit_set
from gamut_hf.evaluation.injections import INJECTIONS, inject

PROSE_SOURCE = Path(__file__).with_name("judge_audit_prose.json")
INJECTION_KINDS = list(INJECTIONS)


def sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() or len(text) == 1 else text


def first_clause(statement: str) -> str | None:
    """The statement cut at its first clause break, when both halves carry content: an
    incomplete statement of the fact (partially_meets)."""
    for separator in ("; ", ": ", ", "):
        depth = 0
        for position, char in enumerate(statement):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and statement.startswith(separator, position):
                head, tail = statement[:position], statement[position + len(separator) :]
                if len(head.split()) >= 3 and len(tail.split()) >= 3:
                    return head
    return None


def item_texts(item: Any) -> list[str]:
    """Everything a rendering of ``item`` may write."""
    if isinstance(item, KnowledgeItem):
        texts = [item.statement]
    elif isinstance(item, RelationshipItem):
        texts = [item.subject, item.object]
    elif isinstance(item, StrictListItem):
        texts = list(item.elements)
    elif isinstance(item, FlexibleListItem):
        texts = list(item.options)
    else:
        texts = [step.text for step in item.steps]
    return [*texts, item.label, getattr(item, "meta_insight", None) or ""]


def leaky_members(question: AnnotatedQuestion) -> set[tuple[str, str]]:
    """(item id, member) for list members that another item's text contains: a response that
    leaves such a member out may still mention it there, so it is always written (gold meets)."""
    found = set()
    for item in question.meta_rubric.items:
        members = (
            item.elements
            if isinstance(item, StrictListItem)
            else item.options
            if isinstance(item, FlexibleListItem)
            else []
        )
        others = " ".join(
            t for other in question.meta_rubric.items if other is not item for t in item_texts(other)
        ).casefold()
        found |= {(item.id, member) for member in members if member.casefold() in others}
    return found


class Writer:
    """One response, item by item: the paragraphs and the gold verdict of every check."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.paragraphs: list[str] = []
        self.gold: dict[str, str] = {}

    def knowledge(self, item: KnowledgeItem, state: str) -> None:
        check = f"{item.id}.fact"
        partial = first_clause(item.statement)
        if state == "partially_meets" and partial is None:
            state = "meets"
        if state == "meets":
            self.paragraphs.append(sentence(item.statement))
        elif state == "contradicts":
            self.paragraphs.append(
                f'Some sources say "{item.statement.rstrip(".")}", but that is wrong and should be disregarded.'
            )
        elif state == "partially_meets":
            self.paragraphs.append(sentence(partial))
        self.gold[check] = state

    def relationship(self, item: RelationshipItem, state: str) -> None:
        if state == "meets":
            self.paragraphs.append(sentence(f"{item.subject} {item.relation} {item.object}"))
        elif state == "contradicts":
            self.paragraphs.append(
                sentence(
                    f"It is not the case that {lower_first(item.subject)} {item.relation} "
                    f"{item.object}; that is a misconception"
                )
            )
        elif state == "partially_meets":
            self.paragraphs.append(
                f"{item.subject} and {lower_first(item.object)} are connected in some way, "
                "though the details are not simple."
            )
        self.gold[f"{item.id}.relationship"] = state

    def insight(self, item: StrictListItem | FlexibleListItem | ProcessItem, stated: bool) -> None:
        if item.meta_insight:
            if stated:
                self.paragraphs.append(sentence(item.meta_insight))
            self.gold[f"{item.id}.insight"] = "meets" if stated else "missing"

    def strict_list(self, item: StrictListItem, chosen: list[str], denied: str | None, insight: bool) -> None:
        text = ""
        if chosen:
            text = f"On {item.label}: {', '.join(chosen)}."
        if denied:
            text += f' "{denied}" is not one of them, although it is often listed.'
        if text:
            self.paragraphs.append(text.strip())
        for n, element in enumerate(item.elements, 1):
            self.gold[f"{item.id}.element.{n}"] = (
                "meets" if element in chosen else "contradicts" if element == denied else "missing"
            )
        self.insight(item, insight)

    def flexible_list(
        self, item: FlexibleListItem, chosen: list[str], small_pool: int, thresholds: list[int], insight: bool
    ) -> None:
        if chosen:
            self.paragraphs.append(f"On {item.label}: {', '.join(chosen)}.")
        count = len(chosen)

        def coverage(k: int) -> str:
            return "meets" if count >= k else "partially_meets" if count else "missing"

        several = len(item.options) > small_pool and thresholds
        self.gold[f"{item.id}.coverage.1" if several else f"{item.id}.coverage"] = coverage(item.threshold)
        if len(item.options) <= small_pool:
            for n, option in enumerate(item.options, 1):
                self.gold[f"{item.id}.option.{n}"] = "meets" if option in chosen else "missing"
        else:
            for n, k in enumerate(thresholds, 2):
                self.gold[f"{item.id}.coverage.{n}"] = coverage(k)
        self.insight(item, insight)

    def process(self, item: ProcessItem, shown: list[int], insight: bool) -> None:
        """``shown``: indexes of the steps written, in the order written."""
        texts = [lower_first(item.steps[i].text) for i in shown]
        if texts:
            words = ["First"] + ["then"] * (len(texts) - 2) + ["finally"] if len(texts) > 1 else ["Just"]
            parts = [f"{word}, {text}" for word, text in zip(words, texts, strict=True)]
            self.paragraphs.append(f"For {item.label}: " + "; ".join(parts) + ".")
        for n in range(1, len(item.steps) + 1):  # a process has >= 2 steps: ids are always numbered
            self.gold[f"{item.id}.step.{n}"] = "meets" if n - 1 in shown else "missing"

        def order(indexes: list[int], complete: bool) -> str:
            if len(indexes) < 2:
                return "missing"
            if indexes != sorted(indexes):
                return "contradicts"
            return "meets" if complete else "partially_meets"

        required = [i for i, step in enumerate(item.steps) if step.required]
        if len(required) >= 2:
            present = [i for i in shown if i in required]
            self.gold[f"{item.id}.order"] = order(present, len(present) == len(required))
        if item.has_optional_steps and item.grade_full_order:
            # "the steps it includes in this full order": complete coverage is not asked for.
            self.gold[f"{item.id}.full_order"] = order(shown, True)
        self.insight(item, insight)


def write_response(question: AnnotatedQuestion, name: str, plan: str, params: Any) -> tuple[str, dict[str, str]]:
    """``plan``: "complete" (every item in full) or "mixed" (a state drawn per item)."""
    rng = random.Random(f"{question.id}:{name}")
    writer = Writer(rng)
    from gamut_hf.core.compiler import higher_thresholds

    leaky = leaky_members(question)
    for item in question.meta_rubric.items:
        full = plan == "complete"
        forced = {member for item_id, member in leaky if item_id == item.id}
        if isinstance(item, KnowledgeItem):
            writer.knowledge(
                item, "meets" if full else rng.choice(["meets", "missing", "contradicts", "partially_meets"])
            )
        elif isinstance(item, RelationshipItem):
            writer.relationship(
                item, "meets" if full else rng.choice(["meets", "missing", "contradicts", "partially_meets"])
            )
        elif isinstance(item, StrictListItem):
            if full:
                writer.strict_list(item, list(item.elements), None, True)
            else:
                chosen = set(rng.sample(item.elements, rng.randint(0, len(item.elements)))) | forced
                left = [e for e in item.elements if e not in chosen]
                denied = rng.choice(left) if left and rng.random() < 0.4 else None
                writer.strict_list(item, [e for e in item.elements if e in chosen], denied, rng.random() < 0.5)
        elif isinstance(item, FlexibleListItem):
            thresholds = higher_thresholds(len(item.options), item.threshold, params)
            if full:
                chosen = list(item.options)
            else:
                # Below, at and above the threshold equally often, so every coverage answer occurs.
                size = rng.choice(
                    [
                        rng.randint(1, max(1, item.threshold - 1)),
                        item.threshold,
                        rng.randint(item.threshold, len(item.options)),
                        0,
                    ]
                )
                picked = set(rng.sample(item.options, size)) | forced
                chosen = [o for o in item.options if o in picked]
            writer.flexible_list(item, chosen, params.small_pool_max, thresholds, full or rng.random() < 0.5)
        elif isinstance(item, ProcessItem):
            indexes = list(range(len(item.steps)))
            if full:
                shown = indexes
            else:
                required = [i for i in indexes if item.steps[i].required]
                shape = rng.choice(["all", "some", "swapped" if len(required) >= 2 else "some", "none"])
                shown = (
                    indexes
                    if shape == "all"
                    else sorted(rng.sample(indexes, rng.randint(1, len(indexes))))
                    if shape == "some"
                    else indexes[:]
                    if shape == "swapped"
                    else []
                )
                if shape == "swapped":
                    a, b = rng.sample(required, 2)
                    shown[a], shown[b] = shown[b], shown[a]
            writer.process(item, shown, full or rng.random() < 0.5)
    return "\n\n".join(writer.paragraphs), writer.gold


def gold_score(question: AnnotatedQuestion, gold: dict[str, str]) -> float:
    return round(score_question(question.checks, gold).score, 12)


def build() -> str:
    from gamut_hf.core.compiler import DEFAULT_COMPILE_PARAMS

    questions = read_annotations(SAMPLE_SOURCE)
    by_id = {q.id: q for q in questions}
    prose = json.loads(PROSE_SOURCE.read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    turn = 0
    for question in questions:
        bases: list[tuple[str, str, dict[str, str], str]] = []
        for name, plan in (("complete", "complete"), ("mixed-a", "mixed"), ("mixed-b", "mixed")):
            response, gold = write_response(question, name, plan, DEFAULT_COMPILE_PARAMS)
            bases.append((name, response, gold, "templated"))
        for entry in prose:
            if entry["question_id"] == question.id:
                bases.append((entry["name"], entry["response"], entry["gold"], "prose"))
        for name, response, gold, style in bases:
            assert list(gold) == [c.id for c in question.checks], (
                question.id,
                name,
                set(gold) ^ {c.id for c in question.checks},
            )
            rows.append(
                {
                    "id": f"{question.id}/{name}",
                    "question_id": question.id,
                    "style": style,
                    "twin_of": None,
                    "injection": None,
                    "response": response,
                    "gold": gold,
                    "gold_score": gold_score(question, gold),
                }
            )
        # The complete response has nothing to gain; the others each get one injection, the
        # kinds and their variants taken in turn over the whole set, appended and embedded alternately.
        for name, response, gold, style in bases[1:]:
            kind = INJECTION_KINDS[turn % len(INJECTION_KINDS)]
            texts = INJECTIONS[kind]
            text = texts[(turn // len(INJECTION_KINDS)) % len(texts)]
            position = "appended" if turn % 2 == 0 else "embedded"
            turn += 1
            rows.append(
                {
                    "id": f"{question.id}/{name}+{kind}",
                    "question_id": question.id,
                    "style": style,
                    "twin_of": f"{question.id}/{name}",
                    "injection": {"kind": kind, "position": position},
                    "response": inject(response, text, position),
                    "gold": gold,
                    "gold_score": gold_score(question, gold),
                }
            )
    assert all(entry["question_id"] in by_id for entry in prose)
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped file is not what this builds")
    args = parser.parse_args()
    text = build()
    if args.check:
        same = AUDIT_FILE.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{AUDIT_FILE} differs from what the builder writes")
        return 0 if same else 1
    AUDIT_FILE.write_text(text, encoding="utf-8")
    audit = load_audit_set(AUDIT_FILE)
    print(f"wrote {AUDIT_FILE}: {len(audit.responses)} responses, {audit.checks} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
