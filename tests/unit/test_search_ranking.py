"""BM25F, the catalog's filter masks, signal mixing and skills as a soft signal (pure logic)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from toolmesh.index.base import Where
from toolmesh.search.lexical import DocumentTerms, LexicalIndex, Vocabulary, tool_fields
from toolmesh.search.ranking import BM25_ONLY, Weights, score, top
from toolmesh.search.table import SearchTable
from toolmesh.skills.taxonomy import Skill

pytestmark = pytest.mark.unit


def _lexical(*texts: str) -> LexicalIndex:
    vocabulary = Vocabulary()
    return LexicalIndex.of([DocumentTerms.of({"description": t}, vocabulary) for t in texts], vocabulary)


def test_bm25_ranks_matching_text_and_respects_the_mask() -> None:
    lexical = _lexical("search the web for pages", "create an issue in github", "read a file from disk")
    assert [i for i, _ in lexical.search("web search", 5)] == [0]
    assert lexical.search("web search", 5, np.array([False, True, True])) == []
    assert lexical.search("unknownword", 5) == []
    assert [i for i, _ in lexical.search("search a file", 1)] in ([0], [2])
    assert len(lexical.search("search a file", 5)) == 2
    assert LexicalIndex.of([], Vocabulary()).search("anything", 5) == []


def test_bm25f_a_word_in_the_tool_name_outweighs_the_same_word_in_a_description() -> None:
    vocabulary = Vocabulary()
    in_name = tool_fields({"original_name": "send_email", "description": "Deliver a message."})
    in_description = tool_fields({"original_name": "notify", "description": "Send an email to a person."})
    lexical = LexicalIndex.of([DocumentTerms.of(f, vocabulary) for f in (in_description, in_name)], vocabulary)
    assert [i for i, _ in lexical.search("email", 2)] == [1, 0]


def _catalog(*rows: tuple[str, str, str, list[str], list[float] | None]) -> SearchTable:
    table = SearchTable({s: Skill(id=s, name=s, description=s) for s in ("files", "web_search")}, 2)
    for point_id, server, status, skills, vector in rows:
        payload: dict[str, Any] = {
            "original_name": point_id,
            "source_server_id": server,
            "source_server_name": server,
            "server_status": status,
            "namespace": "default",
            "is_external": True,
            "is_classified": bool(skills),
            "skill_ids": skills,
        }
        table.put(point_id, payload, np.array(vector, dtype=np.float32) if vector is not None else None)
    return table


async def test_catalog_masks_follow_the_index_filter_semantics() -> None:
    table = _catalog(
        ("t1", "a", "CONNECTED", ["web_search"], [1.0, 0.0]),
        ("t2", "b", "DISCONNECTED", ["web_search"], [0.0, 1.0]),
        ("t3", "b", "DEGRADED", [], None),
    )
    table.applied(7)
    catalog = await table.catalog()
    assert list(catalog.ids) == ["t1", "t2", "t3"] and catalog.seq == 7
    assert catalog.flags["embedded"].tolist() == [True, True, False]
    serving = Where(statuses=["CONNECTED", "DEGRADED"])
    assert catalog.mask(serving).tolist() == [True, False, True]
    assert catalog.mask(Where(server_names=["b"])).tolist() == [False, True, True]
    assert catalog.mask(Where(skill_ids=["web_search"])).tolist() == [True, True, False]
    assert catalog.mask(Where(skill_ids=["web_search"], or_unclassified=True)).tolist() == [True, True, True]
    assert catalog.mask(Where(external_only_false=True)).tolist() == [False, False, False]
    assert catalog.mask(Where(server_names=["nobody"])).tolist() == [False, False, False]
    assert catalog.mask(Where(server_id="b", namespace="default")).tolist() == [False, True, True]
    assert catalog.mask(Where(namespace="other")).tolist() == [False, False, False]
    assert catalog.count_servers(catalog.mask(serving)) == 2
    assert catalog.count_servers(catalog.mask(Where(server_names=[]))) == 0
    assert catalog.has_skill("web_search").tolist() == [True, True, False]

    # A published catalog is a snapshot: later changes show in the next one only.
    table.update(table.get("t2").id, {"server_status": "CONNECTED"})  # type: ignore[union-attr]
    table.remove("t1")
    table.put("t3", {**catalog.payloads[2], "description": "new text"}, None)  # new text: new slot
    newer = await table.catalog()
    assert catalog.mask(serving).tolist() == [True, False, True]
    assert newer.mask(serving).tolist() == [False, True, False, True]
    assert [newer.ids[i] for i in np.flatnonzero(newer.flags["alive"])] == ["t2", "t3"]


async def test_dead_slots_are_dropped_when_they_outnumber_the_live_ones() -> None:
    table = _catalog(*((f"t{i}", "a", "CONNECTED", ["files"], [1.0, float(i)]) for i in range(3)))
    for round_ in range(1100):  # each new vector takes a new slot
        table.put("t0", {**table.get("t0").payload}, np.array([1.0, round_], dtype=np.float32))  # type: ignore[union-attr]
    catalog = await table.catalog()
    assert len(catalog.ids) == 3 and sorted(str(i) for i in catalog.ids) == ["t0", "t1", "t2"]
    assert catalog.flags["alive"].all() and catalog.has_skill("files").all()
    assert table.skills.count("files") == 3
    found = catalog.lexical.search("t1", 3)
    assert [catalog.ids[i] for i, _ in found] == ["t1"]


async def test_mixed_scores_are_scaled_and_the_skill_bonus_reorders_without_filtering() -> None:
    catalog = await _catalog(
        ("a", "s", "CONNECTED", [], [1.0, 0.0]),
        ("b", "s", "CONNECTED", ["files"], [0.8, 0.6]),
        ("c", "s", "CONNECTED", [], [0.0, 1.0]),
    ).catalog()
    everything = np.ones(3, dtype=bool)
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    dense = Weights(dense=1.0, clauses=0.0, lexical=0.0, skills=0.0, servers=0.0)
    positions, scores = score(catalog, everything, None, query, dense, {})
    assert [catalog.ids[i] for i, _ in top(positions, scores, 3)] == ["a", "b", "c"]
    assert scores.max() == pytest.approx(1.0) and scores.min() == pytest.approx(0.0)
    # A matched skill lifts its tools; the unclassified ones stay in the ranking.
    bonus = Weights(dense=1.0, clauses=0.0, lexical=0.0, skills=0.5, servers=0.0)
    positions, scores = score(catalog, everything, None, query, bonus, {"files": 0.9})
    assert [catalog.ids[i] for i, _ in top(positions, scores, 3)] == ["b", "a", "c"]
    # BM25 only, without any match: nothing scores.
    positions, scores = score(catalog, everything, None, query, BM25_ONLY, {})
    assert not scores.any()


async def test_a_tool_shares_its_servers_score_the_mean_of_its_best_three() -> None:
    catalog = await _catalog(
        ("a1", "a", "CONNECTED", [], [1.0, 0.0]),
        ("a2", "a", "CONNECTED", [], [0.0, 1.0]),
        ("b1", "b", "CONNECTED", [], [0.95, 0.31]),
        ("b2", "b", "CONNECTED", [], [0.9, 0.43]),
        ("b3", "b", "CONNECTED", [], [0.85, 0.52]),
        ("b4", "b", "CONNECTED", [], [0.0, 1.0]),
    ).catalog()
    everything = np.ones(6, dtype=bool)
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    alone = Weights(dense=1.0, clauses=0.0, lexical=0.0, skills=0.0, servers=0.0)
    positions, scores = score(catalog, everything, None, query, alone, {})
    assert [catalog.ids[i] for i, _ in top(positions, scores, 2)] == ["a1", "b1"]
    together = Weights(dense=1.0, clauses=0.0, lexical=0.0, skills=0.0, servers=1.0)
    positions, boosted = score(catalog, everything, None, query, together, {})
    assert [catalog.ids[i] for i, _ in top(positions, boosted, 1)] == ["b1"]
    b_server = scores[2:5].mean()  # b4, its fourth tool, does not count
    assert boosted[2] == pytest.approx((scores[2] + b_server) / 2)
    assert boosted[0] == pytest.approx((scores[0] + scores[:2].mean()) / 2)


def test_ties_rank_in_catalog_order_and_limit_keeps_the_best() -> None:
    positions = np.array([4, 1, 3, 0])
    scores = np.array([0.5, 0.5, 0.9, 0.1])
    assert top(positions, scores, 3) == [(3, 0.9), (1, 0.5), (4, 0.5)]
