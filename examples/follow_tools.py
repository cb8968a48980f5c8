"""Follow tool changes of a toolmesh: a standalone consumer of its public events (nats-py only).

    python examples/follow_tools.py [--nats URL | --endpoints ~/.toolmesh/endpoints.json]
                                    [--from-seq N | --since 2026-01-01T00:00:00+00:00] [--count N]

Prints one JSON line per ``tools.discovered`` (a server's full tool list), ``tools.changed``
(definitions held for approval) and ``tools.approved`` event, with its stream sequence. Events are
replayed from the JetStream stream ``TOOLMESH_EVENTS`` by an ordered consumer: start anywhere
(``--from-seq``, ``--since``; default: new events only) and resume with ``--from-seq <last + 1>``.
The subjects and payloads are those of ``docs/asyncapi.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import nats
from nats.js.api import ConsumerConfig, DeliverPolicy

STREAM = "TOOLMESH_EVENTS"
SUBJECTS = "toolmesh.evt.tools.>"
FOLLOWED = {"toolmesh.evt.tools.discovered", "toolmesh.evt.tools.changed", "toolmesh.evt.tools.approved"}


def nats_url(args: argparse.Namespace) -> str:
    """``--nats``, else the ``nats`` entry of ``toolmesh up``'s endpoints.json, else TOOLMESH_NATS_URL."""
    if args.nats:
        return str(args.nats)
    endpoints = Path(args.endpoints).expanduser()
    if endpoints.is_file():
        return str(json.loads(endpoints.read_text())["nats"])
    return os.environ.get("TOOLMESH_NATS_URL", "nats://127.0.0.1:4222")


def consumer_config(args: argparse.Namespace) -> ConsumerConfig:
    """Where the replay starts: a stream sequence, a time, or the next new event."""
    if args.from_seq is not None:
        return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=args.from_seq)
    if args.since is not None:
        since = datetime.fromisoformat(args.since)
        return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since)
    return ConsumerConfig(deliver_policy=DeliverPolicy.NEW)


def summary(subject: str, seq: int, event: dict[str, Any]) -> dict[str, Any]:
    """The line printed for one event."""
    line: dict[str, Any] = {
        "seq": seq,
        "event": subject.removeprefix("toolmesh.evt."),
        "namespace": event["namespace"],
        "server": event.get("server_name"),
        "server_id": event["server_id"],
        "at": event["occurred_at"],
    }
    if subject.endswith(".discovered"):
        line["tools"] = sorted(tool["original_name"] for tool in event["tools"])
    elif subject.endswith(".changed"):
        line["held"] = {change["original_name"]: change["reason"] for change in event["changes"]}
    else:
        line["approved"] = sorted(tool["original_name"] for tool in event["tools"])
    return line


async def follow(args: argparse.Namespace) -> None:
    nc = await nats.connect(nats_url(args), connect_timeout=10)
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def enqueue(msg: Any) -> None:
        await queue.put(msg)

    try:
        sub = await nc.jetstream().subscribe(
            SUBJECTS, stream=STREAM, ordered_consumer=True, config=consumer_config(args), cb=enqueue
        )
        printed = 0
        while args.count is None or printed < args.count:
            msg = await queue.get()
            if msg.subject not in FOLLOWED:
                continue  # e.g. tools.classified
            print(json.dumps(summary(msg.subject, msg.metadata.sequence.stream, json.loads(msg.data))), flush=True)
            printed += 1
        await sub.unsubscribe()
    finally:
        await nc.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nats", help="NATS URL (with user:password when the server needs them)")
    parser.add_argument("--endpoints", default="~/.toolmesh/endpoints.json", help="endpoints.json of toolmesh up")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-seq", type=int, help="replay from this stream sequence")
    start.add_argument("--since", help="replay from this time (ISO 8601)")
    parser.add_argument("--count", type=int, help="stop after this many events")
    try:
        asyncio.run(follow(parser.parse_args()))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
