"""STDIO transport: an MCP server as a child process in its own process group.

mcp 2.3's ``stdio_client`` already starts the child with ``start_new_session=True``, but it
gives no hook to run code in the child (``PR_SET_PDEATHSIG``), writes the child's stderr to a
file object instead of handing us lines, takes its inherited environment from a fixed allow-list
instead of a configurable one, and does not expose the process (pid, exit code). So this
module spawns the process itself and speaks the same stream contract the SDK's ``ClientSession``
consumes: a read stream of ``SessionMessage | Exception`` and a write stream of
``SessionMessage``, newline-delimited JSON-RPC on stdin/stdout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolmesh.platform import processes
from toolmesh.storable import storable
from toolmesh_session_worker.upstream.streams import TransportStreams

logger = logging.getLogger("toolmesh.upstream")

KILL_GRACE_SECONDS = 2.0
"""Time between SIGTERM and SIGKILL to the process group."""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Longest message accepted from an upstream, a stdout line or an SSE event (a tools/list of thousands of
tools is one line)."""
_STDERR_LINE_CHARS = 4000


def base_environment(names: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` named in ``names`` (``TOOLMESH_STDIO_BASE_ENV``): all a STDIO
    server inherits from the worker; everything else comes from its own config's ``env``."""
    return {name: environ[name] for name in names if name in environ}


class StdioProcess:
    """One upstream server process: spawn, stream bridging, stderr capture, group kill.

    The child's environment is ``base_env`` (a few variables such as PATH and HOME) overlaid
    with the server's configured ``env``; nothing else of the worker's environment reaches it.
    ``rlimits`` are set in the child before exec (a sandboxed child's command is its sandbox's).
    ``pass_fds`` (the host paths its sandbox binds) are handed to the first child spawned and closed
    here right after: the process is connected once.
    """

    def __init__(
        self,
        server_name: str,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None = None,
        base_env: Mapping[str, str] | None = None,
        rlimits: Mapping[int, tuple[int, int]] | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.server_name = server_name
        self._pass_fds = list(pass_fds)
        weakref.finalize(self, _close_all, self._pass_fds)  # never connected: still closed
        self._argv = [command, *args]
        self._env = {**(base_env or {}), **env}  # never the worker's own environment
        self._cwd = cwd
        self._rlimits = dict(rlimits or {})
        self.process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        """Pid of the child (also its process group id), once spawned."""
        return None if self.process is None else self.process.pid

    def failure_hint(self) -> str:
        """The exit status, to explain a failed connect. The child's stderr is never part of it: the
        child may print anything it can read, so its lines go only to the log, through the redactor."""
        if self.process is not None and self.process.returncode is not None:
            return f"process exited with code {self.process.returncode}"
        return ""

    def refused(self) -> None:
        """A local process has no credentials to refuse."""
        return None

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        """Spawn the process and yield the SDK's (read, write) streams; kill the group on exit."""
        fds = self._pass_fds[:]
        self._pass_fds.clear()
        try:
            process = await processes.spawn_piped(
                self._argv, env=self._env, cwd=self._cwd, limit=MAX_MESSAGE_BYTES, rlimits=self._rlimits, pass_fds=fds
            )
        finally:
            _close_all(fds)
        self.process = process
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump_stdout, process, read_send)
                tg.start_soon(self._pump_stdin, process, write_recv, read_send)
                tg.start_soon(self._pump_stderr, process)
                try:
                    yield read_recv, write_send
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await kill_process_group(process)
            for stream in (read_send, read_recv, write_send, write_recv):
                stream.close()

    async def _pump_stdout(
        self, process: asyncio.subprocess.Process, sink: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None
        async with sink:  # closing the sink is the session's end-of-stream
            while True:
                try:
                    line = await process.stdout.readline()
                except ValueError as exc:  # line longer than MAX_MESSAGE_BYTES; the reader dropped it
                    await sink.send(exc)
                    continue
                except ConnectionError as exc:
                    logger.warning("stdout of the server failed: %s", exc, extra={"server": self.server_name})
                    return
                if not line:
                    return
                if line.strip():
                    await sink.send(_parse_line(line))

    async def _pump_stdin(
        self,
        process: asyncio.subprocess.Process,
        source: MemoryObjectReceiveStream[SessionMessage],
        read_sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert process.stdin is not None
        stdin = process.stdin
        try:
            async with source:
                async for message in source:
                    # Messages queued meanwhile (concurrent calls) go out in the same write: one
                    # syscall, one wake-up of the child, for all of them.
                    lines = [_line(message), *(_line(queued) for queued in _queued(source))]
                    stdin.write(b"".join(lines))
                    await stdin.drain()
        except (ConnectionError, OSError) as exc:
            # The server can no longer read: end the read side so waiters fail instead of hanging.
            logger.warning("stdin of the server failed: %s", exc, extra={"server": self.server_name})
            read_sink.close()
        finally:
            stdin.close()

    async def _pump_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while True:
            try:
                raw = await process.stderr.readline()
            except ValueError:  # an endless line; skip what the reader kept
                continue
            if not raw:
                return
            line = storable(raw.decode(errors="replace")).rstrip()[:_STDERR_LINE_CHARS]
            if line:
                logger.info("%s", line, extra={"server": self.server_name})


def _close_all(fds: list[int]) -> None:
    """Close the descriptors in ``fds`` (this process's copies) and forget them."""
    for fd in fds:
        os.close(fd)
    fds.clear()


def _line(message: SessionMessage) -> bytes:
    """One message as a line of newline-delimited JSON-RPC."""
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def _queued(source: MemoryObjectReceiveStream[SessionMessage]) -> list[SessionMessage]:
    """The messages already waiting in ``source``, without waiting for more."""
    waiting: list[SessionMessage] = []
    while True:
        try:
            waiting.append(source.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return waiting


def _parse_line(line: bytes) -> SessionMessage | Exception:
    """Parse one stdout line; a bad line becomes a value the session reports, not a crash."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        return exc


async def kill_process_group(process: asyncio.subprocess.Process, grace: float = KILL_GRACE_SECONDS) -> None:
    """SIGTERM the child's whole process group, SIGKILL it after ``grace`` seconds; reap the child.

    The group is signalled even when the leader already exited, so grandchildren it left
    behind are stopped too.
    """
    if process.stdin is not None:
        process.stdin.close()
    await processes.stop(process, signal.SIGTERM, grace, tree_signal=True)
