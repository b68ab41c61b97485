"""Evidence for authoring: snippets with stable ids, and the retrievers that find them.

A snippet is a passage of a web page (url, title, text, retrieval date). Its id is a hash of
its url and text, so the same passage keeps its id across runs, stores and machines, and a
draft's citations stay valid when the store grows. Two retrievers share one interface:

- :class:`LocalSnippetStore`: a JSONL file of snippets, ranked by TF-IDF cosine
  (scikit-learn). The embedded default: offline and reproducible.
- :class:`SearxngRetriever`: a web-search API the user configures (SearxNG's JSON API, which
  any self-hosted instance serves); results are cached into a local store so a rerun cites
  the same snippets.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gamut_hf.files import InputError, jsonl_lines, parse_json, read_text


def snippet_id(url: str, text: str) -> str:
    return "s-" + hashlib.sha256(f"{url}\x00{text}".encode()).hexdigest()[:10]


class Snippet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = ""
    url: str = Field(min_length=1)
    title: str = ""
    text: str = Field(min_length=1)
    retrieved: date

    @model_validator(mode="after")
    def _stable_id(self) -> Snippet:
        expected = snippet_id(self.url, self.text)
        if not self.id:
            object.__setattr__(self, "id", expected)
        elif self.id != expected:
            raise ValueError(f"id {self.id!r} is not the hash of its url and text ({expected})")
        return self


class Retriever(Protocol):
    def search(self, query: str, k: int = 8) -> list[Snippet]: ...

    def get(self, ids: Iterable[str]) -> dict[str, Snippet]: ...


def read_snippets(path: str | Path) -> list[Snippet]:
    """A snippet JSONL file; every bad line is named (file and line) in one error."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such snippet file")
    snippets, problems = [], []
    for number, line in jsonl_lines(read_text(path)):
        try:
            snippets.append(Snippet.model_validate(parse_json(line, f"{path}:{number}")))
        except InputError as error:
            problems.append(str(error))
        except ValidationError as error:
            first = error.errors()[0]
            problems.append(f"{path}:{number}: {'.'.join(map(str, first['loc'])) or 'line'}: {first['msg']}")
    if problems:
        raise InputError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return snippets


class LocalSnippetStore:
    """Snippets in a JSONL file, ranked for a query by TF-IDF cosine similarity."""

    def __init__(self, snippets: Sequence[Snippet], path: Path | None = None):
        self.path = path
        self.snippets = {s.id: s for s in snippets}
        self._index: tuple[list[Snippet], Any, Any] | None = None  # (snippets, vectorizer, matrix)

    @classmethod
    def open(cls, path: str | Path) -> LocalSnippetStore:
        path = Path(path)
        return cls(read_snippets(path) if path.is_file() else [], path)

    def add(self, snippets: Iterable[Snippet]) -> list[Snippet]:
        """Add new snippets (appended to the file, if any); returns those that were new."""
        new = [s for s in snippets if s.id not in self.snippets]
        for snippet in new:
            self.snippets[snippet.id] = snippet
        if new and self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.writelines(s.model_dump_json() + "\n" for s in new)
        self._index = None
        return new

    def get(self, ids: Iterable[str]) -> dict[str, Snippet]:
        return {i: self.snippets[i] for i in ids if i in self.snippets}

    def search(self, query: str, k: int = 8) -> list[Snippet]:
        if not self.snippets:
            return []
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.metrics.pairwise import linear_kernel

        if self._index is None:  # built on first use
            ordered = list(self.snippets.values())
            vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
            matrix = vectorizer.fit_transform(f"{s.title} {s.text}" for s in ordered)
            self._index = (ordered, vectorizer, matrix)
        ordered, vectorizer, matrix = self._index
        scores = linear_kernel(vectorizer.transform([query]), matrix).ravel()
        ranked = sorted(range(len(ordered)), key=lambda i: (-scores[i], ordered[i].id))
        return [ordered[i] for i in ranked[:k] if scores[i] > 0]


class SearxngRetriever:
    """A SearxNG instance's JSON search API (``GET {base_url}/search?q=...&format=json``).

    Every result becomes a snippet (its ``content`` as text) and is kept in ``cache``, a local
    store, so the ids a draft cites can be looked up again without the network.
    """

    def __init__(self, base_url: str, cache: LocalSnippetStore, timeout: float = 20.0):
        self.base_url = base_url.rstrip("/")
        self.cache = cache
        self.timeout = timeout

    def search(self, query: str, k: int = 8) -> list[Snippet]:
        import urllib.parse
        import urllib.request

        url = f"{self.base_url}/search?" + urllib.parse.urlencode({"q": query, "format": "json"})
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
        except (OSError, ValueError) as error:
            raise InputError(f"search API {self.base_url}: {type(error).__name__}: {error}") from None
        today = date.today()
        found = []
        for result in payload.get("results", [])[:k]:
            text = (result.get("content") or "").strip()
            if result.get("url") and text:
                found.append(Snippet(url=result["url"], title=result.get("title") or "", text=text, retrieved=today))
        self.cache.add(found)
        return found

    def get(self, ids: Iterable[str]) -> dict[str, Snippet]:
        return self.cache.get(ids)
