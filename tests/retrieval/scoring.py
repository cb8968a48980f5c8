"""Tool-level retrieval scores of ``SearchService`` answers against gold slots.

recall@k = share of a task's gold slots with a candidate in the top k; MRR@10 = 1 / rank of the first
result that fills any slot (0 beyond 10). A slot is a list of ``server.tool`` names, any of which fills it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from toolmesh.contracts.search import SearchRequest
from toolmesh.search.service import SearchService

Scores = tuple[float, float, float]
"""recall@1, recall@5 and reciprocal rank (within 10) of one task."""


def scores(ranked: list[str], slots: list[list[str]]) -> Scores:
    """One task's scores for the ``server.tool`` names of its results, best first."""

    def recall(k: int) -> float:
        top = set(ranked[:k])
        return sum(1 for slot in slots if top & set(slot)) / len(slots)

    gold = {name for slot in slots for name in slot}
    rr = next((1.0 / rank for rank, name in enumerate(ranked[:10], start=1) if name in gold), 0.0)
    return recall(1), recall(5), rr


async def per_task(
    service: SearchService, strategy: Literal["hierarchical", "flat"], tasks: list[dict[str, Any]]
) -> list[Scores]:
    """Each task's scores (``query`` and ``gold_slots``) for the top 10 of ``service`` with ``strategy``."""
    rows = []
    for task in tasks:
        response = await service.search(SearchRequest(query=str(task["query"]), limit=10, strategy=strategy))
        ranked = [f"{t.source_server.name}.{t.original_name}" for t in response.tools]
        rows.append(scores(ranked, task["gold_slots"]))
    return rows


def means(rows: Sequence[Scores]) -> dict[str, float]:
    """recall@1, recall@5 and MRR@10 over tasks, rounded to three places."""
    n = len(rows)
    return {
        "recall@1": round(sum(r[0] for r in rows) / n, 3),
        "recall@5": round(sum(r[1] for r in rows) / n, 3),
        "mrr@10": round(sum(r[2] for r in rows) / n, 3),
    }
