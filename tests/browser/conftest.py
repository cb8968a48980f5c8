"""The browser for the browser tests, provided once per session before the first of them runs.

It is provided when collection is done (outside any test's timeout: an install takes minutes) and
only when a browser test is selected; ``chromium`` hands it to the tests, or fails each of them with
the one message saying what to install.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.chromium import ChromiumUnavailable, provide

_PROVIDED = pytest.StashKey["Path | ChromiumUnavailable"]()


def _provided(session: pytest.Session) -> Path | ChromiumUnavailable:
    """The browser's path, or why there is none; worked out once per session."""
    if _PROVIDED not in session.stash:
        try:
            session.stash[_PROVIDED] = provide()
        except ChromiumUnavailable as exc:
            session.stash[_PROVIDED] = exc
    return session.stash[_PROVIDED]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Provide the browser now when a browser test is going to run."""
    if session.config.option.collectonly:
        return
    if any(item.get_closest_marker("browser") for item in session.items):
        _provided(session)


@pytest.fixture(scope="session")
def chromium(request: pytest.FixtureRequest) -> Path:
    """``/usr/bin/chromium``, there or installed by this session."""
    outcome = _provided(request.session)
    if isinstance(outcome, ChromiumUnavailable):
        pytest.fail(str(outcome), pytrace=False)
    return outcome
