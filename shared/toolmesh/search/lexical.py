"""Field-weighted BM25 (BM25F) over tool fields: name, server, description, parameter names.

Each document's term weights are computed once, when the tool is indexed (``DocumentTerms``), with
each field's length normalised against a fixed reference length, so adding or removing a tool never
re-weights the others. A ``LexicalIndex`` is an immutable set of postings built from those arrays
(numpy only: a sort by term), queried term by term.

On LiveMCPBench (bench/search_quality.py) weighting the tool's own name 3x and its parameter names
0.5x beat weighting every field alike (MRR@10 .479 vs .463 for BM25 alone; held-out half .441 vs
.413).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from bm25s.stopwords import STOPWORDS_EN

from toolmesh.embed.text import parameter_descriptions, parameter_names, readable

# scikit-learn's token pattern, lower-cased, English stop words dropped.
_WORDS = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = frozenset(STOPWORDS_EN)
Scores = npt.NDArray[np.floating]
Mask = npt.NDArray[np.bool_]
K1 = 1.2
B = 0.75
# Field: (weight, reference length in terms).
FIELDS: dict[str, tuple[float, float]] = {
    "name": (3.0, 3.0),
    "server": (1.0, 2.0),
    "description": (1.0, 20.0),
    "parameters": (0.5, 4.0),
}


def tokens(text: str) -> list[str]:
    """The BM25 terms of ``text``; documents and queries go through this same function."""
    return [word for word in _WORDS.findall(text.lower()) if word not in _STOPWORDS]


def tool_fields(payload: Mapping[str, Any]) -> dict[str, str]:
    """The lexical fields of a tool point's payload (the parameters' descriptions count as description)."""
    schema = payload.get("input_schema")
    return {
        "name": readable(str(payload.get("original_name") or "")),
        "server": readable(str(payload.get("source_server_name") or "")),
        "description": " ".join([str(payload.get("description") or ""), *parameter_descriptions(schema)]),
        "parameters": " ".join(readable(p) for p in parameter_names(schema)),
    }


class Vocabulary:
    """Term -> id, only growing; written by one thread, read by any (ids never change)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, term: str) -> int:
        """The id of ``term``, assigning the next one if it is new."""
        found = self._ids.get(term)
        if found is None:
            with self._lock:
                found = self._ids.setdefault(term, len(self._ids))
        return found

    def find(self, terms: Sequence[str]) -> list[int]:
        """Ids of the known ``terms`` (unknown ones are skipped)."""
        return [i for t in terms if (i := self._ids.get(t)) is not None]


@dataclass(frozen=True)
class DocumentTerms:
    """One document's distinct term ids and their saturated BM25F weights (before idf)."""

    terms: npt.NDArray[np.int32]
    weights: npt.NDArray[np.float32]

    @classmethod
    def of(cls, fields: Mapping[str, str], vocabulary: Vocabulary) -> DocumentTerms:
        """Weights of a document's fields: ``sum_f w_f * tf_f / (1 - b + b * len_f / ref_f)``, saturated."""
        pseudo: dict[str, float] = {}
        for name, text in fields.items():
            weight, reference = FIELDS[name]
            words = tokens(text)
            if not words:
                continue
            norm = 1 - B + B * len(words) / reference
            for term, count in Counter(words).items():
                pseudo[term] = pseudo.get(term, 0.0) + weight * count / norm
        terms = np.array([vocabulary.add(t) for t in pseudo], dtype=np.int32)
        tf = np.array(list(pseudo.values()), dtype=np.float32)
        return cls(terms, (tf * (K1 + 1) / (tf + K1)).astype(np.float32))


EMPTY = DocumentTerms(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))


class Postings:
    """Immutable postings of consecutive documents (positions ``offset`` onwards), without idf."""

    def __init__(self, documents: Sequence[DocumentTerms], offset: int = 0) -> None:
        self.offset = offset
        self.size = len(documents)
        lengths = np.array([d.terms.size for d in documents], dtype=np.int64)
        terms = np.concatenate([d.terms for d in documents]) if documents else np.zeros(0, np.int32)
        weights = np.concatenate([d.weights for d in documents]) if documents else np.zeros(0, np.float32)
        docs = np.repeat(np.arange(offset, offset + self.size, dtype=np.int32), lengths)
        order = np.argsort(terms, kind="stable")
        self.docs = docs[order]
        self.weights = weights[order]
        self.df = np.bincount(terms, minlength=int(terms.max()) + 1 if terms.size else 0)
        self.starts = np.concatenate([[0], np.cumsum(self.df)])

    def add_to(self, scores: Scores, term: int, idf: float) -> None:
        """Add ``idf`` times the term's weights to the scores of its documents."""
        if term + 1 < self.starts.size:
            start, end = self.starts[term], self.starts[term + 1]
            scores[self.docs[start:end]] += idf * self.weights[start:end]


class LexicalIndex:
    """BM25F over one or more ``Postings`` parts (idf from all of them); one score per position."""

    def __init__(self, parts: Sequence[Postings], size: int, vocabulary: Vocabulary) -> None:
        self.size = size
        self._parts = [p for p in parts if p.size]
        self._vocabulary = vocabulary
        width = max((p.df.size for p in self._parts), default=0)
        df = np.zeros(width, dtype=np.int64)
        for part in self._parts:
            df[: part.df.size] += part.df
        documents = sum(p.size for p in self._parts)
        self._df = df
        self._idf = np.log1p((documents - df + 0.5) / (df + 0.5)).astype(np.float32)

    @classmethod
    def of(cls, documents: Sequence[DocumentTerms], vocabulary: Vocabulary) -> LexicalIndex:
        """An index of ``documents`` at positions 0..n-1."""
        return cls([Postings(documents)], len(documents), vocabulary)

    def scores(self, query: str) -> Scores | None:
        """BM25F score of every position for ``query`` (None: no query term is in the corpus)."""
        ids = [i for i in dict.fromkeys(self._vocabulary.find(tokens(query))) if i < self._df.size and self._df[i]]
        if not ids:
            return None
        scores = np.zeros(self.size, dtype=np.float32)
        for term in ids:
            for part in self._parts:
                part.add_to(scores, term, float(self._idf[term]))
        return scores

    def search(self, query: str, limit: int, allowed: Mask | None = None) -> list[tuple[int, float]]:
        """Best ``limit`` positions with a positive score, restricted to ``allowed`` positions."""
        return best(self.scores(query), limit, allowed)


def best(scores: Scores | None, limit: int, allowed: Mask | None = None) -> list[tuple[int, float]]:
    """The ``limit`` best positions of ``scores`` with a positive score, among ``allowed`` positions."""
    if scores is None or limit <= 0:
        return []
    if allowed is not None:
        scores = np.where(allowed, scores, 0.0)
    candidates = np.flatnonzero(scores > 0)
    if candidates.size > limit:
        candidates = candidates[np.argpartition(-scores[candidates], limit - 1)[:limit]]
    ordered = candidates[np.argsort(-scores[candidates], kind="stable")]
    return [(int(i), float(scores[i])) for i in ordered]
