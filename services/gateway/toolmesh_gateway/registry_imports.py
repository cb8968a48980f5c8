"""Importing an MCP Registry ``server.json`` through the API (REST and NATS): the conversion is
``toolmesh.registry_import``, the registration the same as ``POST /api/v1/aggregator/servers``."""

from __future__ import annotations

from toolmesh.contracts.registry_import import (
    RegistryImportPlan,
    RegistryImportRequest,
    RegistryInput,
    RegistryOption,
    RegistryPlanRequest,
)
from toolmesh.contracts.servers import ServerCreated
from toolmesh.registry_import.conversion import convert, plan
from toolmesh.registry_import.documents import single_entry
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.server_commands import ServerCommands


def import_plan(body: RegistryPlanRequest) -> RegistryImportPlan:
    """What importing the entry would register, and the inputs it takes; nothing is stored."""
    found = plan(single_entry(body.document), package=body.package, remote=body.remote, name=body.name)
    return RegistryImportPlan(
        registry_name=found.registry_name,
        name=found.name,
        option=RegistryOption(**found.option.as_dict()),
        options=[RegistryOption(**o.as_dict()) for o in found.options],
        inputs=[RegistryInput(**spec.as_dict()) for spec in found.inputs],
    )


async def import_registry(body: RegistryImportRequest, caller: Caller, commands: ServerCommands) -> ServerCreated:
    """Register the entry with the given inputs, as the caller (the registration rules apply)."""
    registration = {"auto_connect": body.auto_connect, "namespace": body.namespace}
    done = convert(
        single_entry(body.document),
        body.inputs,
        package=body.package,
        remote=body.remote,
        name=body.name,
        registration=registration,
    )
    return await commands.register(done.request, caller)
