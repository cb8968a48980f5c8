"""How ``upstream.stateless`` reads a 2026-07-28 upstream's answer that is JSON (one value per line):
in linear time in its size, so a large answer arriving in small pieces does not hold a core for
minutes (each piece used to re-scan and copy everything before it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import httpx2

from toolmesh_session_worker.upstream.stateless import _messages

PIECE = 4096


def answer(body: bytes) -> httpx2.Response:
    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), PIECE):
            await anyio.lowlevel.checkpoint()  # as a network read would: where a deadline is noticed
            yield body[start : start + PIECE]

    return httpx2.Response(200, headers={"content-type": "application/json"}, content=pieces())


async def test_a_large_answer_in_small_pieces_is_read_in_linear_time() -> None:
    text = "a" * (16 * 1024 * 1024)
    body = b'{"jsonrpc":"2.0","id":1,"result":{"x":"' + text.encode() + b'"}}'
    with anyio.fail_after(5):  # well under a second read in linear time; about 20s re-scanning
        messages = [m async for m in _messages(answer(body))]
    assert messages == [{"jsonrpc": "2.0", "id": 1, "result": {"x": text}}]


async def test_json_lines_split_anywhere_are_each_one_message() -> None:
    lines = [b'{"jsonrpc":"2.0","method":"notifications/message","params":{"n":%d}}' % n for n in range(3000)]
    body = b"\n".join([*lines, b'{"jsonrpc":"2.0","id":7,"result":{}}', b""])
    messages = [m async for m in _messages(answer(body))]
    assert [m["params"]["n"] for m in messages[:-1]] == list(range(3000))
    assert messages[-1] == {"jsonrpc": "2.0", "id": 7, "result": {}}
