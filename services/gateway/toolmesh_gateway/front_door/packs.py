"""Packs of code mode, as plain functions: which name is which pack, which method is which tool.

A *pack* is a name a ``run()`` snippet calls tools through, ``pack.tool(arg=...)``. Every
registered server is a pack under its name (``-`` becomes ``_``, so ``my-server`` is ``my_server``).
*Local packs* are toolmesh's own: ``proxy`` (``list_servers()``, ``list_tools(server=...)``) and
``toolmesh`` (``search(query, limit=10, server_filter=None)``). A local pack wins over a server
with the same name; that server's tools stay reachable through ``/mcp`` and ``call_tool``.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Iterable
from typing import Any

from pydantic_core import to_jsonable_python

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


MAX_ARGUMENT_ITEMS = 100_000
"""How many values (scalars, lists, dicts, keys) one pack call's arguments may hold."""
_MAX_INT_BITS = 4300 * 3  # under the digits Python's int <-> str conversion accepts (4300)


class ArgumentRefused(ValueError):
    """Arguments a pack call cannot carry as a JSON body: the reason, without the ``call()`` prefix."""


def json_arguments(arguments: dict[str, Any], max_bytes: int, max_depth: int) -> dict[str, Any]:
    """``arguments`` as JSON-ready values, converted with a budget: refused (``ArgumentRefused``) as
    soon as they hold more than ``MAX_ARGUMENT_ITEMS`` values, would encode to more than ``max_bytes``,
    nest deeper than ``max_depth``, or hold something JSON has no form for (a pack, bytes, a set, an
    integer too long to write, NaN). The work stops at the first refusal, however large the input."""
    converted: dict[str, Any] = _bounded(arguments, max_bytes, max_depth, lenient=False)
    return converted


def json_result(value: Any, max_bytes: int, max_depth: int) -> Any:
    """A run's result as JSON-ready values, with the budget of ``json_arguments``; what JSON has no
    form for becomes its ``repr`` (a set a list), and only the budget refuses (``ArgumentRefused``)."""
    return _bounded(value, max_bytes, max_depth, lenient=True)


def _bounded(value: Any, max_bytes: int, max_depth: int, *, lenient: bool) -> Any:
    budget = [MAX_ARGUMENT_ITEMS, max_bytes]
    pending: list[tuple[Any, Any, Any, str, int]] = []
    holder: list[Any] = [None]
    _open(budget, [value], "", 0, pending, holder)
    while pending:
        parent, slot, item, where, depth = pending.pop()
        here = _path(where, slot) if depth else "result"
        if lenient and isinstance(item, set | frozenset):
            item = list(item)
        if isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                raise ArgumentRefused(f"{'the result' if lenient else 'arguments'} nest deeper than {max_depth} levels")
            copy: Any = _open(budget, item, here if depth else "", depth + 1, pending)
        else:
            copy = _scalar(item, here, lenient)
            _charge(budget, 0, _scalar_size(copy, here), here)  # counted with its container
        parent[slot] = copy
    return holder[0]


def _open(
    budget: list[int],
    value: Any,
    where: str,
    depth: int,
    pending: list[tuple[Any, Any, Any, str, int]],
    copy: Any = None,
) -> Any:
    """An empty copy of a container (or ``copy``), its keys charged and its members queued to fill it;
    refused before anything is copied when it alone holds more members than the budget has left."""
    _charge(budget, len(value), 2 + len(value), where)
    if copy is None:
        copy = {} if isinstance(value, dict) else [None] * len(value)
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ArgumentRefused(f"{where or 'arguments'}: object keys must be strings, not {type(key).__name__}")
            _charge(budget, 0, _text_size(key, where) + 3, where)
            pending.append((copy, key, value[key], where, depth))
    else:
        pending.extend((copy, i, item, where, depth) for i, item in enumerate(value))
    return copy


def _path(where: str, slot: Any) -> str:
    if isinstance(slot, int):
        return f"{where}[{slot}]"
    key = slot if len(slot) <= 40 else slot[:40] + "..."
    return f"{where}.{key}" if where else key


def _charge(budget: list[int], items: int, size: int, where: str) -> None:
    budget[0] -= items
    budget[1] -= size
    if budget[0] < 0:
        raise ArgumentRefused(f"{where or 'all'}: more than {MAX_ARGUMENT_ITEMS} values in all")
    if budget[1] < 0:
        raise ArgumentRefused(f"{where or 'all'}: larger than the request body limit in all")


def _scalar(value: Any, where: str, lenient: bool = False) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int) and value.bit_length() <= _MAX_INT_BITS:
        return int(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    if lenient and isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else f"<integer of {value.bit_length()} bits>"
    if lenient:
        return to_jsonable_python(value, fallback=repr)  # bytes as text, anything else its repr
    if isinstance(value, int):
        raise ArgumentRefused(f"{where}: integer too long for JSON")
    if isinstance(value, float):
        raise ArgumentRefused(f"{where}: {value!r} is not a JSON number")
    raise ArgumentRefused(f"{where}: a value of type {type(value).__name__} has no JSON form")


def _scalar_size(value: Any, where: str) -> int:
    if isinstance(value, str):
        return _text_size(value, where) + 2
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() // 3 + 2
    return 5 if value is None or isinstance(value, bool) else 24


def _text_size(text: str, where: str) -> int:
    """UTF-8 size of ``text`` (at least: escapes add more); a lone surrogate has none."""
    try:
        return len(text.encode())
    except UnicodeEncodeError:
        raise ArgumentRefused(f"{where}: text with a lone surrogate is not valid UTF-8") from None
