"""``toolmesh quotas ...``: durable quotas of tool calls per key, namespace and server (list with
current usage, set, remove)."""

from __future__ import annotations

import argparse
from typing import Any

from toolmesh_cli.client import ApiClient, api_options
from toolmesh_cli.tables import as_json, show, table

WINDOWS = ("minute", "day", "month")


def _shown(quota: dict[str, Any], window: str) -> str:
    limit = quota.get(f"per_{window}")
    return "-" if limit is None else f"{quota['usage'].get(window, '?')}/{limit}"


def quotas_list(args: argparse.Namespace, api: ApiClient) -> int:
    """The quotas the caller sees, each window as used/limit."""
    quotas = api.quotas("list", {})["quotas"]
    if args.json:
        print(as_json(quotas))
        return 0
    rows = [[q["scope"], q["target"], q["namespace"], *(_shown(q, w) for w in WINDOWS), q["id"]] for q in quotas]
    show(table(["SCOPE", "TARGET", "NAMESPACE", "MINUTE", "DAY", "MONTH", "ID"], rows))
    return 0


def quotas_set(args: argparse.Namespace, api: ApiClient) -> int:
    """Create the quota of a scope and target, or replace its limits when it exists."""
    body: dict[str, Any] = {"scope": args.scope, **{f"per_{w}": getattr(args, f"per_{w}") for w in WINDOWS}}
    if args.target:
        body["target"] = args.target
    if args.namespace:
        body["namespace"] = args.namespace
    found = [
        q
        for q in api.quotas("list", {})["quotas"]
        if q["scope"] == args.scope
        and q["target"] == (args.target or q["namespace"])
        and (args.namespace is None or q["namespace"] == args.namespace)
    ]
    if found:
        saved = api.quotas(
            "replace", {"quota_id": found[0]["id"], **{k: v for k, v in body.items() if k != "namespace"}}
        )
    else:
        saved = api.quotas("create", body)
    print(as_json(saved) if args.json else f"quota {saved['id']}: {saved['scope']} {saved['target']} set")
    return 0


def quotas_remove(args: argparse.Namespace, api: ApiClient) -> int:
    """Remove a quota by id."""
    api.quotas("delete", {"quota_id": args.quota})
    print(as_json({"id": args.quota, "removed": True}) if args.json else f"removed quota {args.quota}")
    return 0


def add_parser(sub: Any) -> None:
    """Add ``quotas`` to the top-level subcommands."""
    common = [api_options()]
    quotas = sub.add_parser("quotas", help="durable quotas of tool calls per key, namespace, server").add_subparsers(
        dest="action", required=True
    )
    quotas.add_parser("list", parents=common, help="list quotas with current usage").set_defaults(run=quotas_list)
    put = quotas.add_parser("set", parents=common, help="create or change the quota of a key, namespace or server")
    put.add_argument("scope", choices=["key", "namespace", "server"])
    put.add_argument("target", nargs="?", help="the key's or server's name (a namespace quota: its namespace)")
    put.add_argument("--namespace", help="default: your own (only the owner may name another)")
    for window in WINDOWS:
        put.add_argument(f"--per-{window}", type=int, help=f"tool calls per {window} (UTC)")
    put.set_defaults(run=quotas_set)
    remove = quotas.add_parser("remove", parents=common, help="remove a quota")
    remove.add_argument("quota", metavar="ID", help="the ID column of `toolmesh quotas list`")
    remove.set_defaults(run=quotas_remove)
