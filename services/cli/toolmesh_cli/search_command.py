"""``toolmesh search "..."``: the search API from a shell."""

from __future__ import annotations

import argparse
import os
from typing import Any

from toolmesh_cli.client import ApiClient, resolve_target
from toolmesh_cli.tables import as_json, clip, show, table


def add_parser(sub: Any) -> None:
    """Add ``search`` to the ``toolmesh`` sub-commands."""
    parser = sub.add_parser("search", help="search tools of connected servers (hybrid BM25 + embeddings)")
    parser.add_argument("query")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--server", action="append", dest="servers", help="only this server (repeatable)")
    parser.add_argument("--strategy", choices=["hierarchical", "flat"], default="hierarchical")
    parser.add_argument("--no-external", action="store_true", help="leave out external servers' tools")
    parser.add_argument("--schemas", action="store_true", help="include input schemas (with --json)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")
    parser.add_argument("--url", help="toolmesh API (default $TOOLMESH_URL or http://127.0.0.1:8081)")
    parser.add_argument("--token", help="admin token (default $TOOLMESH_ADMIN_TOKEN or $TOOLMESH_DATA_DIR/admin-token)")
    parser.set_defaults(run=search)


def search(args: argparse.Namespace, api: ApiClient) -> int:
    """Run one search and print a table (or JSON)."""
    body = {
        "query": args.query,
        "limit": args.limit,
        "strategy": args.strategy,
        "include_external": not args.no_external,
        "include_schemas": args.schemas,
        **({"server_filter": args.servers} if args.servers else {}),
    }
    result = api.search(body)
    if args.json:
        print(as_json(result))
        return 0
    rows = [
        [
            f"{t['score']:.3f}",
            t["name"],
            t["source_server"]["status"],
            t.get("primary_skill_id") or "-",
            clip(t.get("description") or "", 60),
        ]
        for t in result["tools"]
    ]
    show(table(["SCORE", "TOOL", "SERVER STATUS", "SKILL", "DESCRIPTION"], rows, coloured=("SERVER STATUS",)))
    meta = result["metadata"]
    skills = ", ".join(s["id"] for s in result["matched_skills"]) or "none"
    print(
        f"\n{len(rows)} tools, strategy {meta['strategy_used']} ({meta['retrieval']}), skills matched: {skills}, "
        f"{meta['servers_searched']} servers, {meta['total_time_ms']:.1f} ms"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    """Standalone entry: open a client from ``--url``/``--token`` and search."""
    with ApiClient(resolve_target(args.url, args.token, os.environ)) as api:
        return search(args, api)
