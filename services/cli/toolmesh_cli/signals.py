"""Turning SIGTERM/SIGINT into a stop event, so every role drains and closes cleanly."""

from __future__ import annotations

import asyncio
import signal


def stop_on_signals() -> asyncio.Event:
    """An event set by the first SIGTERM or SIGINT (a second one is left to the default handler)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def handle(sig: signal.Signals) -> None:
        stop.set()
        loop.remove_signal_handler(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, handle, sig)
    return stop
