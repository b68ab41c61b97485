"""The authoring pipeline the paper built GAMUT with: propose, draft, refine; then human review and export.

1. **propose**: a multimodal model proposes candidate questions per image under the paper's
   rules (open-ended, multi-step research, the entity named only generically, the stranger
   test). Fixed rules reject what can be checked mechanically; a second model pass screens
   the rest (leading? research-intensive?) and one question per image is chosen, the most
   research-intensive, preferring ones unlike those already chosen. Every candidate is kept
   with the reason it was kept or rejected.
2. **draft**: evidence is retrieved for the question; the model organises it into a
   meta-rubric under structured output whose schema is the rubric's own pydantic JSON schema,
   with evidence given as snippet ids. A draft that fails validation goes back with the
   validation errors, for a bounded number of rounds. The schema is never loosened.
3. **refine**: the self-refinement audit. Each item's cited snippets are checked for support
   (a model verdict per item); unsupported items get a new search for evidence; items still
   unsupported are removed; the rubric is rebuilt and recompiled. Findings are saved beside it.
4. **export**: accepted questions become an annotation folder that ``gamut build`` takes, with
   the human-edited binary rubric when there is one.

Any backend serves (transformers, vllm, openai): requests go through the one Backend interface.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from gamut_hf import atomic
from gamut_hf.authoring.evidence import Retriever, Snippet
from gamut_hf.authoring.store import AuthoredQuestion, AuthoringStore
from gamut_hf.backends.base import Backend, ChatRequest, Choice, JsonSchema
from gamut_hf.core.compiler import compile_rubric
from gamut_hf.core.rubric import MetaRubric, RubricError, parse_meta_rubric
from gamut_hf.dataset.annotations import QUESTIONS_FILE
from gamut_hf.files import open_image

Echo = Callable[[str], None]

# -- 1. propose ------------------------------------------------------------------------------

PROPOSE_SYSTEM = """You write research questions about photos taken by a person wearing smart glasses.
Propose several candidate questions about the main subject of the photo. Each question must:
- be open-ended (no yes/no answer, no single fact) and need multi-step research to answer well;
- refer to the subject only generically ("this plant", "this car"), never by its name or brand;
- pass the stranger test: a stranger who sees only the photo could ask it, so it presupposes nothing
  about the subject's identity, owner or history;
- not be leading (no suggested answer, no loaded premise).
Also give the same question with the subject named (text_question), the subject's name (entity), the
domain, and the research steps an expert would take. Answer with JSON only."""

SCREEN_SYSTEM = """You review a candidate research question about a photo. Judge it strictly and answer with JSON only:
leading (does it suggest an answer or carry a loaded premise?), open_ended, needs_research (several
steps of research, not one lookup), stranger_test (could a stranger who sees only the photo ask it,
presupposing nothing about the subject's identity, owner or history?), research_intensity from 1
(one lookup) to 5 (a report's worth), and a one-sentence reason."""


class Candidate(BaseModel):
    question: str = Field(min_length=8)
    text_question: str = Field(min_length=8)
    entity: str = Field(min_length=1)
    domain: str = Field(min_length=1)
    research_steps: list[str] = Field(default_factory=list)


class CandidateList(BaseModel):
    candidates: list[Candidate] = Field(min_length=1, max_length=8)


class Screening(BaseModel):
    leading: bool
    open_ended: bool
    needs_research: bool
    stranger_test: bool
    research_intensity: int = Field(ge=1, le=5)
    reason: str


GENERIC_REFERENCE = re.compile(r"\b(this|these|that|those)\b", re.IGNORECASE)
LEADING_PATTERNS = (
    re.compile(r"^(isn't|aren't|doesn't|don't|wouldn't|shouldn't|isnt|dont)\b", re.IGNORECASE),
    re.compile(r"\b(obviously|clearly|surely|everyone knows|isn't it|right\?)", re.IGNORECASE),
    re.compile(r"^why (is|are) (this|these) (the )?(best|worst)", re.IGNORECASE),
)
YES_NO = re.compile(r"^(is|are|can|does|do|did|was|were|has|have|will|should)\b", re.IGNORECASE)


def rule_problems(candidate: Candidate) -> list[str]:
    """What the fixed rules reject (the checks that need no judgement)."""
    problems = []
    question = candidate.question.strip()
    if candidate.entity.strip() and candidate.entity.strip().lower() in question.lower():
        problems.append(f"names the entity ({candidate.entity!r}) instead of referring to it generically")
    if not GENERIC_REFERENCE.search(question):
        problems.append("does not refer to the pictured subject generically ('this ...')")
    if any(p.search(question) for p in LEADING_PATTERNS):
        problems.append("leading: suggests its own answer")
    if YES_NO.match(question):
        problems.append("closed: answerable with yes or no")
    if not question.endswith("?"):
        problems.append("not a question (no question mark)")
    return problems


def _json_text(text: str) -> str:
    """A model's answer from its first "{" on: backends without constraints may talk before the JSON."""
    start = text.find("{")
    return text[start:] if start >= 0 else text


Parsed = TypeVar("Parsed", bound=BaseModel)


def _json_output(text: str, model: type[Parsed]) -> Parsed:
    return model.model_validate_json(_json_text(text))


def _similarity(texts: Sequence[str]):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    matrix = TfidfVectorizer(stop_words="english").fit_transform(texts)
    return cosine_similarity(matrix)


def propose(
    images: Sequence[Path],
    backend: Backend,
    store: AuthoringStore,
    *,
    domain_hint: str | None = None,
    echo: Echo = print,
) -> list[dict]:
    """Propose, screen and choose one question per image; every candidate is stored with its fate."""
    rows: list[dict] = []
    for image_path in images:
        name = Path(image_path).name
        image = open_image(image_path).convert("RGB")  # refused (one line) before anything is copied
        shutil.copy2(image_path, store.folder / "images" / name)
        hint = f" The photo is in the domain {domain_hint}." if domain_hint else ""
        [answer] = backend.complete(
            [
                ChatRequest(
                    user="Propose 3 to 5 candidate questions." + hint,
                    system=PROPOSE_SYSTEM,
                    image=image,
                    max_tokens=1500,
                )
            ],
            JsonSchema(CandidateList.model_json_schema(), "candidates"),
        )
        try:
            candidates = _json_output(answer.text, CandidateList).candidates
        except ValidationError as error:
            rows.append(
                {
                    "image": name,
                    "candidate": 0,
                    "question": answer.text[:500],
                    "text_question": "",
                    "entity": "",
                    "domain": "",
                    "status": "rejected",
                    "research": 0,
                    "reasons": [f"the model's answer is not a candidate list: {error.errors()[0]['msg']}"],
                }
            )
            echo(f"{name}: no usable candidates")
            continue
        screens = backend.complete(
            [
                ChatRequest(user=f"Candidate question: {c.question}", system=SCREEN_SYSTEM, image=image, max_tokens=400)
                for c in candidates
            ],
            JsonSchema(Screening.model_json_schema(), "screening"),
        )
        for number, (candidate, screen) in enumerate(zip(candidates, screens, strict=True), start=1):
            reasons = rule_problems(candidate)
            research = 0
            try:
                verdict = _json_output(screen.text, Screening)
                research = verdict.research_intensity
                if verdict.leading:
                    reasons.append(f"screening: leading ({verdict.reason})")
                if not verdict.open_ended:
                    reasons.append(f"screening: not open-ended ({verdict.reason})")
                if not verdict.needs_research:
                    reasons.append(f"screening: needs no multi-step research ({verdict.reason})")
                if not verdict.stranger_test:
                    reasons.append(f"screening: fails the stranger test ({verdict.reason})")
            except ValidationError:
                reasons.append("screening: the screening answer was unreadable")
            rows.append(
                {
                    "image": name,
                    "candidate": number,
                    "question": candidate.question,
                    "text_question": candidate.text_question,
                    "entity": candidate.entity,
                    "domain": candidate.domain,
                    "status": "rejected" if reasons else "kept",
                    "reasons": reasons or ["passes the rules and the screening"],
                    "research": research,
                }
            )
    _choose(rows)
    store.put_proposals(rows)
    for row in rows:
        if row["status"] == "selected":
            qid = re.sub(r"[^A-Za-z0-9]+", "-", Path(row["image"]).stem).strip("-").lower() or "q"
            store.put_question(
                AuthoredQuestion(
                    id=qid,
                    image=row["image"],
                    domain=row["domain"],
                    question=row["question"],
                    text_question=row["text_question"],
                    entity=row["entity"],
                    meta_rubric=None,
                    binary_rubric=None,
                    stage="proposed",
                    status="open",
                    updated_at="",
                )
            )
            echo(f"{row['image']}: chose {row['question']!r}")
    return rows


def _choose(rows: list[dict]) -> None:
    """Per image, the kept candidate with the most research; ties go to the one least like the questions
    already chosen (TF-IDF cosine), so the set stays diverse. Marks it 'selected' with the reason."""
    kept = [r for r in rows if r["status"] == "kept"]
    if not kept:
        return
    similarity = _similarity([r["question"] for r in kept]) if len(kept) > 1 else [[1.0]]
    chosen: list[int] = []
    for image in dict.fromkeys(r["image"] for r in kept):
        options = [i for i, r in enumerate(kept) if r["image"] == image]

        def overlap(i: int) -> float:
            return max((similarity[i][j] for j in chosen), default=0.0)

        best = max(options, key=lambda i: (kept[i]["research"], -overlap(i), -kept[i]["candidate"]))
        chosen.append(best)
        kept[best]["status"] = "selected"
        kept[best]["reasons"] = [
            f"most research-intensive kept candidate for this image (intensity "
            f"{kept[best]['research']}; similarity to other chosen questions {overlap(best):.2f})"
        ]
        for i in options:
            if i != best:
                kept[i]["reasons"] = [
                    f"kept, not chosen: candidate {kept[best]['candidate']} needs more research "
                    "or differs more from the rest of the set"
                ]


# -- 2. draft --------------------------------------------------------------------------------

DRAFT_SYSTEM = """You turn web evidence into a GAMUT meta-rubric: the structured list of what a complete
answer to the question must contain. Use only the evidence given; cite it by snippet id in each
item's "evidence" list. Item types: knowledge (one fact: statement), strict_list (all elements
required: elements, at least 2), flexible_list (a pool of acceptable options and the threshold of
how many to mention, 1 <= threshold <= number of options), process (ordered steps, each required
or optional, at least one required), relationship (subject, relation, object). Tiers:
answer_critical (the answer fails without it), valuable, context. Item ids: i1, i2, ...
Answer with JSON only."""


def draft_schema() -> dict:
    """The meta-rubric's own JSON schema, with each evidence entry a snippet id: every other rule
    (types, tiers, required fields, patterns) is exactly the rubric's."""
    schema = copy.deepcopy(MetaRubric.model_json_schema())
    schema["$defs"]["Evidence"] = {"type": "string", "description": "the id of a snippet from the evidence list"}
    return schema


def resolve_citations(draft: Any, snippets: dict[str, Snippet], question_id: str) -> tuple[Any, list[str]]:
    """The draft with snippet ids replaced by their {text, url, title}; unknown ids are problems."""
    problems: list[str] = []
    if not isinstance(draft, dict) or not isinstance(draft.get("items"), list):
        return draft, []
    resolved = copy.deepcopy(draft)
    for item in resolved["items"]:
        if not isinstance(item, dict) or not isinstance(item.get("evidence"), list):
            continue
        evidence = []
        for cited in item["evidence"]:
            snippet = snippets.get(cited) if isinstance(cited, str) else None
            if snippet is None:
                problems.append(
                    f"question {question_id}, item {item.get('id', '?')}, field evidence: "
                    f"{cited!r} is not one of the snippet ids given"
                )
            else:
                evidence.append({"text": snippet.text, "url": snippet.url, "title": snippet.title})
        item["evidence"] = evidence
    return resolved, problems


def validate_draft(text: str, snippets: dict[str, Snippet], question_id: str) -> tuple[MetaRubric | None, list[str]]:
    """A model's draft checked exactly as a released rubric is: JSON, the schema's rules, the cited
    ids, evidence on every item, and compilation. Returns the rubric or every problem found."""
    try:
        data = json.loads(_json_text(text))
    except json.JSONDecodeError as error:
        return None, [f"question {question_id}: not JSON ({error.msg} at line {error.lineno} column {error.colno})"]
    if isinstance(data, dict):
        data["question_id"] = question_id
    resolved, problems = resolve_citations(data, snippets, question_id)
    try:
        rubric = parse_meta_rubric(resolved, require_evidence=True, question_id=question_id)
    except RubricError as error:
        return None, problems + [str(p) for p in error.problems]
    if problems:
        return None, problems
    compile_rubric(rubric)
    return rubric, []


def draft(
    store: AuthoringStore,
    retriever: Retriever,
    backend: Backend,
    *,
    max_rounds: int = 3,
    k: int = 10,
    max_tokens: int = 3000,
    question_ids: Sequence[str] | None = None,
    echo: Echo = print,
) -> dict[str, list[str]]:
    """Draft a meta-rubric for every proposed question; returns the problems of those that failed."""
    failed: dict[str, list[str]] = {}
    for question in store.questions():
        if question_ids is not None and question.id not in question_ids:
            continue
        if question_ids is None and question.stage not in ("proposed", "draft_failed"):
            continue
        snippets = {s.id: s for s in retriever.search(question.text_question, k)}
        evidence = "\n".join(f"[{s.id}] {s.title}: {s.text}" for s in snippets.values()) or "(no evidence found)"
        prompt = f"Question: {question.text_question}\n\nEvidence:\n{evidence}\n\nWrite the meta-rubric."
        problems: list[str] = []
        rubric, raw = None, ""
        for number in range(1, max_rounds + 1):
            user = (
                prompt
                if number == 1
                else (
                    f"{prompt}\n\nYour previous draft:\n{raw}\n\nIt failed validation:\n- "
                    + "\n- ".join(problems)
                    + "\n\nFix every problem and answer with the whole corrected rubric."
                )
            )
            [answer] = backend.complete(
                [ChatRequest(user=user, system=DRAFT_SYSTEM, max_tokens=max_tokens)],
                JsonSchema(draft_schema(), "meta_rubric"),
            )
            raw = answer.text
            rubric, problems = validate_draft(raw, snippets, question.id)
            store.put_round(question.id, number, raw, problems)
            if rubric is not None:
                break
        question.meta_rubric = rubric.model_dump(mode="json", exclude_defaults=True) if rubric else question.meta_rubric
        question.stage = "drafted" if rubric else "draft_failed"
        store.put_question(question)
        if rubric is None:
            failed[question.id] = problems
            echo(f"{question.id}: no valid draft after {max_rounds} rounds: {problems[0]}")
        else:
            echo(f"{question.id}: drafted in {number} round(s), {len(rubric.items)} items")
    return failed


# -- 3. refine -------------------------------------------------------------------------------

AUDIT_SYSTEM = """You check whether evidence supports a rubric item. Answer with one word:
supported (the evidence states it), partially (some of it), or unsupported (the evidence does not say it)."""
SUPPORT = Choice(("supported", "partially", "unsupported"))


def item_claim(item: dict) -> str:
    """What an item asserts, in words, for the support check."""
    parts = [item.get("label", "")]
    for key in ("statement", "subject", "relation", "object", "meta_insight"):
        if item.get(key):
            parts.append(str(item[key]))
    for key in ("elements", "options"):
        if item.get(key):
            parts.append("; ".join(item[key]))
    if item.get("steps"):
        parts.append(" -> ".join(step["text"] for step in item["steps"]))
    return ". ".join(p for p in parts if p)


@dataclass
class ItemFinding:
    item_id: str
    verdict: str  # supported / partially / unsupported / re-grounded / removed
    detail: str


def _support(backend: Backend, claim: str, snippets: Sequence[dict]) -> str:
    if not snippets:
        return "unsupported"
    evidence = "\n".join(f"- {s['title']}: {s['text']}" for s in snippets)
    [answer] = backend.complete(
        [ChatRequest(user=f"Item: {claim}\n\nEvidence:\n{evidence}\n\nVerdict:", system=AUDIT_SYSTEM, max_tokens=8)],
        SUPPORT,
    )
    # Backends return the choice as a word or, under a JSON schema, as {"verdict": word}; a
    # word-boundary search reads both ("supported" does not match inside "unsupported").
    found = [
        (m.start(), option) for option in SUPPORT.options if (m := re.search(rf"\b{option}\b", answer.text.lower()))
    ]
    return min(found)[1] if found else "unsupported"


def refine(
    store: AuthoringStore, retriever: Retriever, backend: Backend, *, k: int = 3, echo: Echo = print
) -> dict[str, list[ItemFinding]]:
    """Audit every drafted rubric item by item; rebuild and recompile; save the findings beside it."""
    report: dict[str, list[ItemFinding]] = {}
    for question in store.questions():
        if question.stage != "drafted" or question.meta_rubric is None:
            continue
        rubric = copy.deepcopy(question.meta_rubric)
        findings: list[ItemFinding] = []
        kept = []
        for item in rubric["items"]:
            claim = item_claim(item)
            verdict = _support(backend, claim, item.get("evidence", []))
            if verdict != "unsupported":
                findings.append(ItemFinding(item["id"], verdict, f"{len(item.get('evidence', []))} cited snippet(s)"))
                kept.append(item)
                continue
            fresh = [
                s for s in retriever.search(claim, k) if s.text not in {e["text"] for e in item.get("evidence", [])}
            ]
            found = [
                {"text": s.text, "url": s.url, "title": s.title}
                for s in fresh
                if _support(backend, claim, [{"text": s.text, "url": s.url, "title": s.title}]) != "unsupported"
            ]
            if found:
                item["evidence"] = found
                kept.append(item)
                findings.append(
                    ItemFinding(
                        item["id"],
                        "re-grounded",
                        f"the cited snippets did not support it; {len(found)} new snippet(s) do",
                    )
                )
            else:
                findings.append(
                    ItemFinding(item["id"], "removed", "unsupported by its cited snippets and by a new search")
                )
        if not kept:  # never leave a question without items: keep them all, flagged
            kept = rubric["items"]
            findings.append(ItemFinding("*", "flagged", "every item was unsupported; kept for a human to decide"))
        rubric["items"] = kept
        checks = compile_rubric(parse_meta_rubric(rubric, require_evidence=True, question_id=question.id))
        store.put_audit(question.id, {"items": [f.__dict__ for f in findings], "checks": len(checks)})
        question.meta_rubric = rubric
        question.stage = "refined"
        store.put_question(question)
        report[question.id] = findings
        removed = [f.item_id for f in findings if f.verdict == "removed"]
        echo(
            f"{question.id}: audited {len(findings)} items; removed {', '.join(removed) or 'none'}; {len(checks)} checks"
        )
    return report


# -- 4. export -------------------------------------------------------------------------------


def export(store: AuthoringStore, out: str | Path, *, license_: str = "CC-BY-4.0", source: str = "authored") -> int:
    """Accepted questions as an annotation folder (SPEC section 5) that ``gamut build`` takes.

    ``out`` may be new, empty or a previous export (it carries the export's manifest,
    :class:`atomic.OwnedFolder`); an annotation folder made by hand, or anything else not empty,
    is refused rather than replaced. A rerun replaces the files the previous export wrote, each
    atomically, removes those it no longer writes, and leaves any other file alone.
    """
    lines = []
    with atomic.OwnedFolder(
        out, "author export", others_allowed=False, advice="export into a new or empty folder"
    ) as folder:
        folder.folder("images")
        for q in store.questions():
            if q.status != "accepted" or q.meta_rubric is None:
                continue
            shutil.copy2(store.folder / "images" / q.image, folder.path(f"images/{q.image}"))
            record = {
                "id": q.id,
                "domain": q.domain,
                "question": q.question,
                "text_question": q.text_question,
                "entity": q.entity,
                "image": f"images/{q.image}",
                "image_source": source,
                "image_license": license_,
                "meta_rubric": {**q.meta_rubric, "question_id": q.id},
            }
            if q.binary_rubric is not None:
                record["binary_rubric"] = q.binary_rubric
            lines.append(json.dumps(record, ensure_ascii=False))
        folder.write_text(QUESTIONS_FILE, "".join(line + "\n" for line in lines))
    return len(lines)
