"""The classifier interface and the default one: embedding similarity to skill descriptions."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from toolmesh.contracts.events import DiscoveredTool, ToolClassification
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.embed.model import Embedder
from toolmesh.embed.text import dense_text
from toolmesh.skills.taxonomy import Skill
from toolmesh.skills.vectors import skill_vectors
from toolmesh_classifier.assignment import assign


class Classifier(Protocol):
    """Classifies a batch of tools (at most 10) into skills of the taxonomy."""

    name: str

    async def classify(self, server_name: str, tools: list[DiscoveredTool]) -> list[ToolClassification]: ...


class EmbeddingClassifier:
    """Cosine similarity of the tool's text to each skill's description, calibrated; no LLM needed.

    The tool's text is the one the index embeds (``dense_text``), embedded on the process's bulk
    lane: in one process the shared embedder computes each tool's vector once for both.
    """

    name = "embedding"

    def __init__(self, embedder: Embedder, skills: list[Skill], lanes: EmbeddingLanes) -> None:
        """``lanes``: the process's bulk embedding lanes (its context's), shared with its indexer."""
        self._lane = lanes.for_embedder(embedder)
        self._skill_ids = [s.id for s in skills]
        self._skills = skill_vectors(embedder, skills)

    async def classify(self, server_name: str, tools: list[DiscoveredTool]) -> list[ToolClassification]:
        texts = [dense_text(t.original_name, t.description, t.input_schema) for t in tools]
        vectors = await self._lane.embed(texts)
        return self.assign_all(tools, vectors)

    def assign_all(self, tools: list[DiscoveredTool], vectors: np.ndarray) -> list[ToolClassification]:
        """Classifications from precomputed tool vectors."""
        similarities = vectors @ self._skills.T
        return [
            assign(tool.original_name, dict(zip(self._skill_ids, (float(x) for x in row), strict=True)))
            for tool, row in zip(tools, similarities, strict=True)
        ]
