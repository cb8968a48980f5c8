"""The shipped skill vectors: equal to what the packaged model computes, used instead of it at start."""

from __future__ import annotations

import numpy as np
import pytest

from toolmesh.embed.model import DIMENSIONS, MODEL_ID, OnnxEmbedder, Vectors
from toolmesh.skills.taxonomy import Skill, default_taxonomy, skill_text
from toolmesh.skills.vectors import shipped_vectors, skill_vectors

pytestmark = pytest.mark.unit


class CountingEmbedder:
    """The packaged model, counting the texts it is asked to embed."""

    model_id = MODEL_ID
    dimensions = DIMENSIONS

    def __init__(self) -> None:
        self.inner = OnnxEmbedder()
        self.asked: list[str] = []

    def embed(self, texts: list[str]) -> Vectors:
        self.asked.extend(texts)
        return self.inner.embed(texts)


def test_the_shipped_vectors_are_the_models_vectors_of_the_shipped_skills() -> None:
    skills = default_taxonomy()
    texts = [skill_text(s) for s in skills]
    shipped = shipped_vectors()
    assert sorted(shipped) == sorted(texts), "run: python -m toolmesh.skills.vectors"
    computed = OnnxEmbedder().embed(texts)
    assert np.allclose(np.stack([shipped[t] for t in texts]), computed, atol=1e-5)


def test_the_shipped_skills_need_no_embedding_and_others_are_embedded() -> None:
    embedder = CountingEmbedder()
    skills = default_taxonomy()
    vectors = skill_vectors(embedder, skills)
    assert embedder.asked == [] and vectors.shape == (len(skills), DIMENSIONS)

    extra = Skill(id="weather", name="Weather", description="Forecasts and current conditions")
    mixed = skill_vectors(embedder, [*skills, extra])
    assert embedder.asked == [skill_text(s) for s in [*skills, extra]]
    assert np.allclose(mixed[:-1], vectors, atol=1e-5)


def test_the_model_is_built_on_the_first_embedding_only() -> None:
    embedder = OnnxEmbedder()
    assert embedder._session is None  # the ~160 MB session is not built by loading the embedder
    assert embedder.embed(["hello"]).shape == (1, DIMENSIONS)
    assert embedder._session is not None
