"""The NATS failures that mean "not reachable now": a restart, a partition, a stream or bucket electing
a leader after a JetStream server of a cluster went away. Whoever meets one answers 503
``BACKEND_UNAVAILABLE`` (worth a retry), not an internal error."""

from __future__ import annotations

import nats.errors
import nats.js.errors

NATS_UNREACHABLE = (
    nats.errors.TimeoutError,
    nats.errors.NoServersError,
    nats.errors.ConnectionClosedError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.NoStreamResponseError,
)
