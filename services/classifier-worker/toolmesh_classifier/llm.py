"""An optional LLM classifier for any OpenAI-compatible chat endpoint; JSON out, validated, retried."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

import httpx
from pydantic import BaseModel, Field
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from toolmesh.contracts.events import DiscoveredTool, ToolClassification
from toolmesh.errors import ClassificationFailed
from toolmesh.skills.taxonomy import Skill
from toolmesh_classifier.assignment import from_confidences

log = logging.getLogger("toolmesh.classifier")
ATTEMPTS = 3
BACKOFF_SECONDS = 0.5
"""The pause after the first failed attempt; it doubles after each further one."""
RETRIED = (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError)
"""What a new attempt may fix: the endpoint failing, or an answer of the wrong shape (pydantic's
``ValidationError`` and invalid JSON are ``ValueError``s)."""


class _Score(BaseModel):
    skill_id: str
    confidence: float = Field(ge=0.0, le=1.0)


class _ToolAnswer(BaseModel):
    name: str
    skills: list[_Score] = Field(max_length=3)


class _Answer(BaseModel):
    tools: list[_ToolAnswer]


_PROMPT = """Classify each tool into 1 to 3 of these skills, with a confidence from 0 to 1.
Skills (id: description):
{skills}

Tools of the server "{server}" (name: description):
{tools}

Answer with JSON only, in this shape:
{{"tools": [{{"name": "<tool name>", "skills": [{{"skill_id": "<id>", "confidence": 0.9}}]}}]}}"""


class LlmClassifier:
    """Asks a chat-completions endpoint; answers are validated by pydantic and retried when invalid."""

    name = "llm"

    def __init__(
        self,
        http: httpx.AsyncClient,
        model: str,
        skills: list[Skill],
        *,
        timeout: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._http = http
        self._model = model
        self._skills = {s.id: s for s in skills}
        self._timeout = timeout
        self._sleep = sleep

    def prompt(self, server_name: str, tools: list[DiscoveredTool]) -> str:
        """The user message for one batch."""
        skills = "\n".join(f"- {s.id}: {s.description}" for s in self._skills.values())
        listed = "\n".join(f"- {t.original_name}: {(t.description or '')[:500]}" for t in tools)
        return _PROMPT.format(skills=skills, server=server_name, tools=listed)

    async def classify(self, server_name: str, tools: list[DiscoveredTool]) -> list[ToolClassification]:
        """Classify one batch: up to ``ATTEMPTS`` requests, pausing 0.5 s, then 1 s, between them.

        Raises:
            ClassificationFailed: every attempt failed with one of ``RETRIED``.
        """
        body = {
            "model": self._model,
            "messages": [{"role": "user", "content": self.prompt(server_name, tools)}],
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        retrying = AsyncRetrying(
            stop=stop_after_attempt(ATTEMPTS),
            wait=wait_exponential(multiplier=BACKOFF_SECONDS),
            retry=retry_if_exception_type(RETRIED),
            after=_log_failed_attempt,
            sleep=self._sleep,
        )
        try:
            classified: list[ToolClassification] = await retrying(self._ask, tools, body)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise ClassificationFailed(
                f"LLM classification failed after {ATTEMPTS} attempts: {type(last).__name__}: {last}"
            ) from last
        return classified

    async def _ask(self, tools: list[DiscoveredTool], body: dict[str, object]) -> list[ToolClassification]:
        response = await self._http.post("chat/completions", json=body, timeout=self._timeout)
        response.raise_for_status()
        content = response.json()["choices"][0]["message"]["content"]
        return self.parse(tools, content)

    def parse(self, tools: list[DiscoveredTool], content: str) -> list[ToolClassification]:
        """Validate the model's JSON; unknown skills are dropped, missing tools are an error (retried)."""
        answer = _Answer.model_validate(json.loads(content))
        by_name = {a.name: a for a in answer.tools}
        missing = [t.original_name for t in tools if t.original_name not in by_name]
        if missing:
            raise ValueError(f"answer lacks tools {missing}")
        return [
            from_confidences(
                t.original_name,
                {s.skill_id: s.confidence for s in by_name[t.original_name].skills if s.skill_id in self._skills},
            )
            for t in tools
        ]


def _log_failed_attempt(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome is not None else None
    log.warning("LLM classification attempt %d failed: %s: %s", state.attempt_number, type(error).__name__, error)
