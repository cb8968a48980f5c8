"""``Where`` as a Qdrant filter; qdrant-client's models and qdrant-edge share the class names.

Boolean payload fields are matched through keyword mirrors (``flags``): qdrant-edge-py 0.9.0
turns ``MatchValue(True)`` into the integer 1, which never matches a stored boolean.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from toolmesh.index.base import Where

# Payload fields filters use; both backends keep an index on each.
KEYWORD_FIELDS = (
    "kind",
    "source_server_id",
    "source_server_name",
    "server_status",
    "namespace",
    "category",
    "skill_ids",
    "external_flag",
    "classified_flag",
    "embedded_flag",
)


def embedded_fields(embedded: bool) -> dict[str, Any]:
    """Whether a point holds its tool's vector: the boolean and its keyword mirror."""
    return {"embedded": embedded, "embedded_flag": str(embedded).lower()}


def flags(*, is_external: bool, is_classified: bool, embedded: bool) -> dict[str, str]:
    """Keyword mirrors of the boolean fields filters use; store them next to the booleans."""
    return {
        "external_flag": str(is_external).lower(),
        "classified_flag": str(is_classified).lower(),
        "embedded_flag": str(embedded).lower(),
    }


def qdrant_filter(where: Where, models: ModuleType) -> Any:
    """A ``models.Filter`` for ``where`` (``models`` is ``qdrant_client.models`` or ``qdrant_edge``)."""

    def equals(key: str, value: Any) -> Any:
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    def any_of(key: str, values: list[Any]) -> Any:
        return models.FieldCondition(key=key, match=models.MatchAny(any=values))

    must: list[Any] = []
    if where.kind is not None:
        must.append(equals("kind", where.kind))
    if where.server_id is not None:
        must.append(equals("source_server_id", where.server_id))
    if where.server_names is not None:
        must.append(any_of("source_server_name", list(where.server_names)))
    if where.statuses is not None:
        must.append(any_of("server_status", list(where.statuses)))
    if where.external_only_false:
        must.append(equals("external_flag", "false"))
    if where.namespace is not None:
        must.append(equals("namespace", where.namespace))
    if where.categories is not None:
        must.append(any_of("category", list(where.categories)))
    if where.embedded_only:
        must.append(equals("embedded_flag", "true"))
    if where.skill_ids is not None:
        skills = any_of("skill_ids", list(where.skill_ids))
        if where.or_unclassified:
            must.append(models.Filter(should=[skills, equals("classified_flag", "false")]))
        else:
            must.append(skills)
    return models.Filter(must=must) if must else None
