"""The packaged model embeds a bulk of texts batched by token count, each text as it would alone."""

from __future__ import annotations

import numpy as np
import pytest

from toolmesh.embed.model import BATCH_SIZE, OnnxEmbedder

pytestmark = pytest.mark.unit


def test_bulk_embedding_gives_each_text_its_own_vector_in_the_callers_order() -> None:
    # Character counts that say little about token counts: CJK, code-like text, text past the
    # truncation limit, one word; interleaved so that sorting by tokens reorders them.
    texts = []
    for i in range(BATCH_SIZE * 2 + 5):
        texts.append(
            [
                f"read file {i}: Read a file from disk.",
                f"趋势热榜 {i}: 获取微博、知乎、抖音的实时热搜榜单",
                f"run query {i}: " + "SELECT id, name FROM table_x WHERE y_z = 1; " * 3,
                f"summarise {i}: " + "A very long description of what the tool does. " * 60,  # past MAX_TOKENS
                f"tool{i}",
            ][i % 5]
        )
    embedder = OnnxEmbedder()
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([text]) for text in texts])
    assert together.shape == (len(texts), 384)
    np.testing.assert_allclose(together, alone, atol=1e-5)
