"""The ``mcpServers`` conversion shared by ``toolmesh import`` and ``toolmesh up --config``, and the config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolmesh.contracts.connection_config import TransportType
from toolmesh.naming import SERVER_NAME_RE
from toolmesh.naming import normalize_server_name as normalize_name
from toolmesh_cli.client import Target, resolve_target
from toolmesh_cli.config_file import load_config, parse_config
from toolmesh_cli.datadir import DataDirLock
from toolmesh_cli.errors import CliError, ConfigError
from toolmesh_cli.mcp_servers import convert, url_transport

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("github", "github"),
        ("GitHub MCP", "github-mcp"),
        ("my.server (v2)", "my-server-v2"),
        ("under_score-ok", "under_score-ok"),
        ("9lives", "mcp-9lives"),
        ("_private", "mcp-_private"),
        ("Ünïcode Server", "unicode-server"),
        ("!!!", "server"),
        ("Server Card", "server-card-server"),
    ],
)
def test_normalize_name_follows_the_product_rule(raw: str, expected: str) -> None:
    assert normalize_name(raw) == expected
    assert SERVER_NAME_RE.match(normalize_name(raw))


def test_normalize_name_keeps_the_length_limit() -> None:
    assert len(normalize_name("a" * 300)) == 255


@pytest.mark.parametrize(
    ("url", "declared", "expected"),
    [
        ("https://h/sse", None, TransportType.SSE),
        ("https://h/v1/sse/", None, TransportType.SSE),
        ("https://h/mcp", None, TransportType.HTTP),
        ("https://h/sse-proxy/mcp", None, TransportType.HTTP),
        ("https://h/mcp", "sse", TransportType.SSE),
        ("https://h/sse", "http", TransportType.HTTP),
        ("https://h/x", "streamable-http", TransportType.HTTP),
        ("https://h/x", "streamableHttp", TransportType.HTTP),
    ],
)
def test_url_transport_detects_sse_and_streamable_http(url: str, declared: str | None, expected: TransportType) -> None:
    assert url_transport(url, declared) is expected


def test_url_transport_rejects_an_unknown_type() -> None:
    with pytest.raises(ValueError, match="websocket"):
        url_transport("https://h/x", "websocket")


def test_convert_builds_registration_bodies_per_transport() -> None:
    entries = convert(
        {
            "files": {"command": "npx", "args": ["-y", "server-files", 8080], "env": {"PORT": 8080}},
            "remote": {"url": "https://h/sse", "headers": {"Authorization": "Bearer t"}},
            "stream": {"url": "https://h/mcp", "type": "http", "description": "streamed", "disabled": True},
        }
    )
    files, remote, stream = (e.request for e in entries)
    assert files is not None and remote is not None and stream is not None
    assert files.transport_type is TransportType.STDIO
    assert files.connection_config == {
        "command": "npx",
        "args": ["-y", "server-files", "8080"],
        "env": {"PORT": "8080"},
    }
    assert remote.transport_type is TransportType.SSE
    assert remote.connection_config == {"url": "https://h/sse", "headers": {"Authorization": "Bearer t"}}
    assert stream.transport_type is TransportType.HTTP
    assert stream.connection_config == {"base_url": "https://h/mcp"}
    assert stream.description == "streamed" and stream.auto_connect is False


def test_convert_reports_renamed_entries() -> None:
    (entry,) = convert({"My Server": {"command": "x"}})
    assert entry.request is not None and entry.request.name == "my-server"
    assert entry.renamed and "'My Server'" in entry.label


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"args": ["x"]}, "needs 'command'"),
        ({"command": "x", "url": "https://h/sse"}, "both"),
        ({"command": "x", "type": "sse"}, "has a 'command'"),
        ({"url": "ftp://h/sse"}, "http(s) URL"),
        ({"command": "x", "args": "not-a-list"}, "'args' must be a list"),
        ({"url": "https://h/mcp", "headers": ["x"]}, "'headers' must be a mapping"),
        ("just a string", "must be an object"),
    ],
)
def test_convert_reports_invalid_entries_and_keeps_the_others(entry: object, problem: str) -> None:
    bad, good = convert({"bad": entry, "good": {"command": "ok"}})
    assert bad.request is None and bad.problem is not None and problem in bad.problem
    assert good.request is not None and good.problem is None


def test_convert_rejects_two_entries_that_normalize_to_one_name() -> None:
    first, second = convert({"My Server": {"command": "a"}, "my-server": {"command": "b"}})
    assert first.request is not None
    assert second.request is None and "used by another entry" in (second.problem or "")


def test_parse_config_accepts_servers_and_mcp_servers_together() -> None:
    config = parse_config(
        {
            "servers": [
                {
                    "name": "demo",
                    "transport_type": "STDIO",
                    "connection_config": {"command": "python", "args": ["demo.py"]},
                    "auto_connect": False,
                }
            ],
            "mcpServers": {"Remote": {"url": "https://h/sse"}},
        }
    )
    assert [s.name for s in config.servers] == ["demo", "remote"]
    assert config.servers[0].auto_connect is False
    assert config.notes == ["mcpServers.Remote: registered as 'remote'"]


def test_load_config_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "toolmesh.yaml"
    path.write_text(
        "servers:\n"
        "  - name: remote\n"
        "    transport_type: HTTP\n"
        "    connection_config: {base_url: 'https://h/mcp', headers: {X-Key: abc}}\n"
        "    health_check_url: https://h/health\n"
        "mcpServers:\n"
        "  files: {command: npx, args: [-y, server-files]}\n"
    )
    config = load_config(path)
    assert [(s.name, s.transport_type) for s in config.servers] == [
        ("remote", TransportType.HTTP),
        ("files", TransportType.STDIO),
    ]
    assert str(config.servers[0].health_check_url) == "https://h/health"


def test_empty_config_has_no_servers(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path).servers == []


def test_invalid_entries_are_all_reported_with_where_they_are() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {
                "servers": [
                    {"name": "Bad Name", "transport_type": "STDIO", "connection_config": {"command": "x"}},
                    {"name": "sse", "transport_type": "SSE", "connection_config": {}},
                    {"name": "extra", "transport_type": "STDIO", "connection_config": {"command": "x"}, "port": 1},
                    "not a mapping",
                    {"name": "ok", "transport_type": "STDIO", "connection_config": {"command": "x"}},
                    {"name": "ok", "transport_type": "STDIO", "connection_config": {"command": "y"}},
                ],
                "mcpServers": {"nothing": {}},
            }
        )
    problems = caught.value.problems
    assert len(problems) == 6
    assert problems[0].startswith("servers[0] (Bad Name): name:")
    assert problems[1] == "servers[1] (sse): connection_config.url: SSE transport requires 'url' in connection_config"
    assert problems[2].startswith("servers[2] (extra): port:")
    assert problems[3].startswith("servers[3]: must be a mapping")
    assert problems[4] == "servers[5] (ok): name 'ok' is used by another entry"
    assert problems[5].startswith("mcpServers.nothing: needs 'command'")
    assert "6 invalid server entries" in str(caught.value)


@pytest.mark.parametrize("document", [["a"], {"server": []}, {"servers": {"a": 1}}])
def test_config_with_the_wrong_shape_is_rejected(document: object) -> None:
    with pytest.raises(ConfigError):
        parse_config(document)


def test_config_that_is_not_yaml_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("servers: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_token_comes_from_option_then_env_then_data_dir(tmp_path: Path) -> None:
    (tmp_path / "admin-token").write_text("from-file\n")
    env = {"TOOLMESH_DATA_DIR": str(tmp_path)}
    assert resolve_target(None, "from-option", env).token == "from-option"
    assert resolve_target(None, None, {**env, "TOOLMESH_ADMIN_TOKEN": "from-env"}).token == "from-env"
    target = resolve_target("http://127.0.0.1:8081", None, env)
    assert (target.url, target.token) == ("http://127.0.0.1:8081", "from-file")
    assert resolve_target("http://h:1/", None, {"TOOLMESH_DATA_DIR": str(tmp_path / "none")}).token is None
    assert resolve_target(None, None, {"TOOLMESH_URL": "http://h:2"}).url == "http://h:2"


def test_url_comes_from_option_then_env_then_the_running_toolmesh_up(tmp_path: Path) -> None:
    """``toolmesh up --port 9000``: the CLI of the same data dir finds it there, as it finds the token."""
    env = {"TOOLMESH_DATA_DIR": str(tmp_path)}
    assert resolve_target(None, None, env).url == "http://127.0.0.1:8081"  # nothing running
    (tmp_path / "endpoints.json").write_text('{"http": "http://127.0.0.1:9000", "pid": 1}\n')
    lock = DataDirLock(tmp_path)
    lock.acquire()
    try:
        assert resolve_target(None, None, env).url == "http://127.0.0.1:9000"
        assert resolve_target(None, None, {**env, "TOOLMESH_URL": "http://h:2"}).url == "http://h:2"
        assert resolve_target("http://h:1/", None, env).url == "http://h:1"
        (tmp_path / "endpoints.json").write_text("{not json")
        assert resolve_target(None, None, env).url == "http://127.0.0.1:8081"
    finally:
        lock.release()


def test_the_data_dirs_token_goes_only_to_the_toolmesh_up_running_there(tmp_path: Path) -> None:
    """Attack: ``toolmesh up`` is stopped (or was killed and left its endpoints.json); a local process of
    another user listens on 127.0.0.1:8081. The CLI sent it ``<data dir>/admin-token``, the owner token."""
    (tmp_path / "admin-token").write_text("owner\n")
    env = {"TOOLMESH_DATA_DIR": str(tmp_path)}
    with pytest.raises(CliError, match="toolmesh up is not running on"):
        resolve_target(None, None, env)
    (tmp_path / "endpoints.json").write_text('{"http": "http://127.0.0.1:9000"}')  # left by a killed run
    with pytest.raises(CliError, match="toolmesh up is not running on"):
        resolve_target(None, None, env)
    lock = DataDirLock(tmp_path)
    lock.acquire()
    try:
        assert resolve_target(None, None, env) == Target(
            "http://127.0.0.1:9000", "owner", str(tmp_path / "admin-token")
        )
    finally:
        lock.release()
    named = resolve_target("http://h:1", None, env)  # a URL the user names gets the token as before
    assert (named.url, named.token) == ("http://h:1", "owner")
    assert resolve_target(None, None, {**env, "TOOLMESH_ADMIN_TOKEN": "t"}).url == "http://127.0.0.1:8081"
    with pytest.raises(CliError, match="toolmesh up is not running on"):  # the README's export of that file
        resolve_target(None, None, {**env, "TOOLMESH_ADMIN_TOKEN": "owner"})
