"""Reciprocal-rank fusion, the BM25 ranking and the in-memory filter masks (pure logic)."""

from __future__ import annotations

import numpy as np
import pytest

from toolmesh.index.base import Hit, Where
from toolmesh.search.catalog import Catalog
from toolmesh.search.fusion import normalised, reciprocal_rank_fusion
from toolmesh.search.lexical import LexicalIndex

pytestmark = pytest.mark.unit


def test_rrf_rewards_agreement_between_rankings() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [item for item, _ in fused] == ["b", "c", "a", "d"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)


def test_rrf_single_ranking_keeps_its_order_and_ties_are_stable() -> None:
    assert [i for i, _ in reciprocal_rank_fusion([["x", "y", "z"]])] == ["x", "y", "z"]
    assert [i for i, _ in reciprocal_rank_fusion([["a"], ["b"]])] == ["a", "b"]
    assert reciprocal_rank_fusion([]) == []


def test_normalised_score_is_one_for_first_everywhere() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["a", "b"]]))
    assert normalised(fused["a"], 2) == pytest.approx(1.0)
    assert 0 < normalised(fused["b"], 2) < 1
    assert normalised(dict(reciprocal_rank_fusion([["a"]]))["a"], 2) == pytest.approx(0.5)


def test_bm25_ranks_matching_text_and_respects_the_mask() -> None:
    lexical = LexicalIndex(["search the web for pages", "create an issue in github", "read a file from disk"])
    assert [i for i, _ in lexical.search("web search", 5)] == [0]
    assert lexical.search("web search", 5, np.array([False, True, True])) == []
    assert lexical.search("unknownword", 5) == []
    assert [i for i, _ in lexical.search("search a file", 1)] in ([0], [2])
    assert len(lexical.search("search a file", 5)) == 2
    assert LexicalIndex([]).search("anything", 5) == []


def _hit(point_id: str, server: str, status: str, skills: list[str], classified: bool) -> Hit:
    payload = {
        "text": point_id,
        "source_server_id": server,
        "source_server_name": server,
        "server_status": status,
        "namespace": "default",
        "is_external": True,
        "is_classified": classified,
        "skill_ids": skills,
    }
    return Hit(point_id, payload)


def test_catalog_masks_follow_the_index_filter_semantics() -> None:
    catalog = Catalog.build(
        1,
        [
            _hit("t1", "a", "CONNECTED", ["web_search"], True),
            _hit("t2", "b", "DISCONNECTED", ["web_search"], True),
            _hit("t3", "b", "DEGRADED", [], False),
        ],
        None,
    )
    assert catalog.ids == ["t1", "t2", "t3"]
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
    # Same texts: the BM25 index is reused, not rebuilt.
    again = Catalog.build(2, [_hit(i, "a", "CONNECTED", [], False) for i in ("t1", "t2", "t3")], catalog)
    assert again.lexical is catalog.lexical
