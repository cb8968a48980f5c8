"""Where the search benchmarks find LiveMCPBench's tools and tasks (``tools.jsonl``, ``queries.jsonl``)."""

from __future__ import annotations

import os
from pathlib import Path


def _data_dir() -> Path:
    """``TOOLMESH_BENCH_DATA``, else the first ``shared/data/livemcpbench`` above this file."""
    if os.environ.get("TOOLMESH_BENCH_DATA"):
        return Path(os.environ["TOOLMESH_BENCH_DATA"])
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "data" / "livemcpbench"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("LiveMCPBench data not found: set TOOLMESH_BENCH_DATA")


DATA = _data_dir()
