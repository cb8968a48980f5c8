"""An in-memory copy of the index's tool payloads: the BM25 corpus and fast filter masks.

Rebuilt when the index's revision moves; the BM25 part only when the set of texts changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from toolmesh.index.base import Hit, Where
from toolmesh.search.lexical import LexicalIndex

Mask = npt.NDArray[np.bool_]


class Column:
    """One payload field as small integer codes, so a filter is an integer comparison, not a string scan."""

    def __init__(self, values: list[Any]) -> None:
        self._codes: dict[Any, int] = {}
        codes = [self._codes.setdefault(v, len(self._codes)) for v in values]
        self.codes = np.array(codes, dtype=np.int32)

    def equals(self, value: Any) -> Mask:
        """Rows whose value is ``value``."""
        code = self._codes.get(value)
        return self.codes == code if code is not None else np.zeros(self.codes.size, dtype=bool)

    def any_of(self, values: Sequence[Any]) -> Mask:
        """Rows whose value is one of ``values``."""
        wanted = [self._codes[v] for v in set(values) if v in self._codes]
        return np.isin(self.codes, wanted) if wanted else np.zeros(self.codes.size, dtype=bool)


@dataclass
class Catalog:
    """Tool payloads in a fixed order, with column arrays for filtering."""

    revision: int
    ids: list[str]
    payloads: list[dict[str, Any]]
    lexical: LexicalIndex
    text_key: int
    position: dict[str, int] = field(init=False)
    _columns: dict[str, Column] = field(init=False)
    _external: Mask = field(init=False)
    _unclassified: Mask = field(init=False)
    _skills: dict[str, Mask] = field(init=False)

    def __post_init__(self) -> None:
        self.position = {point_id: i for i, point_id in enumerate(self.ids)}
        self._columns = {
            key: Column([p.get(key) for p in self.payloads])
            for key in ("source_server_id", "source_server_name", "server_status", "namespace")
        }
        self._external = np.array([bool(p.get("is_external")) for p in self.payloads], dtype=bool)
        self._unclassified = ~np.array([bool(p.get("is_classified")) for p in self.payloads], dtype=bool)
        skills: dict[str, Mask] = {}
        for i, payload in enumerate(self.payloads):
            for skill in payload.get("skill_ids") or []:
                skills.setdefault(skill, np.zeros(len(self.ids), dtype=bool))[i] = True
        self._skills = skills

    @classmethod
    def build(cls, revision: int, hits: list[Hit], previous: Catalog | None) -> Catalog:
        """A catalog of ``hits``; reuses ``previous``'s BM25 index when the texts are the same."""
        hits = sorted(hits, key=lambda h: h.id)
        ids = [h.id for h in hits]
        texts = [str(h.payload.get("text") or "") for h in hits]
        key = hash((tuple(ids), tuple(texts)))
        lexical = previous.lexical if previous is not None and previous.text_key == key else LexicalIndex(texts)
        return cls(revision, ids, [h.payload for h in hits], lexical, key)

    def count_servers(self, mask: Mask) -> int:
        """How many distinct servers the masked tools come from."""
        column = self._columns["source_server_id"]
        return int(np.count_nonzero(np.bincount(column.codes[mask], minlength=1)))

    def mask(self, where: Where) -> Mask:
        """Which tools satisfy ``where`` (the same semantics as the index's filter)."""
        result = np.ones(len(self.ids), dtype=bool)
        c = self._columns
        if where.server_id is not None:
            result &= c["source_server_id"].equals(where.server_id)
        if where.server_names is not None:
            result &= c["source_server_name"].any_of(where.server_names)
        if where.statuses is not None:
            result &= c["server_status"].any_of(where.statuses)
        if where.external_only_false:
            result &= ~self._external
        if where.namespace is not None:
            result &= c["namespace"].equals(where.namespace)
        if where.skill_ids is not None:
            skills = np.zeros(len(self.ids), dtype=bool)
            for skill in where.skill_ids:
                if skill in self._skills:
                    skills |= self._skills[skill]
            if where.or_unclassified:
                skills |= self._unclassified
            result &= skills
        return result
