"""What can go wrong in a CLI command, each as one readable line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toolmesh.errors import ToolmeshError, ValidationFailed


class CliError(Exception):
    """A failure reported to the user as ``toolmesh: <message>`` with exit code 1."""


class ApiError(CliError):
    """The API answered with an error, or could not be reached."""

    def __init__(self, message: str, status: int | None = None, error_code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class UsageError(CliError):
    """The command line is well-formed but asks for something that cannot be done."""


class ConfigError(CliError):
    """A config or import file that cannot be used; ``problems`` holds one line per bad entry."""

    def __init__(self, message: str, problems: Iterable[str] = ()) -> None:
        self.problems = list(problems)
        super().__init__("\n  ".join([message, *self.problems]))


def describe_validation(errors: Iterable[Mapping[str, Any]]) -> str:
    """Pydantic / FastAPI 422 error items as ``field: message; field: message``."""
    parts = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        msg = str(error.get("msg", "invalid"))
        parts.append(f"{'.'.join(loc)}: {msg}" if loc else msg)
    return "; ".join(parts) or "invalid request"


def describe_api_error(error: ToolmeshError) -> str:
    """An API error as one line: its detail (each invalid field for a validation error) and code."""
    errors = error.context.get("errors") if isinstance(error, ValidationFailed) else None
    message = describe_validation(e for e in errors if isinstance(e, dict)) if isinstance(errors, list) else None
    return f"{message or error.detail} ({error.error_code})"
