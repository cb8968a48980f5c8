"""What ``toolmesh up`` tells the user: each backend as it starts, then, once it serves, where everything is."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolmesh.platform.bus.connection import shown_urls
from toolmesh.platform.config import Settings
from toolmesh.sandbox import runner as sandbox
from toolmesh.secret_text import mask_url
from toolmesh_cli.datadir import ENDPOINTS_FILE
from toolmesh_cli.provisioning import HEALTH, api_base

ADMIN_TOKEN_FILE = "admin-token"


@contextlib.contextmanager
def starting(out: Console, what: str) -> Iterator[None]:
    """A spinner while ``what`` starts (on a terminal), then a ``✓ what (1.2 s)`` line."""
    started = time.monotonic()
    with out.status(f"starting {what}…"):
        yield
    out.print(Text.assemble(("✓ ", "green"), f"{what} started ({time.monotonic() - started:.1f} s)"))


def where(settings: Settings, data_dir: Path, embedded: Sequence[str], roles: Sequence[str]) -> Table:
    """One row per thing ``up`` runs or serves, and where it is."""
    base = api_base(settings.host, settings.port)
    grid = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(no_wrap=True, overflow="ignore")
    grid.add_column(style="dim")  # the notes wrap on a narrow terminal, the names and addresses never
    grid.add_row("API", f"{base}/api/v1", f"OpenAPI at {base}/openapi.json")
    grid.add_row("console", f"{base}/ui/", "sign in with an API key")
    grid.add_row("MCP", f"{base}/mcp", "Streamable HTTP, bearer token")
    nats, postgres = shown_urls(settings.nats_url or "-"), mask_url(settings.database_url or "-")
    grid.add_row("NATS", nats, f"embedded, {data_dir / 'nats'}" if "nats" in embedded else "external")
    grid.add_row("Postgres", postgres, f"embedded, {data_dir / 'postgres'}" if "postgres" in embedded else "external")
    index = mask_url(settings.qdrant_url) if settings.qdrant_url else f"{data_dir / 'index'}"
    grid.add_row("index", index, "Qdrant" if settings.qdrant_url else "embedded")
    grid.add_row("roles", "in this process", ", ".join(roles))
    grid.add_row("limits", *binding_limit(settings))
    grid.add_row("data", str(data_dir), "state, keys and logs of this instance")
    return grid


def binding_limit(settings: Settings) -> tuple[str, str]:
    """How many servers one process connects, and which setting says so."""
    servers, sessions = settings.max_servers, settings.max_sessions_per_worker
    if sessions < servers:
        return f"{sessions} connected servers", f"TOOLMESH_MAX_SESSIONS_PER_WORKER binds (up to {servers} registered)"
    return f"{servers} servers", "MCP_AGGREGATOR_MAX_SERVERS binds"


def banner(
    out: Console, settings: Settings, embedded: Sequence[str], roles: Sequence[str], new_token: str | None
) -> None:
    """Where ``toolmesh up`` serves (printed once it does, after the start-up logs), and the admin
    token when it was just made: on one line, never wrapped, so it can be copied."""
    data_dir = settings.data_dir
    out.print()
    out.print(Text.assemble(("toolmesh is up: ", "bold green"), f"{api_base(settings.host, settings.port)}{HEALTH}"))
    out.print(where(settings, data_dir, embedded, roles))
    out.print(f"  {sandbox.mode(settings).describe()}", soft_wrap=True)
    out.print(f"  endpoints with credentials (other local services): {data_dir / ENDPOINTS_FILE}", soft_wrap=True)
    if new_token is not None:
        shown = f"admin token (shown once, kept in {data_dir / ADMIN_TOKEN_FILE}): "
        out.print(Text.assemble((shown, "bold"), new_token), soft_wrap=True)
    out.print()
