"""How the embedded Postgres authenticates: the superuser's password and the rules of ``pg_hba.conf``.

Every connection, over loopback TCP or the unix socket, must give the superuser's password
(SCRAM-SHA-256). The password is generated once and kept in ``PGDATA/superuser.password``
(mode 0600, PGDATA itself is 0700). A cluster made earlier with ``trust`` authentication, or
one whose password file is gone, gets a new password set in single-user mode (no server listens
meanwhile) and the rules below, so its data is kept.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from toolmesh_cli.embedded.private_files import Account, write_private
from toolmesh_cli.embedded.processes import EmbeddedServerError, server_environment

PASSWORD_FILE = "superuser.password"
HBA_RULES = (
    "# Written by toolmesh: every connection needs the superuser's password (SCRAM-SHA-256).\n"
    "local all all scram-sha-256\n"
    "host all all 127.0.0.1/32 scram-sha-256\n"
    "host all all ::1/128 scram-sha-256\n"
)
INITDB_AUTH = ("--auth-local=scram-sha-256", "--auth-host=scram-sha-256")


def new_password() -> str:
    """A random superuser password (URL- and SQL-literal-safe characters only)."""
    return secrets.token_urlsafe(32)


def read_password(data_dir: Path) -> str | None:
    """The superuser password kept in ``data_dir``, None when there is none."""
    path = data_dir / PASSWORD_FILE
    if not path.exists():
        return None
    return path.read_text().strip() or None


def keep_password(data_dir: Path, password: str, account: Account | None) -> None:
    """Store ``password`` in ``data_dir`` (0600)."""
    write_private(data_dir / PASSWORD_FILE, password + "\n", account)


def needs_password(data_dir: Path) -> bool:
    """Whether an existing cluster still lacks our password or our ``pg_hba.conf`` (e.g. a ``trust`` one)."""
    hba = data_dir / "pg_hba.conf"
    return read_password(data_dir) is None or not hba.exists() or hba.read_text() != HBA_RULES


def write_hba(data_dir: Path, account: Account | None) -> None:
    """Replace ``pg_hba.conf`` with the password-only rules."""
    write_private(data_dir / "pg_hba.conf", HBA_RULES, account)


@contextmanager
def password_file(password: str, account: Account | None) -> Iterator[Path]:
    """A private temporary file holding ``password`` (for ``initdb --pwfile``), removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix="toolmesh-pg-pw-"))
    try:
        if account is not None:
            os.chown(folder, account.uid, account.gid)
        path = folder / "password"
        write_private(path, password + "\n", account)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def set_password(postgres: Path, data_dir: Path, user: str, password: str, account: Account | None) -> None:
    """Set ``user``'s password (SCRAM) with ``postgres --single`` on a stopped cluster.

    The statement goes through stdin, never the command line or the log.
    """
    argv = [str(postgres), "--single", "-D", str(data_dir), "-c", "password_encryption=scram-sha-256", "postgres"]
    statement = f"ALTER ROLE \"{user}\" WITH LOGIN PASSWORD '{password}';\n"
    uid, gid = account if account else (None, None)
    result = await asyncio.to_thread(
        subprocess.run,
        argv,
        input=statement.encode(),
        env=server_environment(),
        cwd=data_dir,
        user=uid,
        group=gid,
        extra_groups=[] if gid is not None else None,
        capture_output=True,
        timeout=120,
        check=False,
    )
    output = (result.stdout + result.stderr).decode(errors="replace").replace(password, "***")
    if result.returncode != 0 or "ERROR:" in output:
        raise EmbeddedServerError(f"could not set the postgres password in {data_dir} ({result.returncode}):\n{output}")
