"""An optional LLM classifier for any OpenAI-compatible chat endpoint; JSON out, validated, retried."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
from pydantic import BaseModel, Field, ValidationError

from toolmesh.contracts.events import DiscoveredTool, ToolClassification
from toolmesh.errors import ClassificationFailed
from toolmesh.skills.taxonomy import Skill
from toolmesh_classifier.assignment import from_confidences

log = logging.getLogger("toolmesh.classifier")
ATTEMPTS = 3


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

    def __init__(self, http: httpx.AsyncClient, model: str, skills: list[Skill], *, timeout: float = 60.0) -> None:
        self._http = http
        self._model = model
        self._skills = {s.id: s for s in skills}
        self._timeout = timeout

    def prompt(self, server_name: str, tools: list[DiscoveredTool]) -> str:
        """The user message for one batch."""
        skills = "\n".join(f"- {s.id}: {s.description}" for s in self._skills.values())
        listed = "\n".join(f"- {t.original_name}: {(t.description or '')[:500]}" for t in tools)
        return _PROMPT.format(skills=skills, server=server_name, tools=listed)

    async def classify(self, server_name: str, tools: list[DiscoveredTool]) -> list[ToolClassification]:
        body = {
            "model": self._model,
            "messages": [{"role": "user", "content": self.prompt(server_name, tools)}],
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        last_error = "no attempt"
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self._http.post("chat/completions", json=body, timeout=self._timeout)
                response.raise_for_status()
                content = response.json()["choices"][0]["message"]["content"]
                return self.parse(tools, content)
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError, ValidationError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                log.warning("LLM classification attempt %d failed: %s", attempt, last_error)
                await asyncio.sleep(0.5 * 2 ** (attempt - 1))
        raise ClassificationFailed(f"LLM classification failed after {ATTEMPTS} attempts: {last_error}")

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
