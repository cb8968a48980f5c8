"""Policies: expressions checked when written, rules combined into one decision, fields redacted, changes
streamed to managers only."""

from __future__ import annotations

import json
from typing import Any

import cel
import pytest

from toolmesh.contracts.policies import PolicyDeleted, PolicyRequest, PolicySaved
from toolmesh.errors import ValidationFailed
from toolmesh_gateway.event_hub import visible
from toolmesh_gateway.policies.decisions import Rule, decide
from toolmesh_gateway.policies.language import SAMPLE, compile_expression
from toolmesh_gateway.policies.result_fields import redact_result


@pytest.mark.parametrize(
    "expression",
    [
        'server.name == "github" && tool.name.startsWith("delete_") && principal.role == "user"',
        'args.path.startsWith("/etc")',
        "tool.annotations.destructiveHint == true",
        'principal.claims.exists(k, k == "groups")',
        "has(args.path) && now.getHours() < 8",
        'surface in ["rest", "nats"] && endpoint == ""',
    ],
)
def test_policy_expressions_that_compile(expression: str) -> None:
    compile_expression(expression)


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("tool.name ==", "does not parse"),
        ('request.path == "/"', "unknown attributes ['request']"),
        ("lookup(tool.name)", "unknown functions ['lookup']"),
        ("1 + 2", "not to a boolean"),
        ('"deny"', "not to a boolean"),
        ("tool.name", "not to a boolean"),
    ],
)
def test_policy_expressions_refused_when_written(expression: str, why: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        compile_expression(expression)
    assert why in refused.value.detail
    assert refused.value.status == 422


def _rule(name: str, expression: str, effect: Any, mode: Any = "enforce", redact: tuple[str, ...] = ()) -> Rule:
    return Rule(name, name, None, effect, mode, f"{name} says no", redact, compile_expression(expression))


def _call(**changes: Any) -> cel.Context:
    return cel.Context({**SAMPLE, **changes})


def test_deny_beats_approval_and_allow() -> None:
    rules = [
        _rule("a-allow", "true", "allow"),
        _rule("b-approve", "true", "require_approval"),
        _rule("c-deny", 'tool.name == "delete_repo"', "deny"),
    ]
    assert decide(rules, _call(tool={"name": "delete_repo"})).rule == rules[2]
    assert decide(rules, _call(tool={"name": "delete_repo"})).effect == "deny"
    assert decide(rules, _call(tool={"name": "get_repo"})).effect == "allow"  # allow overrides approval
    assert decide(rules[1:], _call(tool={"name": "get_repo"})).effect == "require_approval"
    assert decide([], _call()).effect == "allow"


def test_a_rule_that_cannot_be_evaluated_is_counted_and_settled_by_why() -> None:
    """A field the call lacks: no match. A value of another type: a restricting rule fails closed, an
    allow rule does not match (it cannot lift an approval on odd input)."""
    deny = _rule("etc", 'args.path.startsWith("/etc")', "deny")
    assert decide([deny], _call(args={"path": "/etc/passwd"})).effect == "deny"
    missing = decide([deny], _call(args={}))
    assert (missing.effect, [r for r, _ in missing.failures]) == ("allow", [deny])
    for odd in (["/etc/passwd"], 7, None, {"p": "/etc"}):
        decided = decide([deny], _call(args={"path": odd}))
        assert (decided.effect, decided.rule, len(decided.failures)) == ("deny", deny, 1), odd
    held = _rule("held", "true", "require_approval")
    allow = _rule("ok", 'args.path.startsWith("/tmp")', "allow")
    assert decide([held, allow], _call(args={"path": "/tmp/x"})).effect == "allow"
    assert decide([held, allow], _call(args={"path": ["/tmp/x"]})).effect == "require_approval"
    redact = _rule("hide", 'args.path.startsWith("/home")', "redact", redact=("secret",))
    assert decide([redact], _call(args={"path": 1})).redact == ("secret",)


def test_a_rule_written_for_odd_types_denies_them() -> None:
    """The documented idiom: a value of another type than expected is denied too."""
    rule = _rule("etc", 'has(args.path) && (type(args.path) != string || args.path.startsWith("/etc"))', "deny")
    assert decide([rule], _call(args={"path": ["/etc/passwd"]})).effect == "deny"
    assert decide([rule], _call(args={"path": 7})).effect == "deny"
    assert decide([rule], _call(args={"path": "/tmp/x"})).effect == "allow"


def test_dry_run_reports_what_it_would_do_and_never_acts() -> None:
    rules = [_rule("deny-all", "true", "deny", mode="dry_run"), _rule("hide", "true", "redact", "dry_run", ("a",))]
    decision = decide(rules, _call())
    assert (decision.effect, decision.redact) == ("allow", ())
    assert (decision.would_effect, decision.would) == ("deny", rules[0])


def test_every_matching_redaction_applies() -> None:
    rules = [_rule("one", "true", "redact", redact=("a",)), _rule("two", "true", "redact", redact=("b.c", "a"))]
    assert decide(rules, _call()).redact == ("a", "b.c")


def test_redaction_of_structured_content_and_json_text() -> None:
    body = {"owner": {"email": "x@y", "name": "n"}, "items": [{"email": "1", "k": 1}], "token": "t"}
    result = {
        "content": [{"type": "text", "text": json.dumps(body)}, {"type": "text", "text": "token: plain"}],
        "structuredContent": body,
        "isError": False,
    }
    redacted = redact_result(result, ["owner.email", "items.email", "token"])
    expected = {"owner": {"name": "n"}, "items": [{"k": 1}]}
    assert redacted["structuredContent"] == expected
    assert json.loads(redacted["content"][0]["text"]) == expected
    assert redacted["content"][1]["text"] == "token: plain"
    assert result["structuredContent"] == body  # the original is left as it was


def test_redact_lists_fields_of_redact_policies_only() -> None:
    with pytest.raises(ValueError):
        PolicyRequest(name="p", expression="true", effect="redact")
    with pytest.raises(ValueError):
        PolicyRequest(name="p", expression="true", effect="deny", redact=["a"])
    with pytest.raises(ValueError):
        PolicyRequest(name="p", expression="true", effect="redact", redact=["a..b"])


def test_policy_changes_are_streamed_to_managers_only() -> None:
    """A user's console stream does not carry the policies it may not read."""
    saved = PolicySaved(policy_id="p", policy=PolicyRequest(name="p", expression="true", effect="deny"))
    deleted = PolicyDeleted(policy_id="p", name="p")
    for event in (saved, deleted):
        assert visible(event, "default", manages=True)
        assert not visible(event, "default", manages=False)
