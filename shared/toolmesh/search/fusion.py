"""Reciprocal-rank fusion of several rankings (Cormack et al., 2009)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
RRF_K = 60


def reciprocal_rank_fusion(rankings: Sequence[Sequence[K]], *, k: int = RRF_K) -> list[tuple[K, float]]:
    """Fuse best-first rankings; each item scores ``sum(1 / (k + rank))`` (rank from 1), best first.

    Ties keep the order in which items were first seen, so the fusion is deterministic.
    """
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])


def normalised(score: float, lists: int, *, k: int = RRF_K) -> float:
    """An RRF score scaled to [0, 1]: 1 means first in every one of ``lists`` rankings."""
    best = lists / (k + 1)
    return min(1.0, score / best) if best else 0.0
