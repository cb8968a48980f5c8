"""The packaged model embeds a bulk of texts batched by token count, each text as it would alone,
and runs little padding (a long query and its short clauses do not share a batch)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from toolmesh.embed.model import BATCH_SIZE, MAX_PADDING, OnnxEmbedder, batches
from toolmesh.search.query import clauses

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


def test_batches_take_texts_of_similar_token_counts_shortest_first() -> None:
    lengths = [120, 30, 9, 35, 11, 10, 200]
    assert batches(lengths) == [[2, 5, 4], [1, 3], [0], [6]]
    assert [len(b) for b in batches([10] * (BATCH_SIZE + 1))] == [BATCH_SIZE, 1]


def test_a_long_query_and_its_clauses_run_with_little_padding(monkeypatch: pytest.MonkeyPatch) -> None:
    query = (
        "Find the cheapest direct flight from Berlin to Lisbon next Friday, compare it with the train, "
        "then book the better one and add it to my calendar with a reminder the evening before, "
        "and send the itinerary to my manager by email."
    )
    texts = [query, *clauses(query)]
    embedder = OnnxEmbedder()
    session = embedder._model()
    run = session.run
    fed: list[tuple[int, int]] = []  # (tokens run, tokens of the texts) per model run

    def counting(names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        fed.append((feeds["input_ids"].size, int(feeds["attention_mask"].sum())))
        return list(run(names, feeds))

    monkeypatch.setattr(session, "run", counting)
    vectors = embedder.embed(texts)
    assert len(texts) >= 5
    run_tokens, text_tokens = map(sum, zip(*fed, strict=True))
    assert run_tokens <= MAX_PADDING * text_tokens  # one batch padded to the query ran ~3x its tokens
    monkeypatch.undo()
    np.testing.assert_allclose(vectors, np.vstack([embedder.embed([t]) for t in texts]), atol=1e-5)


def test_a_query_does_not_wait_for_a_tokenizer_another_caller_holds() -> None:
    embedder = OnnxEmbedder()
    busy = embedder._tokenizers.get()  # as a bulk batch being tokenized on a lane thread holds it
    answered: list[np.ndarray] = []
    query = threading.Thread(target=lambda: answered.append(embedder.embed(["send an email"])))
    query.start()
    query.join(timeout=60)  # waiting for the busy tokenizer would never end
    embedder._tokenizers.put(busy)
    assert not query.is_alive()
    assert answered[0].shape == (1, 384)
