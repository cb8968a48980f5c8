"""JSON Schemas out of an OpenAPI document with every ``$ref`` inlined, as finite JSON (no I/O).

References resolve inside the document only (``referencing``'s registry, whose retrieval refuses
everything): a reference to another document, a remote URL or a file becomes ``{}``, never a fetch.
A reference back into itself (a recursive schema) becomes ``{}`` where it recurs, and a schema whose
inlining would pass ``MAX_NODES`` nodes or ``MAX_DEPTH`` levels is cut the same way, so one hostile
document cannot make a tool definition explode; and a document whose schemas inline to more than
``MAX_DOCUMENT_NODES`` nodes in all (many operations referring to one large schema) is refused
(``TooComplex``), so it cannot make the whole list explode either. OpenAPI 3.0's ``nullable``
becomes a ``"null"`` type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012
from referencing.typing import URI

from toolmesh_session_worker.upstream.openapi.document import DocumentProblem

DOCUMENT_URI = "urn:toolmesh:openapi-document"
"""The base URI the document is registered under; every other URI is refused."""
MAX_NODES = 20_000
MAX_DEPTH = 64
MAX_DOCUMENT_NODES = 500_000
"""The most nodes all of a document's schemas may inline to (about two seconds of work)."""


class TooComplex(DocumentProblem):
    """A document whose schemas inline to more than ``MAX_DOCUMENT_NODES`` nodes."""


def _refuse(uri: URI) -> Resource[Any]:
    """Retrieval of anything but the document itself: refused (no file or network reads)."""
    raise NoSuchResource(uri)


@dataclass
class _Budget:
    nodes: int = MAX_NODES
    trail: list[int] = field(default_factory=list)


class Dereferencer:
    """Inlines ``$ref`` within one OpenAPI document."""

    def __init__(self, document: dict[str, Any]) -> None:
        resource: Resource[Any] = DRAFT202012.create_resource(document)
        registry: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]
        self._resolver = registry.with_resource(DOCUMENT_URI, resource).resolver(DOCUMENT_URI)
        self._nullable = str(document.get("openapi", "")).startswith("3.0.")
        self._spent = 0

    def resolve(self, node: Any) -> Any:
        """``node`` itself when it is no reference object, else what it refers to (one level, for
        parameters, request bodies and responses); ``{}`` for a reference that cannot be followed."""
        for _ in range(MAX_DEPTH):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node
            try:
                node = self._resolver.lookup(node["$ref"]).contents
            except (Unresolvable, ValueError):  # ValueError: a reference that is no valid URI
                return {}
        return {}

    def schema(self, node: Any) -> Any:
        """``node`` (a schema) with every reference inlined, bounded.

        Raises:
            TooComplex: the document's schemas so far inline to more than ``MAX_DOCUMENT_NODES`` nodes.
        """
        return self._inline(node, self._resolver, _Budget(), 0)

    def _inline(self, node: Any, resolver: Any, budget: _Budget, depth: int) -> Any:
        budget.nodes -= 1
        self._spent += 1
        if self._spent > MAX_DOCUMENT_NODES:
            raise TooComplex(f"its schemas inline to more than {MAX_DOCUMENT_NODES} nodes in all")
        if budget.nodes < 0 or depth > MAX_DEPTH:
            return {}
        if isinstance(node, list):
            return [self._inline(item, resolver, budget, depth + 1) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolved = resolver.lookup(ref)
            except (Unresolvable, ValueError):  # ValueError: a reference that is no valid URI
                return {}
            target = resolved.contents
            if id(target) in budget.trail:
                return {}  # a recursive schema: the cycle stops here
            budget.trail.append(id(target))
            try:
                inlined = self._inline(target, resolved.resolver, budget, depth + 1)
            finally:
                budget.trail.pop()
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if not siblings or not isinstance(inlined, dict):
                return inlined
            return {**inlined, **self._inline(siblings, resolver, budget, depth + 1)}
        out = {str(k): self._inline(v, resolver, budget, depth + 1) for k, v in node.items()}
        if self._nullable and out.pop("nullable", False) is True and isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        return out
