"""The official release's layout (``facebook/GAMUT`` as published), read by its columns.

The release does not carry the project's typed columns. A row has ``session_id`` (the question's
id, and the key of its photo in CRAG-MM), ``question`` (what the model is asked, in either split)
and ``rubrics``, an object (a struct, or the same object as a JSON string) holding:

- one list of **elements** per tier, keyed ``Answer_Critical`` (also spelt ``Answer Critical``),
  ``Valuable`` and ``Context``. Each element is one binary check: ``Handle`` (a short name, the
  check's id), ``Ingredient`` (the check's text, as the judge reads it) and ``Specifics`` (entries
  whose ``Citation`` names a snippet);
- ``Snippets``: the cited evidence, ``{id, Title, Text}``.

The release has no meta-rubric: its elements are the binary rubric already compiled (a process's
order check reads "Evaluate the relative order of the matching mandatory steps against this master
list: ..."). So every element becomes a :class:`~gamut_hf.core.rubric.Check` of its own item, of
kind ``order`` where its wording says so and ``unspecified`` otherwise, and whatever needs a typed
meta-rubric (``gamut compile``, ``gamut stats``' structure rows, the failure browser's item view)
says that this layout has none. A citation that names no snippet is kept (and counted), not fatal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gamut_hf.core.rubric import TIERS, Check, CheckKind, Problem, RubricError, Tier
from gamut_hf.errors import shown

# The columns that make a table the release's layout; ``domain`` and ``entity`` are read where present.
RELEASE_COLUMNS = ("session_id", "question", "rubrics")
# The release's tier keys (both spellings of the first are in use) and the project's tiers.
RELEASE_TIERS: dict[str, Tier] = {
    "Answer_Critical": "answer_critical",
    "Answer Critical": "answer_critical",
    "Valuable": "valuable",
    "Context": "context",
}
SNIPPETS_KEY = "Snippets"
# How the release words a process's order check (its only element whose kind the text gives away).
ORDER_WORDING = "evaluate the relative order"
# What a question's domain is where the release gives none.
UNKNOWN_DOMAIN = "unknown"


@dataclass(frozen=True)
class CitedSnippet:
    """One citation of an element, with the snippet it names; ``text`` is None for a dangling one."""

    citation: str
    title: str | None = None
    text: str | None = None

    @property
    def dangling(self) -> bool:
        return self.text is None


@dataclass(frozen=True)
class ReleasedRubric:
    """A release row's checks, tier by tier and in the release's order within a tier, and their evidence."""

    checks: list[Check]
    evidence: dict[str, tuple[CitedSnippet, ...]] = field(default_factory=dict)  # by check id

    @property
    def dangling_citations(self) -> int:
        return sum(snippet.dangling for snippets in self.evidence.values() for snippet in snippets)


def _rubrics_object(question_id: str, value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise RubricError(
                [Problem(question_id, None, "rubrics", f"is a string but not JSON ({error.msg})")]
            ) from None
    if not isinstance(value, Mapping):
        raise RubricError([Problem(question_id, None, "rubrics", f"expected an object, got {type(value).__name__}")])
    return value


def _kind(text: str) -> CheckKind:
    return "order" if text.strip().casefold().startswith(ORDER_WORDING) else "unspecified"


def _unique(handle: str, seen: set[str]) -> str:
    """The handle, or ``handle.2``, ``handle.3``... where the question has it already."""
    candidate, n = handle, 1
    while candidate in seen:
        n += 1
        candidate = f"{handle}.{n}"
    seen.add(candidate)
    return candidate


def _snippets(question_id: str, rubrics: Mapping[str, Any]) -> dict[str, CitedSnippet]:
    entries = rubrics.get(SNIPPETS_KEY) or []
    if not isinstance(entries, list):
        raise RubricError([Problem(question_id, None, f"rubrics.{SNIPPETS_KEY}", "expected a list of snippets")])
    found = {}
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("id") is not None:
            key = str(entry["id"])
            found[key] = CitedSnippet(key, _text(entry.get("Title")), _text(entry.get("Text")) or "")
    return found


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def released_rubric(question_id: str, value: Any) -> ReleasedRubric:
    """A row's ``rubrics`` as checks and cited snippets. Raises :class:`RubricError` naming the
    question, the element and the field: an unknown tier key, an element without ``Ingredient``."""
    rubrics = _rubrics_object(question_id, value)
    snippets = _snippets(question_id, rubrics)
    problems: list[Problem] = []
    checks: list[Check] = []
    evidence: dict[str, tuple[CitedSnippet, ...]] = {}
    seen: set[str] = set()
    # Tier by tier, whatever order the keys are stored in (a struct column orders its fields by first use).
    by_tier = sorted(rubrics.items(), key=lambda kv: TIERS.index(RELEASE_TIERS[kv[0]]) if kv[0] in RELEASE_TIERS else 3)
    for key, elements in by_tier:
        if key == SNIPPETS_KEY or elements is None:  # a struct column holds every row's keys; null where unused
            continue
        tier = RELEASE_TIERS.get(key)
        if tier is None:
            known = ", ".join([*RELEASE_TIERS, SNIPPETS_KEY])
            problems.append(Problem(question_id, None, f"rubrics.{shown(key)}", f"unknown tier; expected {known}"))
            continue
        if not isinstance(elements, list):
            problems.append(Problem(question_id, None, f"rubrics.{key}", "expected a list of elements"))
            continue
        for position, element in enumerate(elements, start=1):
            where = f"rubrics.{key}[{position}]"
            if not isinstance(element, Mapping):
                problems.append(Problem(question_id, None, where, "expected an element object"))
                continue
            handle = _text(element.get("Handle"))
            label = handle.strip() if handle and handle.strip() else f"{tier}-{position}"
            text = _text(element.get("Ingredient"))
            if text is None or not text.strip():
                reason = "required field is missing" if text is None else "must not be empty"
                problems.append(Problem(question_id, label, f"{where}.Ingredient", reason))
                continue
            check_id = _unique(label, seen)
            checks.append(Check(id=check_id, item_id=check_id, kind=_kind(text), tier=tier, text=text))
            cited = []
            for specific in element.get("Specifics") or []:
                citation = specific.get("Citation") if isinstance(specific, Mapping) else None
                if citation is not None:
                    cited.append(snippets.get(str(citation), CitedSnippet(str(citation))))
            if cited:
                evidence[check_id] = tuple(cited)
    if problems:
        raise RubricError(problems)
    if not checks:
        raise RubricError([Problem(question_id, None, "rubrics", "no elements in any tier")])
    return ReleasedRubric(checks, evidence)
