"""Streams and KV buckets of DESIGN.md, created idempotently by whichever process comes first."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from functools import partial

from nats.js import JetStreamContext
from nats.js.api import (
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, BadRequestError, NotFoundError
from nats.js.kv import KeyValue

from toolmesh.contracts.commands import COMMANDS_STREAM, COMMANDS_SUBJECTS
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS
from toolmesh.contracts.quotas import QUOTA_STREAMS, QuotaWindow
from toolmesh.errors import StreamMisconfigured
from toolmesh.platform.bus.replicas import creation_refused, lost_race, report_replicas

LEASES_BUCKET = "toolmesh_leases"
NAMES_BUCKET = "toolmesh_names"
IDEMPOTENCY_BUCKET = "toolmesh_idempotency"
MCP_SESSIONS_BUCKET = "toolmesh_mcp_sessions"
OAUTH_FLOWS_BUCKET = "toolmesh_oauth_flows"
SPENT_STATES_BUCKET = "toolmesh_spent_request_states"
TASKS_BUCKET = "toolmesh_tasks"
APPROVALS_BUCKET = "toolmesh_approvals"
DUPLICATE_WINDOW_SECONDS = 120.0


def events_stream_config(replicas: int = 1) -> StreamConfig:
    """Facts, kept with no age limit so the projection can be rebuilt from scratch."""
    return StreamConfig(
        name=EVENTS_STREAM,
        num_replicas=replicas,
        subjects=[EVENTS_SUBJECTS],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        duplicate_window=DUPLICATE_WINDOW_SECONDS,
    )


def commands_stream_config(replicas: int = 1) -> StreamConfig:
    """Long-running commands: a work queue, so none is lost while a worker restarts."""
    return StreamConfig(
        name=COMMANDS_STREAM,
        num_replicas=replicas,
        subjects=[COMMANDS_SUBJECTS],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_SECONDS,
    )


def quota_stream_config(window: QuotaWindow, replicas: int = 1) -> StreamConfig:
    """Durable quota counts of one window (NATS 2.12+ distributed counters: ``Nats-Incr``), the last
    value of each counter only, read by direct get."""
    name, kept = QUOTA_STREAMS[window]
    return StreamConfig(
        name=name,
        num_replicas=replicas,
        subjects=[f"toolmesh.quota.{window}.>"],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        max_age=kept,
        max_msgs_per_subject=1,
        allow_msg_counter=True,
        allow_direct=True,
    )


GUARDED_FIELDS: dict[str, object] = {
    "subjects": None,
    "retention": RetentionPolicy.LIMITS,
    "storage": StorageType.FILE,
    "discard": DiscardPolicy.OLD,
    "max_age": 0,
    "max_msgs": -1,
    "max_bytes": -1,
    "max_msgs_per_subject": -1,
    "sealed": False,
    "allow_rollup_hdrs": False,
    "allow_msg_ttl": False,
    "allow_msg_counter": False,
    "republish": None,
    "mirror": None,
    "sources": None,
    "subject_transform": None,
}
"""The fields of a stream's configuration that decide what it captures, keeps, loses or copies
elsewhere, with the server's value when none is given. Toolmesh never changes a stream once made,
so an existing stream must match on each; the rest may differ (a replica count other than the
configured one is reported, ``replicas.report_replicas``)."""


def _normal(value: object, default: object) -> object:
    if value is None or value == []:
        return default
    return sorted(value) if isinstance(value, list) else value


def _shown(value: object) -> object:
    return value.value if isinstance(value, Enum) else value


def config_differences(expected: StreamConfig, found: StreamConfig) -> list[str]:
    """Each guarded field on which ``found`` (a stream's configuration) differs from ``expected``."""
    differences = []
    for name, default in GUARDED_FIELDS.items():
        want, have = (_normal(getattr(config, name), default) for config in (expected, found))
        if want != have:
            differences.append(f"{name} is {_shown(have)!r}, toolmesh expects {_shown(want)!r}")
    return differences


async def _ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    assert config.name is not None
    replicas = config.num_replicas or 1
    try:
        info = await js.stream_info(config.name)
    except NotFoundError:
        try:
            await js.add_stream(config)
            return
        except APIError as e:
            if not lost_race(e):
                raise creation_refused(config.name, replicas, e) from e
            # Another process created it between our look and our create.
            info = await js.stream_info(config.name)
    differences = config_differences(config, info.config)
    if differences:
        raise StreamMisconfigured(
            f"JetStream stream {config.name} exists with another configuration than toolmesh's "
            f"({'; '.join(differences)}): not using it; correct or recreate it before starting",
            {"stream": config.name, "differences": differences},
        )
    report_replicas(config.name, info.config.num_replicas, replicas)


STREAMS: dict[str, Callable[[int], StreamConfig]] = {
    EVENTS_STREAM: events_stream_config,
    COMMANDS_STREAM: commands_stream_config,
    **{name: partial(quota_stream_config, window) for window, (name, _) in QUOTA_STREAMS.items()},
}
"""Every stream of the topology, by name, with its configuration."""


async def ensure_streams(js: JetStreamContext, names: Iterable[str], *, replicas: int = 1) -> None:
    """Create the streams ``names`` (of ``STREAMS``) with ``replicas`` copies each if missing (safe from
    every process, concurrently); raise StreamMisconfigured when one exists with another configuration
    (``config_differences``) or JetStream cannot keep that many copies (``replicas.creation_refused``).

    A role ensures only the streams it uses: its NATS user may look at and create no other.
    """
    for name in names:
        await _ensure_stream(js, STREAMS[name](replicas))


async def ensure_topology(js: JetStreamContext, *, lease_ttl_seconds: float, replicas: int = 1) -> None:
    """Create every stream and the shared buckets if missing (for a process that runs every role)."""
    await ensure_streams(js, STREAMS, replicas=replicas)
    await leases_bucket(js, lease_ttl_seconds, replicas=replicas)
    await names_bucket(js, replicas=replicas)


async def _bucket(js: JetStreamContext, config: KeyValueConfig) -> KeyValue:
    """The bucket of ``config``, created (with ``config.replicas`` copies) if missing."""
    stream = bucket_subjects(config.bucket)[0]
    try:
        info = await js.stream_info(stream)
    except (NotFoundError, BadRequestError):
        try:
            return await js.create_key_value(config)
        except APIError as e:
            if not lost_race(e):
                raise creation_refused(stream, config.replicas, e) from e
            info = await js.stream_info(stream)
    report_replicas(stream, info.config.num_replicas, config.replicas)
    return await js.key_value(config.bucket)


async def leases_bucket(js: JetStreamContext, ttl_seconds: float, *, replicas: int = 1) -> KeyValue:
    """Ownership leases; bucket TTL (works on NATS 2.9+) expires a lease nobody renews."""
    return await _bucket(
        js,
        KeyValueConfig(bucket=LEASES_BUCKET, ttl=ttl_seconds, history=1, storage=StorageType.FILE, replicas=replicas),
    )


async def names_bucket(js: JetStreamContext, *, replicas: int = 1) -> KeyValue:
    """Server names taken, for an atomic uniqueness check across gateway replicas."""
    return await _bucket(
        js, KeyValueConfig(bucket=NAMES_BUCKET, history=1, storage=StorageType.FILE, replicas=replicas)
    )


async def idempotency_bucket(js: JetStreamContext, window_seconds: float, *, replicas: int = 1) -> KeyValue:
    """First results of commands sent with an idempotency key; each expires ``window_seconds`` after
    its last write (bucket TTL; a bucket made earlier keeps the window it was made with)."""
    return await _bucket(
        js,
        KeyValueConfig(
            bucket=IDEMPOTENCY_BUCKET, ttl=window_seconds, history=1, storage=StorageType.FILE, replicas=replicas
        ),
    )


async def mcp_sessions_bucket(js: JetStreamContext, ttl_seconds: float, *, replicas: int = 1) -> KeyValue:
    """MCP client sessions of the gateway replicas; each expires ``ttl_seconds`` after its last write
    (bucket TTL; a bucket made earlier keeps the TTL it was made with). Replicas read a session's
    record often (``McpSessionTable.recent``), so a bucket of one replica answers direct gets (no
    JetStream API envelope); one of several does not, since any replica answers a direct get and a
    follower's copy may lag behind the write a replica just made (a bucket keeps what it was made with)."""
    config = KeyValueConfig(
        bucket=MCP_SESSIONS_BUCKET,
        ttl=ttl_seconds,
        history=1,
        storage=StorageType.FILE,
        replicas=replicas,
        direct=replicas == 1,
    )
    return await _bucket(js, config)


async def oauth_flows_bucket(js: JetStreamContext, ttl_seconds: float, *, replicas: int = 1) -> KeyValue:
    """Upstream OAuth authorizations in progress (state -> flow), for the callback on any gateway
    replica; each expires ``ttl_seconds`` after it was started."""
    return await _bucket(
        js,
        KeyValueConfig(
            bucket=OAUTH_FLOWS_BUCKET, ttl=ttl_seconds, history=1, storage=StorageType.FILE, replicas=replicas
        ),
    )


async def spent_states_bucket(js: JetStreamContext, ttl_seconds: float, *, replicas: int = 1) -> KeyValue:
    """The ``requestState``s of 2026-07-28 upstreams that a client retry already spent (one key each),
    so a state is redeemed once whichever gateway replica the retry reaches; a mark expires with the
    state (``ttl_seconds``)."""
    return await _bucket(
        js,
        KeyValueConfig(
            bucket=SPENT_STATES_BUCKET, ttl=ttl_seconds, history=1, storage=StorageType.FILE, replicas=replicas
        ),
    )


async def tasks_bucket(js: JetStreamContext, ttl_seconds: float, *, replicas: int = 1) -> KeyValue:
    """Tasks of the 2026-07-28 Tasks extension (task id -> record), for every gateway replica; each
    expires ``ttl_seconds`` after its last change (bucket TTL, set when the bucket is made)."""
    return await _bucket(
        js, KeyValueConfig(bucket=TASKS_BUCKET, ttl=ttl_seconds, history=1, storage=StorageType.FILE, replicas=replicas)
    )


async def approvals_bucket(js: JetStreamContext, kept_seconds: float, *, replicas: int = 1) -> KeyValue:
    """Approvals of tool calls (id -> record), for every gateway replica; each expires ``kept_seconds``
    after its last change (bucket TTL, set when the bucket is made)."""
    return await _bucket(
        js,
        KeyValueConfig(
            bucket=APPROVALS_BUCKET, ttl=kept_seconds, history=1, storage=StorageType.FILE, replicas=replicas
        ),
    )


def bucket_subjects(bucket: str) -> tuple[str, str]:
    """The stream of the KV bucket ``bucket`` and the prefix of its keys' subjects (NATS's KV layout),
    for a consumer of the bucket's changes that the KV API does not offer (new changes only, say)."""
    return f"KV_{bucket}", f"$KV.{bucket}."


async def kept_for(kv: KeyValue, wanted: float) -> float:
    """How long ``kv`` keeps a value after its last write: its TTL (a bucket made earlier keeps the
    TTL it was made with, whatever this process's settings say), ``wanted`` when it has none."""
    ttl = (await kv.status()).ttl
    return float(ttl) if ttl else wanted
