"""Scoring a catalog for one query: dense (whole query and its clauses), BM25F, skills as a bonus.

The query arrives prepared (``search.query``: URLs as words, clauses split).

Each signal is min-max scaled over the tools the filter allows, then mixed with fixed weights, so
the final score is in [0, 1]. Weights were chosen on the even-numbered half of LiveMCPBench's
tasks and checked on the odd half (bench/search_quality.py reports both halves and the whole set),
except the skill bonus: the tuning half scores every weight from 0 to .1 alike, and the held-out
half showed .05 costing .010, so it is .02. Skills are a soft signal: a tool of a skill the query
matches gets a bonus in proportion to the match; an unclassified tool is ranked on its own signals,
never filtered out. A tool also gets a share of its server's score (tasks tend to need several
tools of one server).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from toolmesh.search.catalog import Catalog, Mask
from toolmesh.search.lexical import Scores

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Weights:
    """How much each signal counts; ``skills`` is the hierarchical strategy's bonus."""

    dense: float = 0.2
    clauses: float = 0.3
    lexical: float = 0.3
    skills: float = 0.02
    servers: float = 0.1


BM25_ONLY = Weights(dense=0.0, clauses=0.0, lexical=1.0, skills=0.0, servers=0.0)
DENSE_ONLY = Weights(dense=1.0, clauses=0.0, lexical=0.0, skills=0.0, servers=0.0)
SERVER_TOP = 3  # a server scores the mean of its best three tools
SERVER_CANDIDATES = 1000  # tools ranked with their server's score (the rest cannot reach the top)


def _scaled(values: npt.NDArray[np.floating]) -> npt.NDArray[np.floating]:
    low, high = float(values.min()), float(values.max())
    if high > low:
        return (values - low) / (high - low)
    return (values > 0).astype(np.float64)  # one value: full marks if it is a match at all


def score(
    catalog: Catalog,
    allowed: Mask,
    lexical: Scores | None,
    query: Vectors | None,
    weights: Weights,
    skill_matches: dict[str, float],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.floating]]:
    """Positions of the allowed tools (the best ``SERVER_CANDIDATES`` of them when servers count) and
    their scores in [0, 1], in the same order."""
    positions = np.flatnonzero(allowed)
    total = np.zeros(positions.size, dtype=np.float64)
    if positions.size == 0:
        return positions, total
    used = 0.0
    if query is not None and (weights.dense or weights.clauses):
        similarities = (catalog.vectors @ query.T)[positions]  # one column per text: the query, then its clauses
        waiting = ~catalog.flags["embedded"][positions]
        if waiting.any() and not waiting.all():  # no vector yet: no dense evidence, the lowest of the others
            similarities[waiting] = similarities[~waiting].min(axis=0)
        if weights.dense:
            total += weights.dense * _scaled(similarities[:, 0])
            used += weights.dense
        if weights.clauses:
            best = similarities[:, 1:].max(axis=1) if query.shape[0] > 1 else similarities[:, 0]
            total += weights.clauses * _scaled(best)
            used += weights.clauses
    if weights.lexical:
        if lexical is not None:
            total += weights.lexical * _scaled(lexical[positions])
        used += weights.lexical
    if used:
        total /= used
    if weights.skills and skill_matches:
        bonus = np.zeros(positions.size, dtype=np.float64)
        for skill, similarity in skill_matches.items():
            bonus = np.maximum(bonus, similarity * catalog.has_skill(skill)[positions])
        total = (total + weights.skills * bonus) / (1 + weights.skills)
    if weights.servers:
        if positions.size > SERVER_CANDIDATES:  # only the best can end in the top; their servers count
            keep = np.argpartition(-total, SERVER_CANDIDATES - 1)[:SERVER_CANDIDATES]
            positions, total = positions[keep], total[keep]
        total = (total + weights.servers * _server_scores(catalog, positions, total)) / (1 + weights.servers)
    return positions, total


def _server_scores(
    catalog: Catalog, positions: npt.NDArray[np.intp], scores: npt.NDArray[np.floating]
) -> npt.NDArray[np.floating]:
    """Each tool's server's score: the mean of the server's best ``SERVER_TOP`` tool scores."""
    servers = catalog.columns["source_server_id"][positions]
    order = np.lexsort((-scores, servers))
    grouped = servers[order]
    starts = np.flatnonzero(np.concatenate([[True], grouped[1:] != grouped[:-1]]))
    rank = np.arange(order.size) - np.repeat(starts, np.diff(np.concatenate([starts, [order.size]])))
    keep = rank < SERVER_TOP
    sums = np.bincount(grouped[keep], weights=scores[order][keep], minlength=int(servers.max()) + 1)
    counts = np.bincount(grouped[keep], minlength=sums.size)
    return (sums / np.maximum(counts, 1))[servers]


def top(positions: npt.NDArray[np.intp], scores: npt.NDArray[np.floating], limit: int) -> list[tuple[int, float]]:
    """The ``limit`` best (position, score), best first; ties in catalog order."""
    key = scores - positions * 1e-12  # ties broken by position, so a rebuilt catalog answers the same
    if positions.size > limit:
        keep = np.argpartition(-key, limit - 1)[:limit]
        positions, scores, key = positions[keep], scores[keep], key[keep]
    order = np.argsort(-key, kind="stable")
    return [(int(positions[i]), float(scores[i])) for i in order]
