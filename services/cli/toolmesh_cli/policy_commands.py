"""``toolmesh policies ...``: policies on tool calls (CEL): list, add (or add a preset), show with their
versions, remove."""

from __future__ import annotations

import argparse
from typing import Any

from toolmesh_cli.client import ApiClient, api_options
from toolmesh_cli.errors import UsageError
from toolmesh_cli.policy_presets import PRESETS
from toolmesh_cli.tables import as_json, show, table, when


def policies_list(args: argparse.Namespace, api: ApiClient) -> int:
    """The policies of the caller's namespace and the global ones."""
    listed = api.operation("policies.list", {})["policies"]
    if args.json:
        print(as_json(listed))
        return 0
    rows = [
        [p["name"], p["namespace"] or "(global)", p["effect"], p["mode"], p["version"], p["expression"], p["id"]]
        for p in listed
    ]
    show(table(["NAME", "NAMESPACE", "EFFECT", "MODE", "VERSION", "EXPRESSION", "ID"], rows))
    return 0


def policies_add(args: argparse.Namespace, api: ApiClient) -> int:
    """Add a policy, written out or from a preset (``--preset``)."""
    body: dict[str, Any] = dict(PRESETS[args.preset]) if args.preset else {}
    if args.expression:
        body["expression"] = args.expression
    if args.effect:
        body["effect"] = args.effect
    if args.reason:
        body["reason"] = args.reason
    if "expression" not in body or "effect" not in body:
        raise UsageError("give --expression and --effect, or --preset")
    body.update(name=args.name or args.preset, namespace=None if args.everywhere else args.namespace)
    body.update(redact=args.redact or [], mode="dry_run" if args.dry_run else "enforce")
    if not body["name"]:
        raise UsageError("give the policy a name")
    created = api.operation("policies.create", body)
    if args.json:
        print(as_json(created))
    else:
        where = created["namespace"] or "every namespace"
        print(f"added policy {created['name']} ({created['effect']}, {created['mode']}) in {where}: {created['id']}")
    return 0


def policies_show(args: argparse.Namespace, api: ApiClient) -> int:
    """One policy and every version it had."""
    policy_id = _resolve(api, args.policy)
    versions = api.operation("policies.versions", {"policy_id": policy_id})["versions"]
    if args.json:
        print(as_json(versions))
        return 0
    rows = [
        [
            v["version"],
            "deleted" if v["deleted"] else v["effect"],
            v["mode"],
            v["expression"],
            v["actor"],
            when(v["at"]),
        ]
        for v in versions
    ]
    show(table(["VERSION", "EFFECT", "MODE", "EXPRESSION", "BY", "AT"], rows))
    return 0


def policies_remove(args: argparse.Namespace, api: ApiClient) -> int:
    """Remove a policy by id or name; every gateway stops applying it."""
    policy_id = _resolve(api, args.policy)
    api.operation("policies.delete", {"policy_id": policy_id})
    print(as_json({"id": policy_id, "removed": True}) if args.json else f"removed policy {args.policy}")
    return 0


def policies_presets(args: argparse.Namespace, api: ApiClient) -> int:
    """The ready-made policies (none is on until added)."""
    if args.json:
        print(as_json(PRESETS))
        return 0
    show(table(["PRESET", "EFFECT", "EXPRESSION"], [[n, p["effect"], p["expression"]] for n, p in PRESETS.items()]))
    return 0


def _resolve(api: ApiClient, id_or_name: str) -> str:
    named = [p["id"] for p in api.operation("policies.list", {})["policies"] if p["name"] == id_or_name]
    if len(named) > 1:
        raise UsageError(f"several policies are called {id_or_name}: give its id")
    return named[0] if named else id_or_name


def add_parser(sub: Any) -> None:
    """Add ``policies`` to the top-level subcommands."""
    common = [api_options()]
    policies = sub.add_parser("policies", help="policies on tool calls (CEL)").add_subparsers(
        dest="action", required=True
    )
    policies.add_parser("list", parents=common, help="list policies").set_defaults(run=policies_list)
    add = policies.add_parser("add", parents=common, help="add a policy (or a preset)")
    add.add_argument("name", nargs="?", help="default: the preset's name")
    add.add_argument("--preset", choices=sorted(PRESETS), help="a ready-made policy (`toolmesh policies presets`)")
    add.add_argument("--expression", help="CEL over the call, e.g. 'tool.name.startsWith(\"delete_\")'")
    add.add_argument("--effect", choices=["allow", "deny", "require_approval", "redact"])
    add.add_argument("--reason", help="what the caller (or the approver) is told")
    add.add_argument("--redact", nargs="+", metavar="FIELD", help="result fields a redact policy removes (a.b)")
    add.add_argument("--dry-run", action="store_true", help="log and audit what it would do, never act")
    where = add.add_mutually_exclusive_group(required=True)
    where.add_argument("--namespace", help="the namespace it applies in")
    where.add_argument("--global", dest="everywhere", action="store_true", help="every namespace (owner only)")
    add.set_defaults(run=policies_add)
    show_ = policies.add_parser("show", parents=common, help="a policy's versions")
    show_.add_argument("policy", metavar="ID_OR_NAME")
    show_.set_defaults(run=policies_show)
    remove = policies.add_parser("remove", parents=common, help="remove a policy")
    remove.add_argument("policy", metavar="ID_OR_NAME")
    remove.set_defaults(run=policies_remove)
    policies.add_parser("presets", parents=common, help="the ready-made policies").set_defaults(run=policies_presets)
