"""``toolmesh import`` of MCP Registry documents: reading one from a file or an http(s) URL, and the
inputs of each entry, from ``--input NAME=VALUE`` or asked on a terminal (secrets without echo).

The conversion itself is ``toolmesh.registry_import``, shared with the gateway's import endpoint.
"""

from __future__ import annotations

import getpass
import json
import shutil
import sys
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from toolmesh.errors import RegistryEntryRefused
from toolmesh.registry_import.conversion import convert, plan
from toolmesh.registry_import.documents import registry_entries
from toolmesh.registry_import.inputs import InputSpec
from toolmesh_cli.errors import ConfigError
from toolmesh_cli.mcp_servers import Entry

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
FETCH_SECONDS = 30.0

Ask = Callable[[InputSpec], str | None]


@dataclass(frozen=True)
class Choice:
    """What the command line chose for registry entries."""

    values: Mapping[str, str]
    package: int | None = None
    remote: int | None = None
    name: str | None = None


def parse_inputs(pairs: list[str]) -> dict[str, str]:
    """``--input NAME=VALUE`` flags as a mapping; ``ConfigError`` for one without ``=``."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ConfigError(f"--input {pair!r}: expected NAME=VALUE")
        values[name] = value
    return values


def read_document(source: str) -> Any:
    """The JSON document at a file path or an http(s) URL."""
    if source.startswith(("http://", "https://")):
        try:
            with httpx.stream("GET", source, timeout=FETCH_SECONDS, follow_redirects=True) as response:
                response.raise_for_status()
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise ConfigError(f"{source}: larger than {MAX_DOCUMENT_BYTES} bytes")
        except httpx.HTTPError as exc:
            raise ConfigError(f"cannot fetch {source}: {exc}") from exc
        text, where = body.decode("utf-8", "replace"), source
    else:
        try:
            text, where = Path(source).read_text(), source
        except OSError as exc:
            raise ConfigError(f"cannot read {source}: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc}") from exc


def _shown(text: str) -> str:
    """``text`` of an entry as it may reach a terminal: control characters (escape sequences that
    could rewrite the screen, the title or the clipboard) as ``?``."""
    return "".join("?" if unicodedata.category(c) == "Cc" else c for c in text)


def ask_on_terminal(spec: InputSpec) -> str | None:
    """Ask for one input on the terminal (a secret without echo); None when left empty."""
    about = f" ({spec.description})" if spec.description else ""
    options = f" [{'/'.join(spec.choices)}]" if spec.choices else ""
    prompt = _shown(f"{spec.name}{about}{options}: ")
    answer = getpass.getpass(prompt) if spec.secret else input(prompt)
    return answer or None


def terminal_asker() -> Ask | None:
    """``ask_on_terminal`` when stdin and stderr are a terminal, else None (nothing is asked)."""
    return ask_on_terminal if sys.stdin.isatty() and sys.stderr.isatty() else None


def _entry(server: Mapping[str, Any], choice: Choice, declared: set[str], ask: Ask | None) -> tuple[Entry, list[str]]:
    source = _shown(str(server.get("name") or "server.json"))
    try:
        found = plan(server, package=choice.package, remote=choice.remote, name=choice.name)
        names = {spec.name for spec in found.inputs}
        declared |= names
        values = {k: v for k, v in choice.values.items() if k in names}
        for spec in found.inputs:
            if ask is not None and spec.required and spec.name not in values and spec.default is None:
                if (answer := ask(spec)) is not None:
                    values[spec.name] = answer
        done = convert(server, values, package=choice.package, remote=choice.remote, name=choice.name)
    except RegistryEntryRefused as exc:
        return Entry(source, problem=_shown(exc.detail)), []
    command = done.request.connection_config.get("command")
    warnings = list(done.warnings)
    if command and shutil.which(command) is None:
        warnings.append(f"{command} is not on this machine's PATH; the session worker that runs the server needs it")
    return Entry(source, request=done.request), [f"{source}: {w}" for w in warnings]


def convert_registry(document: Any, choice: Choice, ask: Ask | None) -> tuple[list[Entry], list[str]]:
    """An ``Entry`` per server of a registry document, and warnings to show (an ``--input`` no entry
    declares is one); ``ConfigError`` for a document of no registry shape, or ``--name`` for several."""
    try:
        servers = registry_entries(document)
    except RegistryEntryRefused as exc:
        raise ConfigError(_shown(exc.detail)) from exc
    if choice.name is not None and len(servers) != 1:
        raise ConfigError(f"--name names one server; the document holds {len(servers)}")
    declared: set[str] = set()
    entries: list[Entry] = []
    warnings: list[str] = []
    taken: set[str] = set()
    for server in servers:
        entry, said = _entry(server, choice, declared, ask)
        if entry.request is not None and entry.request.name in taken:
            entry = Entry(entry.source_name, problem=f"name {entry.request.name!r} is used by another entry")
        if entry.request is not None:
            taken.add(entry.request.name)
        entries.append(entry)
        warnings += said
    if unknown := sorted(set(choice.values) - declared):
        warnings.append(f"--input {', '.join(unknown)}: no entry of the document declares such an input")
    return entries, warnings
