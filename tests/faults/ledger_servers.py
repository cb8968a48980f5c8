"""STDIO servers whose tool notes every execution in one ledger file, a load of calls with unique call ids
through the gateways' REST API, and what the fault tests check about them: who holds each server's lease,
how many STDIO processes each has, and which process executed which call."""

from __future__ import annotations

import asyncio
import itertools
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import System, processes_running
from tests.peers.ledger import read_ledger
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import leases_bucket

LEDGER_PEER = Path(__file__).resolve().parents[1] / "peers" / "ledger.py"
CALL = "/api/v1/tools/call"
CALL_TIMEOUT_SECONDS = 10
TOOL_ERROR = 0
"""The status an outcome notes for a 200 whose result is a tool error."""


@dataclass
class LedgerServers:
    """The servers of one test: names, ids, and the ledger file every one of their processes writes."""

    directory: Path
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def ledger(self) -> Path:
        return self.directory / "ledger.log"

    def marker(self, name: str) -> str:
        """The command-line fragment of ``name``'s STDIO processes alone."""
        return f"--name {self.run}-{name}"

    async def register(self, system: System, name: str) -> str:
        """Register a STDIO server running the ledger peer (its sandbox may write the ledger's directory)."""
        if not self.ledger.exists():  # each server's sandboxed child may run as a uid of its own
            self.ledger.touch()
            self.ledger.chmod(0o666)
        args = [str(LEDGER_PEER), "--ledger", str(self.ledger), "--name", f"{self.run}-{name}"]
        config = {
            "command": sys.executable,
            "args": args,
            "env": {},
            "sandbox": {"paths_read_write": [str(self.directory)]},
        }
        self.ids[name] = (await system.register(name, "STDIO", config))["id"]
        return self.ids[name]

    def stdio_processes(self) -> dict[str, int]:
        """How many STDIO processes of each server are alive."""
        return {name: len(processes_running(self.marker(name))) for name in self.ids}

    def executions(self) -> Counter[str]:
        """How often each call id was executed, by any process."""
        return Counter(key for key, _ in read_ledger(self.ledger))

    def executed_by(self) -> dict[str, set[str]]:
        """The process tokens that executed each call id."""
        found: dict[str, set[str]] = {}
        for key, process in read_ledger(self.ledger):
            found.setdefault(key, set()).add(process)
        return found


async def lease_holders(system: System, server_ids: list[str]) -> dict[str, int | None]:
    """The pid of the process holding each server's lease (None: nobody)."""
    kv = await leases_bucket(system.backends.js, system.settings.lease_ttl_seconds)
    leases = LeaseTable(kv, "observer")
    holders: dict[str, int | None] = {}
    for server_id in server_ids:
        holder = await leases.holder_of(server_id)
        holders[server_id] = int(holder.rsplit(":", 1)[1]) if holder else None
    return holders


@dataclass
class Outcome:
    """One call: its id, server, the phases it started and ended in, and how it was answered."""

    key: str
    server: str
    started: int
    ended: int
    status: int
    text: str


@dataclass
class Load:
    """Sequential calls of ``tally`` by ``clients`` callers, each over every server in turn with call ids
    of its own, alternating gateways, until ``stop``; ``phase`` is the test's (an ordering, not a time)."""

    systems: list[System]
    servers: list[str]
    phase: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def caller(self, client: int) -> None:
        cycle = itertools.cycle(self.servers)
        for n in itertools.count():
            if self.stop.is_set():
                return
            key, server, started = f"c{client}-{n}", next(cycle), self.phase
            body = {"name": f"{server}.tally", "arguments": {"key": key}, "timeout_seconds": CALL_TIMEOUT_SECONDS}
            response = await self.systems[n % len(self.systems)].api.post(CALL, json=body)
            status, text = response.status_code, response.text
            if status == 200:
                answer = response.json()
                status, text = (TOOL_ERROR, text) if answer.get("isError") else (200, answer["content"][0]["text"])
            self.outcomes.append(Outcome(key, server, started, self.phase, status, text))

    def succeeded(self, since: int = 0, server: str | None = None) -> int:
        """Calls answered 200 that started in phase ``since`` or later (of ``server`` only, if given)."""
        return sum(
            1
            for o in self.outcomes
            if o.status == 200 and o.started >= since and (server is None or o.server == server)
        )
