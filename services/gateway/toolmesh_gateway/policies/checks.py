"""The policy check every tool call passes, on every surface, before it reaches its upstream.

``ToolCalls.call`` calls ``CallPolicies.check`` for the calls it routes, ``forward_screened`` for the
two ``/mcp`` paths that forward a call themselves; both before the quotas (``ToolCalls.admit``). A
denied call raises ``PolicyDenied`` (403, the policy's reason); a call a policy holds waits for the
``ApprovalGate``; the ``Verdict`` returned names the result fields to remove and what a dry-run
policy would have done (for the audit log).
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import cel

from toolmesh.contracts.rpc import ClientRef
from toolmesh.errors import PolicyDenied, ToolmeshError
from toolmesh.platform.metrics import record_policy_action, record_policy_errors
from toolmesh_gateway.approval_requests import ApprovalGate, PendingCall
from toolmesh_gateway.auth import Caller, Principal
from toolmesh_gateway.catalog import Catalog
from toolmesh_gateway.policies.book import PolicyBook
from toolmesh_gateway.policies.decisions import Decision, decide
from toolmesh_gateway.routing import ServerRoute

log = logging.getLogger("toolmesh.gateway.policies")
SURFACES = ("rest", "mcp", "nats", "code")


@dataclass(frozen=True, slots=True)
class CallSubject:
    """One call as the policies see it: who, where from, which tool of which server, with what."""

    caller: Caller
    server: ServerRoute
    tool: str
    """The tool's original (upstream) name, whatever name the caller used."""
    arguments: dict[str, Any]
    surface: str
    endpoint: str = ""
    client: ClientRef | None = None

    @classmethod
    def seen_in(
        cls, view: object, caller: Caller, server: ServerRoute, tool: str, arguments: dict[str, Any], surface: str
    ) -> CallSubject:
        """The call as made in ``view`` (an endpoint's ``BundleView`` names its endpoint)."""
        bundle = getattr(view, "bundle", None)
        return cls(caller, server, tool, arguments, surface, bundle.name if bundle else "")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the policies left to do after the call was let through, and what the audit log notes."""

    redact: tuple[str, ...] = ()
    policy: str | None = None
    """The policy that acted (redact, approval) or would have (dry run)."""
    effect: str | None = None
    """``redact``, ``require_approval``, or ``dry_run:<effect>``."""


PASSED = Verdict()
APPROVED = "require_approval"
"""The ``Verdict.effect`` of a call a policy held and a human approved."""


class CallPolicies:
    """Checks calls against the policies of their server's namespace."""

    def __init__(self, book: PolicyBook, catalog: Catalog, gate: ApprovalGate) -> None:
        self._book = book
        self._catalog = catalog
        self._gate = gate
        self._failing: set[str] = set()
        """Policies whose evaluation failed once already (logged as a warning the first time only)."""

    async def check(self, call: CallSubject, approved: bool = False) -> Verdict:
        """The verdict on ``call``; ``PolicyDenied`` when a policy denies it; waits for approval when one
        holds it (the gate raises on a rejection or a deadline), unless the call was ``approved`` in an
        earlier round of its own (a relayed call's retry)."""
        rules = self._book.rules_for(call.server.namespace)
        if not rules:
            return PASSED
        decision = decide(rules, cel.Context(self.attributes(call)))
        if decision.failures:
            self._failed(call, decision)
        verdict = self._dry_run(call, decision)
        if decision.effect == "deny" and decision.rule is not None:
            record_policy_action("deny", "enforce")
            raise PolicyDenied(decision.rule.told, {"policy": decision.rule.name, "tool": call.tool})
        if decision.effect == "require_approval" and decision.rule is not None:
            if not approved:
                record_policy_action("require_approval", "enforce")
                await self._gate.approve(self._pending(call, decision))
            verdict = Verdict(verdict.redact, decision.rule.name, APPROVED)
        if decision.redact:
            record_policy_action("redact", "enforce")
            named = next(r.name for r in decision.matched if r.effect == "redact" and r.mode == "enforce")
            return Verdict(decision.redact, verdict.policy or named, verdict.effect or "redact")
        return verdict

    def attributes(self, call: CallSubject) -> dict[str, Any]:
        """The variables of a policy expression for ``call`` (``toolmesh_gateway.policies.language.ATTRIBUTES``)."""
        principal = call.caller.principal
        tool = self._catalog.tool(call.server.id, call.tool)
        return {
            "principal": {
                "id": principal.key_id,
                "name": principal.name,
                "role": str(principal.role),
                "namespace": principal.namespace,
                "claims": _claims(principal),
            },
            "endpoint": call.endpoint,
            "surface": call.surface,
            "server": {"id": call.server.id, "name": call.server.name, "namespace": call.server.namespace},
            "tool": {
                "name": call.tool,
                "annotations": dict(tool.annotations or {}) if tool is not None else {},
                "category": str(tool.category) if tool is not None else "general",
                "skills": list(tool.skills) if tool is not None else [],
            },
            "args": call.arguments,
            "now": datetime.now(UTC),
        }

    def _failed(self, call: CallSubject, decision: Decision) -> None:
        record_policy_errors(len(decision.failures))
        for rule, why in decision.failures:
            first = rule.id not in self._failing
            self._failing.add(rule.id)
            log.log(
                logging.WARNING if first else logging.DEBUG,
                "policy %s could not be evaluated on the call of %s.%s (%s): %s",
                rule.name,
                call.server.name,
                call.tool,
                why,
                "taken as matching" if rule in decision.matched else "not matching",
                extra={"server": call.server.name, "tool": call.tool, "policy": rule.name},
            )

    @staticmethod
    def _dry_run(call: CallSubject, decision: Decision) -> Verdict:
        if decision.would is None or decision.would_effect is None:
            return PASSED
        record_policy_action(decision.would_effect, "dry_run")
        log.warning(
            "policy %s (dry run) would %s the call of %s.%s by %s",
            decision.would.name,
            decision.would_effect,
            call.server.name,
            call.tool,
            call.caller.actor,
            extra={"server": call.server.name, "tool": call.tool, "policy": decision.would.name},
        )
        return Verdict((), decision.would.name, f"dry_run:{decision.would_effect}")

    @staticmethod
    def _pending(call: CallSubject, decision: Decision) -> PendingCall:
        assert decision.rule is not None
        return PendingCall(
            caller=call.caller,
            namespace=call.server.namespace,
            server_id=call.server.id,
            server_name=call.server.name,
            tool=call.tool,
            arguments=call.arguments,
            policy=decision.rule.name,
            reason=decision.rule.told,
            surface="bundle" if call.endpoint else call.surface,
            client=call.client,
        )


def refusal(exc: ToolmeshError, verdict: Verdict) -> Verdict:
    """The audit note of a call that failed with ``exc``: the policy that denied it, if one did."""
    if isinstance(exc, PolicyDenied):
        return Verdict((), exc.context.get("policy"), "deny")
    return verdict


def _claims(principal: Principal) -> dict[str, Any]:
    """The claims of the JWT a principal of the identity provider presented (verified when it was
    authenticated); {} for an API key."""
    if principal.token is None:
        return {}
    try:
        payload = principal.token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}
