"""BM25 over tool texts with ``bm25s``; rebuilt when the set of texts changes."""

from __future__ import annotations

import logging
import re

import bm25s
import numpy as np
import numpy.typing as npt
from bm25s.stopwords import STOPWORDS_EN

log = logging.getLogger("toolmesh.search")

# bm25s.tokenize's defaults (scikit-learn's pattern, lower-cased, English stop words), without its
# per-call progress bar and id bookkeeping: a query is tokenised on every search.
_WORDS = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = frozenset(STOPWORDS_EN)
Scores = npt.NDArray[np.floating]


def tokens(text: str) -> list[str]:
    """The BM25 terms of ``text``; documents and queries go through this same function."""
    return [word for word in _WORDS.findall(text.lower()) if word not in _STOPWORDS]


class LexicalIndex:
    """BM25 over a fixed list of documents; ``search`` returns positions into that list."""

    def __init__(self, texts: list[str]) -> None:
        self.size = len(texts)
        self._bm25: bm25s.BM25 | None = None
        corpus = [tokens(text) for text in texts]
        if any(corpus):
            self._bm25 = bm25s.BM25()
            self._bm25.index(corpus, show_progress=False)

    def scores(self, query: str) -> Scores | None:
        """BM25 score of every document for ``query`` (None: no query term is in the corpus)."""
        if self._bm25 is None:
            return None
        vocabulary = self._bm25.vocab_dict
        known = [t for t in tokens(query) if t in vocabulary]
        if not known:
            return None
        scores: Scores = self._bm25.get_scores(known)
        return scores

    def search(self, query: str, limit: int, allowed: npt.NDArray[np.bool_] | None = None) -> list[tuple[int, float]]:
        """Best ``limit`` positions with a positive score, restricted to ``allowed`` positions."""
        return best(self.scores(query), limit, allowed)


def best(scores: Scores | None, limit: int, allowed: npt.NDArray[np.bool_] | None = None) -> list[tuple[int, float]]:
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
