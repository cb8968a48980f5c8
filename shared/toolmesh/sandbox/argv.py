"""The bubblewrap command line of a sandboxed STDIO child, and its resource limits.

Pure functions of a server's ``sandbox`` config, the settings and a few resolved paths: nothing
here starts a process. The child gets its own mount, PID, IPC, UTS (and, with ``network: false``,
network) namespaces, a fresh ``/proc`` and ``/dev``, the system directories read-only, a private
``/tmp``, a private ``HOME``, the host paths its arguments name and the host paths its config and the
operator declare, nothing else.
"""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from toolmesh.contracts.sandbox import StdioSandbox
from toolmesh.platform.config import Settings

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc")
"""Host directories every child sees read-only (a symlink, such as a merged ``/bin``, stays one)."""
HIDDEN_DIRS = ("/proc", "/sys", "/dev")
"""Never bound from the host: the child gets fresh ones (``/sys`` not at all)."""
SANDBOX_HOME = "/home/toolmesh"
"""Where the child's private home directory appears."""
SETPRIV = "/usr/bin/setpriv"
"""Switches a child started as root to its own uid inside the sandbox."""


@dataclass(frozen=True)
class Placement:
    """What a child's sandbox is built around: resolved on the host, checked by ``path_problem``."""

    command: Sequence[str]
    """The child's argv (its executable already resolved to a path)."""
    home: str
    """Host directory bound read-write as the child's ``HOME``."""
    runtime: Sequence[str] = ()
    """Install prefixes the executable needs (a venv, a Python or Node install), bound read-only."""
    cwd: str | None = None
    uid: int | None = None
    """When set (toolmesh runs as root), the child runs as this uid and gid."""
    fds: Mapping[str, int] = field(default_factory=dict)
    """An open descriptor of every host path bound besides ``home`` (see ``toolmesh.sandbox.mounts``):
    bubblewrap binds what was opened and checked, never the name again."""


def path_problem(path: str, data_dir: Path) -> str | None:
    """Why ``path`` may not be shown to a child (the data dir, ``/proc``, the whole root), else None."""
    if any(_within(os.path.normpath(path), hidden) for hidden in HIDDEN_DIRS):
        return f"{path} is under /proc, /sys or /dev"
    try:
        real = os.path.realpath(path)
    except OSError:
        return f"{path} cannot be resolved"
    data = os.path.realpath(data_dir)
    if real == "/":
        return f"{path} is the root directory"
    if any(_within(real, hidden) for hidden in HIDDEN_DIRS):
        return f"{path} is under /proc, /sys or /dev"
    if _within(real, data) or _within(data, real):
        return f"{path} holds or is inside toolmesh's data directory"
    if not os.path.exists(real):
        return f"{path} does not exist"
    return None


def runtime_paths(executable: str, path_env: str, data_dir: Path) -> list[str]:
    """Install prefixes ``executable`` needs: its own and its realpath's (``.../bin/x`` -> ``...``), and
    those of the interpreter its ``#!`` line names; a prefix that may not be shown is narrowed to the
    file itself. Paths under the system directories need nothing."""
    found: list[str] = []
    for candidate in _with_interpreter(executable, path_env):
        for path in dict.fromkeys((candidate, os.path.realpath(candidate))):
            if any(_within(path, system) for system in SYSTEM_DIRS):
                continue
            parent = Path(path).parent
            prefix = str(parent.parent if parent.name == "bin" else parent)
            chosen = prefix if path_problem(prefix, data_dir) is None and prefix != str(Path.home()) else path
            if chosen not in found and path_problem(chosen, data_dir) is None:
                found.append(chosen)
    return found


def argument_paths(args: Sequence[str], data_dir: Path) -> list[str]:
    """Host paths a command names in its arguments (``python /srv/mcp/server.py``), to be shown read-only:
    a file's directory (its sibling modules come along), narrowed to the file itself when that directory
    may not be shown; paths under the system directories, and those ``path_problem`` refuses, are left out."""
    found: list[str] = []
    for arg in args:
        if not os.path.isabs(arg) or not os.path.exists(arg) or path_problem(arg, data_dir) is not None:
            continue
        if any(_within(os.path.realpath(arg), system) for system in SYSTEM_DIRS):
            continue
        directory = arg if os.path.isdir(arg) else os.path.dirname(arg)
        shown = directory if path_problem(directory, data_dir) is None and directory != str(Path.home()) else arg
        if shown not in found:
            found.append(shown)
    return found


def bwrap_options(sandbox: StdioSandbox, settings: Settings, place: Placement) -> list[str]:
    """bubblewrap's options for ``place``: namespaces, mounts, binds (``place.fds`` named), capabilities.

    They reach bubblewrap through ``--args`` (see ``bwrap_argv``), never on its command line."""
    argv = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--hostname", "toolmesh-stdio"]
    if not sandbox.network:
        argv.append("--unshare-net")
    for directory in SYSTEM_DIRS:
        if os.path.islink(directory):
            argv += ["--symlink", os.readlink(directory), directory]
        else:
            argv += ["--ro-bind-try", directory, directory]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    read_only = [*place.runtime, *settings.stdio_sandbox_paths_read_only, *sandbox.paths_read_only]
    if place.cwd is not None and place.cwd not in sandbox.paths_read_write:
        read_only.append(place.cwd)
    for directory in _parents([*read_only, *sandbox.paths_read_write, SANDBOX_HOME]):
        argv += ["--perms", "0755", "--dir", directory]
    for path in dict.fromkeys(read_only):
        if path not in sandbox.paths_read_write:  # bound writable below
            argv += ["--ro-bind-fd", str(_fd(place, path)), path]
    for path in dict.fromkeys(sandbox.paths_read_write):
        argv += ["--bind-fd", str(_fd(place, path)), path]
    argv += ["--bind", place.home, SANDBOX_HOME, "--chdir", place.cwd or SANDBOX_HOME]
    if place.uid is not None:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return argv


def sandboxed_command(place: Placement) -> list[str]:
    """What bubblewrap runs inside: the child's command, behind ``setpriv`` when it gets its own uid."""
    if place.uid is None:
        return list(place.command)
    switch = [SETPRIV, f"--reuid={place.uid}", f"--regid={place.uid}", "--clear-groups", "--no-new-privs"]
    return [*switch, "--", *place.command]


def bwrap_argv(bwrap: str, args_fd: int, place: Placement) -> tuple[list[str], str]:
    """bubblewrap's command line and the directory to start it in: ``./bwrap`` from its own directory
    (``argv[0]`` is what a process shows), its options read from ``args_fd``. The child sees this line as
    its PID 1's, so it learns no host path there that it was not shown, not even bubblewrap's install."""
    program = os.path.abspath(bwrap)
    argv = [f"./{os.path.basename(program)}", "--args", str(args_fd), "--", *sandboxed_command(place)]
    return argv, os.path.dirname(program)


def encode_options(options: Sequence[str]) -> bytes:
    """``options`` as ``--args`` reads them: each one NUL-terminated.

    Raises:
        ValueError: an option holds a NUL (it would split into options of its own).
    """
    if any("\0" in option for option in options):
        raise ValueError("a sandbox option holds a NUL character")
    return b"".join(option.encode() + b"\0" for option in options)


def _fd(place: Placement, path: str) -> int:
    """The descriptor ``path`` is bound from; a path without one is never bound by name."""
    try:
        return place.fds[path]
    except KeyError:
        raise ValueError(f"{path} is bound without an open descriptor") from None


def resource_limits(sandbox: StdioSandbox, settings: Settings) -> dict[int, tuple[int, int]]:
    """``setrlimit`` values (soft = hard) of a child: address space, processes, open files."""
    memory = (sandbox.memory_mb or settings.stdio_sandbox_memory_mb) * 1024 * 1024
    processes = sandbox.max_processes or settings.stdio_sandbox_max_processes
    files = sandbox.max_open_files or settings.stdio_sandbox_max_open_files
    return {
        resource.RLIMIT_AS: (memory, memory),
        resource.RLIMIT_NPROC: (processes, processes),
        resource.RLIMIT_NOFILE: (files, files),
    }


def sandbox_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``HOME`` and ``TMPDIR`` pointing inside the sandbox."""
    return {**env, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp"}


def _parents(paths: Sequence[str]) -> list[str]:
    """The directories above ``paths`` that the sandbox's root must hold, shallowest first (bubblewrap
    would make them mode 0700, closed to a child running as its own uid)."""
    found: set[str] = set()
    for path in paths:
        found.update(str(parent) for parent in Path(path).parents if str(parent) != "/")
    fixed = (*SYSTEM_DIRS, *HIDDEN_DIRS)
    kept = (p for p in found if p != "/tmp" and not any(_within(p, d) for d in fixed))
    return sorted(kept, key=lambda p: (p.count("/"), p))


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _with_interpreter(executable: str, path_env: str) -> list[str]:
    """``executable`` and, for a script, the interpreter of its ``#!`` line (``env NAME`` looked up)."""
    try:
        with open(executable, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return [executable]
    if not first.startswith(b"#!"):
        return [executable]
    words = first[2:].decode(errors="replace").split()
    if not words:
        return [executable]
    interpreter = words[0]
    if os.path.basename(interpreter) == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(names[0], path=path_env) if names else None
        return [executable, *([found] if found else [])]
    return [executable, interpreter]
