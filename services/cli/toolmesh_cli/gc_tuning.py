"""The garbage collector of a serving process, set for many short-lived objects per request.

A tool call allocates thousands of short-lived objects (JSON-RPC messages, pydantic models, tasks,
streams). With CPython's defaults the collector runs a young collection every 700 of them, and each
older collection walks every long-lived object again. On the ``/mcp`` path that was about a fifth of
toolmesh's CPU per call (bench/routing.py, c16: 1.60 to 1.63 ms with the defaults, 1.42 to 1.47 ms
with the heap frozen when serving starts, 1.24 to 1.29 ms frozen and with the young threshold below).
What is frozen is what lives when ``serve`` starts (the interpreter, the CLI, settings and the
modules imported by then; the roles import theirs later). Memory is freed as before when the last
reference goes; only garbage in reference cycles waits a little longer for its collection.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
"""Allocations (minus frees) of container objects between two young collections (CPython: 700)."""


def tune_for_serving() -> None:
    """Collect once, keep everything alive now out of every later collection, collect young objects less often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
