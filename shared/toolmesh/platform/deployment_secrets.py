"""The secrets of the deployment itself: made known to the log redactor when a process starts, and
kept out of ``${VAR}`` expansion (``registration_policy.worker_environment``).

A hostile upstream may print what it read (a STDIO child's stderr is logged line by line), and
drivers quote URLs in their errors: whatever the line, the owner token, the credential keys, the
backends' passwords and every API key token are masked in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from toolmesh.contracts.keys import KEY_TOKEN_PATTERN
from toolmesh.platform.config import Settings
from toolmesh.redaction import Secret, process_redactor
from toolmesh.secret_text import is_secret_name, url_secrets

SHELL_DIRECTORIES = frozenset({"PWD", "OLDPWD"})
"""Variables the shell sets to directories: "PWD" reads as a password's name, but masking the working
directory would hide every path in the log."""


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _named(name: str, value: str) -> list[Secret]:
    """``value`` of a variable or setting: a secret when its name says so (numbers aside: a limit of
    ``TOOLMESH_AUTH_FAILURE_LIMIT`` is no credential), and the credentials of the URLs in it
    (``TOOLMESH_DATABASE_URL``); a list (``MCP_CREDENTIAL_KEY_PREVIOUS``) item by item."""
    found: list[Secret] = []
    parts = [part.strip() for part in value.split(",") if part.strip()]
    if is_secret_name(name) and not _is_number(value):
        found.extend(Secret(part, name) for part in {value, *parts})
    found.extend(secret for part in parts if "://" in part for secret in url_secrets(part))
    return found


def deployment_secrets(settings: Settings, environ: Mapping[str, str]) -> list[Secret]:
    """The settings that hold secrets (owner token, credential keys, NATS and metrics tokens,
    passwords in the backends' URLs) and every variable of ``environ`` whose name marks a secret."""
    found: list[Secret] = []
    for field, value in settings.model_dump().items():
        if isinstance(value, str) and value:
            found.extend(_named(field, value))
    for name, value in environ.items():
        if value and name not in SHELL_DIRECTORIES:
            found.extend(_named(name, value))
    return found


def guard_deployment_secrets(settings: Settings, environ: Mapping[str, str], extra: Iterable[str] = ()) -> None:
    """Make the redactor mask the deployment's secrets, ``extra`` values (an owner token read from
    the data dir) and every string shaped like an API key token, in every log line of this process."""
    redactor = process_redactor()
    redactor.add([*deployment_secrets(settings, environ), *extra])
    redactor.add_shape(KEY_TOKEN_PATTERN)
