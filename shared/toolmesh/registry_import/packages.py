"""A registry ``server.json`` package as a STDIO command: an argv list, never a shell line.

===========  ===========  ==============================================================
registryType  runtime      command
===========  ===========  ==============================================================
npm          npx          ``npx [runtimeArguments] -y <identifier>@<version> [packageArguments]``
pypi         uvx          ``uvx [runtimeArguments] <identifier>==<version> [packageArguments]``
oci          docker,      ``docker run -i --rm [runtimeArguments] -e NAME... <image> [packageArguments]``
             podman
nuget        dnx          ``dnx [runtimeArguments] <identifier>@<version> --yes -- [packageArguments]``
===========  ===========  ==============================================================

``runtimeHint`` picks among a kind's runtimes and nothing else (a hint of ``sh`` would run anything).
Identifiers, versions and flag names are checked against their registries' shapes, so none can
start with ``-`` and turn into an option of the runtime; each argument value is one argv element.
``runtimeArguments`` may not use the runtime's options that run another command, fetch the package
from elsewhere or loosen a container (``RUNTIME_OPTIONS_REFUSED``), and ``environmentVariables`` may
not name a variable that changes how the runtime itself runs (``RUNTIME_VARIABLES_REFUSED``): a
hostile entry gets no more than its package running as labelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolmesh.errors import RegistryEntryRefused
from toolmesh.registry_import.inputs import Inputs, document_text

RUNTIMES: dict[str, tuple[str, ...]] = {
    "npm": ("npx",),
    "pypi": ("uvx",),
    "oci": ("docker", "podman"),
    "nuget": ("dnx",),
}
"""The runtimes each package kind may run with; the first is the default."""
_IDENTIFIERS = {
    "npm": re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$", re.IGNORECASE),
    "pypi": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?$"),
    "oci": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$"),
    "nuget": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$"),
}
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]*$")
_FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTAINER_OPTIONS = (
    "--privileged --cap-add --security-opt --device --device-cgroup-rule --pid --ipc --uts --userns --cgroupns "
    "--cgroup-parent --network --net --volumes-from -v --volume --mount --env-file --entrypoint -u --user "
    "--group-add --runtime --sysctl"
)
RUNTIME_OPTIONS_REFUSED: dict[str, frozenset[str]] = {
    "npx": frozenset(
        "-c --call -p --package --registry --userconfig --globalconfig --node-options --script-shell --prefix".split()
    ),
    "uvx": frozenset(
        "--from --with -w --with-requirements --with-editable --index --index-url -i --extra-index-url "
        "--default-index --find-links -f --python -p --config-file --directory --project".split()
    ),
    "docker": frozenset(_CONTAINER_OPTIONS.split()),
    "podman": frozenset(_CONTAINER_OPTIONS.split()),
    "dnx": frozenset("--source -s --add-source --configfile".split()),
}
"""Per runtime, the options a registry entry's ``runtimeArguments`` may not use."""
RUNTIME_VARIABLES_REFUSED = re.compile(
    r"^(PATH|HOME|ENV|BASH_ENV|LD_\w*|DYLD_\w*|NODE_OPTIONS|NODE_PATH|NODE_EXTRA_CA_CERTS|NODE_TLS_\w*|"
    r"NPM_CONFIG_\w*|PYTHONPATH|PYTHONHOME|PYTHONSTARTUP|PYTHONUSERBASE|PIP_\w*|UV_\w*|DOCKER_\w*|"
    r"CONTAINER_\w*|CONTAINERS_\w*|DOTNET_\w*|NUGET_\w*|SSL_CERT_\w*|REQUESTS_CA_BUNDLE|HTTPS?_PROXY|ALL_PROXY)$",
    re.IGNORECASE,
)
"""Environment variables a registry entry may not set: they change how the runtime runs, where it
fetches the package from, or whom it trusts (a package's own settings are any other name)."""


def package_problem(package: Any) -> str | None:
    """Why toolmesh cannot run ``package`` (before any input is asked), else None."""
    if not isinstance(package, Mapping):
        return "a package must be an object"
    kind = package.get("registryType")
    if kind == "mcpb":
        return "MCP bundles (mcpb) are not supported: register the server's command or URL instead"
    if kind not in RUNTIMES:
        return f"unknown registryType {kind!r} (supported: {', '.join(RUNTIMES)})"
    transport = package.get("transport") or {"type": "stdio"}
    kind_of_transport = transport.get("type") if isinstance(transport, Mapping) else None
    if kind_of_transport != "stdio":
        return (
            f"the package serves {kind_of_transport!r}, not stdio: toolmesh starts only STDIO packages; start it "
            "yourself and register its URL"
        )
    hint = package.get("runtimeHint")
    if hint is not None and hint not in RUNTIMES[kind]:
        return f"runtimeHint {hint!r} is not a runtime of {kind} packages (allowed: {', '.join(RUNTIMES[kind])})"
    identifier = package.get("identifier")
    if not isinstance(identifier, str) or not _IDENTIFIERS[kind].match(identifier):
        return f"identifier {identifier!r} is not a valid {kind} package name"
    version = package.get("version")
    if kind != "oci" and version is not None and (not isinstance(version, str) or not _VERSION.match(version)):
        return f"version {version!r} is not a valid version"
    return None


def package_label(package: Any) -> str:
    """How a package is shown in a list of choices: ``npm @scope/name@1.2.3``."""
    if not isinstance(package, Mapping):
        return "package ?"
    version = package.get("version")
    suffix = f"@{version}" if version and package.get("registryType") != "oci" else ""
    return f"{package.get('registryType')} {package.get('identifier')}{suffix}"


def _arguments(items: Any, inputs: Inputs, where: str, *, runtime: bool = False) -> list[str]:
    """The argv elements of ``runtimeArguments`` or ``packageArguments``. A runtime's are options
    only: a named one is one element ``--flag=value`` (so no value can become the runtime's package
    when the flag takes none), a positional one must start with ``-``."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise RegistryEntryRefused(f"{where} must be a list")
    argv: list[str] = []
    for number, item in enumerate(items, 1):
        here = f"{where}[{number}]"
        if not isinstance(item, Mapping):
            raise RegistryEntryRefused(f"{here} must be an object")
        if item.get("type") == "positional":
            hint = item.get("valueHint")
            name = document_text(hint, f"{here}: 'valueHint'") if hint is not None else None
            value = inputs.value_of(name, item, "argument", here)
            if runtime and value is not None and not value.startswith("-"):
                raise RegistryEntryRefused(
                    f"{here}: {value!r} is no option: it would become the package the runtime runs"
                )
            argv += [] if value is None else [value]
        elif item.get("type") == "named":
            flag = document_text(item.get("name"), f"{here}: 'name'")
            if not _FLAG.match(flag):
                raise RegistryEntryRefused(f"{here}: {flag!r} is not a command-line flag (-x or --name)")
            value = inputs.value_of(flag.lstrip("-"), item, "argument", here)
            argv += [] if value is None else [f"{flag}={value}"] if runtime else [flag, value]
        else:
            raise RegistryEntryRefused(f"{here}: unknown argument type {item.get('type')!r} (positional or named)")
    return argv


def _environment(items: Any, inputs: Inputs) -> dict[str, str]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise RegistryEntryRefused("'environmentVariables' must be a list")
    env: dict[str, str] = {}
    for number, item in enumerate(items, 1):
        here = f"environmentVariables[{number}]"
        name = document_text(item.get("name") if isinstance(item, Mapping) else None, f"{here}: 'name'")
        if not _ENV_NAME.match(name):
            raise RegistryEntryRefused(f"{here}: {name!r} is not an environment variable name")
        if RUNTIME_VARIABLES_REFUSED.match(name):
            raise RegistryEntryRefused(
                f"{here}: {name} changes how the runtime itself runs; a registry entry may not set it"
            )
        value = inputs.value_of(name, item, "env", here)
        if value is not None:
            env[name] = value
    return env


def _check_runtime_options(runtime: str, argv: list[str]) -> None:
    """Refuse a runtime argument that is (or, as combined short flags, holds) a refused option."""
    refused = RUNTIME_OPTIONS_REFUSED[runtime]
    for arg in argv:
        option = arg.split("=", 1)[0]
        shorts = {f"-{c}" for c in option[1:]} if re.match(r"^-[A-Za-z]{2,}$", option) else set()
        if hit := ({option} | shorts) & refused:
            raise RegistryEntryRefused(
                f"runtimeArguments: {runtime} option {min(hit)} is refused: it would run another command, "
                "fetch the package from elsewhere or loosen its container"
            )


def stdio_config(package: Mapping[str, Any], inputs: Inputs) -> dict[str, Any]:
    """The STDIO ``connection_config`` of a package ``package_problem`` accepted."""
    kind = str(package["registryType"])
    runtime = str(package.get("runtimeHint") or RUNTIMES[kind][0])
    identifier, version = str(package["identifier"]), package.get("version")
    runtime_args = _arguments(package.get("runtimeArguments"), inputs, "runtimeArguments", runtime=True)
    _check_runtime_options(runtime, runtime_args)
    env = _environment(package.get("environmentVariables"), inputs)
    package_args = _arguments(package.get("packageArguments"), inputs, "packageArguments")
    if kind == "npm":
        args = [*runtime_args, "-y", f"{identifier}@{version}" if version else identifier, *package_args]
    elif kind == "pypi":
        args = [*runtime_args, f"{identifier}=={version}" if version else identifier, *package_args]
    elif kind == "oci":
        passed = [part for name in env for part in ("-e", name)]  # values stay in env, sealed
        args = ["run", "-i", "--rm", *runtime_args, *passed, identifier, *package_args]
    else:
        args = [*runtime_args, f"{identifier}@{version}" if version else identifier, "--yes"]
        args += ["--", *package_args] if package_args else []
    config: dict[str, Any] = {"command": runtime, "args": args}
    if env:
        config["env"] = env
    return config
