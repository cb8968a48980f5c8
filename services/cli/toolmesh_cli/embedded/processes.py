"""Embedded servers' processes: the environment they start with, and the leftovers of an earlier run
on a data dir (found and stopped)."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until

logger = logging.getLogger(__name__)


class EmbeddedServerError(RuntimeError):
    """An embedded server (NATS, Postgres) could not be provisioned, started or stopped."""


SERVER_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TMPDIR")
"""The only variables of ``toolmesh up`` an embedded server (and ``initdb``) starts with: never the owner
token, the credential keys or the upstream secrets kept for ``${VAR}``, which the Postgres superuser
could read through ``COPY ... FROM PROGRAM 'env'``."""

PARENT_EXIT_GRACE = 3.0
"""How long leftovers whose parent is still alive are given for that parent to finish exiting."""


def server_environment() -> dict[str, str]:
    """The environment of an embedded server: ``SERVER_ENVIRONMENT`` as this process has it."""
    return {name: os.environ[name] for name in SERVER_ENVIRONMENT if name in os.environ}


def _held_by_live_parent(pids: list[int]) -> dict[int, int]:
    """The pids among ``pids`` whose parent is alive and not init nor one of ``pids``: {pid: ppid}."""
    held = {}
    for pid in pids:
        parent = processes.parent_of(pid)
        if parent is not None and parent not in (0, 1, *pids) and processes.alive(parent):
            held[pid] = parent
    return held


async def kill_leftovers(directory: Path, name: str, sig: signal.Signals, grace: float = 10.0) -> None:
    """Stop orphaned ``name`` processes of an earlier run on ``directory`` (``sig``, then SIGKILL).

    A server on ``directory`` whose parent is still alive belongs to another live run: it is left
    alone and ``EmbeddedServerError`` is raised.
    """
    if not processes.using_dir(directory, name):
        return
    # A parent killed a moment ago may still be exiting: give it a little time before calling the
    # directory "in use" by a live run.
    await poll_until(lambda: not _held_by_live_parent(processes.using_dir(directory, name)), PARENT_EXIT_GRACE)
    pids = processes.using_dir(directory, name)
    if not pids:
        return
    held = _held_by_live_parent(pids)
    if held:
        raise EmbeddedServerError(f"{directory} is in use by running {name} (pid: parent pid) {held}")
    logger.warning("stopping leftover %s processes %s using %s", name, pids, directory)
    for pid in pids:
        await processes.stop(pid, sig, grace, group=False)
    if any(processes.alive(pid) for pid in pids):
        raise EmbeddedServerError(f"leftover {name} processes {pids} on {directory} would not die")


def port_holders(port: int | None) -> str:
    """ ", port N is held by pid P" when other processes listen on ``port`` (a failed start's likely cause)."""
    holders = [pid for pid in processes.listening_on(port) if pid != os.getpid()] if port else []
    return f", port {port} is held by pid {', '.join(map(str, holders))}" if holders else ""


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
