"""How many copies JetStream keeps of a toolmesh stream or bucket: what a role says when a stream it
finds has another replica count than its settings ask for, or when JetStream cannot make one with
that many (a count above the cluster's size, a single server that is not clustered)."""

from __future__ import annotations

import logging

from nats.js.errors import APIError

from toolmesh.errors import StreamMisconfigured

log = logging.getLogger("toolmesh.bus")

STREAM_NAME_IN_USE = 10058
"""JetStream's error code for a create that lost the race to another process (the stream exists)."""


def replica_mismatch(stream: str, found: int | None, wanted: int) -> str | None:
    """What differs when ``stream`` keeps ``found`` copies and the settings ask for ``wanted``; None if
    nothing does. Toolmesh does not change a stream once made (no role may reconfigure one), so the
    operator scales it: ``nats stream edit <stream> --replicas <n>`` (JetStream moves the copies)."""
    have = found or 1
    if have == wanted:
        return None
    return (
        f"JetStream stream {stream} keeps {have} replica(s), TOOLMESH_NATS_REPLICAS asks for {wanted}: "
        f"it is used as it is; scale it with `nats stream edit {stream} --replicas {wanted}`"
    )


def report_replicas(stream: str, found: int | None, wanted: int) -> str | None:
    """Log a warning (with ``stream``, ``replicas`` and ``wanted``) when ``stream``'s replica count is not
    the configured one; the warning's text, or None when they agree."""
    mismatch = replica_mismatch(stream, found, wanted)
    if mismatch is not None:
        log.warning(mismatch, extra={"stream": stream, "replicas": found or 1, "wanted": wanted})
    return mismatch


def lost_race(error: APIError) -> bool:
    """Whether a create failed only because another process made the stream first."""
    return error.err_code == STREAM_NAME_IN_USE


def creation_refused(stream: str, replicas: int, error: APIError) -> StreamMisconfigured:
    """The error for a create JetStream refused for another reason than a race (e.g. ``replicas > 1 not
    supported in non-clustered mode``, ``insufficient resources``), naming the stream and the count."""
    return StreamMisconfigured(
        f"JetStream refused to create stream {stream} with {replicas} replica(s): {error.description} "
        f"(code {error.err_code}); TOOLMESH_NATS_REPLICAS may not exceed the JetStream servers of the cluster",
        {"stream": stream, "replicas": replicas, "err_code": error.err_code},
    )
