"""A small synchronous client of the toolmesh REST API, for the CLI commands."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from toolmesh_cli.errors import ApiError, describe_validation

DEFAULT_URL = "http://127.0.0.1:8081"
SERVERS = "/api/v1/aggregator/servers"
PAGE = 1000  # the API's maximum page size


@dataclass(frozen=True)
class Target:
    """Where the API is and how to authenticate; ``token_source`` says where the token came from."""

    url: str
    token: str | None
    token_source: str


def resolve_target(url: str | None, token: str | None, environ: Mapping[str, str]) -> Target:
    """``--url``/``TOOLMESH_URL``, and ``--token``/``TOOLMESH_ADMIN_TOKEN``/``<data dir>/admin-token``."""
    base = (url or environ.get("TOOLMESH_URL") or DEFAULT_URL).rstrip("/")
    if token:
        return Target(base, token, "--token")
    if environ.get("TOOLMESH_ADMIN_TOKEN"):
        return Target(base, environ["TOOLMESH_ADMIN_TOKEN"], "TOOLMESH_ADMIN_TOKEN")
    data_dir = Path(environ.get("TOOLMESH_DATA_DIR") or Path.home() / ".toolmesh").expanduser()
    token_file = data_dir / "admin-token"
    try:
        return Target(base, token_file.read_text().strip() or None, str(token_file))
    except OSError:
        return Target(base, None, f"none (no --token, TOOLMESH_ADMIN_TOKEN or {token_file})")


def api_options() -> argparse.ArgumentParser:
    """The options every API command takes (``--url``, ``--token``, ``--json``), as a parent parser."""
    common = argparse.ArgumentParser(add_help=False)
    api = common.add_argument_group("API")
    api.add_argument("--url", help="toolmesh API (default $TOOLMESH_URL or http://127.0.0.1:8081)")
    api.add_argument("--token", help="admin token (default $TOOLMESH_ADMIN_TOKEN or $TOOLMESH_DATA_DIR/admin-token)")
    api.add_argument("--json", action="store_true", help="print the API's JSON")
    return common


def _json_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def error_code(response: httpx.Response) -> str | None:
    """The ``error_code`` of an error body, if it has one."""
    body = _json_body(response)
    return str(body["error_code"]) if isinstance(body, dict) and body.get("error_code") else None


def describe_error(response: httpx.Response) -> str:
    """An error response as one line: the spec's ``{"detail","error_code"}`` or FastAPI's 422 list."""
    body = _json_body(response)
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):
        message = describe_validation(item for item in detail if isinstance(item, dict))
    elif detail:
        message = str(detail)
    else:
        message = response.text.strip().splitlines()[0] if response.text.strip() else response.reason_phrase
    return f"{message} ({error_code(response) or response.status_code})"


class ApiClient:
    """Calls the API; every failure becomes an ``ApiError`` with a one-line message."""

    def __init__(self, target: Target, timeout: float = 60.0, transport: httpx.BaseTransport | None = None) -> None:
        self.target = target
        headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
        self._http = httpx.Client(base_url=target.url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send one request; the decoded JSON body, or None for an empty one."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise ApiError(f"toolmesh is not running at {self.target.url}") from exc
        except httpx.TimeoutException as exc:
            raise ApiError(f"toolmesh at {self.target.url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach toolmesh at {self.target.url}: {exc}") from exc
        if response.is_error:
            message = describe_error(response)
            if response.status_code == 401:
                message += f"; admin token from {self.target.token_source}"
            raise ApiError(message, response.status_code, error_code(response))
        return response.json() if response.content else None

    # Servers

    def servers(self, status: str | None = None, include_tools: bool = False) -> list[dict[str, Any]]:
        """Every registered server (all pages)."""
        params: dict[str, Any] = {"limit": PAGE, "include_tools": include_tools}
        if status:
            params["status"] = status
        return list(self._pages(params))

    def _pages(self, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            page = self.request("GET", SERVERS, params={**params, "offset": offset})
            yield from page["servers"]
            offset += len(page["servers"])
            if not page["servers"] or offset >= page["total"]:
                return

    def resolve(self, id_or_name: str) -> str:
        """The id of the server named ``id_or_name``, else ``id_or_name`` itself (taken as an id)."""
        for server in self.servers():
            if server["name"] == id_or_name:
                return str(server["id"])
        return id_or_name

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /servers``."""
        result: dict[str, Any] = self.request("POST", SERVERS, json=body)
        return result

    def server(self, server_id: str) -> dict[str, Any]:
        """``GET /servers/{id}``."""
        result: dict[str, Any] = self.request("GET", f"{SERVERS}/{server_id}")
        return result

    def connect(self, server_id: str) -> dict[str, Any]:
        """``POST /servers/{id}/connect``."""
        result: dict[str, Any] = self.request("POST", f"{SERVERS}/{server_id}/connect")
        return result

    def disconnect(self, server_id: str, force: bool) -> dict[str, Any]:
        """``POST /servers/{id}/disconnect``."""
        result: dict[str, Any] = self.request("POST", f"{SERVERS}/{server_id}/disconnect", json={"force": force})
        return result

    def remove(self, server_id: str) -> None:
        """``DELETE /servers/{id}``."""
        self.request("DELETE", f"{SERVERS}/{server_id}")

    def history(self, server_id: str) -> list[dict[str, Any]]:
        """``GET /servers/{id}/history``."""
        result: list[dict[str, Any]] = self.request("GET", f"{SERVERS}/{server_id}/history")
        return result

    def tools(self, server_id: str) -> dict[str, Any]:
        """``GET /servers/{id}/tools``."""
        result: dict[str, Any] = self.request("GET", f"{SERVERS}/{server_id}/tools")
        return result
