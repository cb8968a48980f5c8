"""The ids of requests a gateway replica sends to clients name that replica, and nothing else reads as one."""

from __future__ import annotations

import pytest

from toolmesh.contracts.clients import asked_by, asking_id


def test_an_answer_names_the_replica_that_asked() -> None:
    assert asking_id("0123456789ab", 7) == "tm-0123456789ab-7"
    assert asked_by(asking_id("0123456789ab", 7)) == "0123456789ab"


@pytest.mark.parametrize(
    "request_id",
    [
        7,
        "7",
        None,
        "tm-0123456789ab",
        "tm-0123456789AB-1",
        "tm-0123456789a-1",
        "tm-0123456789ab-1.>",
        "tm-*.>-1",
        "tm-0123456789ab-1\n",
    ],
)
def test_an_id_of_no_replica_names_none(request_id: object) -> None:
    """A client's own ids, or one made up to reach other subjects, name no replica."""
    assert asked_by(request_id) is None
