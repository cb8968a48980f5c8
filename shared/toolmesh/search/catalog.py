"""An immutable snapshot of the searchable tools: payloads, vectors, BM25F postings, filter columns.

The table (``search.table``) keeps tools in slots: arrays a new catalog shares or copies in one
numpy operation each, so publishing costs what changed, not one Python step per tool. Positions of
a catalog are slots; a slot whose tool was replaced or removed is not ``alive`` and never matches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from toolmesh.index.base import Where
from toolmesh.search.lexical import LexicalIndex

Mask = npt.NDArray[np.bool_]
Matrix = npt.NDArray[np.float32]
Codes = npt.NDArray[np.int32]
COLUMNS = ("source_server_id", "source_server_name", "server_status", "namespace", "category")
FLAGS = ("alive", "embedded", "external", "classified")


@dataclass(frozen=True)
class SkillRows:
    """Skill ids, their current vectors (one row each) and their payloads."""

    ids: list[str]
    vectors: Matrix
    payloads: list[dict[str, Any]]


@dataclass(frozen=True)
class Catalog:
    """What one search reads: every array has one entry per slot."""

    seq: int  # the last event this snapshot includes
    built_at: float  # time.time() when published
    ids: Sequence[str | None]
    payloads: Sequence[dict[str, Any] | None]
    vectors: Matrix
    lexical: LexicalIndex
    skills: SkillRows
    columns: dict[str, Codes]
    codes: Mapping[str, Mapping[Any, int]]  # value -> code of each column (shared, only growing)
    flags: dict[str, Mask]
    skill_members: npt.NDArray[np.bool_]  # slot x skill (order of ``skill_order``)
    skill_order: Mapping[str, int]

    def _equals(self, column: str, value: Any) -> Mask:
        code = self.codes[column].get(value)
        return self.columns[column] == code if code is not None else np.zeros(len(self.ids), dtype=bool)

    def _any_of(self, column: str, values: Sequence[Any]) -> Mask:
        wanted = [c for v in set(values) if (c := self.codes[column].get(v)) is not None]
        return np.isin(self.columns[column], wanted) if wanted else np.zeros(len(self.ids), dtype=bool)

    def has_skill(self, skill: str) -> Mask:
        """Tools classified into ``skill``."""
        index = self.skill_order.get(skill)
        if index is None or index >= self.skill_members.shape[1]:
            return np.zeros(len(self.ids), dtype=bool)
        return self.skill_members[:, index]

    def count_servers(self, mask: Mask) -> int:
        """How many distinct servers the masked tools come from."""
        codes = self.columns["source_server_id"][mask]
        return int(np.count_nonzero(np.bincount(codes))) if codes.size else 0

    def mask(self, where: Where) -> Mask:
        """Which live tools satisfy ``where`` (the same semantics as the index's filter)."""
        result = self.flags["alive"].copy()
        if where.server_id is not None:
            result &= self._equals("source_server_id", where.server_id)
        if where.server_names is not None:
            result &= self._any_of("source_server_name", where.server_names)
        if where.statuses is not None:
            result &= self._any_of("server_status", where.statuses)
        if where.external_only_false:
            result &= ~self.flags["external"]
        if where.namespace is not None:
            result &= self._equals("namespace", where.namespace)
        if where.categories is not None:
            result &= self._any_of("category", where.categories)
        if where.embedded_only:
            result &= self.flags["embedded"]
        if where.skill_ids is not None:
            skills = np.zeros(len(self.ids), dtype=bool)
            for skill in where.skill_ids:
                skills |= self.has_skill(skill)
            if where.or_unclassified:
                skills |= ~self.flags["classified"]
            result &= skills
        return result
