"""``toolmesh keys ...``: API keys (create, list, revoke), the connected apps acting as them (MCP
clients signed in with OAuth: list, disconnect), and rotation of the credential key."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from toolmesh.credentials import new_key
from toolmesh_cli.client import ApiClient, api_options
from toolmesh_cli.datadir import DataDirInUse, DataDirLock, prepare_data_dir
from toolmesh_cli.errors import UsageError
from toolmesh_cli.tables import as_json, show, table, when

KEY_FILE, PREVIOUS_FILE = "credential.key", "credential.key.previous"


def keys_create(args: argparse.Namespace, api: ApiClient) -> int:
    """Create a key and print its token (shown this once)."""
    body: dict[str, Any] = {"name": args.name, "role": args.role}
    if args.namespace:
        body["namespace"] = args.namespace
    created = api.create_key(body)
    if args.json:
        print(as_json(created))
    else:
        print(f"created {created['role']} key {created['name']} in {created['namespace']} ({created['id']})")
        print(f"token (shown once, only its hash is kept): {created['token']}")
    return 0


def keys_list(args: argparse.Namespace, api: ApiClient) -> int:
    """The keys the caller may manage (never their tokens)."""
    keys = api.keys()
    if args.json:
        print(as_json(keys))
        return 0
    rows = [[k["id"], k["name"], k["role"], k["namespace"], when(k["created_at"]), k.get("created_by")] for k in keys]
    show(table(["ID", "NAME", "ROLE", "NAMESPACE", "CREATED", "BY"], rows))
    return 0


def keys_revoke(args: argparse.Namespace, api: ApiClient) -> int:
    """Revoke a key by id or name; every gateway refuses it at once."""
    key_id = args.key
    for key in api.keys():
        if key["name"] == args.key and (args.namespace is None or key["namespace"] == args.namespace):
            key_id = key["id"]
    api.revoke_key(key_id)
    print(as_json({"id": key_id, "revoked": True}) if args.json else f"revoked {args.key}")
    return 0


def keys_apps(args: argparse.Namespace, api: ApiClient) -> int:
    """The connected apps the caller sees: which client acts as which key, at which MCP endpoint."""
    apps = api.apps()
    if args.json:
        print(as_json(apps))
        return 0
    rows = [
        [
            a.get("client_name") or a["client_id"],
            a["key_name"],
            a["namespace"],
            urlsplit(a["resource"]).path or a["resource"],
            when(a["created_at"]),
            when(a.get("refreshed_at")),
            a["id"],
        ]
        for a in apps
    ]
    show(table(["CLIENT", "KEY", "NAMESPACE", "ENDPOINT", "CREATED", "REFRESHED", "ID"], rows))
    return 0


def keys_disconnect(args: argparse.Namespace, api: ApiClient) -> int:
    """Revoke a connected app; every gateway refuses its tokens at once."""
    api.disconnect_app(args.app)
    print(as_json({"id": args.app, "disconnected": True}) if args.json else f"disconnected app {args.app}")
    return 0


def keys_reseal(args: argparse.Namespace, api: ApiClient) -> int:
    """Seal every server's config and upstream OAuth grant again under the running deployment's
    current credential key."""
    report = api.reseal()
    if args.json:
        print(as_json(report))
    else:
        print(
            f"resealed {report['resealed']} of {report['total']} server configs and {report['grants_resealed']} of "
            f"{report['grants_total']} upstream OAuth grants under key {report['key_id']}"
        )
    return 0


def rotate_credential_key(args: argparse.Namespace) -> int:
    """Offline rotation for ``toolmesh up``: a new key in the data dir, the old one kept as previous
    until the next ``toolmesh up`` has resealed every config under the new key."""
    data_dir = prepare_data_dir(args.data_dir or Path(os.environ.get("TOOLMESH_DATA_DIR") or "~/.toolmesh"))
    current = data_dir / KEY_FILE
    if not current.exists():
        raise UsageError(f"no credential key in {data_dir}: nothing to rotate")
    lock = DataDirLock(data_dir)
    try:
        lock.acquire()
    except DataDirInUse as exc:
        raise UsageError(f"{exc}; stop it first (its processes hold the current key)") from exc
    try:
        previous = data_dir / PREVIOUS_FILE
        kept = [line for line in _lines(previous)] + [current.read_text().strip()]
        _write_private(previous, "\n".join(kept) + "\n")
        _write_private(current, new_key() + "\n")
    finally:
        lock.release()
    print(f"new credential key written to {current}; the next `toolmesh up` reseals every server config")
    return 0


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def add_parser(sub: Any) -> None:
    """Add ``keys`` to the top-level subcommands."""
    common = [api_options()]
    keys = sub.add_parser("keys", help="API keys, connected apps and the credential key").add_subparsers(
        dest="action", required=True
    )
    create = keys.add_parser("create", parents=common, help="create an API key (its token is shown once)")
    create.add_argument("name")
    create.add_argument("--role", choices=["owner", "admin", "agent", "user"], default="user")
    create.add_argument("--namespace", help="default: your own (only the owner may name another)")
    create.set_defaults(run=keys_create)
    ls = keys.add_parser("list", parents=common, help="list API keys")
    ls.set_defaults(run=keys_list)
    revoke = keys.add_parser("revoke", parents=common, help="revoke an API key (by id or name)")
    revoke.add_argument("key", metavar="ID_OR_NAME")
    revoke.add_argument("--namespace", help="which namespace's key of that name")
    revoke.set_defaults(run=keys_revoke)
    apps = keys.add_parser("apps", parents=common, help="list connected apps (MCP clients signed in with OAuth)")
    apps.set_defaults(run=keys_apps)
    disconnect = keys.add_parser(
        "disconnect", parents=common, help="revoke a connected app (its tokens stop working at once)"
    )
    disconnect.add_argument("app", metavar="APP_ID", help="the ID column of `toolmesh keys apps`")
    disconnect.set_defaults(run=keys_disconnect)
    reseal = keys.add_parser(
        "reseal", parents=common, help="reseal every server config under the deployment's current credential key"
    )
    reseal.set_defaults(run=keys_reseal)
    rotate = keys.add_parser(
        "rotate-credential-key", help="new credential key for `toolmesh up` (run while it is stopped)"
    )
    rotate.add_argument("--data-dir", type=Path, help="the data dir of toolmesh up (default ~/.toolmesh)")
    rotate.set_defaults(offline=rotate_credential_key)
