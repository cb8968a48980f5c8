"""deploy/nats/nats.conf gives each role a user of its own and nobody `_INBOX.>`; the compose file and
the Kubernetes manifests connect each role as that user with its inbox prefix and its own password.

Pure file checks; tests/integration/test_nats_deploy_roles.py runs the config on a real nats-server.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from annotated_types import Le

from tests.deploy.manifests import DEPLOY, compose, containers, of_kind
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS, ToolsDiscovered
from toolmesh.contracts.tools import ToolCallRequest
from toolmesh_cli.roles import ROLES, STREAMS

pytestmark = pytest.mark.deploy
NATS_CONF = DEPLOY / "nats" / "nats.conf"
NATS_SERVERS = ("nats-1", "nats-2", "nats-3")
USER_BLOCK = re.compile(r"user: (\S+)\s+password: \$(\w+)(.*?)(?=\n    \{|\n  \])", re.DOTALL)


def users() -> dict[str, tuple[str, str]]:
    """Each user of nats.conf: its password variable and its permissions text."""
    text = "\n".join(line.split("#")[0] for line in NATS_CONF.read_text().splitlines())
    return {name: (variable, block) for name, variable, block in USER_BLOCK.findall(text)}


def subjects(block: str, direction: str, kind: str = "allow") -> list[str]:
    section = re.search(rf"{direction}: \{{(.*?)\}}\n", block, re.DOTALL)
    assert section is not None, direction
    found = re.search(rf"{kind}: \[(.*?)\]", section.group(1), re.DOTALL)
    return re.findall(r'"([^"]+)"', found.group(1)) if found else []


def password_variable(user: str) -> str:
    return f"TOOLMESH_NATS_{user.upper().replace('-', '_')}_PASSWORD"


def test_every_role_and_the_service_have_a_user_with_a_password_of_their_own() -> None:
    found = users()
    assert set(found) == {*ROLES, "service"}
    assert {name: variable for name, (variable, _) in found.items()} == {
        name: password_variable(name) for name in found
    }


def test_nobody_may_subscribe_to_every_inbox_or_another_users_inbox() -> None:
    for name, (_, block) in users().items():
        subscribe = subjects(block, "subscribe")
        assert subscribe, name
        inboxes = [s for s in subscribe if s.startswith("_INBOX")]
        assert inboxes == [f"_INBOX_{name}.>"], name
        assert not {">", "_INBOX.>", "*.>"} & set(subscribe), name


def test_the_service_reaches_the_public_api_only() -> None:
    _, block = users()["service"]
    assert subjects(block, "publish") == ["toolmesh.api.>"]
    assert subjects(block, "subscribe") == ["_INBOX_service.>"]
    assert "allow_responses" not in block


BUCKETS = {
    "gateway": {
        "toolmesh_names",
        "toolmesh_idempotency",
        "toolmesh_mcp_sessions",
        "toolmesh_oauth_flows",
        "toolmesh_spent_request_states",
        "toolmesh_tasks",
        "toolmesh_approvals",
    },
    "session-worker": {"toolmesh_leases"},
    "health-worker": {"toolmesh_leases"},
    "indexer": {"toolmesh_leases"},
}
"""The KV buckets each role uses (each opens, and creates when missing, its own)."""
READ_ONLY = {"gateway": {"toolmesh_leases"}}
"""Buckets a role reads but never writes nor creates: the gateway confirms an owner's fencing token."""
JETSTREAM_SUBJECT = re.compile(
    r"^\$(?:JS\.API\.(?:STREAM\.(?:INFO|CREATE|MSG\.GET)|CONSUMER\.(?:CREATE|INFO|MSG\.NEXT|DELETE)|DIRECT\.GET)"
    r"|JS\.ACK|JS\.FC)\.(?P<stream>[^.*>]+)(?:\.|$)|^\$KV\.(?P<bucket>[^.*>]+)\."
)


def jetstream(subjects: list[str]) -> list[str]:
    """The JetStream and KV subjects among ``subjects``."""
    return [s for s in subjects if s.startswith(("$JS.", "$KV."))]


def stream_of(subject: str) -> str:
    """The stream a JetStream subject reaches (a bucket's is ``KV_<bucket>``)."""
    found = JETSTREAM_SUBJECT.match(subject)
    assert found is not None, f"{subject} names no single stream"
    return found["stream"] or f"KV_{found['bucket']}"


def test_each_role_reaches_only_its_own_streams_and_buckets_and_may_create_each() -> None:
    for name, (_, block) in users().items():
        allowed = [s for s in jetstream(subjects(block, "publish")) if s != "$JS.API.INFO"]
        reached = {stream_of(subject) for subject in allowed}
        created = {s.removeprefix("$JS.API.STREAM.CREATE.") for s in allowed if s.startswith("$JS.API.STREAM.CREATE.")}
        uses = {*STREAMS.get(name, ()), *(f"KV_{bucket}" for bucket in BUCKETS.get(name, ()))}
        assert reached == uses | {f"KV_{bucket}" for bucket in READ_ONLY.get(name, ())}, name
        assert created == uses, name  # whichever role starts first creates what it uses
        written = [s for s in allowed for bucket in READ_ONLY.get(name, ()) if s.startswith(f"$KV.{bucket}.")]
        assert not written, (name, written)


def test_each_role_reads_its_buckets_by_message_get_and_by_direct_get() -> None:
    """nats-py reads a key the way the bucket was created for (its `allow_direct`), which it keeps for
    good: a bucket an earlier version made without direct gets is read by message get."""
    for name, (_, block) in users().items():
        allowed = set(subjects(block, "publish"))
        for bucket in {*BUCKETS.get(name, ()), *READ_ONLY.get(name, ())}:
            reads = {"$JS.API.STREAM.MSG.GET.KV_", "$JS.API.DIRECT.GET.KV_"}
            forms = {f"{read}{bucket}" for read in reads} | {f"$JS.API.DIRECT.GET.KV_{bucket}.>"}
            assert forms <= allowed, (name, bucket, forms - allowed)


def test_only_the_gateway_and_the_event_consumers_read_the_events() -> None:
    readers = {
        name: sorted(s for s in subjects(block, "publish") if s.startswith(f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}"))
        for name, (_, block) in users().items()
    }
    assert {name: found for name, found in readers.items() if found} == {
        "gateway": [f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}"],  # ephemeral ordered consumers
        "projector": [f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}.projector.{EVENTS_SUBJECTS}"],
        "indexer": [f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}.indexer.{EVENTS_SUBJECTS}"],
        "classifier-worker": [f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}.classifier.{ToolsDiscovered.subject}"],
    }


REBUILT = {"projector", "indexer"}  # `--rebuild` drops the role's own durable consumer


def test_no_role_lists_deletes_purges_or_reconfigures_a_stream() -> None:
    verbs = (".STREAM.NAMES", ".STREAM.LIST", ".DELETE.", ".PURGE", ".UPDATE.")
    for name, (_, block) in users().items():
        destructive = [s for s in jetstream(subjects(block, "publish")) if any(verb in s for verb in verbs)]
        assert destructive == [f"$JS.API.CONSUMER.DELETE.{EVENTS_STREAM}.{name}"] * (name in REBUILT), name


ANSWERING = {"gateway", "session-worker", "indexer"}  # the API and client links, rpc, search
LONGEST_TOOL_CALL_SECONDS = next(
    m.le for m in ToolCallRequest.model_fields["timeout_seconds"].metadata if isinstance(m, Le)
)


def test_only_the_roles_that_answer_requests_may_reply_and_long_enough_for_any_call() -> None:
    units = {"s": 1, "m": 60, "h": 3600}
    for name, (_, block) in users().items():
        responses = re.search(r'allow_responses: \{ max: 1, expires: "(\d+)([smh])" \}', block)
        assert (responses is not None) == (name in ANSWERING), name
        if responses is not None:  # the server's default (2 min) would cut off a slow tool call's result
            assert int(responses.group(1)) * units[responses.group(2)] > LONGEST_TOOL_CALL_SECONDS, name


def _role_environment(env: dict[str, Any], role: str) -> None:
    assert env["TOOLMESH_NATS_USER"] == role
    assert env["TOOLMESH_NATS_INBOX_PREFIX"] == f"_INBOX_{role}"


def test_compose_connects_each_role_as_its_user_with_its_password() -> None:
    services = compose()["services"]
    for service in services.values():
        if "build" not in service:
            continue
        role = service["command"][0]
        _role_environment(service["environment"], role)
        assert password_variable(role) in service["environment"]["TOOLMESH_NATS_PASSWORD"], role
    cluster = {"NATS_SERVER_NAME", "NATS_ROUTES", "TOOLMESH_NATS_ROUTE_PASSWORD"}
    for name in NATS_SERVERS:
        assert set(services[name]["environment"]) == {password_variable(user) for user in users()} | cluster


def test_kubernetes_gives_every_nats_server_every_users_password_from_the_secret() -> None:
    (container,) = containers(of_kind("StatefulSet")["nats"])
    from_secret = {
        e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})
    }
    wanted = {password_variable(user) for user in users()} | {"TOOLMESH_NATS_ROUTE_PASSWORD"}
    assert from_secret == {name: {"name": "toolmesh", "key": name} for name in wanted}


def test_kubernetes_connects_each_role_as_its_user_with_its_password() -> None:
    assert "TOOLMESH_NATS_USER" not in of_kind("ConfigMap")["toolmesh"]["data"]
    for role in ROLES:
        (container,) = containers(of_kind("Deployment")[f"toolmesh-{role}"])
        env = {e["name"]: e for e in container["env"]}
        _role_environment({name: e.get("value") for name, e in env.items()}, role)
        secret = env["TOOLMESH_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert secret == {"name": "toolmesh", "key": password_variable(role)}
