"""What the roles of one process share lives in its ``ProcessContext`` (issue 24): shared by the
roles given the same context, never seen by another context (another process, another test)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import numpy as np
import pytest

from toolmesh.embed.model import Vectors
from toolmesh.platform.process_context import ProcessContext
from toolmesh.platform.telemetry import configure_logging
from toolmesh.redaction import SecretRedactor, process_redactor
from toolmesh.search.setup import lend_table, local_catalogs
from toolmesh.search.table import SearchTable

pytestmark = pytest.mark.unit


class _Embedder:
    model_id, dimensions = "fake", 4

    def embed(self, texts: list[str]) -> Vectors:
        return np.ones((len(texts), 4), dtype=np.float32)


def test_the_roles_of_a_process_share_one_embedder_loaded_once() -> None:
    loads: list[_Embedder] = []

    def load() -> _Embedder:
        loads.append(_Embedder())
        return loads[-1]

    context = ProcessContext()
    assert context.embedder(load) is context.embedder(load) is loads[0]
    assert ProcessContext().embedder(load) is loads[1]  # another process (or test) loads its own
    assert len(loads) == 2


def test_a_model_that_cannot_load_is_not_tried_again_by_the_next_role() -> None:
    tries: list[None] = []

    def fail() -> None:
        tries.append(None)

    context = ProcessContext()
    assert context.embedder(fail) is None and context.embedder(fail) is None
    assert len(tries) == 1


async def test_searches_read_the_table_their_process_lent_and_no_other_process_sees_it() -> None:
    context, elsewhere = ProcessContext(), ProcessContext()
    table = SearchTable({}, 4)
    assert await local_catalogs(context)() is None
    with lend_table(context, table):
        assert await local_catalogs(context)() is await table.catalog()
        assert await local_catalogs(elsewhere)() is None
    assert await local_catalogs(context)() is None


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, its handlers, level and filters put back as the test found them."""
    root = logging.getLogger()
    handlers, filters, level = root.handlers[:], root.filters[:], root.level
    yield root
    root.handlers[:], root.filters[:] = handlers, filters
    root.setLevel(level)


def test_the_log_redactor_is_the_one_logging_holds(root_logger: logging.Logger) -> None:
    root_logger.filters[:] = [f for f in root_logger.filters if not isinstance(f, SecretRedactor)]
    redactor = process_redactor()
    assert process_redactor() is redactor
    assert [f for f in root_logger.filters if isinstance(f, SecretRedactor)] == [redactor]
    redactor.add(["token-registered-before-logging-starts"])
    output = io.StringIO()
    configure_logging("INFO", stream=output)
    logging.getLogger("toolmesh.test").warning("refused token-registered-before-logging-starts")
    assert "token-registered" not in output.getvalue() and "refused ***" in output.getvalue()
