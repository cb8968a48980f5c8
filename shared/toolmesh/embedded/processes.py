"""Child processes of embedded servers: spawn them tied to us, find leftovers, stop them.

Every embedded server runs as a direct child in its own process group (so one signal reaches
the server and its helpers) and, on Linux, with ``PR_SET_PDEATHSIG`` set to ``SIGKILL``: if we
die, even by ``kill -9``, the kernel kills the server too. The parent-death signal fires when
the *thread* that spawned the child exits, so spawn from a long-lived thread (the event loop's).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


class EmbeddedServerError(RuntimeError):
    """An embedded server (NATS, Postgres) could not be provisioned, started or stopped."""


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """Build a ``preexec_fn`` asking the kernel to SIGKILL the child when its parent dies."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: the child only calls into it

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def spawn(
    argv: Sequence[str],
    *,
    log: IO[bytes],
    cwd: Path | None = None,
    user: int | None = None,
    group: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, output appended to ``log``, dying with us.

    ``user``/``group`` switch credentials before exec (and before the parent-death signal is
    set, since a credential change clears it).
    """
    preexec = _die_with_parent(os.getpid()) if sys.platform == "linux" else None
    logger.debug("spawning %s", " ".join(argv))
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=preexec,
        user=user,
        group=group,
        extra_groups=[] if group is not None else None,
    )


async def stop_process(proc: subprocess.Popen[bytes], sig: signal.Signals, grace: float) -> int:
    """Send ``sig`` to ``proc``, wait up to ``grace`` s, then SIGKILL its process group; reap it."""
    if proc.poll() is None:
        _signal_pid(proc.pid, sig)
        if not await poll_until(lambda: proc.poll() is not None, grace):
            logger.warning("pid %d ignored %s for %.0fs, killing it", proc.pid, sig.name, grace)
    _kill_group(proc.pid)
    await poll_until(lambda: proc.poll() is not None, 5.0)
    return proc.wait(timeout=1.0)


async def poll_until(done: Callable[[], bool], grace: float, interval: float = 0.05) -> bool:
    """Check ``done()`` every ``interval`` s for up to ``grace`` s; return its last value."""
    deadline = time.monotonic() + grace
    while True:
        if done():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_pid(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


PARENT_EXIT_GRACE = 3.0
"""How long leftovers whose parent is still alive are given for that parent to finish exiting."""


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process from ``/proc``, None if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def pid_alive(pid: int) -> bool:
    """True if a process (not a zombie) with this pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _proc_stat(pid)
    return stat is None or stat[0] != "Z"


def _uses_dir(pid: int, directory: Path, comm: str) -> bool:
    proc = Path(f"/proc/{pid}")
    inside = str(directory) + os.sep
    try:
        if proc.joinpath("comm").read_text().strip() != comm:
            return False
        args = proc.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0")
        if any(arg == str(directory) or arg.startswith(inside) for arg in args):
            return True
        return Path(os.readlink(proc / "cwd")) == directory
    except OSError:
        return False


def pids_using_dir(directory: Path, comm: str) -> list[int]:
    """Live processes named ``comm`` whose command line names, or whose cwd is, ``directory``.

    Linux only (reads ``/proc``); elsewhere returns an empty list.
    """
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return []
    directory = directory.resolve()
    found = []
    for entry in proc_root.iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            pid = int(entry.name)
            if _uses_dir(pid, directory, comm) and pid_alive(pid):
                found.append(pid)
    return found


def _held_by_live_parent(pids: list[int]) -> dict[int, int]:
    """The pids among ``pids`` whose parent is alive and not init nor one of ``pids``: {pid: ppid}."""
    held = {}
    for pid in pids:
        stat = _proc_stat(pid)
        if stat is not None and stat[1] not in (0, 1, *pids) and pid_alive(stat[1]):
            held[pid] = stat[1]
    return held


async def kill_leftovers(directory: Path, comm: str, sig: signal.Signals, grace: float = 10.0) -> None:
    """Stop orphaned ``comm`` processes of an earlier run on ``directory`` (``sig``, then SIGKILL).

    A server on ``directory`` whose parent is still alive belongs to another live run: it is left
    alone and ``EmbeddedServerError`` is raised.
    """
    pids = pids_using_dir(directory, comm)
    if not pids:
        return
    # A parent killed a moment ago may still be exiting: give it a little time before calling the
    # directory "in use" by a live run.
    await poll_until(lambda: not _held_by_live_parent(pids_using_dir(directory, comm)), PARENT_EXIT_GRACE)
    pids = pids_using_dir(directory, comm)
    if not pids:
        return
    held = _held_by_live_parent(pids)
    if held:
        raise EmbeddedServerError(f"{directory} is in use by running {comm} (pid: parent pid) {held}")
    logger.warning("stopping leftover %s processes %s using %s", comm, pids, directory)
    for pid in pids:
        _signal_pid(pid, sig)
    if await poll_until(lambda: not any(pid_alive(p) for p in pids), grace):
        return
    for pid in pids:
        _signal_pid(pid, signal.SIGKILL)
    if not await poll_until(lambda: not any(pid_alive(p) for p in pids), 5.0):
        raise EmbeddedServerError(f"leftover {comm} processes {pids} on {directory} would not die")


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
