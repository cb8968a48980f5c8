"""An existing stream is used only when it matches toolmesh's configuration on every field that
decides what it captures, keeps, loses or copies elsewhere (topology.config_differences)."""

from __future__ import annotations

from dataclasses import replace

from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from toolmesh.contracts.events import EVENTS_SUBJECTS
from toolmesh.platform.bus.topology import commands_stream_config, config_differences, events_stream_config


def as_the_server_returns(config: StreamConfig) -> StreamConfig:
    """``config`` with the values the server fills in where toolmesh gives none."""
    limits = replace(config, max_age=0.0, max_msgs=-1, max_bytes=-1, max_msgs_per_subject=-1, num_replicas=3)
    return replace(limits, discard=config.discard or DiscardPolicy.OLD, sealed=False, allow_msg_ttl=False)


def test_streams_as_toolmesh_makes_them_match_whatever_their_replicas() -> None:
    for config in (events_stream_config(), commands_stream_config()):
        assert config_differences(config, as_the_server_returns(config)) == []


def test_each_weakened_field_is_named() -> None:
    expected = events_stream_config()
    found = replace(
        as_the_server_returns(expected),
        subjects=[EVENTS_SUBJECTS, "toolmesh.rpc.>"],
        max_age=1.0,
        retention=RetentionPolicy.INTEREST,
        storage=StorageType.MEMORY,
        allow_rollup_hdrs=True,
    )
    differences = config_differences(expected, found)
    weakened = ["subjects", "retention", "storage", "max_age", "allow_rollup_hdrs"]
    assert [d.split(" is ")[0] for d in differences] == weakened
    assert differences[:2] == [
        f"subjects is ['{EVENTS_SUBJECTS}', 'toolmesh.rpc.>'], toolmesh expects ['{EVENTS_SUBJECTS}']",
        "retention is 'interest', toolmesh expects 'limits'",
    ]
