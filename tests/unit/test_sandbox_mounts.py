"""Host paths a STDIO child is given are judged on what was opened, and bound from that descriptor."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolmesh.sandbox.mounts import HeldPaths


@pytest.fixture
def held(tmp_path: Path) -> Iterator[HeldPaths]:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "credential.key").write_text("secret")
    paths = HeldPaths(tmp_path / "data")
    yield paths
    paths.close()


def test_a_symlink_swapped_after_the_check_does_not_change_what_is_bound(tmp_path: Path, held: HeldPaths) -> None:
    """Attack: check-then-use race, a declared symlink turned to the data dir between check and bind."""
    (tmp_path / "ok").mkdir()
    link = tmp_path / "l"
    link.symlink_to(tmp_path / "ok")
    assert held.hold(str(link)) is None
    link.unlink()
    link.symlink_to(tmp_path / "data")
    assert os.readlink(f"/proc/self/fd/{held.fds[str(link)]}") == str(tmp_path / "ok")


def test_what_is_opened_is_refused_when_it_is_or_holds_the_data_dir(tmp_path: Path, held: HeldPaths) -> None:
    """Attack: a declared path that resolves, at open, into the data dir or above it."""
    link = tmp_path / "innocent"
    link.symlink_to(tmp_path / "data")
    for path in (link, link / "credential.key", tmp_path / "data", tmp_path, Path("/")):
        assert held.hold(str(path)) == f"{path} holds or is inside toolmesh's data directory"
    assert held.fds == {}


def test_a_directory_inside_the_data_dir_is_refused_by_its_lineage(tmp_path: Path, held: HeldPaths) -> None:
    (tmp_path / "data" / "inner" / "deeper").mkdir(parents=True)
    (tmp_path / "side").symlink_to(tmp_path / "data" / "inner")
    assert held.hold(str(tmp_path / "side" / "deeper")) is not None
    assert held.fds == {}


def test_shared_temporary_directories_may_not_be_writable(held: HeldPaths) -> None:
    """Rule: /tmp, /var/tmp and /dev/shm would be a channel between the children of different servers."""
    for path in ("/tmp", "/var/tmp/", "/dev/shm"):
        problem = held.hold(path, writable=True)
        assert problem is not None and "shared temporary directory" in problem
    assert held.hold("/var/tmp") is None  # read-only is another matter


def test_a_missing_path_is_refused_and_a_plain_one_is_held(tmp_path: Path, held: HeldPaths) -> None:
    (tmp_path / "srv").mkdir()
    assert held.hold(str(tmp_path / "missing")) == f"{tmp_path / 'missing'} cannot be opened"
    assert held.hold(str(tmp_path / "srv"), writable=True) is None
    fd = held.fds[str(tmp_path / "srv")]
    held.close()
    with pytest.raises(OSError):
        os.fstat(fd)
