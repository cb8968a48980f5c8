"""The event loop a toolmesh process runs on: uvloop when installed (Linux, ``uvicorn[standard]``).

uvloop cuts the per-call cost of the hot path (sockets to NATS and HTTP clients, pipes to STDIO
upstreams). ``TOOLMESH_EVENT_LOOP=asyncio`` keeps the standard loop, e.g. to compare or debug.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_name(environ: dict[str, str] | None = None) -> str:
    """``uvloop`` or ``asyncio``: what ``run`` will use."""
    wanted = (environ if environ is not None else os.environ).get("TOOLMESH_EVENT_LOOP", "uvloop")
    if wanted == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401  (optional: only to probe it is installed)
    except ImportError:
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the chosen loop."""
    if loop_name() == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)
    return asyncio.run(main)
