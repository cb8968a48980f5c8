"""Child processes: start them tied to us, stop their whole tree, wait for them, find them (psutil).

Every child starts in its own session (so one signal reaches it and its helpers) and, on Linux,
with ``PR_SET_PDEATHSIG`` set to ``SIGKILL``: if we die, even by ``kill -9``, the kernel kills it
too. The parent-death signal fires when the *thread* that spawned the child exits, so spawn from a
long-lived thread (the event loop's).

A child is named by its ``subprocess.Popen``, its ``asyncio`` process or a bare pid; stopping one
signals the process, then kills its whole tree (every descendant psutil finds plus the process
group, which also holds helpers an exited leader left behind) and waits for it to exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import psutil

from toolmesh.platform.polling import poll_until, wait_until

logger = logging.getLogger("toolmesh.processes")

Child = subprocess.Popen[bytes] | asyncio.subprocess.Process | int
"""A process to wait for or stop: a ``Popen``, an ``asyncio`` process or a pid."""

KILL_WAIT_SECONDS = 5.0
"""How long a killed tree is given to disappear."""

_PR_SET_PDEATHSIG = 1
_Output = int | IO[Any] | None


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when we die (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: the child only calls into it
    parent_pid = os.getpid()

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def child_setup(rlimits: Mapping[int, tuple[int, int]] | None = None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that sets ``rlimits`` (``resource`` id -> soft, hard) and ties the child to us."""
    tie = die_with_parent()
    if not rlimits:
        return tie
    limits = [(which, _within_hard(which, values)) for which, values in rlimits.items()]

    def preexec() -> None:
        for which, values in limits:
            resource.setrlimit(which, values)
        if tie is not None:
            tie()

    return preexec


def _within_hard(which: int, values: tuple[int, int]) -> tuple[int, int]:
    """``values`` lowered to our own hard limit (only root may raise one)."""
    hard = resource.getrlimit(which)[1]
    if hard == resource.RLIM_INFINITY or os.geteuid() == 0:
        return values
    return min(values[0], hard), min(values[1], hard)


def spawn(
    argv: Sequence[str],
    *,
    stdout: _Output = subprocess.DEVNULL,
    stderr: _Output = subprocess.STDOUT,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    user: int | None = None,
    group: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, stdin closed, dying with us.

    ``user``/``group`` switch credentials before exec (and before the parent-death signal is set,
    since a credential change clears it).
    """
    logger.debug("spawning %s", " ".join(argv))
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
        preexec_fn=die_with_parent(),
        user=user,
        group=group,
        extra_groups=[] if group is not None else None,
    )


async def spawn_piped(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str | None = None,
    limit: int = 2**16,
    stderr: int = asyncio.subprocess.PIPE,
    rlimits: Mapping[int, tuple[int, int]] | None = None,
    pass_fds: Sequence[int] = (),
) -> asyncio.subprocess.Process:
    """Start ``argv`` like ``spawn`` with stdin, stdout and stderr (or ``stderr``: ``STDOUT``) as asyncio
    pipes; ``limit`` is the longest line a reader takes; ``rlimits`` are set in the child before exec;
    ``pass_fds`` stay open in the child (the caller still closes its own)."""
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        preexec_fn=child_setup(rlimits),
        pass_fds=tuple(pass_fds),
        limit=limit,
    )


def _pid(child: Child) -> int:
    return child if isinstance(child, int) else child.pid


def exited(child: Child) -> bool:
    """True once ``child`` has exited (a ``Popen`` is reaped by this check)."""
    if isinstance(child, subprocess.Popen):
        return child.poll() is not None
    if isinstance(child, asyncio.subprocess.Process):
        return child.returncode is not None
    return not alive(child)


def alive(pid: int) -> bool:
    """True if a process (not a zombie) with this pid exists."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _tree(pid: int) -> list[psutil.Process]:
    """``pid`` and its descendants (those still there)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _signal_tree(pid: int, sig: signal.Signals, *, group: bool) -> None:
    for process in _tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process.send_signal(sig)
    if group:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


def send(child: Child, sig: signal.Signals) -> None:
    """Send ``sig`` to ``child`` alone (nothing if it is gone)."""
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        psutil.Process(_pid(child)).send_signal(sig)


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return True  # gone: its group may still hold what it left behind


async def stop(
    child: Child,
    sig: signal.Signals = signal.SIGTERM,
    grace: float = 10.0,
    *,
    group: bool = True,
    tree_signal: bool = False,
) -> None:
    """Send ``sig`` to ``child``, wait up to ``grace`` s, then SIGKILL its whole tree and wait for it.

    ``group``: also signal the process group ``child`` leads (for children started by ``spawn``);
    ``tree_signal``: send ``sig`` to the whole tree too, not to ``child`` alone.
    """
    pid = _pid(child)
    group = group and _leads_group(pid)
    if not exited(child):
        if tree_signal:
            _signal_tree(pid, sig, group=group)
        else:
            send(child, sig)
        if not await poll_until(lambda: exited(child), grace):
            logger.warning("pid %d ignored %s for %.1fs, killing its tree", pid, sig.name, grace)
    _signal_tree(pid, signal.SIGKILL, group=group)
    if not await poll_until(lambda: exited(child), KILL_WAIT_SECONDS):
        logger.warning("pid %d survived SIGKILL", pid)


def stop_sync(child: Child, sig: signal.Signals = signal.SIGTERM, grace: float = 10.0, *, group: bool = True) -> None:
    """``stop`` for code without an event loop."""
    pid = _pid(child)
    group = group and _leads_group(pid)
    if not exited(child):
        send(child, sig)
        if not wait_until(lambda: exited(child), grace):
            logger.warning("pid %d ignored %s for %.1fs, killing its tree", pid, sig.name, grace)
    _signal_tree(pid, signal.SIGKILL, group=group)
    wait_until(lambda: exited(child), KILL_WAIT_SECONDS)


def kill(child: Child) -> None:
    """SIGKILL ``child`` alone (its children must die by themselves) and wait for it to exit."""
    send(child, signal.SIGKILL)
    wait_until(lambda: exited(child), KILL_WAIT_SECONDS)


async def wait_exit(child: Child, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``child`` to exit; True if it did."""
    return bool(await poll_until(lambda: exited(child), timeout))


def wait_exit_sync(child: Child, timeout: float) -> bool:
    """``wait_exit`` for code without an event loop."""
    return bool(wait_until(lambda: exited(child), timeout))


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid``, None if it is gone."""
    try:
        return psutil.Process(pid).ppid()
    except psutil.NoSuchProcess:
        return None


def children(pid: int, *, recursive: bool = False) -> list[int]:
    """Live (not zombie) children of ``pid``."""
    try:
        found = psutil.Process(pid).children(recursive=recursive)
    except psutil.NoSuchProcess:
        return []
    return [p.pid for p in found if alive(p.pid)]


def command_line(pid: int) -> str | None:
    """The command line of a live (not zombie) process, None when it is gone."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def matching(fragment: str) -> list[int]:
    """Pids of live processes (not us) whose command line contains ``fragment``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or ())
        if fragment in cmdline and process.pid != os.getpid() and alive(process.pid):
            found.append(process.pid)
    return found


def _uses_dir(process: psutil.Process, directory: Path, name: str) -> bool:
    inside = str(directory) + os.sep
    try:
        if process.name() != name:
            return False
        if any(arg == str(directory) or arg.startswith(inside) for arg in process.cmdline()):
            return True
        return Path(process.cwd()) == directory
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return False


def using_dir(directory: Path, name: str) -> list[int]:
    """Live processes named ``name`` (not us) whose command line names, or whose cwd is, ``directory``."""
    directory = directory.resolve()
    return [
        p.pid for p in psutil.process_iter() if p.pid != os.getpid() and _uses_dir(p, directory, name) and alive(p.pid)
    ]


def listening_on(port: int) -> list[int]:
    """Pids of processes listening on TCP ``port`` (only those we may inspect)."""
    found = set()
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            for conn in process.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                    found.add(process.pid)
    return sorted(found)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far, 0 if it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)
