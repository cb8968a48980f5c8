"""The internal verb registry and its dispatcher: subjects built and read in one place, every payload
checked by its verb's model, every error answered in the reply shape the callers already read."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import nats.errors
import pytest

from toolmesh import contracts
from toolmesh.contracts.clients import client_id
from toolmesh.contracts.commands import Command
from toolmesh.contracts.rpc import PingRpc, PingRpcResult, RefreshRpc, RpcReply
from toolmesh.errors import ServerUnavailable
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.dispatch import Dispatcher, encode_result
from toolmesh.platform.bus.in_process import InProcessBus
from toolmesh.platform.bus.interface import Message
from toolmesh.platform.bus.requests import ask_owner, ok_reply
from toolmesh.platform.polling import poll_until

pytestmark = pytest.mark.unit
ROOT = Path(__file__).parents[2]
ASYNCAPI = ROOT / "docs" / "asyncapi.json"
SUBJECT = verbs.PING.subject("srv1")


async def _ping(key: str, body: PingRpc) -> PingRpcResult:
    return PingRpcResult(response_time_ms=body.timeout_seconds)


async def _fail(key: str, body: PingRpc) -> PingRpcResult:
    raise ServerUnavailable(f"Ping of {key} failed: gone", {"server_id": key})


async def _crash(key: str, body: PingRpc) -> PingRpcResult:
    raise RecursionError("maximum recursion depth exceeded")


async def _unreachable(key: str, body: PingRpc) -> PingRpcResult:
    raise nats.errors.NoServersError


class _Recording:
    """A received message whose answers are recorded."""

    def __init__(self, msg: Message, answers: list[bytes]) -> None:
        self.subject, self.data, self.reply, self.headers = msg.subject, msg.data, msg.reply, msg.headers
        self._answers = answers

    async def respond(self, data: bytes) -> None:
        self._answers.append(data)


async def _reply(dispatcher: Dispatcher, subject: str, data: bytes) -> bytes:
    """The dispatcher's reply to a request on ``subject``, carried by an in-process bus."""
    bus = InProcessBus()
    await bus.subscribe(subject, dispatcher.dispatch)
    try:
        return await bus.request(subject, data, timeout=10)
    finally:
        await bus.close()


async def _answer(dispatcher: Dispatcher, subject: str, data: bytes) -> dict[str, object]:
    answer: dict[str, object] = json.loads(await _reply(dispatcher, subject, data))
    return answer


def test_the_registry_builds_and_reads_back_the_subjects_of_each_family() -> None:
    client = client_id("replica1", "session1")
    assert verbs.CALL.subject("srv1") == "toolmesh.rpc.srv1.call"
    assert verbs.CLIENT_REQUEST.subject(client) == "toolmesh.client.replica1.session1.request"
    assert verbs.SEARCH_QUERY.subject(verbs.SEARCH.key) == "toolmesh.rpc.search.query"
    assert verbs.RPC.wildcard("srv1") == "toolmesh.rpc.srv1.*"
    assert verbs.CLIENT.wildcard("replica1") == "toolmesh.client.replica1.>"
    assert verbs.CLIENT.parse(verbs.CLIENT_NOTIFY.subject(client)) == (client, "notify")
    assert verbs.RPC.parse(verbs.DISCONNECT.subject("srv1")) == ("srv1", "disconnect")


@pytest.mark.parametrize(
    "subject", ["toolmesh.rpc.srv1", "toolmesh.rpc.a.b.call", "toolmesh.client.r1.call", "toolmesh.evt.server.removed"]
)
def test_a_subject_outside_the_family_is_refused(subject: str) -> None:
    family = verbs.CLIENT if ".client." in subject else verbs.RPC
    with pytest.raises(verbs.UnknownSubject):
        family.parse(subject)


def test_a_dispatcher_serves_one_family() -> None:
    with pytest.raises(ValueError, match="another family"):
        Dispatcher(verbs.RPC, {verbs.CLIENT_NOTIFY: _ping}, span_name="session")


async def test_a_result_model_is_answered_in_the_reply_envelope() -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _ping}, span_name="session")
    reply = await _reply(dispatcher, SUBJECT, b'{"timeout_seconds": 2}')
    assert reply == RpcReply(ok=True, result={"response_time_ms": 2.0}).model_dump_json().encode()
    assert encode_result(b'{"content":[]}') == ok_reply(b'{"content":[]}')  # raw JSON is not re-encoded


async def test_an_unknown_verb_is_a_routing_failure() -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _ping}, span_name="session")
    answer = await _answer(dispatcher, verbs.RPC.subject("srv1", "reboot"), b"{}")
    assert answer == {
        "ok": False,
        "result": None,
        "error": {"detail": "Unknown request verb: reboot", "error_code": "ROUTING_FAILED"},
    }


@pytest.mark.parametrize("payload", [b"[1, 2]", b'{"timeout_seconds": "soon"}', b"\xff{not json"])
async def test_a_payload_its_model_refuses_is_a_validation_error(payload: bytes) -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _ping}, span_name="session")
    answer = await _answer(dispatcher, SUBJECT, payload)
    error = answer["error"]
    assert answer["ok"] is False and isinstance(error, dict), answer
    assert error["error_code"] == "VALIDATION_ERROR" and error["context"]["errors"], answer


async def test_a_handler_error_is_answered_with_its_error_body() -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _fail}, span_name="session")
    answer = await _answer(dispatcher, SUBJECT, b"{}")
    assert answer["error"] == {
        "detail": "Ping of srv1 failed: gone",
        "error_code": "SERVER_UNAVAILABLE",
        "context": {"server_id": "srv1"},
    }


async def test_an_unexpected_handler_failure_is_answered_not_left_to_time_out(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _crash}, span_name="session")
    answer = await _answer(dispatcher, SUBJECT, b"{}")
    assert answer["ok"] is False, answer
    assert answer["error"] == {
        "detail": "ping failed on its handler (RecursionError); the log of the process that handled it says more",
        "error_code": "ROUTING_FAILED",
        "context": {"verb": "ping"},
    }
    assert any(record.exc_info and record.exc_info[0] is RecursionError for record in caplog.records)


async def test_nats_unreachable_in_a_handler_is_answered_as_worth_a_retry() -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _unreachable}, span_name="session")
    answer = await _answer(dispatcher, SUBJECT, b"{}")
    error = answer["error"]
    assert answer["ok"] is False and isinstance(error, dict), answer
    assert error["error_code"] == "BACKEND_UNAVAILABLE" and error["context"] == {"verb": "ping"}, answer


async def test_a_reply_over_the_limit_is_refused_naming_both_sizes() -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _ping}, span_name="session", reply_limit=lambda: 20)
    answer = await _answer(dispatcher, SUBJECT, b"{}")
    error = answer["error"]
    assert isinstance(error, dict) and error["error_code"] == "EXECUTION_FAILED", answer
    assert error["context"]["limit_bytes"] == 20 and error["context"]["result_bytes"] > 20, answer


async def test_a_message_without_a_reply_subject_gets_no_answer() -> None:
    dispatcher = Dispatcher(verbs.RPC, {verbs.PING: _ping}, span_name="session")
    bus = InProcessBus()
    handled: list[str] = []
    answered: list[bytes] = []

    async def spy(msg: Message) -> None:
        await dispatcher.dispatch(_Recording(msg, answered))
        handled.append(msg.subject)

    await bus.subscribe(SUBJECT, spy)
    await bus.publish(SUBJECT, b"{}")
    await poll_until(lambda: handled, 10)
    await bus.close()
    assert handled == [SUBJECT] and answered == []


def test_checked_in_subject_table_matches_the_registry() -> None:
    regenerate = "python -m toolmesh.platform.bus.verbs > docs/internal-subjects.md"
    stale = f"docs/internal-subjects.md is stale: run `{regenerate}`"
    assert (ROOT / "docs" / "internal-subjects.md").read_text() == verbs.subject_table(), stale


def test_the_subject_table_names_every_verb_of_the_registry() -> None:
    table = verbs.subject_table()
    for verb in verbs.VERBS:
        assert f"| `{verb.pattern()}` | `{verb.request.__name__}` |" in table, verb.name


def _subject_constants() -> dict[str, str]:
    """Every subject (or subject prefix) the contracts spell, by where it is declared."""
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(contracts.__path__):
        module = importlib.import_module(f"{contracts.__name__}.{info.name}")
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            if isinstance(value, str) and value.startswith("toolmesh."):
                found[f"{info.name}.{name}"] = value
            elif isinstance(value, type) and issubclass(value, Command) and value is not Command:
                found[f"{info.name}.{name}.subject"] = value.subject
    return found


def test_the_subject_table_names_every_internal_subject_of_the_contracts() -> None:
    table = verbs.subject_table()
    public = [channel.get("address") or "" for channel in json.loads(ASYNCAPI.read_text())["channels"].values()]
    constants = _subject_constants()
    assert "mcp_sessions.SESSION_ENDED_SUBJECT" in constants and "rpc.PROGRESS_PREFIX" in constants
    for where, subject in constants.items():
        stem = subject.removesuffix(".>").removesuffix(".")
        if not any(address.startswith(f"{stem}.") for address in public):
            assert f"`{stem}." in table or f"`{stem}`" in table, f"{where} ({subject}) is not in the table"


async def test_a_request_to_an_owner_names_a_registered_verb_with_its_model() -> None:
    bus = InProcessBus()  # refused before anything is sent
    with pytest.raises(ValueError, match="not an rpc verb"):
        await ask_owner(bus, "srv1", "reboot", PingRpc(), timeout=1)
    with pytest.raises(TypeError, match="takes PingRpc"):
        await ask_owner(bus, "srv1", "ping", RefreshRpc(), timeout=1)
