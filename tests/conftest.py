"""Servers for the test session: Postgres and NATS with JetStream.

By default they are the embedded servers of ``toolmesh_cli.embedded`` on random loopback ports in
temp dirs. ``TOOLMESH_TEST_DATABASE_URL`` / ``TOOLMESH_TEST_NATS_URL`` point the suite at
existing servers instead; ``TOOLMESH_TEST_USE_DOCKER=1`` uses testcontainers when it and a
Docker daemon are available.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import nats
import pytest
import pytest_asyncio
from nats.js.errors import NotFoundError

from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres

_CLEAN_STREAM_PREFIXES = ("TOOLMESH", "KV_toolmesh")
_OWN_BASETEMP = pytest.StashKey[str]()


def _docker_enabled() -> bool:
    """True when asked for Docker and both testcontainers and a Docker daemon are usable."""
    if os.environ.get("TOOLMESH_TEST_USE_DOCKER") != "1":
        return False
    if importlib.util.find_spec("testcontainers") is None or shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def _with_database(server_url: str, name: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def postgres_server_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """URL of a Postgres server (superuser) shared by the whole session."""
    external = os.environ.get("TOOLMESH_TEST_DATABASE_URL")
    if external:
        yield external
    elif _docker_enabled():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:17-alpine") as container:
            yield container.get_connection_url(driver=None)
    else:
        async with EmbeddedPostgres(tmp_path_factory.mktemp("postgres")) as server:
            yield server.url


@pytest_asyncio.fixture(loop_scope="session")
async def database_url(postgres_server_url: str) -> AsyncIterator[str]:
    """URL of a fresh, empty database for this test; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex}"
    conn = await asyncpg.connect(postgres_server_url, timeout=10)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    yield _with_database(postgres_server_url, name)
    conn = await asyncpg.connect(postgres_server_url, timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def _shared_nats_url() -> Iterator[str | None]:
    """URL of a NATS server shared by the session (env or Docker), None to embed one per test."""
    external = os.environ.get("TOOLMESH_TEST_NATS_URL")
    if external:
        yield external
    elif _docker_enabled():
        from testcontainers.nats import NatsContainer

        with NatsContainer(jetstream=True) as container:
            yield container.nats_uri()
    else:
        yield None


@pytest_asyncio.fixture(loop_scope="session")
async def _nats_server(
    _shared_nats_url: str | None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[EmbeddedNats | None]:
    """A fresh embedded NATS for this test, or None when a shared server is in use."""
    if _shared_nats_url is not None:
        yield None
        return
    async with EmbeddedNats(tmp_path_factory.mktemp("nats")) as server:
        yield server


@pytest_asyncio.fixture(loop_scope="session")
async def nats_url(_shared_nats_url: str | None, _nats_server: EmbeddedNats | None) -> AsyncIterator[str]:
    """URL of a NATS server with JetStream and no toolmesh streams or KV buckets in it."""
    if _nats_server is not None:
        yield _nats_server.url
        return
    assert _shared_nats_url is not None
    await _delete_toolmesh_streams(_shared_nats_url)
    yield _shared_nats_url


@pytest.fixture
def embedded_nats(_nats_server: EmbeddedNats | None) -> EmbeddedNats:
    """The embedded NATS behind ``nats_url``, for tests that stop and restart it."""
    if _nats_server is None:
        pytest.skip("needs an embedded NATS (TOOLMESH_TEST_NATS_URL or Docker is in use)")
    return _nats_server


async def _delete_toolmesh_streams(url: str) -> None:
    nc = await nats.connect(url, connect_timeout=5, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=5)
        names: list[str] = []
        while page := await js.streams_info(offset=len(names)):
            names += [info.config.name or "" for info in page]
        for name in names:
            if name.startswith(_CLEAN_STREAM_PREFIXES):
                with contextlib.suppress(NotFoundError):
                    await js.delete_stream(name)
    finally:
        await nc.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test by its folder (``unit``, ``integration``, ``e2e``, ``fuzz``, ``browser``, ``faults``) so
    ``-m`` selects them."""
    for item in items:
        for marker in ("unit", "integration", "e2e", "fuzz", "conformance", "browser", "faults"):
            if f"/tests/{marker}/" in str(item.path):
                item.add_marker(getattr(pytest.mark, marker))


def pytest_configure(config: pytest.Config) -> None:
    """Give each test session a private temp root.

    pytest's numbered ``/tmp/pytest-of-<user>/pytest-N`` roots are pruned by whichever session
    ends next, which deletes the data dirs of servers a concurrent session is still running.
    """
    if not config.option.basetemp:
        config.option.basetemp = tempfile.mkdtemp(prefix="toolmesh-tests-")
        config.stash[_OWN_BASETEMP] = config.option.basetemp


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the private temp root made in ``pytest_configure``."""
    own = config.stash.get(_OWN_BASETEMP, None)
    if own:
        shutil.rmtree(own, ignore_errors=True)
