"""The text of a tool, prompt or resource template, as ``(field path, text, is_name)`` pieces to scan."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 12
_SCHEMA_TEXT = ("description", "title", "$comment", "default", "const", "examples", "enum", "pattern")
_SCHEMA_NESTED = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_CHILD = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


@dataclass(frozen=True)
class Piece:
    """One text of a definition: where it is, the text, and whether it is a name (of the item, a
    parameter or a placeholder) rather than prose."""

    field: str
    text: str
    is_name: bool = False


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)


def schema_pieces(schema: Any, path: str, depth: int = 0) -> Iterator[Piece]:
    """Every property name and every text (descriptions, titles, defaults, enums, examples) of a JSON
    schema, nested ones included (``MAX_DEPTH`` levels)."""
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return
    for key in _SCHEMA_TEXT:
        if key in schema:
            for text in _strings(schema[key]):
                yield Piece(f"{path}.{key}", text)
    for key in _SCHEMA_NESTED:
        nested = schema.get(key)
        if isinstance(nested, Mapping):
            for name, child in nested.items():
                yield Piece(f"{path}.{key}.{name}", str(name), is_name=True)
                yield from schema_pieces(child, f"{path}.{key}.{name}", depth + 1)
    for key in _SCHEMA_CHILD:
        yield from schema_pieces(schema.get(key), f"{path}.{key}", depth + 1)
    for key in _SCHEMA_LISTS:
        for i, child in enumerate(schema.get(key) or () if isinstance(schema.get(key), list) else ()):
            yield from schema_pieces(child, f"{path}.{key}[{i}]", depth + 1)
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str):
                yield Piece(f"{path}.required", name, is_name=True)


def _text(item: Mapping[str, Any], key: str) -> Iterator[Piece]:
    value = item.get(key)
    if isinstance(value, str) and value:
        yield Piece(key, value)


def tool_pieces(tool: Mapping[str, Any]) -> Iterator[Piece]:
    """A tool in its wire form: name, title, description, annotation title, input and output schema."""
    yield Piece("name", str(tool.get("name", "")), is_name=True)
    yield from _text(tool, "title")
    yield from _text(tool, "description")
    annotations = tool.get("annotations")
    if isinstance(annotations, Mapping) and isinstance(annotations.get("title"), str):
        yield Piece("annotations.title", annotations["title"])
    yield from schema_pieces(tool.get("inputSchema"), "inputSchema")
    yield from schema_pieces(tool.get("outputSchema"), "outputSchema")


def prompt_pieces(prompt: Mapping[str, Any]) -> Iterator[Piece]:
    """A prompt in its wire form: name, title, description, and each argument's name, title, description."""
    yield Piece("name", str(prompt.get("name", "")), is_name=True)
    yield from _text(prompt, "title")
    yield from _text(prompt, "description")
    arguments = prompt.get("arguments")
    for i, argument in enumerate(arguments if isinstance(arguments, list) else []):
        if isinstance(argument, Mapping):
            yield Piece(f"arguments[{i}].name", str(argument.get("name", "")), is_name=True)
            for key in ("title", "description"):
                for piece in _text(argument, key):
                    yield Piece(f"arguments[{i}].{key}", piece.text)


def template_pieces(template: Mapping[str, Any]) -> Iterator[Piece]:
    """A resource template in its wire form: name, title, description, and its URI template (whose
    ``{placeholders}`` are names)."""
    yield Piece("name", str(template.get("name", "")), is_name=True)
    yield from _text(template, "title")
    yield from _text(template, "description")
    uri = str(template.get("uriTemplate", ""))
    yield Piece("uriTemplate", uri)
    for name in _placeholders(uri):
        yield Piece("uriTemplate", name, is_name=True)


def resource_pieces(resource: Mapping[str, Any]) -> Iterator[Piece]:
    """A fixed resource of ``resources/list``: name, title, description (its URI names data, not prose)."""
    yield Piece("name", str(resource.get("name", "")), is_name=True)
    yield from _text(resource, "title")
    yield from _text(resource, "description")


SCANNED_CHARS = 65_536
"""How much text of a tool result, or of a server's instructions, is scanned (the first characters)."""


def result_pieces(result: Mapping[str, Any], budget: int = SCANNED_CHARS) -> Iterator[Piece]:
    """A tool result's text: each text content item, each embedded text resource, and the strings of its
    ``structuredContent``, up to ``budget`` characters in all (nothing past them is walked)."""
    for field, text in _result_texts(result):
        if budget <= 0:
            return
        yield Piece(field, text[:budget])
        budget -= len(text)


def _result_texts(result: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    content = result.get("content")
    for i, item in enumerate(content if isinstance(content, list) else []):
        if isinstance(item, Mapping):
            resource = item.get("resource")
            text = item.get("text") if item.get("type") == "text" else None
            if isinstance(resource, Mapping):
                text = resource.get("text")
            if isinstance(text, str):
                yield f"content[{i}]", text
    for text in _strings(result.get("structuredContent")):
        yield "structuredContent", text


def _placeholders(uri: str) -> list[str]:
    names: list[str] = []
    rest = uri
    while "{" in rest and "}" in rest.split("{", 1)[1]:
        inner, rest = rest.split("{", 1)[1].split("}", 1)
        names.extend(n.strip("+#./;?&*") for n in inner.split(","))
    return [n for n in names if n]


def parameter_names(tool: Mapping[str, Any]) -> set[str]:
    """Every property name of a tool's input schema (nested too), or of a prompt's arguments."""
    pieces = tool_pieces(tool) if "inputSchema" in tool else prompt_pieces(tool)
    return {p.text for p in pieces if p.is_name and p.field != "name"}
