"""Removal of fields from a tool's result (the ``redact`` effect).

A field path is a key, dotted for nesting (``owner.email``); through a list it applies to every
element (``items.email``). It is removed from ``structuredContent`` and from every text content
item whose text is a JSON object or array; other text is left as it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def redact_result(result: dict[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """``result`` (an MCP ``CallToolResult`` as a dict) without the fields at ``paths``."""
    if not paths:
        return result
    split = [path.split(".") for path in paths]
    redacted = dict(result)
    if isinstance(result.get("structuredContent"), dict | list):
        redacted["structuredContent"] = _without(result["structuredContent"], split)
    content = result.get("content")
    if isinstance(content, list):
        redacted["content"] = [_text_without(item, split) for item in content]
    return redacted


def _text_without(item: Any, paths: list[list[str]]) -> Any:
    if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
        return item
    text = item["text"]
    if not text.lstrip().startswith(("{", "[")):
        return item
    try:
        parsed = json.loads(text)
    except ValueError:
        return item
    return {**item, "text": json.dumps(_without(parsed, paths), ensure_ascii=False)}


def _without(value: Any, paths: list[list[str]]) -> Any:
    for path in paths:
        value = _drop(value, path)
    return value


def _drop(value: Any, path: list[str]) -> Any:
    if isinstance(value, list):
        return [_drop(item, path) for item in value]
    if not isinstance(value, dict) or path[0] not in value:
        return value
    if len(path) == 1:
        return {k: v for k, v in value.items() if k != path[0]}
    return {**value, path[0]: _drop(value[path[0]], path[1:])}
