"""``endpoints.json`` in the data dir of ``toolmesh up``: where other local services find it.

It holds the HTTP base URL, the NATS URL and the Postgres URL, each with the credentials it
needs, so the file is private to its owner (mode 0600). It exists while ``toolmesh up`` runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from toolmesh.contracts.api import API_PREFIX, API_VERSION
from toolmesh.platform.config import Settings
from toolmesh_cli.datadir import ENDPOINTS_FILE
from toolmesh_cli.provisioning import api_base


def endpoints(settings: Settings) -> dict[str, object]:
    """What a local client needs to reach this toolmesh (credentials included)."""
    return {
        "http": api_base(settings.host, settings.port),
        "nats": settings.nats_url,
        "postgres": settings.database_url,
        "nats_api": f"{API_PREFIX}.{API_VERSION}",
        "admin_token_file": str(settings.data_dir / "admin-token"),
        "pid": os.getpid(),
    }


def write_endpoints(settings: Settings) -> Path:
    """Write ``<data dir>/endpoints.json`` (mode 0600), replacing any earlier one atomically."""
    path = settings.data_dir / ENDPOINTS_FILE
    partial = path.with_suffix(".json.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(endpoints(settings), handle, indent=2)
        handle.write("\n")
    partial.chmod(0o600)
    partial.replace(path)
    return path


def remove_endpoints(settings: Settings) -> None:
    """Remove the file when ``toolmesh up`` stops (nothing listens there any more)."""
    (settings.data_dir / ENDPOINTS_FILE).unlink(missing_ok=True)
