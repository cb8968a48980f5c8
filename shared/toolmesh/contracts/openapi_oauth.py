"""Which security scheme of an OpenAPI document an ``OPENAPI`` server's OAuth grant (``auth``) is for.

The scheme is the one ``auth.scheme`` names, else the first by name (sorted, so the choice does not
depend on how the document's keys were ordered) of ``components.securitySchemes`` that toolmesh can
authorize: ``oauth2`` with an ``authorizationCode`` flow, or ``openIdConnect``. The gateway discovers
the authorization server from it; the session-worker sends the grant's token on the operations whose
security requirement names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OAUTH_KINDS = ("oauth2", "openIdConnect")


class NoOAuthScheme(ValueError):
    """The document has no security scheme the server's OAuth grant could be for (the words say why)."""


def _authorizable(scheme: Any) -> bool:
    if not isinstance(scheme, dict):
        return False
    if scheme.get("type") == "openIdConnect":
        return isinstance(scheme.get("openIdConnectUrl"), str)
    flows = scheme.get("flows")
    code = flows.get("authorizationCode") if scheme.get("type") == "oauth2" and isinstance(flows, dict) else None
    if not isinstance(code, dict):
        return False
    return isinstance(code.get("authorizationUrl"), str) and isinstance(code.get("tokenUrl"), str)


def oauth_scheme(document: Mapping[str, Any], named: str | None) -> tuple[str, dict[str, Any]]:
    """The name and definition of the scheme the grant is for: ``named`` when given, else the first
    authorizable one by name.

    Raises:
        NoOAuthScheme: ``named`` is not an authorizable scheme of the document, or there is none.
    """
    components = document.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    schemes = schemes if isinstance(schemes, dict) else {}
    if named is not None:
        if not _authorizable(schemes.get(named)):
            raise NoOAuthScheme(
                f"'auth.scheme' {named!r} is no oauth2 scheme with an authorizationCode flow nor an "
                "openIdConnect scheme of the document's components.securitySchemes"
            )
        return named, schemes[named]
    for name in sorted(str(n) for n in schemes):
        if _authorizable(schemes[name]):
            return name, schemes[name]
    raise NoOAuthScheme(
        "the document declares no oauth2 security scheme with an authorizationCode flow nor an openIdConnect one"
    )


def required_scopes(document: Mapping[str, Any], scheme: str) -> list[str]:
    """The scopes the document's security requirements (its own and its operations') ask of ``scheme``,
    each once, in the order first met."""
    found: list[str] = []

    def take(security: Any) -> None:
        for alternative in security if isinstance(security, list) else []:
            scopes = alternative.get(scheme) if isinstance(alternative, dict) else None
            for scope in scopes if isinstance(scopes, list) else []:
                if isinstance(scope, str) and scope not in found:
                    found.append(scope)

    take(document.get("security"))
    paths = document.get("paths")
    for item in (paths if isinstance(paths, dict) else {}).values():
        for operation in (item if isinstance(item, dict) else {}).values():
            if isinstance(operation, dict):
                take(operation.get("security"))
    return found
