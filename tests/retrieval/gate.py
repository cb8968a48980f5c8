"""The CI search quality gate's frozen set (``tests/data/search_gate/``) and how it is measured.

The set is LiveMCPBench's catalog (527 tools of 70 servers) with the tasks of its tuning half (the
even-numbered ones, 0-based, as ``bench/search_quality.py`` splits them); ``baseline.json`` holds the
default strategy's tool-level recall@5 and MRR@10 on it. The gate (``tests/unit/test_search_gate.py``)
fails when either falls more than ``TOLERANCE`` below the baseline. Run from the repository root::

    python -m tests.retrieval.gate                 # measure and print
    python -m tests.retrieval.gate --write         # measure and write baseline.json
    python -m tests.retrieval.gate --freeze DIR    # rebuild the set from a LiveMCPBench export in DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from tests.retrieval.catalog import classify_index, load_index, read_jsonl, servers_of
from tests.retrieval.scoring import means, per_task
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.embed.model import DIMENSIONS, load_embedder
from toolmesh.search.service import SearchService
from toolmesh_projector.vector_index.edge import EdgeIndex

GATE = Path(__file__).resolve().parent.parent / "data" / "search_gate"
BASELINE = GATE / "baseline.json"
TOLERANCE = 0.02
"""How far below the baseline a gated metric may fall (one task in 47 moving a rank is about .011)."""
GATED = ("recall@5", "mrr@10")
_TOOL_FIELDS = ("server", "name", "description", "input_schema")


async def measure(data: Path = GATE) -> dict[str, Any]:
    """The default strategy's scores on the set in ``data``: the tools indexed and classified as the
    indexer and classifier-worker do, every task searched through ``SearchService`` with default weights."""
    embedder = load_embedder()
    if embedder is None:
        raise RuntimeError("the embedding model did not load")
    servers = servers_of(data / "tools.jsonl")
    tasks = read_jsonl(data / "queries.jsonl")
    strategy = SearchRequest(query="default").strategy
    lanes = EmbeddingLanes()  # one lane for the indexer and the classifier, as in one process
    with tempfile.TemporaryDirectory() as tmp:
        index = EdgeIndex(Path(tmp), DIMENSIONS)
        try:
            projection = await load_index(index, embedder, servers, lanes)
            await classify_index(projection, embedder, servers, lanes)
            rows = await per_task(SearchService(projection.table.catalog, embedder), strategy, tasks)
        finally:
            await index.close()
    return {
        **means(rows),
        "strategy": strategy,
        "model": embedder.model_id,
        "tasks": len(tasks),
        "tools": sum(len(tools) for tools in servers.values()),
    }


def freeze(source: Path, data: Path = GATE) -> None:
    """Write the set from a LiveMCPBench export (``tools.jsonl``, ``queries.jsonl``, ``SOURCE.json``):
    the tools' searched fields, the tuning half's tasks (id, query, gold slots) and their provenance."""
    tools = [{k: t.get(k) for k in _TOOL_FIELDS} for t in read_jsonl(source / "tools.jsonl")]
    tasks = [{k: q[k] for k in ("id", "query", "gold_slots")} for q in read_jsonl(source / "queries.jsonl")[0::2]]
    data.mkdir(parents=True, exist_ok=True)
    for name, rows in (("tools.jsonl", tools), ("queries.jsonl", tasks)):
        (data / name).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    provenance = json.loads((source / "SOURCE.json").read_text())
    provenance["derived"] = (
        f"tools: {len(tools)}, fields {', '.join(_TOOL_FIELDS)} only; queries: the tuning half "
        f"(0-based even lines of queries.jsonl), {len(tasks)} tasks, fields id, query, gold_slots"
    )
    (data / "SOURCE.json").write_text(json.dumps(provenance, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.retrieval.gate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the measured scores to baseline.json")
    parser.add_argument("--freeze", type=Path, metavar="DIR", help="rebuild the set from a LiveMCPBench export")
    args = parser.parse_args()
    if args.freeze:
        freeze(args.freeze)
    measured = asyncio.run(measure())
    if args.write:
        BASELINE.write_text(json.dumps(measured, indent=1) + "\n")
    print(json.dumps(measured))


if __name__ == "__main__":
    main()
