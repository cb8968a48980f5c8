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


class BackendUnavailable(ToolmeshError):
    """NATS, Postgres or the index could not be reached in time."""

    error_code = "BACKEND_UNAVAILABLE"
    status = 503


ERROR_TYPES: dict[str, type[ToolmeshError]] = {
    cls.error_code: cls
    for cls in (
        ServerNotFound,
        ServerAlreadyExists,
        ServerUnavailable,
        ServerConnectionFailed,
        ToolNotFound,
        ToolAmbiguous,
        SessionNotFound,
        RoutingFailed,
        ExecutionFailed,
        ExecutionTimeout,
        HealthCheckFailed,
        ClassificationFailed,
        InvalidStateTransition,
        LimitExceeded,
        Unauthorized,
        BackendUnavailable,
    )
}


def error_from_body(body: dict[str, Any]) -> ToolmeshError:
    """Rebuild an error from its wire body (a NATS reply), so it crosses processes intact."""
    cls = ERROR_TYPES.get(str(body.get("error_code")), RoutingFailed)
    extra = {k: v for k, v in body.items() if k not in ("detail", "error_code", "context")}
    return cls(str(body.get("detail", "")), body.get("context"), **extra)
