"""Credential-key rotation: every server's connection config sealed again under the current key.

Run with a ``CredentialBox`` that holds the new key and the old ones (``MCP_CREDENTIAL_KEY`` and
``MCP_CREDENTIAL_KEY_PREVIOUS``); each config not yet under the current key is opened, sealed
again and published as ``server.config_resealed`` (the projector writes the row). Afterwards the
old keys can be dropped: nothing in the read model needs them.
"""

from __future__ import annotations

from toolmesh.contracts.aggregator import ResealReport
from toolmesh.contracts.events import ServerConfigResealed
from toolmesh.credentials import CredentialBox
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.queries import sealed_configs


async def reseal_configs(b: Backends, box: CredentialBox, actor: str | None) -> tuple[ResealReport, int]:
    """Reseal what the current key did not seal; the report and the last event's stream sequence."""
    rows = await sealed_configs(b.db)
    seq = 0
    resealed = 0
    for row in rows:
        sealed = row["connection_config"]["sealed"]
        if box.is_current(sealed):
            continue
        event = ServerConfigResealed(
            server_id=row["id"],
            namespace=row["namespace"],
            actor=actor,
            sealed_config=box.seal(box.open(sealed)),
            key_id=box.key_id,
        )
        seq = await publish_event(b.js, event)
        resealed += 1
    return ResealReport(resealed=resealed, total=len(rows), key_id=box.key_id), seq
