"""``toolmesh import`` of MCP Registry documents: ``--input`` flags, asking on a terminal, lists."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from toolmesh.registry_import.inputs import InputSpec
from toolmesh_cli.errors import ConfigError
from toolmesh_cli.import_command import import_entries
from toolmesh_cli.registry_entries import Choice, ask_on_terminal, convert_registry, parse_inputs, read_document

pytestmark = pytest.mark.unit


def server(name: str, **package: Any) -> dict[str, Any]:
    return {
        "name": f"io.github.example/{name}",
        "description": name,
        "packages": [
            {
                "registryType": "pypi",
                "identifier": f"{name}-mcp",
                "version": "1.0",
                "transport": {"type": "stdio"},
                **package,
            }
        ],
    }


SECRET_ENV = {"environmentVariables": [{"name": "TOKEN", "isRequired": True, "isSecret": True}]}


def test_input_flags_are_name_value_pairs() -> None:
    assert parse_inputs(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(ConfigError, match="expected NAME=VALUE"):
        parse_inputs(["A"])


def test_required_inputs_without_a_value_are_asked_and_given_ones_are_not() -> None:
    asked: list[InputSpec] = []

    def ask(spec: InputSpec) -> str | None:
        asked.append(spec)
        return "typed"

    document = server("weather", **SECRET_ENV, packageArguments=[{"type": "named", "name": "--units", "default": "c"}])
    (entry,), _ = convert_registry(document, Choice({}), ask)
    assert [(s.name, s.secret) for s in asked] == [("TOKEN", True)]  # the default of --units is not asked
    assert entry.request is not None and entry.request.connection_config["env"] == {"TOKEN": "typed"}
    asked.clear()
    convert_registry(document, Choice({"TOKEN": "given"}), ask)
    assert asked == []


def test_without_a_terminal_a_missing_input_refuses_the_entry_naming_it() -> None:
    (entry,), _ = convert_registry(server("weather", **SECRET_ENV), Choice({}), None)
    assert entry.request is None and entry.problem == "io.github.example/weather needs a value for TOKEN"


def test_a_list_page_converts_each_entry_and_gives_each_only_its_inputs() -> None:
    page = {
        "servers": [{"server": server("weather", **SECRET_ENV)}, {"server": server("maps")}, {"server": server("maps")}]
    }
    entries, warnings = convert_registry(page, Choice({"TOKEN": "t", "TYPO": "1"}), None)
    assert [e.request.name if e.request else e.problem for e in entries] == [
        "weather",
        "maps",
        "name 'maps' is used by another entry",
    ]
    assert "--input TYPO: no entry of the document declares such an input" in warnings
    with pytest.raises(ConfigError, match="--name names one server; the document holds 3"):
        convert_registry(page, Choice({}, name="x"), None)


def test_a_runtime_missing_here_is_a_warning_not_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    (entry,), warnings = convert_registry(server("weather", runtimeHint="uvx"), Choice({}), None)
    assert entry.request is not None
    assert warnings == [
        "io.github.example/weather: uvx is not on this machine's PATH; the session worker that runs the server needs it"
    ]
    oci = {
        "name": "io.x/img",
        "packages": [{"registryType": "oci", "identifier": "example/img:1", "runtimeHint": "podman"}],
    }
    (entry,), warnings = convert_registry(oci, Choice({}), None)
    assert entry.request is not None and entry.request.connection_config["command"] == "podman"


def test_a_document_of_no_known_shape_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"expected a registry server\.json"):
        convert_registry({"servers": {}}, Choice({}), None)
    path = tmp_path / "server.json"
    path.write_text(json.dumps(server("weather")))
    assert read_document(str(path))["name"] == "io.github.example/weather"
    path.write_text("{nope")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        read_document(str(path))


def _args(path: Path, **flags: Any) -> argparse.Namespace:
    defaults = {"input": None, "package": None, "remote": None, "name": None, "json": True}
    return argparse.Namespace(file=str(path), **{**defaults, **flags})


def test_import_tells_a_desktop_config_from_a_registry_document(tmp_path: Path) -> None:
    desktop = tmp_path / "desktop.json"
    desktop.write_text(json.dumps({"mcpServers": {"files": {"command": "npx", "args": ["-y", "files"]}}}))
    (entry,) = import_entries(_args(desktop))
    assert entry.request is not None and entry.request.name == "files"
    with pytest.raises(ConfigError, match="apply to MCP Registry documents only"):
        import_entries(_args(desktop, input=["A=1"]))
    registry = tmp_path / "server.json"
    registry.write_text(json.dumps({"server": server("weather")}))
    (entry,) = import_entries(_args(registry, name="forecast"))
    assert entry.request is not None and entry.request.name == "forecast"
    neither = tmp_path / "other.json"
    neither.write_text(json.dumps({"tools": []}))
    with pytest.raises(ConfigError, match=r"expected an object with \"mcpServers\", or an MCP Registry server\.json"):
        import_entries(_args(neither))


def test_an_entry_cannot_send_escape_sequences_to_the_terminal_that_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    prompts: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt: prompts.append(prompt) or "v")
    spec = InputSpec(name="key\x1b]52;c;ZXZpbA==\x07", kind="env", description="\x1b[2J\x1b[Hcleared\u009b31m")
    assert ask_on_terminal(spec) == "v"
    assert prompts == ["key?]52;c;ZXZpbA==? (?[2J?[Hcleared?31m): "]
    hostile = {
        "name": "io.github.x/\x1b[2Jw",
        "packages": [
            {
                "registryType": "npm",
                "identifier": "w",
                "transport": {"type": "stdio"},
                "environmentVariables": [
                    {"name": "K", "value": "{\x1b]0;t\x07}", "variables": {"\x1b]0;t\x07": {"isRequired": True}}}
                ],
            }
        ],
    }
    [entry], _ = convert_registry(hostile, Choice({}), None)
    assert entry.source_name == "io.github.x/?[2Jw"
    assert entry.problem is not None and "\x1b" not in entry.problem and "\x07" not in entry.problem
