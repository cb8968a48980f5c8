"""Files only their owner may read (mode 0600): the embedded servers' passwords and configurations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Account(NamedTuple):
    """A user and group to own what an embedded server reads (the one Postgres runs as when we are root)."""

    uid: int
    gid: int


def write_private(path: Path, text: str, account: Account | None = None) -> None:
    """Write ``text`` to ``path`` with mode 0600, owned by ``account`` when given."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    path.chmod(0o600)
    if account is not None:
        os.chown(path, account.uid, account.gid)
