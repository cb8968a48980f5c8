"""How the policies that match one call combine into one decision.

Every rule of the call's namespace (and every global rule) is evaluated against the call's
attributes. Among the rules in ``enforce`` mode that match:

- a ``deny`` wins over everything (the first by name gives the reason);
- else a ``require_approval`` holds the call for a human, unless an ``allow`` matches too;
- else the call is allowed (a call no rule matches is allowed);
- every matching ``redact`` removes its fields from the result, whatever else matched.

A rule that cannot be evaluated on a call is counted, and decided by why (``_on_failure``): a field
the call lacks means the rule does not speak of this call — it does not match; a value of another type
than the rule expects (``args.path`` a list where the rule calls ``startsWith``) is what a caller
dodging a rule sends — a ``deny``, ``require_approval`` or ``redact`` rule then acts as if it matched
(fail closed), an ``allow`` rule does not match. Rules in ``dry_run`` mode never act: the decision
they would have made is reported in ``would`` (logged and audited by the gateway).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import cel

from toolmesh.contracts.policies import PolicyEffect, PolicyMode


@dataclass(frozen=True, slots=True)
class Rule:
    """One policy, compiled."""

    id: str
    name: str
    namespace: str | None
    effect: PolicyEffect
    mode: PolicyMode
    reason: str | None
    redact: tuple[str, ...]
    program: cel.Program

    @property
    def told(self) -> str:
        """The reason a caller or an approver is shown."""
        return self.reason or f"Policy {self.name} refuses this call"


@dataclass(slots=True)
class Decision:
    """What the policies decided for one call."""

    effect: PolicyEffect = "allow"
    rule: Rule | None = None
    """The rule that denied the call or holds it for approval."""
    redact: tuple[str, ...] = ()
    would: Rule | None = None
    """The dry-run rule that would have denied the call or held it (when the enforced rules did not)."""
    would_effect: PolicyEffect | None = None
    failures: list[tuple[Rule, str]] = field(default_factory=list)
    """The rules that could not be evaluated on this call, with why (``_on_failure`` tells whether they
    matched)."""
    matched: list[Rule] = field(default_factory=list)


def decide(rules: Sequence[Rule], attributes: cel.Context) -> Decision:
    """The decision of ``rules`` (sorted by name) on one call's ``attributes`` (one shared ``Context``)."""
    decision = Decision()
    for rule in rules:
        try:
            matched = rule.program.execute(attributes) is True
        except Exception as exc:  # a missing field or a wrong type (``_on_failure``)
            decision.failures.append((rule, f"{type(exc).__name__}: {exc}"))
            matched = _on_failure(rule, exc)
        if matched:
            decision.matched.append(rule)
    enforced = [r for r in decision.matched if r.mode == "enforce"]
    decision.effect, decision.rule = _combine(enforced)
    decision.redact = tuple(dict.fromkeys(f for r in enforced if r.effect == "redact" for f in r.redact))
    if len(enforced) != len(decision.matched):
        effect, would = _combine(decision.matched)
        hidden = next((r for r in decision.matched if r.effect == "redact" and r.mode == "dry_run"), None)
        if _rank(effect) > _rank(decision.effect):
            decision.would, decision.would_effect = would, effect
        elif hidden is not None:
            decision.would, decision.would_effect = hidden, "redact"
    return decision


def _on_failure(rule: Rule, exc: Exception) -> bool:
    """Whether ``rule``, whose evaluation raised ``exc``, counts as matching: not when the call lacks a
    field it reads (``KeyError``), else (a wrong type, an overflow) when it restricts the call."""
    return not isinstance(exc, KeyError) and rule.effect != "allow"


def _combine(matched: Sequence[Rule]) -> tuple[PolicyEffect, Rule | None]:
    deny = next((r for r in matched if r.effect == "deny"), None)
    if deny is not None:
        return "deny", deny
    held = next((r for r in matched if r.effect == "require_approval"), None)
    if held is not None and not any(r.effect == "allow" for r in matched):
        return "require_approval", held
    return "allow", None


def _rank(effect: PolicyEffect) -> int:
    return {"deny": 2, "require_approval": 1}.get(effect, 0)
