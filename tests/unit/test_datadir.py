"""The data directory of ``toolmesh up`` and the secrets in it are private to the user."""

from __future__ import annotations

import stat
from pathlib import Path

from toolmesh_cli.datadir import load_or_create_secret, prepare_data_dir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_dir_is_0700(tmp_path: Path) -> None:
    assert _mode(prepare_data_dir(tmp_path / "new" / "data")) == 0o700


def test_an_existing_readable_data_dir_is_made_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    assert _mode(prepare_data_dir(data_dir)) == 0o700


def test_a_secret_is_written_0600_and_read_back_unchanged(tmp_path: Path) -> None:
    secret, created = load_or_create_secret(tmp_path / "admin-token", lambda: "generated")
    assert created and _mode(tmp_path / "admin-token") == 0o600
    assert load_or_create_secret(tmp_path / "admin-token", lambda: "other") == (secret, False)
