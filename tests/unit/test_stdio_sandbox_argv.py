"""The bubblewrap command line of a STDIO child: what it shares with the host and what it may not."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from toolmesh.contracts.sandbox import StdioSandbox
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.platform.config import Settings
from toolmesh.sandbox import runner as sandbox
from toolmesh.sandbox.argv import (
    SANDBOX_HOME,
    Placement,
    argument_paths,
    bwrap_argv,
    bwrap_options,
    encode_options,
    path_problem,
    resource_limits,
    runtime_paths,
    sandboxed_command,
)
from toolmesh.sandbox.homes import homes_dir


def _pairs(argv: list[str], option: str) -> list[str]:
    """The first operand of every ``option`` in ``argv``."""
    return [argv[i + 1] for i, word in enumerate(argv) if word == option]


def _fd_pairs(argv: list[str], option: str) -> list[tuple[str, str]]:
    """The two operands of every ``option`` in ``argv``."""
    return [(argv[i + 1], argv[i + 2]) for i, word in enumerate(argv) if word == option]


def _options(launch: sandbox.Launch) -> list[str]:
    """The options a launch hands bubblewrap through ``--args``."""
    assert launch.argv[1] == "--args"
    data = os.pread(int(launch.argv[2]), 1 << 20, 0)
    assert data.endswith(b"\0")
    return data[:-1].decode().split("\0")


def test_every_child_gets_its_own_namespaces_proc_dev_and_tmp(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    place = Placement(command=["/usr/bin/env", "true"], home=str(tmp_path / "home"))
    argv = bwrap_options(StdioSandbox(), settings, place)
    for option in ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"):
        assert option in argv
    assert _pairs(argv, "--proc") == ["/proc"] and _pairs(argv, "--dev") == ["/dev"]
    assert _pairs(argv, "--tmpfs") == ["/tmp"]
    assert "--unshare-net" not in argv  # network on unless the config says off
    assert argv[argv.index("--bind", argv.index("--tmpfs")) + 2] == SANDBOX_HOME
    assert "--" not in argv and "/usr/bin/env" not in argv  # the command follows them on bwrap's own line
    assert not any(str(settings.data_dir) in word for word in argv)
    # bubblewrap's own line (the child's PID 1's cmdline) names only the descriptor and the command.
    argv, directory = bwrap_argv("/opt/bubblewrap/bwrap", 7, place)
    assert (argv, directory) == (["./bwrap", "--args", "7", "--", "/usr/bin/env", "true"], "/opt/bubblewrap")


def test_network_off_unshares_the_network(tmp_path: Path) -> None:
    place = Placement(command=["/bin/true"], home=str(tmp_path))
    argv = bwrap_options(StdioSandbox(network=False), Settings(data_dir=tmp_path / "d"), place)
    assert "--unshare-net" in argv


def test_only_declared_paths_are_bound_read_only_or_writable(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d", stdio_sandbox_paths_read_only=("/opt/shared",))
    declared = StdioSandbox(paths_read_only=["/srv/ro"], paths_read_write=["/srv/rw"])
    fds = {"/opt/venv": 5, "/opt/shared": 6, "/srv/ro": 7, "/srv/work": 8, "/srv/rw": 9}
    place = Placement(command=["/bin/true"], home="/h", runtime=["/opt/venv"], cwd="/srv/work", fds=fds)
    argv = bwrap_options(declared, settings, place)
    # Host paths are bound from the descriptors they were checked on, never by name again.
    assert _fd_pairs(argv, "--ro-bind-fd") == [
        ("5", "/opt/venv"),
        ("6", "/opt/shared"),
        ("7", "/srv/ro"),
        ("8", "/srv/work"),
    ]
    assert _fd_pairs(argv, "--bind-fd") == [("9", "/srv/rw")]
    assert _pairs(argv, "--ro-bind") == []
    assert _pairs(argv, "--bind") == ["/h"]
    assert _pairs(argv, "--chdir") == ["/srv/work"]
    # Directories above the binds are made reachable (0755), never bound from the host.
    assert {"/opt", "/srv", "/home"} <= set(_pairs(argv, "--dir"))


def test_a_host_path_without_an_open_descriptor_is_never_bound_by_name(tmp_path: Path) -> None:
    """Attack: a path checked by name and bound by name later can be swapped in between."""
    declared = StdioSandbox(paths_read_only=["/srv/ro"])
    with pytest.raises(ValueError, match="without an open descriptor"):
        bwrap_options(declared, Settings(data_dir=tmp_path), Placement(command=["/bin/true"], home="/h"))


def test_directories_above_a_path_under_tmp_are_reachable(tmp_path: Path) -> None:
    """bubblewrap makes missing parents 0700: a child with its own uid could not reach /tmp/a/b."""
    declared = StdioSandbox(paths_read_only=["/tmp/a/b/c"])
    place = Placement(command=["/bin/true"], home="/h", fds={"/tmp/a/b/c": 3})
    argv = bwrap_options(declared, Settings(data_dir=tmp_path), place)
    made = _pairs(argv, "--dir")
    assert made.index("/tmp/a") < made.index("/tmp/a/b") and "/tmp" not in made
    assert argv.index("--tmpfs") < argv.index("/tmp/a")


def test_as_root_the_child_switches_to_its_own_uid(tmp_path: Path) -> None:
    place = Placement(command=["/bin/true"], home="/h", uid=212345)
    argv = bwrap_options(StdioSandbox(), Settings(data_dir=tmp_path), place)
    tail = sandboxed_command(place)
    assert tail[:5] == ["/usr/bin/setpriv", "--reuid=212345", "--regid=212345", "--clear-groups", "--no-new-privs"]
    assert tail[5:] == ["--", "/bin/true"]
    assert _pairs(argv, "--cap-add") == ["CAP_SETUID", "CAP_SETGID"]


def test_the_data_dir_proc_and_the_root_may_not_be_shown(tmp_path: Path) -> None:
    """Attack: a config declares the data dir, a directory holding it, /proc/<pid>/root or /."""
    data = tmp_path / "data"
    (data / "postgres").mkdir(parents=True)
    assert path_problem(str(data), data) is not None
    assert path_problem(str(data / "postgres"), data) is not None
    assert path_problem(str(tmp_path), data) is not None
    assert path_problem("/", data) is not None
    assert path_problem("/proc/1/root/etc", data) is not None
    assert path_problem("/sys/kernel", data) is not None
    assert path_problem(str(tmp_path / "missing"), data) is not None
    link = tmp_path / "innocent"
    link.symlink_to(data)
    assert path_problem(str(link), data) is not None
    assert path_problem("/usr/share", data) is None


def test_a_python_childs_runtime_is_its_venv_and_its_interpreter(tmp_path: Path) -> None:
    found = runtime_paths(sys.executable, "/usr/bin:/bin", tmp_path)
    assert sys.prefix in found
    real = Path(sys.executable).resolve()
    assert any(real.is_relative_to(path) for path in found)


def test_limits_default_from_settings_and_a_config_may_set_its_own(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, stdio_sandbox_memory_mb=512, stdio_sandbox_max_processes=32)
    limits = resource_limits(StdioSandbox(), settings)
    assert limits[resource.RLIMIT_AS] == (512 * 1024 * 1024,) * 2
    assert limits[resource.RLIMIT_NPROC] == (32, 32)
    assert limits[resource.RLIMIT_NOFILE] == (settings.stdio_sandbox_max_open_files,) * 2
    own = resource_limits(StdioSandbox(memory_mb=64, max_open_files=100), settings)
    assert own[resource.RLIMIT_AS] == (64 * 1024 * 1024,) * 2 and own[resource.RLIMIT_NOFILE] == (100, 100)


@pytest.mark.parametrize(
    "sandbox_config",
    [
        {"paths_read_only": ["relative/path"]},
        {"paths_read_write": ["/srv/../etc"]},
        {"memory_mb": 1},
        {"max_processes": 0},
        {"network": "sometimes"},
        {"mounts": ["/"]},
    ],
)
def test_a_bad_sandbox_config_is_a_validation_error(sandbox_config: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as raised:
        RegisterServerRequest(
            name="x", transport_type="STDIO", connection_config={"command": "x", "sandbox": sandbox_config}
        )
    assert [e["loc"] for e in raised.value.errors()] == [("connection_config", "sandbox")]


def test_without_a_working_bwrap_stdio_is_refused_unless_turned_off(tmp_path: Path) -> None:
    broken = Settings(data_dir=tmp_path, stdio_sandbox_bwrap="/bin/false")
    assert sandbox.mode(broken).kind == "unavailable"
    with pytest.raises(sandbox.SandboxError, match="TOOLMESH_STDIO_SANDBOX=off"):
        sandbox.Sandboxer(broken, "server-1").launch("true", [], {"PATH": "/usr/bin:/bin"}, None, None)
    off = Settings(data_dir=tmp_path, stdio_sandbox="off", stdio_sandbox_bwrap="/bin/false")
    launch = sandbox.Sandboxer(off, "server-1").launch("true", ["x"], {"PATH": "/usr/bin:/bin"}, None, None)
    assert launch.argv == ["true", "x"]


def test_a_script_named_in_the_arguments_is_shown_with_its_directory_but_never_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "inner").mkdir(parents=True)
    (data / "admin-token").write_text("secret")
    scripts = tmp_path / "srv" / "mcp"
    scripts.mkdir(parents=True)
    (scripts / "server.py").write_text("print()")
    args = [
        str(scripts / "server.py"),
        "--data",
        str(data / "admin-token"),
        str(data / "inner"),
        "relative.py",
        "/usr/lib",
    ]
    assert argument_paths(args, data) == [str(scripts)]
    # A file whose directory holds the data dir is shown alone, not its directory.
    beside = tmp_path / "beside.py"
    beside.write_text("print()")
    assert argument_paths([str(beside)], data) == [str(beside)]


def test_declared_paths_reach_bwrap_as_descriptors_of_what_was_checked(tmp_path: Path) -> None:
    """Attack: check-then-use race; the launch binds the objects it checked, and refuses a shared temp dir
    as a writable path (a channel between the children of different servers)."""
    settings = Settings(data_dir=tmp_path / "data")
    if sandbox.mode(settings).kind != "bubblewrap":
        pytest.skip("no working bubblewrap here")
    shown = tmp_path / "shown"
    shown.mkdir()
    env = {"PATH": "/usr/bin:/bin"}
    launch = sandbox.Sandboxer(settings, "server-1").launch("true", [], env, None, {"paths_read_only": [str(shown)]})
    try:
        options = _options(launch)
        fd = int(options[options.index("--ro-bind-fd") + 1])
        assert launch.fds == (fd, int(launch.argv[2])) and os.readlink(f"/proc/self/fd/{fd}") == str(shown)
    finally:
        for fd in launch.fds:
            os.close(fd)
    with pytest.raises(sandbox.SandboxError, match="/var/tmp is a shared temporary directory"):
        sandbox.Sandboxer(settings, "server-1").launch("true", [], env, None, {"paths_read_write": ["/var/tmp"]})


def test_options_are_encoded_nul_terminated_and_a_nul_inside_one_is_refused() -> None:
    """Attack: an option holding a NUL would become options of its own (``/x\\0--bind\\0/\\0/y``)."""
    assert encode_options(["--dir", "/a b"]) == b"--dir\0/a b\0"
    with pytest.raises(ValueError, match="NUL"):
        encode_options(["--ro-bind-fd", "5", "/x\0--bind\0/\0/y"])


def test_the_options_descriptor_holds_every_option_sealed() -> None:
    options = ["--dir", "/" + "d" * 200_000]  # far beyond a pipe's buffer
    fd = sandbox.options_descriptor(options)
    try:
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        assert os.pread(fd, 1 << 20, 0) == encode_options(options)
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"--bind", 0)  # sealed: nothing changes what bubblewrap reads
    finally:
        os.close(fd)


SHOW_INIT = """import json, os
fds = {}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        pass  # the listing's own descriptor, closed by now
bound = len(os.listdir(os.environ["SHOWN"]))
print(json.dumps({"init": open("/proc/1/cmdline", "rb").read().decode(), "fds": fds, "bound": bound}))
"""


def test_the_sandboxed_child_reads_no_host_path_in_its_pid_1_cmdline_nor_holds_a_descriptor(tmp_path: Path) -> None:
    """Attack: a child reads ``/proc/1/cmdline`` (bubblewrap's, in its PID namespace) to learn the data dir,
    its home's host path and every bind; or uses a descriptor bubblewrap got. Its options are far beyond
    a pipe's 64 KiB and must all arrive: every declared path is bound."""
    settings = Settings(data_dir=tmp_path / "data")
    if sandbox.mode(settings).kind != "bubblewrap":
        pytest.skip("no working bubblewrap here")
    deep = tmp_path.joinpath(*(f"{level}" + "p" * 250 for level in range(8)))
    shown = [deep / (f"{index:02d}" + "s" * 250) for index in range(40)]
    for path in shown:
        path.mkdir(parents=True)
    declared = {"paths_read_only": [str(path) for path in shown]}
    launch = sandbox.Sandboxer(settings, "server-1").launch(
        sys.executable, ["-c", SHOW_INIT], {"PATH": "/usr/bin:/bin", "SHOWN": str(deep)}, None, declared
    )
    try:
        assert len(os.pread(int(launch.argv[2]), 1 << 20, 0)) > 65_536
        done = subprocess.run(launch.argv, cwd=launch.cwd, pass_fds=launch.fds, env=launch.env, capture_output=True)
    finally:
        for fd in launch.fds:
            os.close(fd)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    init = seen["init"].rstrip("\0").split("\0")
    assert init[:4] == ["./bwrap", "--args", launch.argv[2], "--"] and init == launch.argv
    hidden = [str(settings.data_dir), str(homes_dir(settings.data_dir)), str(launch.cwd), str(deep)]
    assert not any(path in seen["init"] for path in hidden), init
    assert seen["bound"] == len(shown)  # every option arrived
    assert sorted(seen["fds"]) == ["0", "1", "2"], seen["fds"]  # neither the options nor a bound path
