"""A depth and size fuzz of JSON request bodies: every JSON endpoint of ``/openapi.json`` (and ``/mcp``)
gets bodies nested deep, arrays and strings huge, within the body limit and beyond it, and bodies
that are not JSON text (lone surrogates, invalid UTF-8, an integer too long to read); the run
fails on any 5xx (``checks.fault_of``). Bounded: a fixed list of shapes, one request each per
operation and principal, with a deadline.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx

from tests.fuzz.checks import response_fault

WRITES = ("post", "put", "patch")


@dataclass(frozen=True)
class Shape:
    """One body shape: its name and its bytes."""

    name: str
    body: bytes


def shapes(max_bytes: int, max_depth: int) -> list[Shape]:
    """Bodies around the limits: nesting at, just past and far past the depth limit (arrays and
    objects), arrays and strings just under the body limit, and a body just over it."""
    under = max_bytes - 64
    count = under // 4

    def nested(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
        return open_ * depth + b"1" + close * depth

    def objects(depth: int) -> bytes:
        return b'{"a":' * depth + b"1" + b"}" * depth

    return [
        Shape("array at the depth limit", nested(max_depth - 1)),
        Shape("array past the depth limit", nested(max_depth + 1)),
        Shape("objects past the depth limit", objects(max_depth + 1)),
        Shape("array 300 deep", nested(300)),
        Shape("objects 5000 deep", objects(5000)),
        Shape("array nested to the body limit", nested(under // 2 - 1)),
        Shape("object with arguments 300 deep", b'{"name":"x","arguments":{"a":' + nested(300) + b"}}"),
        Shape("huge array of numbers", b"[" + b"1," * (count * 2 - 1) + b"1]"),
        Shape("huge array of objects", b"[" + b'{"a":1},' * (under // 8 - 1) + b'{"a":1}]'),
        Shape("huge string", b'{"name":"' + b"x" * (under - 16) + b'"}'),
        Shape("huge escaped string", b'{"name":"' + b'\\"' * (under // 2 - 16) + b'"}'),
        Shape("unterminated string of backslashes", b'{"name":"' + b"\\" * (under - 16)),
        Shape("brackets inside a string", b'{"name":"' + b"[" * (under - 16) + b'"}'),
        Shape("over the body limit", b"[" + b"1," * (max_bytes // 2) + b"1]"),
        Shape("lone surrogate escape", b'{"name":"x\\ud800","arguments":{"\\udc00":"\\ud800"},"query":"\\ud800"}'),
        Shape("encoded surrogate bytes", b'{"name":"x\xed\xa0\x80","query":"\xed\xa0\x80"}'),
        Shape("invalid UTF-8", b'{"name":"\xff\xfe","query":"\xc3("}'),
        Shape("integer of 5000 digits", b'{"name":"x","limit":' + b"9" * 5000 + b"}"),
    ]


def json_operations(openapi: dict[str, object]) -> Iterator[tuple[str, str]]:
    """``(method, path template)`` of every operation that takes a JSON body."""
    paths = openapi.get("paths", {})
    assert isinstance(paths, dict)
    for path, operations in paths.items():
        for method, operation in operations.items():
            content = (operation.get("requestBody") or {}).get("content", {})
            if method in WRITES and "application/json" in content:
                yield method.upper(), path


def concrete(path: str, server_ids: Sequence[str]) -> str:
    """The path with its parameters filled: a server id when there is one, else a fresh uuid."""
    fill = server_ids[0] if server_ids else str(uuid.uuid4())
    return re.sub(r"\{[^}]+\}", fill, path)


@dataclass(frozen=True)
class Finding:
    """A response that is toolmesh's fault."""

    method: str
    path: str
    shape: str
    fault: str


async def fuzz_bodies(
    base_url: str,
    token: str,
    *,
    max_bytes: int,
    max_depth: int,
    server_ids: Sequence[str] = (),
    deadline_seconds: float = 120.0,
) -> tuple[list[Finding], int]:
    """Send every shape to every JSON operation (and to ``/mcp``) as ``token``; the faults found and
    how many requests were sent."""
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
    mcp_headers = {**headers, "accept": "application/json, text/event-stream"}
    findings: list[Finding] = []
    sent = 0
    stop_at = time.monotonic() + deadline_seconds
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        openapi = (await client.get("/openapi.json")).json()
        targets = [(m, concrete(p, server_ids)) for m, p in json_operations(openapi)]
        targets += [("POST", "/mcp"), ("POST", "/mcp/" + "none")]
        for shape in shapes(max_bytes, max_depth):
            for method, path in targets:
                if time.monotonic() > stop_at:
                    raise TimeoutError(f"body fuzz passed its {deadline_seconds:g}s deadline after {sent} requests")
                extra = {"Idempotency-Key": f"fuzz-{sent}"} if path.startswith("/api/") else {}
                send = mcp_headers if path.startswith("/mcp") else headers
                response = await client.request(method, path, content=shape.body, headers={**send, **extra})
                sent += 1
                fault = response_fault(response)
                if fault is not None:
                    findings.append(Finding(method, path, shape.name, f"{fault}: {response.text[:200]}"))
                await asyncio.sleep(0)
    return findings, sent
