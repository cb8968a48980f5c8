"""Answers for requests on ``toolmesh.api.>`` that no operation serves: an unknown version or verb.

A plain nats-py subscription (it sees every API request and ignores the known ones in a dict
lookup, so it costs the served operations next to nothing).
"""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from toolmesh.contracts.api import API_PREFIX, OPERATIONS_BY_NAME, OPERATIONS_BY_SUBJECT, SUPPORTED_VERSIONS
from toolmesh.errors import ToolmeshError, UnknownOperation, UnsupportedVersion
from toolmesh_gateway.nats_api.replies import JSON, failure


def unserved(subject: str) -> ToolmeshError | None:
    """Why ``subject`` is not served (None when an operation serves it)."""
    if subject in OPERATIONS_BY_SUBJECT:
        return None
    rest = subject.removeprefix(API_PREFIX + ".")
    version, _, operation = rest.partition(".")
    if version not in SUPPORTED_VERSIONS:
        return UnsupportedVersion(
            f"API version '{version}' is not served; supported: {', '.join(SUPPORTED_VERSIONS)}",
            {"subject": subject, "supported": list(SUPPORTED_VERSIONS)},
        )
    return UnknownOperation(
        f"No operation '{operation}' in API {version}",
        {"subject": subject, "operations": sorted(OPERATIONS_BY_NAME)},
    )


class UnknownSubjects:
    """Replies with ``UNSUPPORTED_VERSION`` or ``UNKNOWN_OPERATION`` to requests nobody else serves."""

    def __init__(self, nc: NATS) -> None:
        self._nc = nc

    async def answer(self, msg: Msg) -> None:
        """Reply to ``msg`` when nothing else serves its subject."""
        problem = unserved(msg.subject)
        if problem is None or not msg.reply:
            return
        await self._nc.publish(msg.reply, failure(problem).body.encode(), headers={"content-type": JSON})
