"""The LLM classifier's retries: which failures are tried again, how often, and the pauses between."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from toolmesh.contracts.events import DiscoveredTool
from toolmesh.errors import ClassificationFailed
from toolmesh.skills.taxonomy import default_taxonomy
from toolmesh_classifier.llm import ATTEMPTS, LlmClassifier

pytestmark = pytest.mark.unit

TOOLS = [DiscoveredTool(original_name="create_issue")]
ANSWER = {"tools": [{"name": "create_issue", "skills": [{"skill_id": "issue_tracking", "confidence": 0.9}]}]}


def chat_reply(content: str) -> httpx.Response:
    """A chat-completions answer carrying ``content`` as the model's message."""
    return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})


class Endpoint:
    """An in-process chat endpoint answering with the given replies in turn; records requests and pauses."""

    def __init__(self, *replies: Callable[[], httpx.Response]) -> None:
        self.replies = list(replies)
        self.requests = 0
        self.pauses: list[float] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return self.replies[min(self.requests, len(self.replies)) - 1]()

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)

    async def classify(self) -> list[str | None]:
        transport = httpx.MockTransport(self.handle)
        async with httpx.AsyncClient(transport=transport, base_url="http://llm.test/v1/") as http:
            llm = LlmClassifier(http, "m", default_taxonomy(), sleep=self.sleep)
            return [c.primary_skill_id for c in await llm.classify("tracker", TOOLS)]


async def test_failed_requests_are_retried_with_doubling_pauses() -> None:
    endpoint = Endpoint(
        lambda: httpx.Response(503), lambda: httpx.Response(503), lambda: chat_reply(json.dumps(ANSWER))
    )
    assert await endpoint.classify() == ["issue_tracking"]
    assert endpoint.requests == 3 and endpoint.pauses == [0.5, 1.0]


async def test_an_answer_of_the_wrong_shape_is_retried() -> None:
    endpoint = Endpoint(
        lambda: chat_reply("not json"),
        lambda: httpx.Response(200, json={"choices": []}),
        lambda: chat_reply(json.dumps(ANSWER)),
    )
    assert await endpoint.classify() == ["issue_tracking"]
    assert endpoint.requests == 3


async def test_after_every_attempt_failed_it_names_the_last_error_without_a_last_pause() -> None:
    endpoint = Endpoint(lambda: httpx.Response(503), lambda: chat_reply(json.dumps({"tools": []})))
    with pytest.raises(ClassificationFailed, match=f"after {ATTEMPTS} attempts: ValueError: answer lacks tools"):
        await endpoint.classify()
    assert endpoint.requests == ATTEMPTS and endpoint.pauses == [0.5, 1.0]


async def test_an_error_no_attempt_can_fix_is_not_retried() -> None:
    def broken() -> httpx.Response:
        raise RuntimeError("a bug, not a failing endpoint")

    endpoint = Endpoint(broken)
    with pytest.raises(RuntimeError, match="a bug"):
        await endpoint.classify()
    assert endpoint.requests == 1 and endpoint.pauses == []
