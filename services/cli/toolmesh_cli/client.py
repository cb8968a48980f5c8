"""The CLI's synchronous face of ``toolmesh.client`` over the REST API: where the API is, which token,
and each call's result in the JSON shape the commands print."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pydantic
from pydantic import BaseModel

from toolmesh.client import HttpTransport, ToolmeshClient
from toolmesh.contracts.aggregator import ResealReport
from toolmesh.contracts.api import AUTHORIZATION, AUTHORIZE, OPERATIONS_BY_NAME, RESEAL
from toolmesh.contracts.api_requests import AppRef, ListServersRequest, NoArguments, ServerRef
from toolmesh.contracts.keys import CreateKeyRequest
from toolmesh.contracts.search import SearchRequest
from toolmesh.contracts.servers import RegisterServerRequest, ServerSummary
from toolmesh.contracts.upstream_auth import AuthorizationState, AuthorizeResponse
from toolmesh.errors import ToolmeshError
from toolmesh_cli.datadir import running_api
from toolmesh_cli.errors import ApiError, CliError, describe_api_error, describe_validation

DEFAULT_URL = "http://127.0.0.1:8081"
PAGE = 1000  # the API's maximum page size
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True)
class Target:
    """Where the API is and how to authenticate; ``token_source`` says where the token came from."""

    url: str
    token: str | None
    token_source: str


def resolve_target(url: str | None, token: str | None, environ: Mapping[str, str]) -> Target:
    """``--url``/``TOOLMESH_URL``/the ``toolmesh up`` running on the data dir, and
    ``--token``/``TOOLMESH_ADMIN_TOKEN``/``<data dir>/admin-token``.

    The data dir's owner token (read from its file, or the same value given otherwise, as the README's
    ``export TOOLMESH_ADMIN_TOKEN=$(cat ~/.toolmesh/admin-token)`` does) goes only to a URL the user
    named or to the ``toolmesh up`` running there, never to the default address, where any local
    process may listen while toolmesh is down.

    Raises:
        CliError: that token would go to the default address and no ``toolmesh up`` runs on the data dir.
    """
    data_dir = Path(environ.get("TOOLMESH_DATA_DIR") or Path.home() / ".toolmesh").expanduser()
    named = url or environ.get("TOOLMESH_URL") or running_api(data_dir)
    base = (named or DEFAULT_URL).rstrip("/")
    token_file = data_dir / "admin-token"
    try:
        owner: str | None = token_file.read_text().strip() or None
    except OSError:
        owner = None
    if token:
        target = Target(base, token, "--token")
    elif environ.get("TOOLMESH_ADMIN_TOKEN"):
        target = Target(base, environ["TOOLMESH_ADMIN_TOKEN"], "TOOLMESH_ADMIN_TOKEN")
    elif owner is not None:
        target = Target(base, owner, str(token_file))
    else:
        return Target(base, None, f"none (no --token, TOOLMESH_ADMIN_TOKEN or {token_file})")
    if named is None and owner is not None and target.token == owner:
        raise CliError(
            f"toolmesh up is not running on {data_dir}: start it, or name the API with --url or TOOLMESH_URL"
        )
    return target


def api_options() -> argparse.ArgumentParser:
    """The options every API command takes (``--url``, ``--token``, ``--json``), as a parent parser."""
    common = argparse.ArgumentParser(add_help=False)
    api = common.add_argument_group("API")
    api.add_argument(
        "--url",
        help="toolmesh API (default $TOOLMESH_URL, else the toolmesh up running on $TOOLMESH_DATA_DIR, "
        "else http://127.0.0.1:8081)",
    )
    api.add_argument("--token", help="admin token (default $TOOLMESH_ADMIN_TOKEN or $TOOLMESH_DATA_DIR/admin-token)")
    api.add_argument("--json", action="store_true", help="print the API's JSON")
    return common


def _json(result: BaseModel | list[Any] | None) -> Any:
    """A typed result as the JSON data the commands print and index."""
    if isinstance(result, list):
        return [_json(item) for item in result]
    return None if result is None else result.model_dump(mode="json")


def _valid(model: type[M], body: Mapping[str, Any]) -> M:
    """``body`` as the request ``model``; a field the API would refuse is an ``ApiError`` here already."""
    try:
        return model.model_validate(body)
    except pydantic.ValidationError as exc:
        message = describe_validation(dict(e) for e in exc.errors(include_url=False))
        raise ApiError(f"{message} (VALIDATION_ERROR)", 422, "VALIDATION_ERROR") from exc


class ApiClient:
    """Runs ``toolmesh.client`` calls on an event loop of its own; every failure becomes an ``ApiError``
    with a one-line message."""

    def __init__(
        self, target: Target, timeout: float = 60.0, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.target = target
        self._runner = asyncio.Runner()
        self._http = httpx.AsyncClient(base_url=target.url, transport=transport)
        self._mesh = ToolmeshClient(HttpTransport(target.url, target.token or "", http=self._http), timeout=timeout)

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._runner.run(self._http.aclose())
        finally:
            self._runner.close()

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        try:
            return self._runner.run(call)
        except ToolmeshError as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc: ToolmeshError) -> ApiError:
        cause, url = exc.__cause__, self.target.url
        if isinstance(cause, httpx.ConnectError):
            return ApiError(f"toolmesh is not running at {url}")
        if isinstance(cause, httpx.TimeoutException):
            return ApiError(f"toolmesh at {url} did not answer in time")
        if isinstance(cause, httpx.HTTPError):
            return ApiError(f"cannot reach toolmesh at {url}: {cause}")
        message = describe_api_error(exc)
        if exc.status == 401:
            message += f"; admin token from {self.target.token_source}"
        return ApiError(message, exc.status, exc.error_code)

    # Servers

    def servers(self, status: str | None = None, include_tools: bool = False) -> list[dict[str, Any]]:
        """Every registered server (all pages)."""
        request = _valid(ListServersRequest, {"status": status, "include_tools": include_tools, "limit": PAGE})
        return list(_json(self._run(self._pages(request))))

    async def _pages(self, request: ListServersRequest) -> list[ServerSummary]:
        servers: list[ServerSummary] = []
        while True:
            page = await self._mesh.list_servers(request.model_copy(update={"offset": len(servers)}))
            servers.extend(page.servers)
            if not page.servers or len(servers) >= page.total:
                return servers

    def resolve(self, id_or_name: str) -> str:
        """The id of the server named ``id_or_name``, else ``id_or_name`` itself (taken as an id)."""
        for server in self.servers():
            if server["name"] == id_or_name:
                return str(server["id"])
        return id_or_name

    def register(self, request: RegisterServerRequest) -> dict[str, Any]:
        """Register a server."""
        result: dict[str, Any] = _json(self._run(self._mesh.register(request)))
        return result

    def server(self, server_id: str) -> dict[str, Any]:
        """One server."""
        result: dict[str, Any] = _json(self._run(self._mesh.server(server_id)))
        return result

    def connect(self, server_id: str) -> dict[str, Any]:
        """Connect a server."""
        result: dict[str, Any] = _json(self._run(self._mesh.connect(server_id)))
        return result

    def disconnect(self, server_id: str, force: bool) -> dict[str, Any]:
        """Disconnect a server, draining (or with ``force`` cancelling) its pending calls."""
        result: dict[str, Any] = _json(self._run(self._mesh.disconnect(server_id, force=force)))
        return result

    def authorize(self, server_id: str) -> dict[str, Any]:
        """Start the OAuth authorization of a server: the URL to open and how long it is valid."""
        sent = self._mesh.transport.send(AUTHORIZE, ServerRef(server_id=server_id), None, self._mesh.timeout)
        result: dict[str, Any] = _json(AuthorizeResponse.model_validate(self._run(sent)))
        return result

    def authorization(self, server_id: str) -> dict[str, Any]:
        """Whether the server holds a grant for this key (per-user identity) or for everyone (shared)."""
        sent = self._mesh.transport.send(AUTHORIZATION, ServerRef(server_id=server_id), None, self._mesh.timeout)
        result: dict[str, Any] = _json(AuthorizationState.model_validate(self._run(sent)))
        return result

    def remove(self, server_id: str) -> None:
        """Remove a server with its tools and history."""
        self._run(self._mesh.remove(server_id))

    def history(self, server_id: str) -> list[dict[str, Any]]:
        """The connection history of one server."""
        result: list[dict[str, Any]] = _json(self._run(self._mesh.history(server_id)))
        return result

    def tools(self, server_id: str) -> dict[str, Any]:
        """The tools of one server."""
        result: dict[str, Any] = _json(self._run(self._mesh.tools(server_id)))
        return result

    # Search, keys, connected apps, credentials

    def search(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Hybrid search over the caller's tools."""
        result: dict[str, Any] = _json(self._run(self._mesh.search(_valid(SearchRequest, body))))
        return result

    def create_key(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create an API key (its token is in this result only)."""
        result: dict[str, Any] = _json(self._run(self._mesh.create_key(_valid(CreateKeyRequest, body))))
        return result

    def keys(self) -> list[dict[str, Any]]:
        """The keys the caller manages."""
        result: list[dict[str, Any]] = _json(self._run(self._mesh.keys()))["keys"]
        return result

    def revoke_key(self, key_id: str) -> None:
        """Revoke an API key."""
        self._run(self._mesh.revoke_key(key_id))

    def apps(self) -> list[dict[str, Any]]:
        """The connected apps (MCP clients signed in with OAuth) the caller sees."""
        result: list[dict[str, Any]] = _json(self._run(self._mesh.apps()))["apps"]
        return result

    def disconnect_app(self, app_id: str) -> None:
        """Revoke a connected app."""
        self._run(self._mesh.disconnect_app(_valid(AppRef, {"app_id": app_id}).app_id))

    def operation(self, name: str, body: Mapping[str, Any]) -> Any:
        """Any operation of the API by name (``toolmesh.contracts.api.OPERATIONS``): its JSON result."""
        operation = OPERATIONS_BY_NAME[name]
        return self._run(
            self._mesh.transport.send(operation, _valid(operation.request, body), None, self._mesh.timeout)
        )

    def quotas(self, action: str, body: Mapping[str, Any]) -> Any:
        """``quotas.<action>`` (create, list, get, replace, delete) of the API with ``body``; its result."""
        operation = OPERATIONS_BY_NAME[f"quotas.{action}"]
        request = _valid(operation.request, body)
        return self._run(self._mesh.transport.send(operation, request, None, self._mesh.timeout))

    def reseal(self) -> dict[str, Any]:
        """Seal every server's config again under the deployment's current credential key."""
        sent = self._mesh.transport.send(RESEAL, NoArguments(), None, self._mesh.timeout)
        result: dict[str, Any] = _json(ResealReport.model_validate(self._run(sent)))
        return result
