"""An MCP Registry ``server.json`` entry turned into a toolmesh registration.

Used by ``toolmesh import`` (which asks for inputs on a terminal) and by the gateway's
``/api/v1/aggregator/servers/import-registry`` (which the console's import form calls), so both
read the format the same way. ``plan`` says what an entry offers and which inputs it takes;
``convert`` builds the registration from the values given, or refuses with the reason
(``RegistryEntryRefused``, naming every required input left without a value).

Which package or remote: ``package=N`` or ``remote=N`` (1-based) picks one; by default the first
remote (nothing runs on toolmesh's hosts), else the first package toolmesh can run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.errors import RegistryEntryRefused
from toolmesh.naming import normalize_server_name
from toolmesh.registry_import.inputs import Inputs, InputSpec, document_text
from toolmesh.registry_import.packages import package_label, package_problem, stdio_config

MAX_DESCRIPTION = 1000
REMOTE_TRANSPORTS = {"streamable-http": TransportType.HTTP, "sse": TransportType.SSE}


@dataclass(frozen=True)
class Option:
    """One way to reach an entry's server: a package (run locally) or a remote (a URL)."""

    kind: str
    """``package`` or ``remote``."""
    index: int
    """1-based, in the entry's ``packages`` or ``remotes``."""
    label: str
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"kind": self.kind, "index": self.index, "label": self.label, "problem": self.problem}


@dataclass(frozen=True)
class Plan:
    """What an entry offers: its server's name, the option chosen among all, the inputs it takes."""

    registry_name: str
    name: str
    option: Option
    options: list[Option]
    inputs: list[InputSpec]


@dataclass(frozen=True)
class Conversion:
    """A registration built from an entry, and what the user should know about it."""

    request: RegisterServerRequest
    warnings: list[str]


def registry_name(server: Mapping[str, Any]) -> str:
    """The entry's ``name`` (``io.github.user/weather``); refused when it has none."""
    name = server.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RegistryEntryRefused("the server.json has no 'name'")
    return name


def server_name(registry: str) -> str:
    """A toolmesh server name from a registry name: the part after the ``/`` (``weather``)."""
    return normalize_server_name(registry.rsplit("/", 1)[-1])


def _remote_problem(remote: Any) -> str | None:
    if not isinstance(remote, Mapping):
        return "a remote must be an object"
    if remote.get("type") not in REMOTE_TRANSPORTS:
        return f"unknown remote type {remote.get('type')!r} (streamable-http or sse)"
    if not isinstance(remote.get("url"), str) or not remote["url"].strip():
        return "the remote has no 'url'"
    return None


def _remote_label(remote: Any) -> str:
    return f"{remote.get('type')} {remote.get('url')}" if isinstance(remote, Mapping) else "remote ?"


def options(server: Mapping[str, Any]) -> list[Option]:
    """Every remote and package of an entry, each with the reason it cannot be used (or None)."""
    found: list[Option] = []
    for kind, problem, label in (
        ("remote", _remote_problem, _remote_label),
        ("package", package_problem, package_label),
    ):
        items = server.get(f"{kind}s") or []
        if not isinstance(items, list):
            raise RegistryEntryRefused(f"'{kind}s' must be a list")
        found += [Option(kind, i, label(item), problem(item)) for i, item in enumerate(items, 1)]
    return found


def choose(found: list[Option], package: int | None = None, remote: int | None = None) -> Option:
    """The option asked for, or the first usable one (remotes first); refused with the reason."""
    if package is not None and remote is not None:
        raise RegistryEntryRefused("choose a package or a remote, not both")
    if package is not None or remote is not None:
        kind, index = ("package", package) if package is not None else ("remote", remote)
        chosen = next((o for o in found if (o.kind, o.index) == (kind, index)), None)
        if chosen is None:
            count = sum(1 for o in found if o.kind == kind)
            raise RegistryEntryRefused(f"the entry has no {kind} {index} ({count} {kind}s)")
        if chosen.problem:
            raise RegistryEntryRefused(f"{kind} {index} ({chosen.label}): {chosen.problem}")
        return chosen
    usable = [o for o in found if o.problem is None]
    if usable:
        return usable[0]
    if not found:
        raise RegistryEntryRefused("the entry lists no packages and no remotes: nothing to run or connect to")
    reasons = "; ".join(f"{o.kind} {o.index} ({o.label}): {o.problem}" for o in found)
    raise RegistryEntryRefused(f"toolmesh cannot run any package or remote of the entry: {reasons}")


def _headers(items: Any, inputs: Inputs) -> dict[str, str]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise RegistryEntryRefused("'headers' must be a list")
    headers: dict[str, str] = {}
    for number, item in enumerate(items, 1):
        here = f"headers[{number}]"
        name = document_text(item.get("name") if isinstance(item, Mapping) else None, f"{here}: 'name'")
        value = inputs.value_of(name, item, "header", here)
        if value is not None:
            headers[name] = value
    return headers


def _remote_config(remote: Mapping[str, Any], inputs: Inputs) -> tuple[TransportType, dict[str, Any]]:
    transport = REMOTE_TRANSPORTS[str(remote["type"])]
    url = inputs.fill(document_text(remote["url"], "the remote's 'url'"), remote.get("variables"), "url", in_url=True)
    config: dict[str, Any] = {"url" if transport is TransportType.SSE else "base_url": url}
    if headers := _headers(remote.get("headers"), inputs):
        config["headers"] = headers
    return transport, config


def _build(server: Mapping[str, Any], option: Option, inputs: Inputs) -> tuple[TransportType, dict[str, Any]]:
    item = server[f"{option.kind}s"][option.index - 1]
    if option.kind == "remote":
        return _remote_config(item, inputs)
    return TransportType.STDIO, stdio_config(item, inputs)


def plan(
    server: Mapping[str, Any], *, package: int | None = None, remote: int | None = None, name: str | None = None
) -> Plan:
    """What ``convert`` would use, and every input it takes (none given yet)."""
    if not isinstance(server, Mapping):
        raise RegistryEntryRefused("a server.json must be an object")
    registry = registry_name(server)
    found = options(server)
    option = choose(found, package, remote)
    inputs = Inputs({})
    _build(server, option, inputs)
    return Plan(registry, name or server_name(registry), option, found, list(inputs.specs.values()))


def _description(server: Mapping[str, Any]) -> str | None:
    parts = [str(server[k]) for k in ("title", "description") if isinstance(server.get(k), str) and server[k]]
    return " — ".join(parts)[:MAX_DESCRIPTION] or None


def _invalid(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else str(e["msg"])
        for e in exc.errors(include_url=False)
    )


def convert(
    server: Mapping[str, Any],
    values: Mapping[str, str],
    *,
    package: int | None = None,
    remote: int | None = None,
    name: str | None = None,
    registration: Mapping[str, Any] | None = None,
) -> Conversion:
    """The registration of an entry with ``values`` for its inputs; ``registration`` adds fields of
    the request (``auto_connect``, ``namespace``, ...). Refused when an input is missing or unknown,
    or the result breaks the registration rules (egress, TLS, headers)."""
    found_plan = plan(server, package=package, remote=remote, name=name)
    inputs = Inputs(values)
    transport, config = _build(server, found_plan.option, inputs)
    if unknown := inputs.unknown():
        declared = ", ".join(inputs.specs) or "none"
        raise RegistryEntryRefused(f"the entry declares no input {', '.join(unknown)} (its inputs: {declared})")
    if inputs.missing:
        missing = ", ".join(inputs.missing)
        raise RegistryEntryRefused(
            f"{found_plan.registry_name} needs a value for {missing}", context={"missing_inputs": inputs.missing}
        )
    body = {
        **(registration or {}),
        "name": found_plan.name,
        "description": _description(server),
        "transport_type": transport.value,
        "connection_config": config,
    }
    try:
        request = RegisterServerRequest.model_validate(body)
    except ValidationError as exc:
        raise RegistryEntryRefused(f"{found_plan.registry_name}: {_invalid(exc)}") from exc
    texts = [*config.get("args", []), config.get("url", ""), config.get("base_url", "")]
    warnings = [
        f"secret input {secret!r} is passed on the command line (or URL), where it is not sealed"
        for secret in inputs.secrets_within(texts)
    ]
    return Conversion(request, warnings)
