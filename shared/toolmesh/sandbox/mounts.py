"""Host paths a sandboxed STDIO child sees, held open: what is checked is what bubblewrap binds.

A path checked by name and bound by name later can change in between (a symlink swapped by anyone who
can write a directory on it). So each path is opened once (``O_PATH``, symlinks followed at that moment),
the opened object itself is checked (its kernel-resolved path and its device and inode against the data
dir and its ancestors), and the descriptor is what bubblewrap binds (``--ro-bind-fd``/``--bind-fd``).
"""

from __future__ import annotations

import os
from pathlib import Path

from toolmesh.sandbox.argv import path_problem

SHARED_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
"""World-writable host directories a child may not get writable: they would be a channel between the
children of different servers (every child has a private ``/tmp`` of its own)."""


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def _lineage(directory: Path) -> set[tuple[int, int]]:
    """Device and inode of ``directory`` and of every directory above it."""
    found: set[tuple[int, int]] = set()
    path = Path(os.path.realpath(directory))
    for each in (path, *path.parents):
        try:
            found.add(_identity(os.stat(each)))
        except OSError:
            continue
    return found


class HeldPaths:
    """Open, checked ``O_PATH`` descriptors of the host paths one child is given (``fds``: path -> fd).

    The owner passes ``fds`` to the child (bubblewrap) and closes them in its own process after the spawn.
    """

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._data = _identity(os.stat(os.path.realpath(data_dir))) if os.path.exists(data_dir) else None
        self._refused = _lineage(data_dir)
        self.fds: dict[str, int] = {}

    def hold(self, path: str, *, writable: bool = False) -> str | None:
        """Open ``path`` and keep it when what was opened may be shown; else why not (nothing kept)."""
        if path in self.fds:
            return None
        if writable and os.path.normpath(path) in SHARED_TEMP_DIRS:
            return f"{path} is a shared temporary directory (the child has a private /tmp)"
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return f"{path} cannot be opened"
        problem = self._opened_problem(path, fd, writable)
        if problem is not None:
            os.close(fd)
            return problem
        self.fds[path] = fd
        return None

    def close(self) -> None:
        """Close every held descriptor (in this process; a spawned child keeps its copies)."""
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def _opened_problem(self, path: str, fd: int, writable: bool) -> str | None:
        """Why the object ``fd`` opened may not be shown, judged on the object, never on ``path`` again."""
        try:
            resolved = os.readlink(f"/proc/self/fd/{fd}")
            opened = _identity(os.fstat(fd))
        except OSError:
            return f"{path} cannot be resolved"
        if not resolved.startswith("/") or resolved.endswith(" (deleted)"):
            return f"{path} cannot be resolved"
        if opened in self._refused:
            return f"{path} holds or is inside toolmesh's data directory"
        if writable and resolved in SHARED_TEMP_DIRS:
            return f"{path} is a shared temporary directory (the child has a private /tmp)"
        if self._data is not None and self._beneath_data(fd):
            return f"{path} holds or is inside toolmesh's data directory"
        problem = path_problem(resolved, self._data_dir)
        if problem is not None:
            return problem.replace(resolved, path, 1)
        try:
            unchanged = _identity(os.stat(resolved)) == opened
        except OSError:
            unchanged = False
        return None if unchanged else f"{path} changed while it was checked"

    def _beneath_data(self, fd: int) -> bool:
        """True when a directory above the opened object (walked by ``..`` from it) is the data dir."""
        try:
            current = os.open("..", os.O_PATH | os.O_CLOEXEC, dir_fd=fd)
        except NotADirectoryError:
            return False  # a file: its path was checked; the walk starts from a directory
        except OSError:
            return True
        try:
            while True:
                here = _identity(os.fstat(current))
                if here == self._data:
                    return True
                parent = os.open("..", os.O_PATH | os.O_CLOEXEC, dir_fd=current)
                above = _identity(os.fstat(parent))
                os.close(current)
                current = parent
                if above == here:
                    return False
        finally:
            os.close(current)
