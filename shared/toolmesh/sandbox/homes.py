"""The private homes of sandboxed STDIO servers on the host: where they are, and removing one safely.

Each STDIO server's home is ``<data dir>/sandbox-homes/<server id>``, bound writable into its
sandbox, so its child may have left anything there: symlinks to host files, directories it made
unreadable, very deep trees. Removal walks the tree by open directory descriptors and never follows
a symlink (a symlink is unlinked, never its target), so nothing outside the home is touched.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
from pathlib import Path

log = logging.getLogger("toolmesh.sandbox")

HOMES_DIR = "sandbox-homes"
"""Under the data dir: one private home per STDIO server (only its own is bound into a child)."""
MAX_DEPTH = 64
"""Directories nested deeper are moved up to the home's top first, so a walk holds few descriptors."""
MAX_PASSES = 1000
"""Passes over a home (each removes the top ``MAX_DEPTH`` levels) before giving up on one still filling up."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def homes_dir(data_dir: Path) -> Path:
    """The directory holding every server's home."""
    return data_dir.resolve() / HOMES_DIR


def home_keys(data_dir: Path) -> list[str]:
    """The names (server ids) of the homes present on this host."""
    try:
        return sorted(os.listdir(homes_dir(data_dir)))
    except FileNotFoundError:
        return []


def remove_home(data_dir: Path, key: str) -> bool:
    """Remove the home ``key`` and everything in it; True when it is gone (or was never there).

    The homes directory is opened without following a symlink, and so is every directory below it.
    """
    if key in ("", ".", "..") or "/" in key or "\0" in key:
        raise ValueError(f"unusable home name {key!r}")
    try:
        base = os.open(homes_dir(data_dir), _DIR_FLAGS | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError as exc:  # not a directory: a symlink put in its place is not followed
        log.warning("sandbox homes at %s not opened: %s", homes_dir(data_dir), exc)
        return False
    try:
        _remove_entry(base, key)
    except FileNotFoundError:
        pass  # removed meanwhile (another worker sharing this data dir)
    except OSError as exc:
        log.warning("sandbox home %s not removed: %s", key, exc)
        return False
    finally:
        os.close(base)
    return True


def _remove_entry(parent: int, name: str) -> None:
    """Remove ``name`` in the open directory ``parent``: a file or symlink is unlinked, a directory emptied
    and removed."""
    if not stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
        os.unlink(name, dir_fd=parent)
        return
    top = _open_dir(parent, name)
    try:
        for _ in range(MAX_PASSES):  # deep directories moved up to the top are emptied on the next pass
            if not os.listdir(top):
                break
            _empty(top, top, 0)
        else:
            raise OSError(errno.ENOTEMPTY, "still not empty after every pass", name)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=parent)


def _empty(directory: int, top: int, depth: int) -> None:
    """Remove what the open ``directory`` holds; directories below ``MAX_DEPTH`` go up to ``top``."""
    os.fchmod(directory, 0o700)  # a child may have taken the write bit away to keep its files
    for name in os.listdir(directory):
        if not stat.S_ISDIR(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=directory)
        elif depth >= MAX_DEPTH:
            os.rename(name, f".removing-{secrets.token_hex(8)}", src_dir_fd=directory, dst_dir_fd=top)
        else:
            inner = _open_dir(directory, name)
            try:
                _empty(inner, top, depth + 1)
            finally:
                os.close(inner)
            os.rmdir(name, dir_fd=directory)


def _open_dir(parent: int, name: str) -> int:
    """Open the directory ``name`` of ``parent`` without following a symlink; one the child made
    unreadable gets its permissions back first (through a handle on that very directory)."""
    try:
        return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
    except PermissionError:
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)  # the magic link is the opened inode itself
            return os.open(f"/proc/self/fd/{handle}", _DIR_FLAGS)
        finally:
            os.close(handle)
