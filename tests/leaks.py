"""Looking for secrets where they must not be: the log lines toolmesh writes while a test runs, and
the texts (responses, rows, events, logs) a secret must not appear in."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterable, Iterator

from toolmesh.platform.telemetry import configure_logging


@contextlib.contextmanager
def captured_logs(level: str = "DEBUG") -> Iterator[io.StringIO]:
    """Every log line of this process from ``level`` up while the block runs, as a toolmesh process
    writes it."""
    output = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging(level, stream=output)
    try:
        yield output
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def assert_nowhere(secrets: Iterable[str], **places: str) -> None:
    """Fail, naming the place, when one of ``secrets`` is in the text of one of ``places``."""
    for secret in secrets:
        for where, text in places.items():
            assert secret not in text, f"a secret leaked into {where}"
