"""The ``sandbox`` field of a STDIO server's ``connection_config``: what its child may see and use."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

MAX_DECLARED_PATHS = 64


def _host_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError("must be an absolute path")
    if "\x00" in value:
        raise ValueError("may not contain the NUL character")
    if ".." in value.split("/"):
        raise ValueError("may not contain '..'")
    return value


HostPath = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_host_path)]


class StdioSandbox(BaseModel):
    """Host paths a STDIO child sees besides the system directories, its network, and its limits
    (None: the deployment's default from the ``TOOLMESH_STDIO_SANDBOX_*`` settings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paths_read_only: list[HostPath] = Field(default_factory=list, max_length=MAX_DECLARED_PATHS)
    paths_read_write: list[HostPath] = Field(default_factory=list, max_length=MAX_DECLARED_PATHS)
    network: bool = True
    memory_mb: int | None = Field(default=None, ge=16, le=1_048_576)
    max_processes: int | None = Field(default=None, ge=1, le=65_536)
    max_open_files: int | None = Field(default=None, ge=16, le=1_048_576)


def sandbox_problems(value: Any) -> list[tuple[str, str]]:
    """``(field, message)`` for every way ``value`` is not a valid ``sandbox`` object."""
    try:
        StdioSandbox.model_validate(value)
    except ValidationError as exc:
        return [
            ("sandbox", f"'sandbox.{'.'.join(str(part) for part in error['loc'])}': {error['msg']}")
            for error in exc.errors()
        ]
    return []


def stdio_sandbox(config: dict[str, Any]) -> StdioSandbox:
    """The ``sandbox`` of a validated STDIO ``connection_config`` (the defaults when absent)."""
    return StdioSandbox.model_validate(config.get("sandbox") or {})
