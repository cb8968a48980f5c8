"""The MCP SDK boundary: every use of an SDK private is listed, with its reason, and every listed one is real."""

from __future__ import annotations

import textwrap

import pytest

from tests.sdk_boundary import ALLOWLIST, Access, installed_sdk_names, parse_allowlist, project_sources, scan

SDK_NAMES = {"_request_outbound", "_connection", "_handle_post_request", "_task_group", "_streams"}


def _scan(**sources: str) -> set[Access]:
    return scan({f"{path}.py": textwrap.dedent(text) for path, text in sources.items()}, SDK_NAMES)


def test_every_sdk_private_the_code_uses_is_listed_and_every_listed_one_is_used() -> None:
    listed = parse_allowlist(ALLOWLIST.read_text().splitlines())
    found = scan(project_sources(), installed_sdk_names())
    assert sorted(map(str, found - listed.keys())) == [], "new private SDK uses: list them with a reason"
    assert sorted(map(str, listed.keys() - found)) == [], "listed but no longer used: remove them from the list"
    assert [str(access) for access, reason in listed.items() if not reason] == [], "every entry needs its reason"


def test_a_private_attribute_of_an_sdk_object_is_found() -> None:
    found = _scan(
        links="""
        from mcp.server.context import ServerRequestContext

        def channel(ctx: ServerRequestContext) -> object:
            return ctx.session._request_outbound
        """
    )
    assert found == {Access("links.py", "_request_outbound")}


def test_private_sdk_modules_and_private_names_of_public_ones_are_found() -> None:
    found = _scan(
        streams="""
        import mcp.shared._stream_protocols
        from mcp.client._transport import ReadStream
        from mcp.server.streamable_http import _private, PUBLIC
        """
    )
    assert found == {
        Access("streams.py", "mcp.shared._stream_protocols"),
        Access("streams.py", "mcp.client._transport.ReadStream"),
        Access("streams.py", "mcp.server.streamable_http._private"),
    }


def test_the_projects_own_privates_are_not_sdk_accesses() -> None:
    found = _scan(
        own="""
        import mcp

        class Pump:
            _limit = 3

            def __init__(self) -> None:
                self._queue = []

            def _drain(self) -> None: ...

        def use(pump: Pump, other: Pump, record: tuple) -> None:
            other._drain()
            print(pump._queue, other._limit, getattr(other, "_queue"), record._asdict())
        """
    )
    assert found == set()


def test_a_module_without_the_sdk_is_not_scanned() -> None:
    assert _scan(plain="def f(x):\n    return x._request_outbound\n") == set()


def test_an_override_of_an_sdk_private_counts_even_through_a_project_base_class() -> None:
    found = _scan(
        base="""
        from mcp.server.streamable_http import StreamableHTTPServerTransport as Base

        class Lazy(Base):
            async def _handle_post_request(self) -> None:
                self._mine = 1
        """,
        child="""
        from base import Lazy

        class Lazier(Lazy):
            def __init__(self) -> None:
                self._task_group = None
        """,
    )
    assert found == {Access("base.py", "_handle_post_request"), Access("child.py", "_task_group")}


def test_an_sdk_private_reached_with_getattr_or_on_self_of_a_subclass_is_found() -> None:
    found = _scan(
        manager="""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        class Shared(StreamableHTTPSessionManager):
            def start(self, session: object) -> object:
                return self._task_group, getattr(session, "_connection")
        """
    )
    assert found == {Access("manager.py", "_task_group"), Access("manager.py", "_connection")}


def test_the_allowlist_format_is_enforced() -> None:
    entries = parse_allowlist(["# header", "", "a/b.py: _x  # because", "c.py: mcp.m._y.Z  # why"])
    assert entries == {Access("a/b.py", "_x"): "because", Access("c.py", "mcp.m._y.Z"): "why"}
    with pytest.raises(ValueError, match="line 1"):
        parse_allowlist(["a/b.py _x"])
    with pytest.raises(ValueError, match="line 2 repeats"):
        parse_allowlist(["a.py: _x  # one", "a.py: _x  # two"])
