"""Credential-key rotation: every server's connection config and every upstream OAuth grant sealed
again under the current key.

Run with a ``CredentialBox`` that holds the new key and the old ones (``MCP_CREDENTIAL_KEY`` and
``MCP_CREDENTIAL_KEY_PREVIOUS``). Each config not yet under the current key is opened, sealed again
and published as ``server.config_resealed`` (the projector writes the row). Each grant in
``mcp.upstream_tokens`` not yet under the current key is sealed again in place by the same store
functions the gateway's OAuth callback and the session-worker's refresh write it with: that table is
not a projection, and no event may carry a token. Afterwards the old keys can be dropped: nothing
stored needs them.
"""

from __future__ import annotations

from toolmesh.contracts.aggregator import ResealReport
from toolmesh.contracts.events import ServerConfigResealed
from toolmesh.credentials import CredentialBox
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.queries import sealed_configs
from toolmesh.platform.store.upstream_tokens import replace_sealed_grant, sealed_grants


async def reseal_under_current_key(b: Backends, box: CredentialBox, actor: str | None) -> tuple[ResealReport, int]:
    """Reseal what the current key did not seal; the report and the last config event's stream sequence."""
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
    grants_resealed, grants_total = await reseal_grants(b, box)
    report = ResealReport(
        resealed=resealed,
        total=len(rows),
        grants_resealed=grants_resealed,
        grants_total=grants_total,
        key_id=box.key_id,
    )
    return report, seq


async def reseal_grants(b: Backends, box: CredentialBox) -> tuple[int, int]:
    """Seal every stored upstream OAuth grant again under the current key: how many were, of how many.

    A grant replaced while this ran (a refresh, a new authorization) is left as its writer stored it.
    """
    rows = await sealed_grants(b.db)
    resealed = 0
    for row in rows:
        sealed = row["sealed_grant"]
        if box.is_current(sealed):
            continue
        again = box.seal(box.open(sealed))
        if await replace_sealed_grant(b.db, row["server_id"], row["principal"], sealed, again):
            resealed += 1
    return resealed, len(rows)
