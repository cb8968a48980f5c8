"""Tool results scanned for poisoning, off the call path.

A result cannot be held (the caller is waiting for it, and holding one result tells the model nothing
the next call would not), so it is passed on as it is, and the scan only reports: the call's audit
entry carries the scanner's findings (``CallRecord.result_findings``), ``mcp_aggregator_result_scans_total``
counts clean, flagged and skipped results, and a flagged one is logged. A call only hands its result to
a bounded queue; one task scans them in a worker thread (at most ``SCANNED_CHARS`` of
text each, ``toolmesh.poisoning.fields``), and records the call. When the scanner falls ``QUEUE_SIZE``
results behind, a result is recorded unscanned (``result_scanned: false``): scanning never slows or
refuses a call.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolmesh.contracts.namespace_events import CallRecord
from toolmesh.platform.metrics import record_result_scan
from toolmesh.platform.supervision import supervise
from toolmesh.poisoning import scan_result
from toolmesh_gateway.call_audit import CallAudit

log = logging.getLogger("toolmesh.gateway.results")
QUEUE_SIZE = 1_000


class ResultScreen:
    """Scans tool results and puts each call, with what was found, in the audit trail."""

    def __init__(self, audit: CallAudit, *, enabled: bool = True, queue_size: int = QUEUE_SIZE) -> None:
        self._audit = audit
        self._enabled = enabled
        self._queue: asyncio.Queue[tuple[str, CallRecord, dict[str, Any]]] = asyncio.Queue(queue_size)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="result-scan")
        self._stop = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start scanning (one supervised task)."""
        self._runner = asyncio.create_task(supervise("result-screen", self._run, self._stop), name="result-screen")

    async def close(self) -> None:
        """Stop: results not scanned yet are recorded unscanned."""
        self._stop.set()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        while not self._queue.empty():
            namespace, call, _ = self._queue.get_nowait()
            self._skipped(namespace, call)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def record(self, namespace: str, call: CallRecord, result: dict[str, Any]) -> None:
        """Audit ``call`` once its ``result`` was scanned (no I/O, no wait)."""
        if not self._enabled:
            self._audit.record(namespace, call)
            return
        try:
            self._queue.put_nowait((namespace, call, result))
        except asyncio.QueueFull:
            self._skipped(namespace, call)

    def _skipped(self, namespace: str, call: CallRecord) -> None:
        record_result_scan("skipped")
        self._audit.record(namespace, call.model_copy(update={"result_scanned": False}))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            namespace, call, result = await self._queue.get()
            try:
                findings = [f.summary() for f in await loop.run_in_executor(self._pool, scan_result, result)]
            except RecursionError:  # nested past what the scanner walks: recorded unscanned
                self._skipped(namespace, call)
                continue
            record_result_scan("flagged" if findings else "clean")
            if findings:
                log.warning(
                    "result of %s.%s called by %s has poisoning findings: %s",
                    call.server_name,
                    call.tool,
                    call.actor,
                    "; ".join(findings),
                    extra={"server": call.server_name, "tool": call.tool},
                )
            self._audit.record(namespace, call.model_copy(update={"result_scanned": True, "result_findings": findings}))
