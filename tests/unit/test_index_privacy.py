"""The embedded search index is private to toolmesh's user (attack of issue 23: ``index/`` was 0755 with
0644 files, so any local user read every namespace's tool names and descriptions)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from toolmesh_projector.vector_index.edge import EdgeIndex

pytestmark = pytest.mark.unit
DIM = 4


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_index_directory_is_created_0700(tmp_path: Path) -> None:
    index = EdgeIndex(tmp_path / "data" / "index", DIM)
    try:
        assert mode(index.path) == 0o700  # nobody else may even enter it
    finally:
        asyncio.run(index.close())


def test_an_existing_world_readable_index_directory_is_made_private_on_start(tmp_path: Path) -> None:
    path = tmp_path / "index"
    first = EdgeIndex(path, DIM)
    asyncio.run(first.close())
    path.chmod(0o755)  # as an older toolmesh left it
    assert any(mode(p) & 0o004 for p in path.rglob("*"))  # files inside are world-readable: the dir must guard them

    reopened = EdgeIndex(path, DIM)
    try:
        assert mode(path) == 0o700
    finally:
        asyncio.run(reopened.close())
