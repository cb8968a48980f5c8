"""The searchable tools as the index projection keeps them in memory, and the catalogs it publishes.

The projection writes rows here as it applies events (no index scan per event); skill vectors are
kept as running sums per skill (BR-008: the normalised mean of the description and the skill's
tools), so a classified batch costs its own tools, not the catalog. A ``Catalog`` is built from the
rows off the event loop, at most one at a time, coalescing whatever changed meanwhile; searches read
the last one published and never wait for the writer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from toolmesh.platform.supervision import wait_event
from toolmesh.search.catalog import COLUMNS, FLAGS, Catalog, SkillRows
from toolmesh.search.lexical import EMPTY, DocumentTerms, LexicalIndex, Postings, Vocabulary, tool_fields
from toolmesh.skills.taxonomy import Skill

log = logging.getLogger("toolmesh.search")
Vector = npt.NDArray[np.float32]
PUBLISH_INTERVAL = 0.2  # seconds between two catalog builds while events keep coming
_INLINE_POSTINGS = 2000  # newer tools whose postings are sorted on the loop; more go to a thread


def skill_vector(description: Vector, total: npt.NDArray[np.float64], count: int) -> Vector:
    """BR-008: the normalised mean of the description's and the skill's tools' embeddings."""
    mean = (description.astype(np.float64) + total) / (count + 1)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm > 0 else description


class SkillVectors:
    """Per skill: the description's vector, the sum and count of its embedded tools' vectors."""

    def __init__(self, skills: Mapping[str, Skill], dimensions: int) -> None:
        self.skills = dict(skills)
        self.descriptions: dict[str, Vector] = {}
        self._sums = {s: np.zeros(dimensions, dtype=np.float64) for s in self.skills}
        self._counts = dict.fromkeys(self.skills, 0)
        self.changed: set[str] = set()

    def add(self, skill_ids: Iterable[str], vector: Vector, sign: int) -> None:
        """Count ``vector`` in (``sign`` 1) or out (-1) of each skill."""
        for skill in skill_ids:
            if skill in self._sums:
                self._sums[skill] += sign * vector.astype(np.float64)
                self._counts[skill] += sign
                self.changed.add(skill)

    def count(self, skill: str) -> int:
        """How many embedded tools the skill has."""
        return self._counts.get(skill, 0)

    def vector(self, skill: str) -> Vector | None:
        """The skill's vector (None: no description vector, i.e. no model)."""
        description = self.descriptions.get(skill)
        if description is None:
            return None
        return skill_vector(description, self._sums[skill], self._counts[skill])

    def rows(self, dimensions: int) -> SkillRows:
        """Every skill with a vector, for a catalog."""
        ids = [s for s in self.skills if s in self.descriptions]
        vectors = np.array([self.vector(s) for s in ids], dtype=np.float32).reshape(len(ids), dimensions)
        payloads = [self.payload(s) for s in ids]
        return SkillRows(ids, vectors, payloads)

    def payload(self, skill: str) -> dict[str, Any]:
        """The skill's point payload (without the namespace, which the projection adds)."""
        s = self.skills[skill]
        return {"skill_id": s.id, "name": s.name, "description": s.description, "tool_count": self.count(skill)}


@dataclass(frozen=True)
class Row:
    """One tool as the projection sees it: its payload, its vector (None: not embedded), its terms, its slot."""

    id: str
    payload: dict[str, Any]
    vector: Vector | None
    terms: DocumentTerms
    slot: int


class SearchTable:
    """Every indexed tool in a slot of growing arrays, with skill sums, and the last published catalog.

    A slot's vector is written once: a tool whose vector or text changes moves to a new slot and the
    old one is marked dead, so a published catalog can share the vector matrix without a copy (a tool
    indexed before its vector gets it in its slot: published catalogs then score it by it too). Dead
    slots are dropped (``_compact``) when they outnumber the live ones.
    """

    def __init__(self, skills: Mapping[str, Skill], dimensions: int) -> None:
        self.dimensions = dimensions
        self.vocabulary = Vocabulary()
        self.skills = SkillVectors(skills, dimensions)
        self._skill_order = {s: i for i, s in enumerate(skills)}
        self._rows: dict[str, Row] = {}
        self._by_server: dict[str, set[str]] = {}
        self._codes: dict[str, dict[Any, int]] = {c: {} for c in COLUMNS}
        self._allocate(1024)
        self._used = 0
        self._dead = 0
        self._base: Postings = Postings([])
        self.applied_seq = 0
        self._dirty = asyncio.Event()
        self._build_lock = asyncio.Lock()
        self._publishing = False
        self._catalog = self._snapshot(self._base, Postings([]), 0, 0)
        self.published_at = time.time()

    def _allocate(self, capacity: int) -> None:
        self._ids: list[str | None] = [None] * capacity
        self._payloads: list[dict[str, Any] | None] = [None] * capacity
        self._terms: list[DocumentTerms] = [EMPTY] * capacity
        self._vectors = np.zeros((capacity, self.dimensions), dtype=np.float32)
        self._columns = {c: np.full(capacity, -1, dtype=np.int32) for c in COLUMNS}
        self._flags = {f: np.zeros(capacity, dtype=bool) for f in FLAGS}
        self._members = np.zeros((capacity, len(self._skill_order)), dtype=bool)

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, point_id: str) -> Row | None:
        """The row of ``point_id``."""
        return self._rows.get(point_id)

    def of_server(self, server_id: str) -> list[Row]:
        """Rows of one server's tools."""
        return [self._rows[i] for i in self._by_server.get(server_id, ())]

    def put(self, point_id: str, payload: dict[str, Any], vector: Vector | None) -> None:
        """Add or replace a tool (its terms are computed once, here)."""
        old = self._rows.get(point_id)
        same_text = old is not None and _lexical(old.payload) == _lexical(payload)
        terms = old.terms if old is not None and same_text else DocumentTerms.of(tool_fields(payload), self.vocabulary)
        if old is not None and same_text and old.vector is vector:
            self._set(old, Row(point_id, payload, vector, terms, old.slot))  # same slot: payload only
            return
        if old is not None:
            self._kill(old)
        if self._used == len(self._ids):
            self._grow()
        row = Row(point_id, payload, vector, terms, self._used)
        self._used += 1
        self._ids[row.slot] = point_id
        self._terms[row.slot] = terms
        if vector is not None:
            self._vectors[row.slot] = vector
        self._flags["alive"][row.slot] = True
        self._flags["embedded"][row.slot] = vector is not None
        self._set(None, row)

    def set_vector(self, point_id: str, vector: Vector, changes: Mapping[str, Any]) -> None:
        """Give a tool that has none its vector, in its own slot (never written before), with payload ``changes``."""
        old = self._rows.get(point_id)
        if old is None or old.vector is not None:
            return
        vector = np.array(vector, dtype=np.float32)  # its own copy: not a view keeping its batch alive
        self._vectors[old.slot] = vector
        self._flags["embedded"][old.slot] = True
        self._set(old, Row(point_id, {**old.payload, **changes}, vector, old.terms, old.slot))

    def update(self, point_id: str, changes: Mapping[str, Any]) -> None:
        """Change payload fields of a tool (a new payload dict: published catalogs keep theirs)."""
        old = self._rows.get(point_id)
        if old is not None:
            self._set(old, Row(point_id, {**old.payload, **changes}, old.vector, old.terms, old.slot))

    def remove(self, point_id: str) -> None:
        """Forget a tool."""
        old = self._rows.get(point_id)
        if old is not None:
            self._kill(old)
            del self._rows[point_id]
            self._dirty.set()

    def _set(self, old: Row | None, row: Row) -> None:
        """Make ``row`` current in its slot: payload, columns, skill sums and memberships."""
        if old is not None:
            self._count(old, -1)
        payload, slot = row.payload, row.slot
        self._payloads[slot] = payload
        for column in COLUMNS:
            codes = self._codes[column]
            value = payload.get(column)
            self._columns[column][slot] = codes.setdefault(value, len(codes))
        self._flags["external"][slot] = bool(payload.get("is_external"))
        self._flags["classified"][slot] = bool(payload.get("is_classified"))
        self._members[slot] = False
        for skill in payload.get("skill_ids") or []:
            if skill in self._skill_order:
                self._members[slot, self._skill_order[skill]] = True
        self._count(row, 1)
        self._rows[row.id] = row
        self._dirty.set()

    def _count(self, row: Row, sign: int) -> None:
        server = str(row.payload.get("source_server_id"))
        if sign > 0:
            self._by_server.setdefault(server, set()).add(row.id)
        else:
            self._by_server.get(server, set()).discard(row.id)
        if row.vector is not None:
            self.skills.add(row.payload.get("skill_ids") or [], row.vector, sign)

    def _kill(self, row: Row) -> None:
        self._count(row, -1)
        self._flags["alive"][row.slot] = False
        self._dead += 1

    def _grow(self) -> None:
        """Twice the room (published catalogs keep the old arrays)."""
        used = self._used
        ids, payloads, terms = self._ids, self._payloads, self._terms
        vectors, columns, flags, members = self._vectors, self._columns, self._flags, self._members
        self._allocate(max(1024, 2 * len(ids)))
        self._ids[:used], self._payloads[:used], self._terms[:used] = ids[:used], payloads[:used], terms[:used]
        self._vectors[:used] = vectors[:used]
        for column in COLUMNS:
            self._columns[column][:used] = columns[column][:used]
        for flag in FLAGS:
            self._flags[flag][:used] = flags[flag][:used]
        self._members[:used] = members[:used]

    def _compact(self) -> None:
        """Drop dead slots: live rows move to new arrays, in slot order (published catalogs keep the old)."""
        rows = sorted(self._rows.values(), key=lambda r: r.slot)
        keep = np.array([r.slot for r in rows], dtype=np.int64)
        old_terms, old_payloads = self._terms, self._payloads
        vectors, columns, flags, members = self._vectors, self._columns, self._flags, self._members
        self._allocate(max(1024, 2 * len(rows)))
        count = len(rows)
        self._vectors[:count] = vectors[keep]
        for column in COLUMNS:
            self._columns[column][:count] = columns[column][keep]
        for flag in FLAGS:
            self._flags[flag][:count] = flags[flag][keep]
        self._members[:count] = members[keep]
        for slot, row in enumerate(rows):
            self._ids[slot] = row.id
            self._payloads[slot], self._terms[slot] = old_payloads[row.slot], old_terms[row.slot]
            self._rows[row.id] = replace(row, slot=slot)
        self._used, self._dead = count, 0
        self._base = Postings([])

    def applied(self, seq: int) -> None:
        """Events up to ``seq`` are in the rows."""
        self.applied_seq = seq
        self._dirty.set()

    @property
    def current(self) -> Catalog:
        """The last published catalog."""
        return self._catalog

    async def catalog(self) -> Catalog:
        """The current catalog; built now if rows changed and no publisher runs (tests, benchmarks, CLI)."""
        if self._dirty.is_set() and not self._publishing:
            await self.publish()
        return self._catalog

    def _parts(self) -> tuple[Postings, list[DocumentTerms]]:
        """The BM25F base postings (rebuilt when the newer slots grow past a quarter of it) and the newer slots."""
        if self._dead > max(1024, len(self._rows)):
            self._compact()
        used, base = self._used, self._base
        if used - (base.offset + base.size) > max(256, base.size // 4):
            return Postings([]), self._terms[:used]  # rebuild the base over every slot
        return base, self._terms[base.offset + base.size : used]

    def _snapshot(self, base: Postings, fresh: Postings, used: int, seq: int) -> Catalog:
        """A catalog of the first ``used`` slots; ``base`` and ``fresh`` are their BM25F postings."""
        return Catalog(
            seq=seq,
            built_at=time.time(),
            ids=self._ids[:used],
            payloads=self._payloads[:used],
            vectors=self._vectors[:used],
            lexical=LexicalIndex([base, fresh], used, self.vocabulary),
            skills=self.skills.rows(self.dimensions),
            columns={c: a[:used].copy() for c, a in self._columns.items()},
            codes=self._codes,
            flags={f: a[:used].copy() for f, a in self._flags.items()},
            skill_members=self._members[:used].copy(),
            skill_order=self._skill_order,
        )

    async def publish(self) -> Catalog:
        """Build a catalog of the rows as they are now and make it current.

        Everything but the postings is copied here, on the event loop, in one numpy step per array;
        postings of more than a few thousand tools are sorted in a worker thread.
        """
        async with self._build_lock:
            self._dirty.clear()
            base, newer = self._parts()
            used, seq = self._used, self.applied_seq
            offset = base.offset + base.size
            if len(newer) > _INLINE_POSTINGS:
                fresh = await asyncio.to_thread(Postings, newer, offset)
            else:
                fresh = Postings(newer, offset)
            if base.size == 0:
                base, fresh = fresh, Postings([], offset + fresh.size)
                self._base = base
            self._catalog, self.published_at = self._snapshot(base, fresh, used, seq), time.time()
            return self._catalog

    async def run_publisher(self, stop: asyncio.Event, interval: float = PUBLISH_INTERVAL) -> None:
        """Publish a catalog whenever rows changed, at most one every ``interval`` seconds, until ``stop``."""
        self._publishing = True
        try:
            while not stop.is_set():
                if not await wait_event(self._dirty, 0.5):
                    continue
                started = time.perf_counter()
                await self.publish()
                await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))
        finally:
            self._publishing = False


def _lexical(payload: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(payload.get(k) for k in ("original_name", "source_server_name", "description", "input_schema"))
