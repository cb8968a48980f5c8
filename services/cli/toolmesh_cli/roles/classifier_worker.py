"""The classifier-worker role: skill classification of discovered tools (BR-004)."""

from __future__ import annotations

import asyncio

from toolmesh.credentials import CredentialBox
from toolmesh.platform.runtime import Backends
from toolmesh.platform.supervision import supervise
from toolmesh_classifier.setup import build_classifier
from toolmesh_classifier.worker import run_classifier


async def run(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Skill classification of discovered tools (BR-004)."""

    async def classify() -> None:
        async with build_classifier(b.settings, b.context) as classifier:
            await run_classifier(b.js, classifier, stop, b.settings)

    await supervise("classifier-worker", classify, stop, backoff=5.0)
