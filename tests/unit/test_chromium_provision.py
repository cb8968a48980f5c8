"""Which command the test session runs for the browser tests' chromium, from what the machine has."""

from __future__ import annotations

from collections.abc import Callable

from tests.browser.chromium import plan

APT_GET = "/usr/bin/apt-get"


def finds(*programs: str) -> Callable[[str], str | None]:
    """A ``which`` that finds only ``programs``, under /usr/bin."""
    return lambda name: f"/usr/bin/{name}" if name in programs else None


def test_present_chromium_runs_nothing_whoever_runs_the_tests() -> None:
    for uid, which in ((0, finds("apt-get")), (1000, finds())):
        provision = plan(True, uid, which)
        assert (provision.commands, provision.problem) == ((), "")


def test_missing_chromium_as_root_with_apt_get_is_installed_noninteractively() -> None:
    provision = plan(False, 0, finds("apt-get"))
    assert provision.commands == ((APT_GET, "update", "-q"), (APT_GET, "install", "-y", "-q", "chromium"))
    assert provision.env == {"DEBIAN_FRONTEND": "noninteractive"}
    assert provision.problem == ""


def test_missing_chromium_not_as_root_fails_saying_what_to_install() -> None:
    provision = plan(False, 1000, finds("apt-get"))
    assert provision.commands == ()
    assert "/usr/bin/chromium is missing" in provision.problem
    assert "not run as root" in provision.problem and "sudo apt-get install -y chromium" in provision.problem


def test_missing_chromium_without_apt_get_fails_saying_what_to_install() -> None:
    provision = plan(False, 0, finds())
    assert provision.commands == ()
    assert "no apt-get" in provision.problem and "chromium package (apt-get install -y chromium)" in provision.problem
