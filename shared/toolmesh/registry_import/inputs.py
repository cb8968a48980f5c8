"""The inputs a registry ``server.json`` declares, and their values.

An environment variable, a header, an argument or a ``{variable}`` of a template is an *input*
(the registry's ``Input``): a fixed ``value`` (a template whose ``{name}`` parts come from its
``variables``), or a value the user gives, with ``default``, ``isRequired``, ``isSecret``,
``choices`` and ``format``. Each user-facing input has a name: an environment variable's or
header's ``name``, a named argument's flag without its dashes (``--port`` -> ``port``), a positional
argument's ``valueHint``, a variable's key. The same name declared twice shares one value.

Every string of the document is untrusted: one that references a host variable (``${VAR}``, which
toolmesh expands in a server's config) is refused, so an entry cannot read the gateway's environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote

from toolmesh.credentials import variable_references
from toolmesh.errors import RegistryEntryRefused

FORMATS = ("string", "number", "boolean", "filepath")
_TEMPLATE = re.compile(r"\{([^{}]+)\}")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@dataclass(frozen=True)
class InputSpec:
    """One input the user may (or must) give a value for."""

    name: str
    kind: str
    """``env``, ``header``, ``argument`` or ``variable``."""
    description: str = ""
    required: bool = False
    secret: bool = False
    default: str | None = None
    choices: tuple[str, ...] = ()
    format: str = "string"
    placeholder: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready fields."""
        return {**asdict(self), "choices": list(self.choices)}

    def problem(self, value: str) -> str | None:
        """Why ``value`` does not fit this input, else None."""
        if self.choices and value not in self.choices:
            return f"input {self.name!r} must be one of {', '.join(self.choices)}"
        if self.format == "number" and not _NUMBER.match(value):
            return f"input {self.name!r} must be a number"
        if self.format == "boolean" and value not in ("true", "false"):
            return f"input {self.name!r} must be true or false"
        return None


def document_text(value: Any, where: str) -> str:
    """A string of the document; refused when it is not one or references a host variable."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise RegistryEntryRefused(f"{where} must be a string")
    text = str(value)
    if names := variable_references(text):
        raise RegistryEntryRefused(
            f"{where} references the host variable ${{{names[0]}}}; a registry entry may not read "
            "the gateway's environment"
        )
    return text


def _flag(value: Any, key: str) -> bool:
    return value.get(key) is True if isinstance(value, Mapping) else False


@dataclass
class Inputs:
    """Resolves the inputs of one entry from ``values`` (what the user gave), recording every input
    met (``specs``) and the required ones without a value (``missing``)."""

    values: Mapping[str, str]
    specs: dict[str, InputSpec] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def declare(self, name: str, item: Mapping[str, Any], kind: str, where: str) -> InputSpec:
        """The spec of input ``name`` (the first declaration wins when it is declared twice)."""
        if name in self.specs:
            return self.specs[name]
        choices = item.get("choices") or []
        if not isinstance(choices, list):
            raise RegistryEntryRefused(f"{where}: 'choices' must be a list of strings")
        fmt = str(item.get("format") or "string")
        if fmt not in FORMATS:
            raise RegistryEntryRefused(f"{where}: unknown format {fmt!r} (known: {', '.join(FORMATS)})")
        default = item.get("default")
        spec = InputSpec(
            name=name,
            kind=kind,
            description=str(item.get("description") or ""),
            required=_flag(item, "isRequired"),
            secret=_flag(item, "isSecret"),
            default=None if default is None else document_text(default, f"{where}: 'default'"),
            choices=tuple(document_text(c, f"{where}: a choice") for c in choices),
            format=fmt,
            placeholder=str(item["placeholder"]) if item.get("placeholder") is not None else None,
        )
        self.specs[name] = spec
        return spec

    def value_of(self, name: str | None, item: Any, kind: str, where: str, *, in_url: bool = False) -> str | None:
        """The value of one input: its fixed ``value`` template filled in, else the user's value or
        the default; None when an optional input has none (a required one is noted as missing)."""
        if not isinstance(item, Mapping):
            raise RegistryEntryRefused(f"{where} must be an object")
        if item.get("value") is not None:
            template = document_text(item["value"], f"{where}: 'value'")
            return self.fill(template, item.get("variables"), where, in_url=in_url)
        if name is None:
            raise RegistryEntryRefused(f"{where} has neither a 'value' nor a name to ask a value for")
        spec = self.declare(name, item, kind, where)
        value = self.values.get(name, spec.default)
        if value is None:
            if spec.required and name not in self.missing:
                self.missing.append(name)
            return None
        if problem := spec.problem(value):
            raise RegistryEntryRefused(problem)
        return value

    def fill(self, template: str, variables: Any, where: str, *, in_url: bool = False) -> str:
        """``template`` with each ``{name}`` of ``variables`` replaced by that variable's value
        (percent-encoded in a URL, so a value cannot change its host or path); other braces stay."""
        if variables is None:
            variables = {}
        if not isinstance(variables, Mapping):
            raise RegistryEntryRefused(f"{where}: 'variables' must be an object")

        def replace(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in variables:
                return match.group(0)
            value = self.value_of(key, variables[key], "variable", f"{where}: variable {key!r}")
            if value is None:
                return ""
            return quote(value, safe="") if in_url else value

        return _TEMPLATE.sub(replace, template)

    def secrets_within(self, texts: list[str]) -> list[str]:
        """The secret inputs whose value appears in ``texts`` (a command line, where nothing is sealed)."""
        found = []
        for spec in self.specs.values():
            value = self.values.get(spec.name, spec.default)
            if spec.secret and value and any(value in text for text in texts):
                found.append(spec.name)
        return found

    def unknown(self) -> list[str]:
        """Names the user gave a value for that this entry does not declare."""
        return sorted(set(self.values) - set(self.specs))
