"""What the client's user reads when asked to approve a call: the call, its arguments cut short, the reason."""

from __future__ import annotations

import uuid

from toolmesh.contracts.keys import Role
from toolmesh_gateway.approval_requests import PendingCall
from toolmesh_gateway.approvals.elicitation import SHOWN_ARGUMENTS_CHARS, SHOWN_VALUE_CHARS, question, summary
from toolmesh_gateway.auth import Caller, Principal


def test_each_value_and_the_whole_are_cut_short() -> None:
    shown = summary({"path": "/etc/hosts", "body": "x" * 1000, "flags": {"force": True}})
    assert shown.startswith("path=/etc/hosts, body=" + "x" * SHOWN_VALUE_CHARS + "…, ")
    assert shown.endswith('flags={"force": true}')
    many = summary({f"k{i}": "y" * SHOWN_VALUE_CHARS for i in range(50)})
    assert len(many) == SHOWN_ARGUMENTS_CHARS + 1 and many.endswith("…")
    assert summary({}) == "(no arguments)"


def test_the_question_names_the_call_its_arguments_and_why() -> None:
    principal = Principal(key_id=uuid.uuid4().hex, name="agent", role=Role.USER, namespace="default")
    call = PendingCall(
        caller=Caller(principal),
        namespace="default",
        server_id="s",
        server_name="github",
        tool="delete_repo",
        arguments={"repo": "toolmesh"},
        policy="no-deletes",
        reason="deleting a repository cannot be undone",
        surface="mcp",
    )
    asked = question(call)
    assert "github.delete_repo" in asked and "repo=toolmesh" in asked
    assert "deleting a repository cannot be undone (policy no-deletes)" in asked
