"""Every event of the stream by its subject, and the decoding of a stream message into its model."""

from __future__ import annotations

from toolmesh.contracts.approvals import ApprovalDecided, ApprovalRequested
from toolmesh.contracts.events import (
    Event,
    HealthChecked,
    InstructionsApproved,
    PromptsApproved,
    PromptsDiscovered,
    ResourcesDiscovered,
    ServerAuthorized,
    ServerConfigResealed,
    ServerConnected,
    ServerDescribed,
    ServerDisconnected,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    TemplatesApproved,
    ToolDiscovered,
    ToolsApproved,
    ToolsChanged,
    ToolsClassified,
    ToolsDiscovered,
    ToolsUnclassified,
)
from toolmesh.contracts.namespace_events import (
    AppConnected,
    AppDisconnected,
    CallsRecorded,
    EndpointDeleted,
    EndpointSaved,
    KeyCreated,
    KeyRevoked,
)
from toolmesh.contracts.policies import PolicyDeleted, PolicySaved
from toolmesh.contracts.quotas import QuotaCreated, QuotaDeleted, QuotaUpdated

EVENT_TYPES: dict[str, type[Event]] = {
    cls.subject: cls
    for cls in (
        ServerRegistered,
        ServerStatusChanged,
        ServerRemoved,
        ServerConfigResealed,
        ServerAuthorized,
        ToolsDiscovered,
        ToolsClassified,
        ToolsUnclassified,
        ToolsChanged,
        ToolsApproved,
        HealthChecked,
        KeyCreated,
        KeyRevoked,
        AppConnected,
        AppDisconnected,
        CallsRecorded,
        ResourcesDiscovered,
        PromptsDiscovered,
        PromptsApproved,
        TemplatesApproved,
        InstructionsApproved,
        ServerDescribed,
        EndpointSaved,
        EndpointDeleted,
        ServerConnected,
        ServerDisconnected,
        ToolDiscovered,
        PolicySaved,
        PolicyDeleted,
        QuotaCreated,
        QuotaUpdated,
        QuotaDeleted,
        ApprovalRequested,
        ApprovalDecided,
    )
}


def decode_event(subject: str, data: bytes) -> Event | None:
    """The event model for a stream message, or ``None`` for a subject this version does not know."""
    cls = EVENT_TYPES.get(subject)
    return cls.model_validate_json(data) if cls else None
