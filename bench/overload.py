"""Overload: REST ``tools/call`` above its saturation rate, every role in its own process.

    python bench/overload.py [--servers 10] [--tools 10] [--start-rate 50] [--step-seconds 10]
                             [--seconds 60] [--factors 2,4] [--session-workers 2]

Prints one JSON line per run (stdout; progress on stderr), like ``load.py``, on fresh NATS and Postgres
with the HTTP upstreams of ``load_upstreams.py``. First the saturation rate: open-loop calls stepping up
(x1.5 each ``--step-seconds``) until goodput (200s/s) falls under 90% of the target, p95 passes ten
times its first value or errors pass 1%; the peak is the highest goodput seen. Then, for each factor,
that factor times the saturation rate for ``--seconds``: offered and achieved goodput, its share of the
peak, refused calls by status (429/503) and how many of them carried ``Retry-After``, other errors,
p50/p95/p99 of the admitted calls (from each call's scheduled start, and from its request going out:
the client holds at most 2,048 calls open) and the lease owner changes
seen in the ``toolmesh_leases`` bucket (the issue's contract: goodput >= 90% of the peak, every
refusal 429/503 with Retry-After, p99 of admitted calls < 1 s, no owner change).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nats
from lease_owners import OwnerWatch
from load_calls import rotating
from load_system import Pool, deployment, register_all, upstreams
from nats.js.kv import KeyValue
from pacing import paced

from toolmesh.platform.bus.topology import LEASES_BUCKET

ROLES = ("gateway", "projector", "indexer", "classifier-worker", "health-worker")
MAX_IN_FLIGHT = 2048  # open connections: within a listener's default accept backlog
CALL_TIMEOUT_SECONDS = 30.0
REFUSALS = (429, 503)


def note(message: str) -> None:
    print(f"[overload] {message}", file=sys.stderr, flush=True)


@dataclass
class Answer:
    """One call: its status (0: no HTTP answer), whether it carried Retry-After, seconds from its scheduled
    start (a client held up by its in-flight bound counts) and from its request going out."""

    status: int
    retry_after: bool
    seconds: float
    sent_seconds: float
    error: str = ""


Call = Callable[[], Awaitable[tuple[int, bool, str]]]


def rest_tally(api: Pool, names: list[tuple[int, str, str]]) -> Call:
    """``POST /api/v1/tools/call`` over every server and tool in turn: (status, Retry-After?, error)."""
    pick = rotating(names)

    async def call() -> tuple[int, bool, str]:
        _, server, tool = pick()
        body = json.dumps({"name": f"{server}.{tool}", "arguments": {"text": "hello"}}).encode()
        status, headers, answer = await api.exchange("POST", "/api/v1/tools/call", body)
        error = "" if status != 200 or b'"isError":true' not in answer.replace(b" ", b"") else "tool error"
        if status not in (200, *REFUSALS):
            error = f"http {status} {answer[:80]!r}"
        return status, "retry-after" in headers, error

    return call


async def offer(call: Call, rate: float, seconds: float) -> tuple[list[Answer], float, float]:
    """Open-loop calls at ``rate`` for ``seconds``; every answer, the rate actually offered and the seconds
    until the last answer."""
    answers: list[Answer] = []

    async def one(_: int, scheduled: float) -> None:
        sent = time.perf_counter()
        try:
            status, retry_after, error = await asyncio.wait_for(call(), CALL_TIMEOUT_SECONDS)
        except Exception as exc:  # no answer at all: an error of its own kind
            status, retry_after, error = 0, False, type(exc).__name__
        now = time.perf_counter()
        answers.append(Answer(status, retry_after, now - scheduled, now - sent, error))

    start = time.perf_counter()
    offered = await paced(one, rate, max(1, int(rate * seconds)), MAX_IN_FLIGHT)
    return answers, offered, time.perf_counter() - start


def summary(answers: list[Answer], rate: float, offered: float, seconds: float) -> dict[str, Any]:
    """What one run of ``seconds`` (until its last answer) showed: goodput, refusals, other errors and
    the admitted calls' latency."""
    good = [a for a in answers if a.status == 200 and not a.error]
    refused = [a for a in answers if a.status in REFUSALS]
    others = Counter(a.error or f"http {a.status}" for a in answers if a.error and a.status not in REFUSALS)
    admitted = [a for a in answers if a.status not in REFUSALS]
    cuts, sent = _percentiles([a.seconds for a in admitted]), _percentiles([a.sent_seconds for a in admitted])
    return {
        "target_rate": round(rate, 1),
        "offered_rate": round(offered, 1),
        "calls": len(answers),
        "seconds": round(seconds, 1),
        "goodput": round(len(good) / seconds, 1),
        "refused": dict(Counter(str(a.status) for a in refused)),
        "refused_without_retry_after": sum(1 for a in refused if not a.retry_after),
        "other_errors": dict(others.most_common(5)),
        "other_error_count": sum(others.values()),
        "admitted_p50_ms": round(cuts[49] * 1000, 1),
        "admitted_p95_ms": round(cuts[94] * 1000, 1),
        "admitted_p99_ms": round(cuts[98] * 1000, 1),
        "admitted_from_sent_p50_p95_p99_ms": [round(sent[i] * 1000, 1) for i in (49, 94, 98)],
    }


def _percentiles(values: list[float]) -> list[float]:
    return statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [0.0] * 99


async def saturation(call: Call, args: argparse.Namespace) -> tuple[float, float]:
    """Step the rate up until it no longer holds; (the highest rate that held, the peak goodput)."""
    rate, held, peak, base_p95 = args.start_rate, 0.0, 0.0, None
    while True:
        answers, offered, took = await offer(call, rate, args.step_seconds)
        line = summary(answers, rate, offered, took)
        emit({"run": f"step@{rate:g}", **line})
        peak = max(peak, line["goodput"])
        base_p95 = base_p95 or line["admitted_p95_ms"]
        failed = line["calls"] - line["goodput"] * took
        if line["goodput"] < 0.9 * rate or line["admitted_p95_ms"] > 10 * base_p95 or failed > 0.01 * line["calls"]:
            return held or rate, peak
        held, rate = rate, rate * 1.5


@contextlib.asynccontextmanager
async def leases(nats_url: str) -> AsyncIterator[KeyValue]:
    """The leases bucket, over a connection of the benchmark's own."""
    nc = await nats.connect(nats_url)
    try:
        yield await nc.jetstream().key_value(LEASES_BUCKET)
    finally:
        await nc.close()


def emit(line: dict[str, Any]) -> None:
    print(json.dumps({"bench": "overload", **line}), flush=True)


async def main(args: argparse.Namespace) -> None:
    roles = [*ROLES, *(["session-worker"] * args.session_workers)]
    with tempfile.TemporaryDirectory(prefix="toolmesh-overload-") as tmp:
        async with deployment(Path(tmp), roles, {}) as deploy:
            api = Pool(deploy.port)
            with upstreams(args.servers, args.tools) as (ports, _):
                took = await register_all(api, ports, args.tools, classified=True)
                note(f"{args.servers} servers x {args.tools} tools connected in {took} s")
                names = [(p, f"load{i:03d}", f"tool_{t:04d}") for t in range(args.tools) for i, p in enumerate(ports)]
                call = rest_tally(api, names)
                await offer(call, 20, 2)  # warm up
                saturated, peak = await saturation(call, args)
                emit({"run": "saturation", "rate": saturated, "peak_goodput": peak})
                for factor in (float(f) for f in args.factors.split(",")):
                    async with leases(deploy.nats_url) as bucket, OwnerWatch().watching(bucket) as owners:
                        rate = factor * saturated
                        note(f"offering {rate:g}/s ({factor:g}x) for {args.seconds:g} s")
                        answers, offered, took = await offer(call, rate, args.seconds)
                    line = summary(answers, rate, offered, took)
                    share = round(line["goodput"] / peak, 3) if peak else None
                    emit(
                        {
                            "run": f"overload@{factor:g}x",
                            **line,
                            "goodput_share_of_peak": share,
                            "owner_changes": len(owners.changes),
                            "owner_changes_by_server": dict(Counter(server for server, _, _ in owners.changes)),
                        }
                    )
            api.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--tools", type=int, default=10, help="tools per server")
    parser.add_argument("--start-rate", type=float, default=50)
    parser.add_argument("--step-seconds", type=float, default=10)
    parser.add_argument("--seconds", type=float, default=60, help="duration of each overload run")
    parser.add_argument("--factors", default="2,4", help="multiples of the saturation rate to offer")
    parser.add_argument("--session-workers", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
