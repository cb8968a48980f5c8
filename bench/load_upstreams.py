"""Many small MCP servers over Streamable HTTP in one process, for ``load.py``.

    python bench/load_upstreams.py --servers 50 --tools 200

Each server listens on its own loopback port (``/mcp``) and answers JSON-RPC in plain JSON bodies
(the stateless form of Streamable HTTP: no session id, no SSE): ``initialize``, ``ping``,
``tools/list`` (every tool in one page) and ``tools/call`` (echoes its ``text`` argument).
Notifications get 202; GET (the optional server stream) gets 405. One asyncio HTTP/1.1 loop keeps
the cost per server small, so 500 of them fit on a small machine. When every port listens, one
JSON line ``{"ports": [...]}`` goes to stdout; SIGTERM stops it.

``--tools-file`` (a JSON-lines file of tools with ``name``, ``description``, ``input_schema``, such as
LiveMCPBench's ``tools.jsonl``) gives the servers real tools instead: server ``i`` lists ``--tools``
consecutive tools of the file from tool ``i * --tools`` on, wrapping round (each name once a server).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import signal
from pathlib import Path
from typing import Any

PROTOCOL = "2025-06-18"


def tool_list(tools: int) -> list[dict[str, Any]]:
    """``tools`` echo-like tools with distinct names and descriptions."""
    return [
        {
            "name": f"tool_{i:04d}",
            "description": f"Echo the text back (generated tool {i}, for load tests).",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
        for i in range(tools)
    ]


def file_tool_lists(path: Path, servers: int, tools: int) -> list[list[dict[str, Any]]]:
    """Per server, ``tools`` consecutive tools of the file at ``path`` (wrapping round), names made unique."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    result = []
    for index in range(servers):
        chosen = [rows[(index * tools + i) % len(rows)] for i in range(tools)]
        result.append(
            [
                {
                    "name": f"{row['name']}_{i}" if sum(r["name"] == row["name"] for r in chosen[:i]) else row["name"],
                    "description": row.get("description") or "",
                    "inputSchema": row.get("input_schema") or {"type": "object", "properties": {}},
                }
                for i, row in enumerate(chosen)
            ]
        )
    return result


def answer(message: dict[str, Any], name: str, listing: bytes) -> bytes | None:
    """The JSON body answering one JSON-RPC message, or None for a notification."""
    if "id" not in message:
        return None
    method, ident = message.get("method"), message["id"]
    if method == "tools/list":  # pre-encoded: 200 tools are ~40 KB
        return b'{"jsonrpc":"2.0","id":' + json.dumps(ident).encode() + b',"result":' + listing + b"}"
    result: dict[str, Any]
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", PROTOCOL)
        info = {"name": name, "version": "1"}
        result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "ping":
        result = {}
    elif method == "tools/call":
        text = str(message.get("params", {}).get("arguments", {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        error = {"code": -32601, "message": f"method not found: {method}"}
        return json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode()
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()


def response(status: str, body: bytes = b"", content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str, listing: bytes
) -> None:
    """Keep-alive HTTP/1.1: one request after another until the client closes."""
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                return
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                key, _, value = line.partition(b":")
                if key.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b""
            method = request_line.split(b" ", 1)[0]
            if method != b"POST":
                writer.write(response("405 Method Not Allowed"))
            else:
                reply = answer(json.loads(body), name, listing)
                writer.write(response("202 Accepted") if reply is None else response("200 OK", reply))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
        return  # the client went away, or this process is stopping
    finally:
        writer.close()


async def main(servers: int, tools: int, tools_file: Path | None) -> None:
    listing = json.dumps({"tools": tool_list(tools)}).encode()
    lists = file_tool_lists(tools_file, servers, tools) if tools_file is not None else []
    started = []
    for index in range(servers):
        name = f"load{index:03d}"
        listed = json.dumps({"tools": lists[index]}).encode() if lists else listing
        handle = functools.partial(serve_connection, name=name, listing=listed)
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        started.append(server)
    ports = [server.sockets[0].getsockname()[1] for server in started]
    print(json.dumps({"ports": ports}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in started:
        server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--tools-file", type=Path, help="real tools (JSON lines) instead of echo tools")
    args = parser.parse_args()
    asyncio.run(main(args.servers, args.tools, args.tools_file))
