"""`shared/toolmesh` holds only what more than one consumer needs (issue 24: "shared/ holds no
module used by one service only").

A shared module's consumers are the services that import it, directly or through other shared
modules (an import through another service does not count: the CLI's role commands import the
entry point of each service, which does not make every module of that service the CLI's). The
CLI is a service like the others: what only `toolmesh up` uses belongs to `toolmesh_cli`.

The public API (`toolmesh.contracts`, `toolmesh.client`) is for outside users, so its own modules
are not checked, and it counts as one consumer of what it imports: a module used by one service
and the public API stays shared.
"""

from __future__ import annotations

import grimp
import pytest

SHARED = "toolmesh"
SERVICES = (
    "toolmesh_gateway",
    "toolmesh_session_worker",
    "toolmesh_classifier",
    "toolmesh_health",
    "toolmesh_projector",
    "toolmesh_cli",
)
PUBLIC_API = ("toolmesh.contracts", "toolmesh.client")
PUBLIC = "public API"

pytestmark = pytest.mark.unit


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _is_public(module: str) -> bool:
    return any(_in(module, package) for package in PUBLIC_API)


def consumers(graph: grimp.ImportGraph, module: str) -> set[str]:
    """The services (and the public API) that import ``module``, directly or through shared modules."""
    found: set[str] = set()
    seen = {module}
    todo = [module]
    while todo:
        for importer in graph.find_modules_that_directly_import(todo.pop()):
            if not _in(importer, SHARED):
                found.add(importer.split(".")[0])
                continue
            if _is_public(importer):
                found.add(PUBLIC)
            if importer not in seen:
                seen.add(importer)
                todo.append(importer)
    return found


def shared_consumers(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Every checked module of ``toolmesh`` and its consumers. A package counts the consumers of
    each of its modules too (importing any of them runs the package's ``__init__``)."""
    modules = sorted(m for m in graph.modules if _in(m, SHARED))
    own = {m: consumers(graph, m) for m in modules}
    return {
        m: set().union(*(users for other, users in own.items() if _in(other, m))) for m in modules if not _is_public(m)
    }


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(SHARED, *SERVICES, cache_dir=None)


def test_shared_modules_serve_more_than_one_consumer(graph: grimp.ImportGraph) -> None:
    misplaced = {
        module: sorted(users) or ["nobody: dead code"]
        for module, users in shared_consumers(graph).items()
        if len(users) < 2
    }
    assert not misplaced, f"shared modules with fewer than two consumers (move or delete them): {misplaced}"


def test_consumers_follow_shared_modules_not_services() -> None:
    """The rule's own reading, on a graph of its own: imports through a service stop there,
    imports through shared modules go on, the public API counts once and is not checked itself."""
    graph = grimp.ImportGraph()
    for importer, imported in [
        ("toolmesh_cli.roles", "toolmesh_gateway.serve"),
        ("toolmesh_gateway.serve", "toolmesh.search"),
        ("toolmesh_cli.up", "toolmesh.platform.runtime"),
        ("toolmesh.platform.runtime", "toolmesh.platform.store.pool"),
        ("toolmesh_projector.projection", "toolmesh.platform.store.pool"),
        ("toolmesh.contracts.servers", "toolmesh.naming"),
        ("toolmesh_gateway.routers", "toolmesh.contracts.servers"),
    ]:
        graph.add_import(importer=importer, imported=imported)
    graph.add_module("toolmesh.unused")
    assert shared_consumers(graph) == {
        "toolmesh.search": {"toolmesh_gateway"},
        "toolmesh.platform.runtime": {"toolmesh_cli"},
        "toolmesh.platform.store.pool": {"toolmesh_cli", "toolmesh_projector"},
        "toolmesh.naming": {PUBLIC, "toolmesh_gateway"},
        "toolmesh.unused": set(),
    }
