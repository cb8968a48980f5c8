"""What every embedded server does with its child process: spawn it writing its log, wait until it
answers (or exits), stop it, and say why a start failed."""

from __future__ import annotations

import abc
import logging
import signal
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, ClassVar, Self

from toolmesh.platform import processes
from toolmesh.platform.polling import INTERVAL_SECONDS, poll_until
from toolmesh_cli.embedded.processes import EmbeddedServerError, log_tail, port_holders, server_environment


class EmbeddedServer(abc.ABC):
    """A server run as our child process from ``data_dir``, bound to ``host``:``port``.

    A subclass names its process (``process_name``, also its logger: ``logger``) and the signal of a
    graceful stop, prepares its files in ``start`` before ``_launch``, and says when it answers
    (``_wait_ready``, through ``_await_ready``).
    """

    process_name: ClassVar[str]
    stop_signal: ClassVar[signal.Signals]
    logger: ClassVar[logging.Logger]

    def __init__(self, data_dir: Path, host: str, port: int | None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port
        self.start_timeout = 30.0
        self.stop_timeout = 15.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    @abc.abstractmethod
    def address(self) -> str:
        """The server's URL without credentials (for messages and logs)."""

    @property
    @abc.abstractmethod
    def log_path(self) -> Path:
        """The server's log file."""

    @property
    def pid(self) -> int | None:
        """Pid of the running server, None when stopped."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @abc.abstractmethod
    async def start(self) -> None:
        """Start the server and wait until it accepts connections."""

    async def stop(self) -> None:
        """``stop_signal`` to the server, SIGKILL after ``stop_timeout``; reap it and close its log."""
        proc, self._proc = self._proc, None
        if proc is not None:
            await processes.stop(proc, self.stop_signal, self.stop_timeout)
            self.logger.info("%s pid %d exited with %s", self.process_name, proc.pid, proc.poll())
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _launch(self, argv: Sequence[str], user: int | None = None, group: int | None = None) -> None:
        """Spawn ``argv`` in ``data_dir`` writing ``log_path`` and wait until it is ready (stopped if not)."""
        self._log = self.log_path.open("ab")
        self._proc = processes.spawn(
            argv, stdout=self._log, env=server_environment(), cwd=self.data_dir, user=user, group=group
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise
        self.logger.info(
            "%s pid %d listening on %s (data %s)", self.process_name, self._proc.pid, self.address, self.data_dir
        )

    @abc.abstractmethod
    async def _wait_ready(self) -> None:
        """Return once the server answers; raise ``EmbeddedServerError`` when it will not."""

    async def _await_ready(
        self,
        answers: Callable[[], Awaitable[bool]],
        interval: float = INTERVAL_SECONDS,
        why_not: Callable[[], str] | None = None,
    ) -> None:
        """Poll ``answers`` until it is true, the process exits or ``start_timeout`` passes (then
        ``why_not`` adds the last reason to the error)."""
        proc = self._proc
        assert proc is not None

        async def ready_or_exited() -> bool:
            return proc.poll() is not None or await answers()

        ready = await poll_until(ready_or_exited, self.start_timeout, interval=interval)
        if proc.poll() is not None:
            raise self._failure(f"{self.process_name} exited with {proc.returncode}")
        if not ready:
            reason = f"{self.process_name} not ready on {self.address} after {self.start_timeout:.0f}s"
            raise self._failure(f"{reason}: {why_not()}" if why_not is not None else reason)

    def _failure(self, reason: str) -> EmbeddedServerError:
        return EmbeddedServerError(
            f"{reason}{port_holders(self.port)}; log {self.log_path}:\n{log_tail(self.log_path)}"
        )
