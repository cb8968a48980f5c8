"""Who may register what: running a command on a host and reading the worker's variables are
operators' decisions (plain rules, no I/O; the gateway applies them to every registration).

A STDIO server runs its ``command`` on a session-worker's host: only an ``owner`` or ``admin``
registers one (403 ``FORBIDDEN`` for the rest), and when the deployment lists commands
(``TOOLMESH_STDIO_COMMANDS``), only one of those (422 naming ``connection_config.command``).
A ``${VAR}`` in a config may name only the variables the deployment allows for the namespace
(``TOOLMESH_EXPANDABLE_VARIABLES`` and ``TOOLMESH_EXPANDABLE_VARIABLES_BY_NAMESPACE``; none by
default); any other is refused with 422 naming its field. The session-worker expands by the same
lists (``worker_environment``), never toolmesh's own variables in any spelling, and never a
variable whose value holds one of the worker's secrets.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.keys import Role
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.credentials import expandable_environment, may_expand, variable_references
from toolmesh.errors import Forbidden, ValidationFailed
from toolmesh.platform.config import Settings
from toolmesh.platform.deployment_secrets import deployment_secrets

_MIN_CONTAINED = 8
"""A secret this long is refused inside a longer value too; a shorter one only as the whole value."""


def expandable_patterns(settings: Settings, namespace: str) -> tuple[str, ...]:
    """The glob patterns of the variables ``${VAR}`` may name in ``namespace``'s configs."""
    return (*settings.expandable_variables, *settings.expandable_variables_by_namespace.get(namespace, ()))


def may_run(command: str, patterns: tuple[str, ...]) -> bool:
    """True when the deployment lists no commands, or ``command`` matches one of them."""
    return not patterns or any(fnmatch.fnmatchcase(command, p) for p in patterns)


def check_registration(request: RegisterServerRequest, role: Role, namespace: str, settings: Settings) -> None:
    """Refuse what ``role`` may not register in ``namespace``.

    Raises:
        Forbidden: a STDIO server, or one exchanging callers' tokens, registered by a role other than
            owner or admin.
        ValidationFailed: a command the deployment does not list, or a ``${VAR}`` it does not allow.
    """
    if request.transport_type is TransportType.STDIO and not role.manages:
        raise Forbidden(
            f"Role '{role}' may not register STDIO servers (running a command on a host is for owners and admins)",
            {"role": str(role), "action": "register STDIO servers"},
        )
    config = request.connection_config
    auth = config.get("auth")
    if isinstance(auth, dict) and auth.get("token_exchange") is not None and not role.manages:
        raise Forbidden(
            f"Role '{role}' may not register servers that exchange callers' tokens (sending the front door's "
            "tokens to an authorization server is for owners and admins)",
            {"role": str(role), "action": "register token exchange"},
        )
    problems: list[tuple[str, str]] = []
    command = config.get("command")
    if request.transport_type is TransportType.STDIO and not may_run(str(command), settings.stdio_commands):
        problems.append(("command", f"'command' {command!r} is not one of the commands this deployment allows"))
    patterns = expandable_patterns(settings, namespace)
    for field, value in config.items():
        refused = sorted({name for name in variable_references(value) if not may_expand(name, patterns)})
        if refused:
            problems.append(
                (field, f"'{field}' references variables this deployment does not allow: {', '.join(refused)}")
            )
    if problems:
        raise ValidationFailed(
            "; ".join(message for _, message in problems),
            {
                "errors": [
                    {"loc": ["connection_config", field], "msg": message, "type": "value_error"}
                    for field, message in problems
                ]
            },
        )


def worker_environment(environ: Mapping[str, str], settings: Settings, namespace: str) -> dict[str, str]:
    """The variables of the worker's ``environ`` a config of ``namespace`` may expand: the allowed
    ones, without toolmesh's own nor any whose value holds one of the worker's secrets."""
    secrets = [secret.value for secret in deployment_secrets(settings, {}) if secret.sensitive]
    allowed = expandable_environment(environ, expandable_patterns(settings, namespace))
    return {name: value for name, value in allowed.items() if not any(_holds(value, s) for s in secrets)}


def _holds(value: str, secret: str) -> bool:
    """True when ``value`` is ``secret`` or (a secret long enough not to match by chance) contains it."""
    return secret in value if len(secret) >= _MIN_CONTAINED else value == secret
