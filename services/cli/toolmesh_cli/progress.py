"""Per-server progress of a batch of registrations (``toolmesh import``, ``toolmesh up --config``).

Each server moves through three steps: registered, connecting, settled (connected, or why not).
On a terminal every server has a progress row that follows it; piped, the same facts are plain
lines. The batch ends with a summary table.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn
from rich.table import Table

from toolmesh_cli.tables import console, table

SETTLING = {"CONNECTING"}
HEALTHY = {"CONNECTED", "DEGRADED"}
STEPS = 3  # registered, connecting, settled


@dataclass
class ServerOutcome:
    """How one server of the batch ended up."""

    name: str
    source_name: str | None = None
    server_id: str | None = None
    transport: str | None = None
    status: str | None = None
    tools: int = 0
    problem: str | None = None

    @property
    def result(self) -> str:
        """``ok`` (registered; connected when asked to), ``failed`` (not registered or not connected)."""
        if self.server_id is None or self.status == "ERROR":
            return "failed"
        return "ok"

    def as_dict(self) -> dict[str, Any]:
        """The outcome as ``--json`` prints it."""
        return {
            "name": self.name,
            "source_name": self.source_name,
            "id": self.server_id,
            "transport_type": self.transport,
            "status": self.status,
            "tool_count": self.tools,
            "result": self.result,
            "problem": self.problem,
        }


class ServerProgress:
    """Follows a batch of servers; ``quiet`` prints nothing (for ``--json``)."""

    def __init__(self, names: Sequence[str], out: Console | None = None, quiet: bool = False) -> None:
        self.console = out or console()
        self.quiet = quiet
        self.outcomes: dict[str, ServerOutcome] = {name: ServerOutcome(name) for name in names}
        self._bars = Progress(
            SpinnerColumn(finished_text="•"),
            TextColumn("{task.fields[server]}", style="bold"),
            BarColumn(bar_width=12),
            TextColumn("{task.description}"),
            console=self.console,
            disable=quiet or not self.console.is_terminal,
            transient=True,
        )
        self._tasks: dict[str, TaskID] = {
            name: self._bars.add_task("waiting", total=STEPS, server=name) for name in self.outcomes
        }

    def __enter__(self) -> ServerProgress:
        self._bars.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._bars.stop()

    def say(self, line: str, error: bool = False) -> None:
        """One line above the progress rows (stderr for problems when piped)."""
        if self.quiet:
            return
        if error and not self.console.is_terminal:
            console(file=sys.stderr).print(line)
        else:
            self.console.print(line)

    def registered(self, name: str, server: dict[str, Any], line: str) -> None:
        """The API accepted the registration."""
        outcome = self.outcomes[name]
        outcome.server_id, outcome.transport = str(server["id"]), server.get("transport_type")
        self.status(name, str(server["status"]), int(server.get("tool_count") or 0))
        self.say(line)

    def failed(self, name: str, problem: str, line: str) -> None:
        """The server was not registered."""
        self.outcomes[name].problem = problem
        self._bars.update(self._tasks[name], completed=STEPS, description=f"failed: {problem}")
        self.say(line, error=True)

    def status(self, name: str, status: str, tools: int = 0, error: str | None = None) -> None:
        """The server's latest status (and tool count, and error message when it failed)."""
        outcome = self.outcomes[name]
        outcome.status, outcome.tools = status, tools
        if status == "ERROR":
            outcome.problem = error or outcome.problem or "did not connect"
        step = 2 if status in SETTLING else STEPS
        detail = f"{status}, {tools} tools" if status in HEALTHY else status
        self._bars.update(self._tasks[name], completed=step, description=detail)

    def pending(self) -> list[str]:
        """Registered servers still connecting."""
        return [n for n, o in self.outcomes.items() if o.server_id is not None and o.status in SETTLING]

    def summary(self) -> Table:
        """One row per server: result, status, tools, and what went wrong."""
        rows = [
            (o.name, o.result, o.status, o.transport, o.tools if o.server_id else None, o.problem)
            for o in self.outcomes.values()
        ]
        return table(("SERVER", "RESULT", "STATUS", "TRANSPORT", "TOOLS", "PROBLEM"), rows, ("RESULT", "STATUS"))
