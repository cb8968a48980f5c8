"""BM25 over tool texts with ``bm25s``; rebuilt when the set of texts changes."""

from __future__ import annotations

import logging

import bm25s
import numpy as np
import numpy.typing as npt

log = logging.getLogger("toolmesh.search")


def _tokens(texts: list[str]) -> list[list[str]]:
    result: list[list[str]] = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    return result


class LexicalIndex:
    """BM25 over a fixed list of documents; ``search`` returns positions into that list."""

    def __init__(self, texts: list[str]) -> None:
        self.size = len(texts)
        self._bm25: bm25s.BM25 | None = None
        tokens = _tokens(texts) if texts else []
        if any(tokens):
            self._bm25 = bm25s.BM25()
            self._bm25.index(tokens, show_progress=False)

    def search(self, query: str, limit: int, allowed: npt.NDArray[np.bool_] | None = None) -> list[tuple[int, float]]:
        """Best ``limit`` positions with a positive score, restricted to ``allowed`` positions."""
        if self._bm25 is None or limit <= 0:
            return []
        (query_tokens,) = _tokens([query])
        known = [t for t in query_tokens if t in self._bm25.vocab_dict]
        if not known:
            return []
        scores = self._bm25.get_scores(known)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        limit = min(limit, self.size)
        top = np.argpartition(-scores, limit - 1)[:limit]
        ordered = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in ordered if scores[i] > 0]
