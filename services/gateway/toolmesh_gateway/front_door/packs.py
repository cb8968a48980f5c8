"""Packs of code mode, as plain functions: which name is which pack, which method is which tool.

A *pack* is a name a ``run()`` snippet calls tools through, ``pack.tool(arg=...)``. Every
registered server is a pack under its name (``-`` becomes ``_``, so ``my-server`` is ``my_server``).
*Local packs* are toolmesh's own: ``proxy`` (``list_servers()``, ``list_tools(server=...)``) and
``toolmesh`` (``search(query, limit=10, server_filter=None)``). A local pack wins over a server
with the same name; that server's tools stay reachable through ``/mcp`` and ``call_tool``.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable

LOCAL_PACKS: dict[str, tuple[str, ...]] = {
    "proxy": ("list_servers", "list_tools"),
    "toolmesh": ("search",),
}


def identifier(name: str) -> str:
    """The Python identifier a server or tool name is called by (``-`` and ``.`` become ``_``)."""
    return name.replace("-", "_").replace(".", "_")


def server_packs(server_names: Iterable[str]) -> dict[str, str]:
    """Pack name -> server name, without local packs' names and names that are not identifiers.

    When two servers map to one identifier (``a-b`` and ``a_b``), the one spelled that way wins.
    """
    packs: dict[str, str] = {}
    for name in sorted(server_names, key=lambda n: (identifier(n) != n, n)):
        pack = identifier(name)
        if pack in LOCAL_PACKS or pack in packs or not pack.isidentifier() or keyword.iskeyword(pack):
            continue
        packs[pack] = name
    return packs


def match_tool(method: str, tools: Iterable[str]) -> str | None:
    """The tool a method name means: the exact name, else the one tool whose identifier it is."""
    names = list(tools)
    if method in names:
        return method
    matches = [name for name in names if identifier(name) == method]
    return matches[0] if len(matches) == 1 else None


def unknown_pack_message(name: str, packs: Iterable[str]) -> str:
    """The error of ``unknown.tool()``: what packs there are."""
    return f"name '{name}' is not defined; available packs: {', '.join(sorted(packs)) or '(none)'}"


def unknown_tool_message(pack: str, method: str, tools: Iterable[str]) -> str:
    """The error of ``pack.unknown()``: what tools the pack has."""
    return f"pack '{pack}' has no tool '{method}'; available tools: {', '.join(sorted(tools)) or '(none)'}"
