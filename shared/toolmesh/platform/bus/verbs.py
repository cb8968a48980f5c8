"""Every internal verb, declared once: its subject family, its request model and what it answers.

Two families travel inside toolmesh (the public NATS API has its own document, ``docs/asyncapi.json``):

* ``rpc``: ``toolmesh.rpc.<server_id>.<verb>``, requests to the session-worker owning a server;
* ``client``: ``toolmesh.client.<replica>.<session>.<verb>``, an upstream's traffic toward the MCP
  client session a gateway replica holds;
* ``search``: ``toolmesh.rpc.search.<verb>``, searches forwarded to a process holding the catalog.

Subjects are built (``Family.subject``) and read back (``Family.parse``) here and nowhere else;
``Dispatcher`` (``bus.dispatch``) serves a family's verbs. The internal subjects that are no verb
(commands, a call's progress, the end of an MCP session) are declared beside them (``OTHER_SUBJECTS``),
so ``docs/internal-subjects.md``, rendered from both (``subject_table``), names every internal subject.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from toolmesh.contracts import rpc
from toolmesh.contracts.clients import (
    CLIENT_PREFIX,
    ClientAnswer,
    ClientNotification,
    ClientRequest,
    ResumeInput,
    ResumeWithdrawn,
)
from toolmesh.contracts.commands import COMMANDS_STREAM, CheckServerHealth, ClassifyTools, ConnectServer
from toolmesh.contracts.mcp_sessions import SESSION_ENDED_SUBJECT, McpSessionEnded
from toolmesh.contracts.rpc import RPC_PREFIX, ToolProgress, progress_subject
from toolmesh.contracts.search import SEARCH_QUEUE, SearchHealthQuery, SearchQuery, SearchResponse


class UnknownSubject(ValueError):
    """A subject outside the family it was read as."""


@dataclass(frozen=True)
class Family:
    """Subjects ``<prefix>.<key>.<verb>``; ``key`` is ``key_tokens`` subject tokens."""

    name: str
    prefix: str
    key: str
    key_tokens: int
    served_by: str
    fixed_key: bool = False
    """The key is always ``key`` itself (one subject per verb)."""

    def subject(self, key: str, verb: str) -> str:
        """The subject of ``verb`` for ``key`` (a server id, a client id)."""
        return f"{self.prefix}.{key}.{verb}"

    def wildcard(self, key: str) -> str:
        """Every verb of ``key``; a key of fewer tokens (a gateway replica) covers every key under it."""
        if key.count(".") + 1 < self.key_tokens:
            return f"{self.prefix}.{key}.>"
        return f"{self.prefix}.{key}.*"

    def parse(self, subject: str) -> tuple[str, str]:
        """``(key, verb)`` of a subject of this family; ``UnknownSubject`` for any other subject."""
        head = f"{self.prefix}."
        key, dot, verb = subject.removeprefix(head).rpartition(".")
        if not subject.startswith(head) or not dot or not verb or key.count(".") + 1 != self.key_tokens:
            raise UnknownSubject(f"{subject} is not a {self.name} subject")
        return key, verb


@dataclass(frozen=True)
class Verb:
    """One internal verb: its family, name, request model, and result model (None: the peer's own
    JSON result, passed through as it is); ``replies`` False: published without a reply."""

    family: Family
    name: str
    request: type[BaseModel]
    result: type[BaseModel] | None
    replies: bool = True

    def subject(self, key: str) -> str:
        """This verb's subject for ``key``."""
        return self.family.subject(key, self.name)

    def pattern(self) -> str:
        """This verb's subject with its key named (``<server_id>``), or spelled out when fixed."""
        family = self.family
        return self.subject(family.key if family.fixed_key else f"<{family.key}>")


RPC = Family("rpc", RPC_PREFIX, "server_id", 1, "the session-worker holding the server's lease")
CLIENT = Family("client", CLIENT_PREFIX, "replica.session", 2, "the gateway replica holding the client session")
SEARCH = Family(
    "search", RPC_PREFIX, "search", 1, f"a process holding the search catalog (queue group `{SEARCH_QUEUE}`)", True
)

CALL = Verb(RPC, "call", rpc.CallToolRpc, None)
REQUEST = Verb(RPC, "request", rpc.UpstreamRequestRpc, None)
SUBSCRIBE = Verb(RPC, "subscribe", rpc.SubscribeRpc, rpc.SubscribeRpcResult)
UNSUBSCRIBE = Verb(RPC, "unsubscribe", rpc.SubscribeRpc, rpc.SubscribeRpcResult)
SET_LEVEL = Verb(RPC, "set_level", rpc.SetLevelRpc, rpc.SetLevelRpcResult)
CLIENT_GONE = Verb(RPC, "client_gone", rpc.ClientGoneRpc, rpc.ClientGoneRpcResult)
CANCEL = Verb(RPC, "cancel", rpc.CancelCallRpc, rpc.CancelCallRpcResult)
HEALTH = Verb(RPC, "health", rpc.HealthVerdictRpc, rpc.HealthVerdictResult)
PING = Verb(RPC, "ping", rpc.PingRpc, rpc.PingRpcResult)
REFRESH = Verb(RPC, "refresh", rpc.RefreshRpc, rpc.RefreshRpcResult)
DISCONNECT = Verb(RPC, "disconnect", rpc.DisconnectRpc, rpc.DisconnectRpcResult)

CLIENT_REQUEST = Verb(CLIENT, "request", ClientRequest, None)
CLIENT_NOTIFY = Verb(CLIENT, "notify", ClientNotification, None, replies=False)
CLIENT_ANSWER = Verb(CLIENT, "answer", ClientAnswer, None, replies=False)
CLIENT_RESUME = Verb(CLIENT, "resume", ResumeInput, None)
CLIENT_WITHDRAW = Verb(CLIENT, "withdraw", ResumeWithdrawn, None, replies=False)

SEARCH_QUERY = Verb(SEARCH, "query", SearchQuery, SearchResponse)
SEARCH_HEALTH = Verb(SEARCH, "health", SearchHealthQuery, None)

VERBS: tuple[Verb, ...] = (
    CALL,
    REQUEST,
    SUBSCRIBE,
    UNSUBSCRIBE,
    SET_LEVEL,
    CLIENT_GONE,
    CANCEL,
    HEALTH,
    PING,
    REFRESH,
    DISCONNECT,
    CLIENT_REQUEST,
    CLIENT_NOTIFY,
    CLIENT_ANSWER,
    CLIENT_RESUME,
    CLIENT_WITHDRAW,
    SEARCH_QUERY,
    SEARCH_HEALTH,
)
"""The registry: every internal verb of every family."""


@dataclass(frozen=True)
class Subject:
    """An internal subject that is no verb: a command kept in a stream, or a plain publish."""

    pattern: str
    message: type[BaseModel]
    published_by: str
    received_by: str


OTHER_SUBJECTS: tuple[Subject, ...] = (
    Subject(
        ConnectServer.subject,
        ConnectServer,
        "the gateway (register, connect, refresh, a lost session); the health-worker (reconnect)",
        f"one session-worker (work queue `{COMMANDS_STREAM}`)",
    ),
    Subject(
        ClassifyTools.subject,
        ClassifyTools,
        "the gateway (classify again)",
        f"one classifier-worker (work queue `{COMMANDS_STREAM}`)",
    ),
    Subject(
        CheckServerHealth.subject,
        CheckServerHealth,
        "the health scheduler (one per server and window)",
        f"one health-worker (work queue `{COMMANDS_STREAM}`)",
    ),
    Subject(
        progress_subject("<call_id>"),
        ToolProgress,
        "the session-worker running a call asked with `progress`",
        "the gateway waiting for that call",
    ),
    Subject(
        SESSION_ENDED_SUBJECT,
        McpSessionEnded,
        "the gateway replica whose client ended the MCP session",
        "every gateway replica (each drops its copy)",
    ),
)
"""The internal subjects besides the verbs' (none of them is answered)."""


def family_verbs(family: Family) -> dict[str, Verb]:
    """The verbs of ``family`` by name."""
    return {verb.name: verb for verb in VERBS if verb.family is family}


def _result_cell(verb: Verb) -> str:
    if not verb.replies:
        return "no reply"
    return f"`{verb.result.__name__}`" if verb.result is not None else "the peer's own JSON"


def subject_table() -> str:
    """``docs/internal-subjects.md``: the internal subjects, rendered from the registry."""
    lines = [
        "# Internal subjects",
        "",
        "Generated by `python -m toolmesh.platform.bus.verbs > docs/internal-subjects.md`;",
        "a test fails when this file and the registry disagree. Requests, commands and progress carry a W3C",
        "`traceparent` header; a reply is an `RpcReply` (`ok`, `result` or `error`). The public API (`toolmesh.api.*`,",
        "`toolmesh.evt.*`) is `docs/asyncapi.json`.",
    ]
    for family in (RPC, CLIENT, SEARCH):
        lines += ["", f"## `{family.name}`: served by {family.served_by}", ""]
        lines += ["| subject | request | result |", "|---|---|---|"]
        for verb in family_verbs(family).values():
            lines.append(f"| `{verb.pattern()}` | `{verb.request.__name__}` | {_result_cell(verb)} |")
    lines += ["", "## Other subjects: commands and plain publishes, never answered", ""]
    lines += ["| subject | message | published by | received by |", "|---|---|---|---|"]
    for other in OTHER_SUBJECTS:
        lines.append(f"| `{other.pattern}` | `{other.message.__name__}` | {other.published_by} | {other.received_by} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(subject_table(), end="")
