"""MCP clients signing in with OAuth: the consent page's API (``/api/v1/oauth/requests/{id}``) and
the connected apps (``/api/v1/auth/apps``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response, status

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.connected_apps import (
    ConnectedAppList,
    ConsentDecision,
    ConsentDecisionRequest,
    ConsentRequest,
    SignInOptions,
)
from toolmesh_gateway.auth import Principal, require_signer
from toolmesh_gateway.authorization_server.consent import Consents
from toolmesh_gateway.authorization_server.sign_in import CONSENT_COOKIE
from toolmesh_gateway.dependencies import caller_of

router = APIRouter(tags=["connected apps"])
Signer = Annotated[Principal, Depends(require_signer)]
"""The consent is a person's own: a key limited to MCP endpoints may give it (for those endpoints), and
see and end the apps it connected."""
RequestId = Annotated[str, Path(min_length=16, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")]
_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},
}


async def consents(request: Request) -> Consents:
    """The gateway's consent service."""
    result: Consents = request.app.state.consents
    return result


ConsentService = Annotated[Consents, Depends(consents)]


@dataclass(frozen=True)
class Answering:
    """Who answers a consent request, and whether they signed in at the identity provider for it."""

    principal: Principal
    by_sign_in: bool


async def answering(request: Request, request_id: RequestId, service: ConsentService) -> Answering:
    """Who answers a request: the key (or identity provider's JWT) that signs the call; without one, the
    person who signed in at the identity provider for this very request (its cookie)."""
    secret = request.cookies.get(CONSENT_COOKIE)
    if request.headers.get("authorization") or not secret:
        return Answering(await require_signer(request), by_sign_in=False)
    return Answering(await service.person(request_id, secret), by_sign_in=True)


@router.get("/api/v1/oauth/sign-in")
async def sign_in_options(service: ConsentService) -> SignInOptions:
    """Whether a signed-out person may sign in at an identity provider to answer a request (no key needed)."""
    return service.sign_in_options()


@router.get("/api/v1/oauth/requests/{request_id}", responses=_REFUSALS)
async def consent_request(
    request_id: RequestId, answer: Annotated[Answering, Depends(answering)], service: ConsentService
) -> ConsentRequest:
    """What an MCP client asks for: its name, redirect URI, the endpoint and scopes."""
    return await service.describe(request_id, answer.principal if answer.by_sign_in else None)


@router.post("/api/v1/oauth/requests/{request_id}/decision", responses=_REFUSALS)
async def decide(
    request_id: RequestId,
    body: ConsentDecisionRequest,
    answer: Annotated[Answering, Depends(answering)],
    service: ConsentService,
) -> ConsentDecision:
    """Allow or deny the request as the calling key (or the person signed in for it); send the browser
    to ``redirect_to``."""
    return await service.decide(request_id, body.allow, answer.principal)


@router.get("/api/v1/auth/apps", responses=_REFUSALS)
async def list_apps(principal: Signer, service: ConsentService) -> ConnectedAppList:
    """Connected apps: the caller's own (an admin: its namespace's; the owner: all)."""
    return await service.apps(principal)


@router.delete("/api/v1/auth/apps/{app_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_REFUSALS)
async def disconnect_app(app_id: str, request: Request, principal: Signer, service: ConsentService) -> Response:
    """Revoke a connected app: its tokens are refused at once by every gateway."""
    await service.disconnect(app_id, caller_of(request, principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
