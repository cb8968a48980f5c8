"""The search quality gate: on a frozen retrieval set (LiveMCPBench's tuning half over its 527 tools,
``tests/data/search_gate/``), the default search's tool-level recall@5 and MRR@10 may not fall more
than 0.02 below the committed baseline. After a change that moves them on purpose, rewrite the
baseline with ``python -m tests.retrieval.gate --write`` (docs/search-quality.md)."""

from __future__ import annotations

import json

import pytest

from tests.retrieval.gate import BASELINE, GATED, TOLERANCE, measure

pytestmark = pytest.mark.unit


@pytest.mark.timeout(600)
async def test_search_quality_does_not_fall_below_the_baseline() -> None:
    baseline = json.loads(BASELINE.read_text())
    measured = await measure()
    assert (measured["tasks"], measured["tools"]) == (baseline["tasks"], baseline["tools"])
    fallen = {
        metric: f"{measured[metric]:.3f} < baseline {baseline[metric]:.3f} - {TOLERANCE}"
        for metric in GATED
        if measured[metric] < round(baseline[metric] - TOLERANCE, 3)
    }
    assert not fallen, f"search got worse on the frozen set: {fallen}"
