"""Importing an MCP Registry ``server.json``: ``POST /api/v1/aggregator/servers/import-registry/plan``
(what an entry offers and the inputs it takes) and ``POST /api/v1/aggregator/servers/import-registry``
(register it with values for those inputs)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from toolmesh.naming import MAX_COUNT, NAMESPACE_PATTERN, SERVER_NAME_PATTERN

MAX_INPUTS = 256
MAX_INPUT_VALUE = 65536
InputName = Annotated[str, Field(min_length=1, max_length=255)]
InputValue = Annotated[str, Field(max_length=MAX_INPUT_VALUE)]


class RegistryPlanRequest(BaseModel):
    """One registry entry and the package or remote to use (default: the first usable remote, else
    the first usable package)."""

    model_config = ConfigDict(extra="forbid")

    document: dict[str, Any] = Field(
        description='A server.json, the registry API\'s {"server": {...}}, or {"servers": [...]} holding one'
    )
    package: int | None = Field(None, ge=1, le=MAX_COUNT, description="Use the entry's Nth package (from 1)")
    remote: int | None = Field(None, ge=1, le=MAX_COUNT, description="Use the entry's Nth remote (from 1)")
    name: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        pattern=SERVER_NAME_PATTERN,
        description="Default: the registry name's last part",
    )


class RegistryImportRequest(RegistryPlanRequest):
    """A registry entry to register, with values for its inputs."""

    inputs: dict[InputName, InputValue] = Field(
        default_factory=dict,
        max_length=MAX_INPUTS,
        description="Values of the entry's inputs by name (environment variables, headers, arguments, variables)",
    )
    auto_connect: bool = True
    namespace: str | None = Field(
        None, pattern=NAMESPACE_PATTERN, description="Only the owner may name one; default: the caller's namespace"
    )


class RegistryInput(BaseModel):
    """One input an entry takes."""

    name: str
    kind: str = Field(description="env, header, argument or variable")
    description: str
    required: bool
    secret: bool
    default: str | None
    choices: list[str]
    format: str = Field(description="string, number, boolean or filepath")
    placeholder: str | None


class RegistryOption(BaseModel):
    """A package or remote of an entry, with the reason toolmesh cannot use it (or null)."""

    kind: str = Field(description="package or remote")
    index: int
    label: str
    problem: str | None


class RegistryImportPlan(BaseModel):
    """What an import of the entry would register."""

    registry_name: str
    name: str
    option: RegistryOption
    options: list[RegistryOption]
    inputs: list[RegistryInput]
