"""Terminal output of the CLI: tables that pipes can parse, coloured statuses on a terminal, and
the per-server progress of ``import`` / ``up --config``."""

from __future__ import annotations

import io

from rich.console import Console

from toolmesh_cli.import_command import _names
from toolmesh_cli.mcp_servers import convert
from toolmesh_cli.progress import ServerProgress
from toolmesh_cli.tables import console, table

LONG = "a description that goes on " * 12


def _piped(renderable: object) -> str:
    out = io.StringIO()
    console(out).print(renderable)
    return out.getvalue()


def _terminal(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="standard", width=200).print(renderable)
    return out.getvalue()


def test_a_piped_table_is_plain_columns_one_line_per_row() -> None:
    text = _piped(table(("NAME", "STATUS", "DESCRIPTION"), [("demo", "ERROR", LONG), ("other", None, "x")]))
    lines = text.splitlines()
    assert "\x1b[" not in text
    assert len(lines) == 3
    assert lines[0].split() == ["NAME", "STATUS", "DESCRIPTION"]
    assert lines[1].split()[:2] == ["demo", "ERROR"] and lines[1].rstrip().endswith(LONG.strip())
    assert lines[2].split() == ["other", "-", "x"]


def test_statuses_are_coloured_on_a_terminal() -> None:
    text = _terminal(table(("NAME", "STATUS"), [("a", "ERROR"), ("b", "CONNECTED"), ("c", "NEW")]))
    assert "\x1b[1;31mERROR" in text
    assert "\x1b[32mCONNECTED" in text


def test_progress_tells_how_each_server_ended() -> None:
    quiet = Console(file=io.StringIO())
    progress = ServerProgress(["up", "broken", "refused", "slow"], out=quiet)
    with progress:
        progress.registered("up", {"id": "1", "transport_type": "STDIO", "status": "CONNECTING"}, "added up")
        progress.registered("broken", {"id": "2", "transport_type": "STDIO", "status": "CONNECTING"}, "added")
        progress.registered("slow", {"id": "3", "transport_type": "HTTP", "status": "CONNECTING"}, "added")
        progress.failed("refused", "Server already exists", "failed refused")
        assert progress.pending() == ["up", "broken", "slow"]
        progress.status("up", "CONNECTED", 11)
        progress.status("broken", "ERROR", 0, "No such file or directory")
    assert progress.pending() == ["slow"]
    results = {n: (o.result, o.status, o.tools, o.problem) for n, o in progress.outcomes.items()}
    assert results == {
        "up": ("ok", "CONNECTED", 11, None),
        "broken": ("failed", "ERROR", 0, "No such file or directory"),
        "refused": ("failed", None, 0, "Server already exists"),
        "slow": ("ok", "CONNECTING", 0, None),
    }
    rows = [line.split()[:3] for line in _piped(progress.summary()).splitlines()[1:]]
    assert rows == [
        ["up", "ok", "CONNECTED"],
        ["broken", "failed", "ERROR"],
        ["refused", "failed", "-"],
        ["slow", "ok", "CONNECTING"],
    ]


def test_progress_lines_go_to_the_console_and_problems_to_stderr_when_piped(capsys: object) -> None:
    out = io.StringIO()
    progress = ServerProgress(["a"], out=console(out))
    progress.say("added a")
    progress.say("failed b: why", error=True)
    assert out.getvalue() == "added a\n"
    assert "failed b: why" in capsys.readouterr().err  # type: ignore[attr-defined]


def test_import_names_every_entry_once() -> None:
    entries = convert({"Demo": {"command": "x"}, "demo": {"command": "y"}, "empty": {}})
    assert _names(entries) == ["demo", "demo (2)", "empty"]
