"""The process's embedder embeds each distinct text once, also when two threads ask at the same time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from toolmesh.embed.model import SharedEmbedder

pytestmark = pytest.mark.unit


class _SlowCounting:
    model_id = "counting"
    dimensions = 2

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        self.started.set()
        self.release.wait(timeout=10)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_each_text_is_embedded_once_and_concurrent_callers_join() -> None:
    inner = _SlowCounting()
    shared = SharedEmbedder(inner, size=10)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(shared.embed, ["alpha", "beta"])
        assert inner.started.wait(timeout=10)
        second = pool.submit(shared.embed, ["beta", "gamma", "beta"])
        while "gamma" not in inner.texts:  # the second call embeds only what nobody is embedding
            inner.release.wait(timeout=0.01)
        inner.release.set()
        a, b = first.result(timeout=10), second.result(timeout=10)
    assert sorted(inner.texts) == ["alpha", "beta", "gamma"]
    assert a.tolist() == [[5.0, 1.0], [4.0, 1.0]]
    assert b.tolist() == [[4.0, 1.0], [5.0, 1.0], [4.0, 1.0]]
    shared.embed(["alpha"])
    assert sorted(inner.texts) == ["alpha", "beta", "gamma"]  # from the cache


def test_a_failed_embedding_is_not_cached() -> None:
    class _Failing:
        model_id, dimensions, calls = "failing", 2, 0

        def embed(self, texts: list[str]) -> np.ndarray:
            self.calls += 1
            raise RuntimeError("model crashed")

    inner = _Failing()
    shared = SharedEmbedder(inner)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="model crashed"):
            shared.embed(["x"])
    assert inner.calls == 2
