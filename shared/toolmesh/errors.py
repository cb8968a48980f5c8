"""The one error table: every failure a client can see, with the spec's code and HTTP status."""

from __future__ import annotations

from typing import Any, ClassVar


class ToolmeshError(Exception):
    """Base of every error toolmesh reports; carries the spec's ``error_code`` and HTTP status."""

    error_code: ClassVar[str] = "ROUTING_FAILED"
    status: ClassVar[int] = 500

    def __init__(self, detail: str, context: dict[str, Any] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.context = context or {}
        self.extra = extra

    def headers(self) -> dict[str, str]:
        """HTTP headers that go with this error's response (none by default)."""
        return {}

    def body(self) -> dict[str, Any]:
        """The error body of the system contract: ``{"detail", "error_code", "context", ...}``."""
        body: dict[str, Any] = {"detail": self.detail, "error_code": self.error_code}
        if self.context:
            body["context"] = self.context
        body.update(self.extra)
        return body


class ServerNotFound(ToolmeshError):
    error_code = "SERVER_NOT_FOUND"
    status = 404


class ServerAlreadyExists(ToolmeshError):
    error_code = "SERVER_ALREADY_EXISTS"
    status = 409


class ServerUnavailable(ToolmeshError):
    error_code = "SERVER_UNAVAILABLE"
    status = 503


class ServerConnectionFailed(ToolmeshError):
    error_code = "SERVER_CONNECTION_FAILED"
    status = 503


class ToolNotFound(ToolmeshError):
    error_code = "TOOL_NOT_FOUND"
    status = 404


class ToolAmbiguous(ToolmeshError):
    error_code = "TOOL_AMBIGUOUS"
    status = 400


class SessionNotFound(ToolmeshError):
    error_code = "SESSION_NOT_FOUND"
    status = 503


class RoutingFailed(ToolmeshError):
    error_code = "ROUTING_FAILED"
    status = 500


class ResourceNotFound(ToolmeshError):
    """No registered server serves a resource URI."""

    error_code = "RESOURCE_NOT_FOUND"
    status = 404


class PromptNotFound(ToolmeshError):
    error_code = "PROMPT_NOT_FOUND"
    status = 404


class PromptAmbiguous(ToolmeshError):
    error_code = "PROMPT_AMBIGUOUS"
    status = 400


class PromptChanged(ToolmeshError):
    """A prompt's definition changed (or it is new under review) and waits for an admin's approval."""

    error_code = "PROMPT_CHANGED"
    status = 409


class ResourceChanged(ToolmeshError):
    """A resource URI only a held resource template matches (the poisoning scanner flagged it) is not
    read until an admin approves the template."""

    error_code = "RESOURCE_CHANGED"
    status = 409


class ExecutionFailed(ToolmeshError):
    error_code = "EXECUTION_FAILED"
    status = 502


class ExecutionTimeout(ToolmeshError):
    error_code = "EXECUTION_TIMEOUT"
    status = 504


class HealthCheckFailed(ToolmeshError):
    error_code = "HEALTH_CHECK_FAILED"
    status = 503


class ClassificationFailed(ToolmeshError):
    error_code = "CLASSIFICATION_FAILED"
    status = 500


class InvalidStateTransition(ToolmeshError):
    error_code = "INVALID_STATE_TRANSITION"
    status = 409


class LimitExceeded(ToolmeshError):
    error_code = "LIMIT_EXCEEDED"
    status = 409


class Unauthorized(ToolmeshError):
    error_code = "UNAUTHORIZED"
    status = 401

    def __init__(
        self, detail: str, context: dict[str, Any] | None = None, *, challenge: str = "Bearer", **extra: Any
    ) -> None:
        super().__init__(detail, context, **extra)
        self.challenge = challenge
        """The ``WWW-Authenticate`` value (an MCP endpoint names its protected-resource metadata)."""

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": self.challenge}


class RequestTooLarge(ToolmeshError):
    """The request body is over ``TOOLMESH_MAX_REQUEST_BODY_BYTES``."""

    error_code = "PAYLOAD_TOO_LARGE"
    status = 413


class RateLimited(ToolmeshError):
    """The principal's token bucket is empty; ``context["retry_after_seconds"]`` says for how long."""

    error_code = "RATE_LIMITED"
    status = 429

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.context.get("retry_after_seconds", 1))}


class QuotaExceeded(RateLimited):
    """A durable quota (``/api/v1/quotas``) has no calls left in its current window; ``context`` names it
    (``quota_id``, ``scope``, ``target``, ``namespace``, ``window``, ``limit``, ``reset_at``,
    ``retry_after_seconds``)."""

    def headers(self) -> dict[str, str]:
        return {
            **super().headers(),
            "X-RateLimit-Limit": str(self.context["limit"]),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(self.context["reset_epoch"]),
        }


class QuotaAlreadyExists(ToolmeshError):
    """The namespace has a quota of that scope and target already (change it instead)."""

    error_code = "QUOTA_EXISTS"
    status = 409


class QuotaNotFound(ToolmeshError):
    """No quota of that id is the caller's to see."""

    error_code = "QUOTA_NOT_FOUND"
    status = 404


class FairShareExceeded(RateLimited):
    """The principal holds its fair share of a gateway's in-flight tool calls while others wait
    (``RATE_LIMITED`` on the wire; ``context["retry_after_seconds"]`` says when to try again)."""


class Overloaded(ToolmeshError):
    """A role is at its capacity and refused the work at once rather than finish it late
    (``context["retry_after_seconds"]`` says when to try again)."""

    error_code = "OVERLOADED"
    status = 503

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.context.get("retry_after_seconds", 1))}


class UpstreamAuthorizationRequired(ToolmeshError):
    """A server registered with ``auth.identity: per_user`` has no grant of the caller's own: the
    caller authorizes at ``authorization_url`` (in the body when the gateway could start one) first."""

    error_code = "UPSTREAM_AUTHORIZATION_REQUIRED"
    status = 403


class Forbidden(ToolmeshError):
    """The caller's role may not do this (inside its namespace; outside it, things are not found)."""

    error_code = "FORBIDDEN"
    status = 403


class PolicyDenied(ToolmeshError):
    """A policy refused this tool call (its reason is the detail); the upstream never saw it."""

    error_code = "POLICY_DENIED"
    status = 403


class PolicyNotFound(ToolmeshError):
    error_code = "POLICY_NOT_FOUND"
    status = 404


class PolicyAlreadyExists(ToolmeshError):
    error_code = "POLICY_ALREADY_EXISTS"
    status = 409


class ToolChanged(ToolmeshError):
    """A tool's definition changed (or it is new under review) and waits for an admin's approval."""

    error_code = "TOOL_CHANGED"
    status = 409


class ApprovalRejected(ToolmeshError):
    """A human rejected a tool call that needed an approval (``context.comment``: what they said)."""

    error_code = "APPROVAL_REJECTED"
    status = 403


class ApprovalTimeout(ToolmeshError):
    """Nobody decided a tool call that needed an approval before its deadline."""

    error_code = "APPROVAL_TIMEOUT"
    status = 408


class ApprovalNotFound(ToolmeshError):
    error_code = "APPROVAL_NOT_FOUND"
    status = 404


class ApprovalClosed(ToolmeshError):
    """A decision on an approval that was decided, withdrawn or past its deadline already."""

    error_code = "APPROVAL_CLOSED"
    status = 409


class EndpointNotFound(ToolmeshError):
    error_code = "ENDPOINT_NOT_FOUND"
    status = 404


class EndpointAlreadyExists(ToolmeshError):
    error_code = "ENDPOINT_ALREADY_EXISTS"
    status = 409


class NamespaceNotFound(ToolmeshError):
    error_code = "NAMESPACE_NOT_FOUND"
    status = 404


class KeyNotFound(ToolmeshError):
    error_code = "KEY_NOT_FOUND"
    status = 404


class KeyAlreadyExists(ToolmeshError):
    error_code = "KEY_ALREADY_EXISTS"
    status = 409


class AuthorizationRequestNotFound(ToolmeshError):
    """An OAuth authorization request waiting for consent is unknown, decided already, or expired."""

    error_code = "AUTHORIZATION_REQUEST_NOT_FOUND"
    status = 404


class AppNotFound(ToolmeshError):
    """No connected app (an MCP client signed in with OAuth) of that id is the caller's to see."""

    error_code = "APP_NOT_FOUND"
    status = 404


class ValidationFailed(ToolmeshError):
    """A request body, parameter or header broke its contract (nothing was applied)."""

    error_code = "VALIDATION_ERROR"
    status = 422


class RegistryEntryRefused(ValidationFailed):
    """An MCP Registry ``server.json`` toolmesh cannot run as given: an unknown package kind, a
    transport it cannot start, a hostile field, or an input it needs and did not get
    (``context["missing_inputs"]`` names those)."""


class UnsupportedVersion(ToolmeshError):
    """A NATS API subject names a version this gateway does not serve."""

    error_code = "UNSUPPORTED_VERSION"
    status = 400


class UnknownOperation(ToolmeshError):
    """A NATS API subject names no operation of its version."""

    error_code = "UNKNOWN_OPERATION"
    status = 404


class IdempotencyKeyReused(ToolmeshError):
    """An idempotency key came back with another request than the one it was first used for."""

    error_code = "IDEMPOTENCY_KEY_REUSED"
    status = 422


class BackendUnavailable(ToolmeshError):
    """NATS, Postgres or the index could not be reached in time."""

    error_code = "BACKEND_UNAVAILABLE"
    status = 503


class StreamMisconfigured(BackendUnavailable):
    """A JetStream stream of toolmesh exists with another configuration than toolmesh gives it
    (e.g. made first by another client): it is not used."""


ERROR_TYPES: dict[str, type[ToolmeshError]] = {
    cls.error_code: cls
    for cls in (
        ServerNotFound,
        ServerAlreadyExists,
        ServerUnavailable,
        ServerConnectionFailed,
        ToolNotFound,
        ToolAmbiguous,
        ResourceNotFound,
        PromptNotFound,
        PromptAmbiguous,
        PromptChanged,
        SessionNotFound,
        RoutingFailed,
        ExecutionFailed,
        ExecutionTimeout,
        HealthCheckFailed,
        ClassificationFailed,
        InvalidStateTransition,
        LimitExceeded,
        Unauthorized,
        Forbidden,
        UpstreamAuthorizationRequired,
        ApprovalRejected,
        ApprovalTimeout,
        ApprovalNotFound,
        ApprovalClosed,
        ToolChanged,
        KeyNotFound,
        KeyAlreadyExists,
        AuthorizationRequestNotFound,
        AppNotFound,
        NamespaceNotFound,
        EndpointNotFound,
        EndpointAlreadyExists,
        RequestTooLarge,
        RateLimited,
        Overloaded,
        ValidationFailed,
        UnsupportedVersion,
        UnknownOperation,
        IdempotencyKeyReused,
        BackendUnavailable,
    )
}


def error_from_body(body: dict[str, Any]) -> ToolmeshError:
    """Rebuild an error from its wire body (a NATS reply), so it crosses processes intact."""
    cls = ERROR_TYPES.get(str(body.get("error_code")), RoutingFailed)
    extra = {k: v for k, v in body.items() if k not in ("detail", "error_code", "context")}
    return cls(str(body.get("detail", "")), body.get("context"), **extra)
