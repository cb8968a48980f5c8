"""The policies this gateway checks calls against, compiled once, kept current by the event stream.

Loaded from the same snapshot as the catalog (``catalog_snapshot``) and changed by every
``PolicySaved`` / ``PolicyDeleted`` after it (``CatalogFeed``), so every replica applies a change as
soon as it reads the event. The rules of one namespace (its own and the global ones, by name) are
assembled once per change, not per call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import asyncpg

from toolmesh.contracts.events import Event
from toolmesh.contracts.policies import PolicyDeleted, PolicyRequest, PolicySaved
from toolmesh_gateway.policies.decisions import Rule
from toolmesh_gateway.policies.language import compile_expression

log = logging.getLogger("toolmesh.gateway.policies")


class PolicyBook:
    """Compiled rules by policy id, and by namespace."""

    def __init__(self) -> None:
        self._rules: dict[str, Rule] = {}
        self._by_namespace: dict[str, tuple[Rule, ...]] = {}

    def load(self, rows: Iterable[asyncpg.Record]) -> None:
        """Replace every rule with the snapshot's ``mcp.policies`` rows."""
        self._rules = {}
        for row in rows:
            policy = PolicyRequest(
                name=row["name"],
                expression=row["expression"],
                effect=row["effect"],
                reason=row["reason"],
                redact=list(row["redact"]),
                namespace=row["namespace"],
                mode=row["mode"],
            )
            self._put(row["id"], policy)
        self._by_namespace = {}

    def apply(self, event: Event) -> None:
        """Follow one event of the stream (a listener of ``CatalogFeed``)."""
        if isinstance(event, PolicySaved):
            self._put(event.policy_id, event.policy)
        elif isinstance(event, PolicyDeleted):
            self._rules.pop(event.policy_id, None)
        else:
            return
        self._by_namespace = {}

    def rules_for(self, namespace: str) -> tuple[Rule, ...]:
        """The rules a call in ``namespace`` is checked against (its own and the global ones, by name)."""
        rules = self._by_namespace.get(namespace)
        if rules is None:
            chosen = (r for r in self._rules.values() if r.namespace is None or r.namespace == namespace)
            rules = self._by_namespace[namespace] = tuple(sorted(chosen, key=lambda r: (r.name, r.id)))
        return rules

    def _put(self, policy_id: str, policy: PolicyRequest) -> None:
        taken = any(
            r.id != policy_id and r.name == policy.name and r.namespace == policy.namespace
            for r in self._rules.values()
        )
        if taken:  # the projector drops it too
            return
        try:
            program = compile_expression(policy.expression)
        except Exception as exc:  # checked when written; a library that changed since refuses it now
            log.error("policy %s cannot be compiled and is not applied: %s", policy.name, exc)
            self._rules.pop(policy_id, None)
            return
        self._rules[policy_id] = Rule(
            policy_id,
            policy.name,
            policy.namespace,
            policy.effect,
            policy.mode,
            policy.reason,
            tuple(policy.redact),
            program,
        )
