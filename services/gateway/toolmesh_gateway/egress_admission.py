"""The egress policy at registration: which upstream URLs a role may register (``toolmesh.egress.policy``).

Plain ``http://`` (``allow_insecure``) and loopback or private targets are decisions of an owner or
admin: another role gets 403 ``FORBIDDEN`` naming the field. Link-local and metadata targets are
refused for every role (422 ``VALIDATION_ERROR`` naming the field). Names are judged by what they
resolve to now; a name that does not resolve yet is judged at every connect (as every name is).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from toolmesh.contracts.connection_config import CONFIG_FIELDS, TransportType
from toolmesh.contracts.openapi_config import first_server_url
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.egress.http import check_host
from toolmesh.egress.policy import EgressPolicy, EgressRefused, Reach
from toolmesh.errors import Forbidden, ValidationFailed


def upstream_urls(request: RegisterServerRequest) -> list[tuple[tuple[str, ...], str]]:
    """``(loc, url)`` of every URL of ``request`` toolmesh will fetch."""
    found: list[tuple[tuple[str, ...], str]] = []
    config = request.connection_config
    if request.transport_type is TransportType.OPENAPI:
        found.extend((("connection_config", f), str(config[f])) for f in ("spec_url", "base_url") if f in config)
        if isinstance(config.get("spec"), dict) and "base_url" not in config:
            found.append((("connection_config", "spec"), first_server_url(config["spec"]) or ""))
    elif request.transport_type is not TransportType.STDIO:
        field = CONFIG_FIELDS[request.transport_type][0]
        found.append((("connection_config", field), str(request.connection_config[field])))
    if request.health_check_url is not None:
        found.append((("health_check_url",), str(request.health_check_url)))
    return found


async def admit_upstream(request: RegisterServerRequest, operator: bool, networks: tuple[str, ...]) -> EgressPolicy:
    """The egress policy of a server ``request`` registers, when its URLs are allowed for the caller
    (``operator``: an owner or admin) in a deployment opening ``networks`` to every registrar.

    Raises:
        Forbidden: a non-operator set ``allow_insecure`` or names a loopback or private target.
        ValidationFailed: a URL names a link-local or metadata target (in any spelling, or by a name
            that resolves to one).
    """
    if request.allow_insecure and not operator:
        raise Forbidden(
            "Only an owner or admin may set allow_insecure (plain http:// to a remote upstream)",
            {"field": "allow_insecure", "action": "allow insecure upstreams"},
        )
    policy = EgressPolicy.of(operator, networks)
    for loc, url in upstream_urls(request):
        try:
            await check_host(urlsplit(url).hostname or "", 0, policy)
        except EgressRefused as exc:
            field = ".".join(loc)
            if exc.reach is Reach.FORBIDDEN:
                raise ValidationFailed(
                    f"'{field}': {exc}",
                    {"field": field, "errors": [{"loc": list(loc), "msg": str(exc), "type": "value_error"}]},
                ) from exc
            raise Forbidden(
                f"'{field}': {exc}", {"field": field, "action": "reach loopback or private addresses"}
            ) from exc
        except (OSError, UnicodeError):
            continue  # not resolvable now: every connect resolves and checks it
    return policy
