"""Removing a sandboxed server's home never reaches outside it, whatever its child left there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolmesh.sandbox import homes as sandbox_homes

pytestmark = pytest.mark.unit
KEY = "0b5c2f0e-8d4e-4a57-9a36-1c2d3e4f5a6b"
NOBODY = 65534


@pytest.fixture
def host(tmp_path: Path) -> tuple[Path, Path, Path]:
    """``(data dir, a host file, a host directory with a file)``, all outside the homes."""
    return _host(tmp_path)


def _host(tmp_path: Path) -> tuple[Path, Path, Path]:
    data_dir, outside = tmp_path / "data", tmp_path / "outside"
    (sandbox_homes.homes_dir(data_dir) / KEY).mkdir(parents=True)
    (outside / "dir").mkdir(parents=True)
    (outside / "file").write_text("host")
    (outside / "dir" / "inner").write_text("host")
    return data_dir, outside / "file", outside / "dir"


def _intact(file: Path, directory: Path) -> None:
    assert file.read_text() == "host" and (directory / "inner").read_text() == "host"
    assert os.stat(file).st_mode & 0o777 != 0 and os.stat(directory).st_mode & 0o700 == 0o700


def test_symlinks_are_unlinked_never_followed(host: tuple[Path, Path, Path]) -> None:
    data_dir, file, directory = host
    home = sandbox_homes.homes_dir(data_dir) / KEY
    (home / "to-file").symlink_to(file)
    (home / "to-dir").symlink_to(directory)
    (home / "sub").mkdir()
    (home / "sub" / "to-dir").symlink_to(directory)
    assert sandbox_homes.home_keys(data_dir) == [KEY]
    assert sandbox_homes.remove_home(data_dir, KEY)
    assert not home.exists() and sandbox_homes.home_keys(data_dir) == []
    _intact(file, directory)


def _remove_unprivileged(data_dir: Path) -> bool:
    """``remove_home`` as an unprivileged worker runs it (root ignores the modes a child sets: as root,
    run it as ``nobody``, on a tree ``nobody`` owns, as a child of a worker without root leaves it)."""
    if os.geteuid() != 0:
        return sandbox_homes.remove_home(data_dir, KEY)
    for root, dirs, files in os.walk(data_dir):
        for name in [root, *(os.path.join(root, n) for n in (*dirs, *files))]:
            os.lchown(name, NOBODY, NOBODY)
    code = (
        f"import sys; from pathlib import Path; from toolmesh.sandbox import homes as h; "
        f"sys.exit(0 if h.remove_home(Path({str(data_dir)!r}), {KEY!r}) else 1)"
    )
    done = subprocess.run(
        ["/usr/bin/setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr.decode()
    return done.returncode == 0


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory an unprivileged remover can reach (pytest's own are the user's alone)."""
    made = Path(tempfile.mkdtemp(prefix="toolmesh-homes-"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made)


def test_unreadable_unwritable_and_very_deep_directories_are_removed(reachable: Path) -> None:
    data_dir, file, directory = _host(reachable)
    home = sandbox_homes.homes_dir(data_dir) / KEY
    for name, mode in (("locked", 0o000), ("read-only", 0o500)):
        (home / name).mkdir()
        (home / name / "kept").write_text("x")
        (home / name / "link").symlink_to(directory)
        (home / name).chmod(mode)
    deep = home / "deep"
    deep.mkdir()
    descriptor = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3 * sandbox_homes.MAX_DEPTH):  # by descriptor: the path would outgrow PATH_MAX
        os.mkdir("d", dir_fd=descriptor)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor)
        os.close(descriptor)
        descriptor = inner
    os.symlink(str(file), "bottom", dir_fd=descriptor)
    os.close(descriptor)
    home.chmod(0o500)
    assert _remove_unprivileged(data_dir)
    assert not home.exists()
    _intact(file, directory)


def test_a_home_that_is_a_symlink_is_unlinked_and_its_target_kept(host: tuple[Path, Path, Path]) -> None:
    data_dir, file, directory = host
    home = sandbox_homes.homes_dir(data_dir) / KEY
    home.rmdir()
    home.symlink_to(directory)
    assert sandbox_homes.remove_home(data_dir, KEY)
    assert not os.path.lexists(home)
    _intact(file, directory)


def test_a_homes_directory_replaced_by_a_symlink_is_not_entered(host: tuple[Path, Path, Path]) -> None:
    data_dir, file, directory = host
    homes = sandbox_homes.homes_dir(data_dir)
    (homes / KEY).rmdir()
    homes.rmdir()
    (directory / KEY).mkdir()
    homes.symlink_to(directory)
    assert not sandbox_homes.remove_home(data_dir, KEY)
    assert (directory / KEY).is_dir()
    _intact(file, directory)


@pytest.mark.parametrize("key", ["..", ".", "", "a/b", "../outside"])
def test_names_that_leave_the_homes_directory_are_refused(host: tuple[Path, Path, Path], key: str) -> None:
    with pytest.raises(ValueError, match="unusable home name"):
        sandbox_homes.remove_home(host[0], key)


def test_a_missing_home_counts_as_removed(tmp_path: Path) -> None:
    assert sandbox_homes.remove_home(tmp_path, KEY)
    assert sandbox_homes.home_keys(tmp_path) == []
