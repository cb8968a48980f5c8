"""Registering the servers of ``toolmesh up --config`` once the roles run, then logging ``proxy.init``.

It goes through the HTTP API of the gateway just started with the product's client
(``toolmesh.client``) and the admin token, like any client: the same validation, name reservation,
audit trail and events as a registration by hand, and no reaching into the gateway's app state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from toolmesh.client import ToolmeshClient
from toolmesh.contracts.api_requests import ListServersRequest
from toolmesh.contracts.servers import RegisterServerRequest, ServerSummary
from toolmesh.errors import ServerAlreadyExists, ToolmeshError
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.polling import poll_until
from toolmesh_cli.client import PAGE
from toolmesh_cli.errors import describe_api_error
from toolmesh_cli.progress import ServerProgress

log = logging.getLogger("toolmesh.up")
HEALTH = "/api/v1/aggregator/health"  # what ``toolmesh up`` probes before it says the gateway answers
POLL_SECONDS = 0.25
READY_SECONDS = 30.0
CONNECTED = {ServerStatus.CONNECTED, ServerStatus.DEGRADED}


@dataclass
class ProxyInit:
    """The ``proxy.init`` figures (proxy spec): servers to connect, and how that went."""

    server_count: int
    connected: int = 0
    failed: int = 0
    tool_count: int = 0
    failures: dict[str, str] = field(default_factory=dict)

    def log(self) -> None:
        """One structured record with ``span=proxy.init``."""
        figures = {
            "serverCount": self.server_count,
            "connected": self.connected,
            "failed": self.failed,
            "toolCount": self.tool_count,
        }
        text = " ".join(f"{k}={v}" for k, v in figures.items())
        log.info("proxy.init %s", text, extra={"span": "proxy.init", **figures})


def api_base(host: str, port: int) -> str:
    """The URL this process's gateway answers on, seen from this process."""
    local = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{local}]:{port}" if ":" in local else f"http://{local}:{port}"


async def _ready(mesh: ToolmeshClient) -> None:
    async def answers() -> bool:
        try:
            await mesh.state()
        except ToolmeshError as exc:
            if exc.status < 500:
                raise  # it answers, and refuses: no wait can help
            return False  # not listening yet (BackendUnavailable), or its backends are not ready
        return True

    if not await poll_until(answers, READY_SECONDS, interval=POLL_SECONDS):
        raise TimeoutError(f"the gateway did not answer within {READY_SECONDS:.0f} s")


async def _register(mesh: ToolmeshClient, request: RegisterServerRequest) -> tuple[bool, str | None]:
    """Register one server: whether it existed already, and why it failed (None when it is in)."""
    try:
        await mesh.register(request)
    except ServerAlreadyExists:
        log.info("server %s already registered; left as it is", request.name, extra={"server": request.name})
        return True, None
    except ToolmeshError as exc:
        return False, describe_api_error(exc)
    log.info("registered server %s", request.name, extra={"server": request.name})
    return False, None


async def _statuses(mesh: ToolmeshClient) -> dict[str, ServerSummary]:
    servers: dict[str, ServerSummary] = {}
    while True:
        page = await mesh.list_servers(ListServersRequest(limit=PAGE, offset=len(servers)))
        servers.update((s.name, s) for s in page.servers)
        if not page.servers or len(servers) >= page.total:
            return servers


async def _settle(
    mesh: ToolmeshClient, names: set[str], seconds: float, progress: ServerProgress | None
) -> dict[str, ServerSummary]:
    """Poll until none of ``names`` is still connecting, or ``seconds`` passed; the last statuses seen."""
    seen: dict[str, ServerSummary] = {}

    async def settled() -> bool:
        seen.clear()
        seen.update(await _statuses(mesh))
        if progress is not None:
            for name in names & seen.keys():
                progress.status(name, seen[name].status, seen[name].tool_count)
        return not [n for n in names if n in seen and seen[n].status == ServerStatus.CONNECTING]

    await poll_until(settled, seconds, interval=POLL_SECONDS)
    return seen


async def _error_message(mesh: ToolmeshClient, server: ServerSummary) -> str:
    """Why a server is in ERROR (its ``error_message``), or its status when that cannot be read."""
    try:
        return (await mesh.server(server.id)).error_message or server.status
    except ToolmeshError:
        return server.status


async def provision(
    base_url: str,
    token: str,
    requests: list[RegisterServerRequest],
    settle_seconds: float,
    progress: ServerProgress | None = None,
) -> ProxyInit:
    """Register ``requests`` in parallel (existing names are skipped), wait for them to settle, log;
    ``progress`` follows each server."""
    async with ToolmeshClient.over_http(base_url, token) as mesh:
        await _ready(mesh)
        outcomes = await asyncio.gather(*(_register(mesh, r) for r in requests))
        report = ProxyInit(server_count=sum(1 for r in requests if r.auto_connect))
        registered = set()
        for request, (existed, problem) in zip(requests, outcomes, strict=True):
            if problem is not None:
                log.error("server %s not registered: %s", request.name, problem, extra={"server": request.name})
                report.failures[request.name] = problem
                if progress is not None:
                    progress.failed(request.name, problem, f"failed {request.name}: {problem}")
            else:
                registered.add(request.name)
                if progress is not None:
                    progress.say(f"{'kept' if existed else 'registered'} {request.name}")
        if progress is not None:
            for server in (await _statuses(mesh)).values():
                if server.name in registered:
                    progress.outcomes[server.name].server_id = server.id
                    progress.outcomes[server.name].transport = server.transport_type
        to_connect = {r.name for r in requests if r.auto_connect and r.name not in report.failures}
        servers = await _settle(mesh, registered, settle_seconds, progress)
        for name in to_connect:
            summary = servers.get(name)
            if summary is not None and summary.status in CONNECTED:
                report.connected += 1
                report.tool_count += summary.tool_count
                continue
            failure = await _error_message(mesh, summary) if summary and summary.status == "ERROR" else None
            report.failures[name] = failure or (summary.status if summary else "missing")
            log.warning("server %s did not connect: %s", name, report.failures[name], extra={"server": name})
            if progress is not None and summary is not None:
                progress.status(name, summary.status, 0, report.failures[name])
    report.failed = report.server_count - report.connected
    report.log()
    return report


async def provision_until_stopped(
    base_url: str,
    token: str,
    requests: list[RegisterServerRequest],
    settle_seconds: float,
    stop: asyncio.Event,
    progress: ServerProgress | None = None,
) -> None:
    """``provision``, given up when ``stop`` is set first; its failures are logged, never raised,
    so a bad config entry or a slow gateway cannot bring ``toolmesh up`` down. With ``progress``,
    each server's progress is shown, and a summary once they settled."""
    work = asyncio.ensure_future(provision(base_url, token, requests, settle_seconds, progress))
    stopping = asyncio.ensure_future(stop.wait())
    with progress if progress is not None else contextlib.nullcontext():
        try:
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work, stopping):
                task.cancel()
            await asyncio.gather(work, stopping, return_exceptions=True)
    exc = work.exception() if work.done() and not work.cancelled() else None
    if isinstance(exc, ToolmeshError | TimeoutError):
        log.error("config servers not applied: %s", exc, extra={"span": "proxy.init"})
    elif exc is not None:
        raise exc  # a bug, not a condition: let it surface
    elif progress is not None and work.done() and not work.cancelled():
        report = work.result()
        progress.console.print(progress.summary())
        connected = f"{report.connected} of {report.server_count} servers connected"
        progress.say(f"config: {connected}, {report.tool_count} tools")
