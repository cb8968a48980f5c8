"""Every third-party module that product code (``shared/``, ``services/``) imports comes from a
distribution declared in ``pyproject.toml``'s ``[project.dependencies]``: nothing works only because
another dependency happens to pull it in."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_DIRS = ("shared", "services")


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    """The names in ``[project.dependencies]``, without versions, extras or markers."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for requirement in project["dependencies"]:
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        assert match is not None, requirement
        names.add(normalized(match.group()))
    return names


def first_party_packages() -> set[str]:
    """The top-level packages the distribution ships (``[tool.setuptools.packages.find] where``)."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    return {
        package.name
        for where in tool["setuptools"]["packages"]["find"]["where"]
        for package in (ROOT / where).iterdir()
        if (package / "__init__.py").is_file()
    }


def imported_modules(source: str) -> Iterator[str]:
    """The absolute module names a source imports; for ``from a import b`` both ``a.b`` and ``a``
    (``b`` may be a submodule or a name)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
            yield node.module


@cache
def modules_of(distribution: str) -> frozenset[str]:
    """The dotted module and package names whose files a distribution installs."""
    names = set()
    for file in importlib.metadata.distribution(distribution).files or ():
        if file.suffix in {".py", ".pyi"} or ".so" in file.suffixes:
            parts = list(file.with_suffix("").parts)
            parts[-1] = parts[-1].split(".")[0]  # extension modules: name.cpython-311-x86_64-linux-gnu
            if parts[-1] == "__init__":
                parts.pop()
            names.add(".".join(parts))
    return frozenset(names)


@cache
def top_level_distributions() -> Mapping[str, list[str]]:
    """``importlib.metadata.packages_distributions()``, read once."""
    return importlib.metadata.packages_distributions()


def providing_distributions(module: str) -> set[str]:
    """The installed distributions that provide ``module``: for a namespace package shared by
    several (``opentelemetry``), the one holding the longest prefix of the dotted name."""
    candidates = top_level_distributions().get(module.split(".")[0], [])
    if len(candidates) <= 1:
        return {normalized(name) for name in candidates}
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        owners = {normalized(name) for name in candidates if prefix in modules_of(name)}
        if owners:
            return owners
    return {normalized(name) for name in candidates}


def third_party_imports() -> dict[str, set[str]]:
    """Third-party module name -> the product files (relative paths) that import it."""
    ours = first_party_packages()
    found: dict[str, set[str]] = {}
    for folder in PRODUCT_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for module in imported_modules(path.read_text()):
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ours:
                    found.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    return found


def undeclared(found: dict[str, set[str]], declared: set[str]) -> dict[str, str]:
    """Each undeclared distribution (or unknown module) imported -> one import of it, with a file."""
    problems: dict[str, str] = {}
    for module, files in sorted(found.items()):
        providers = providing_distributions(module)
        if not providers & declared:
            key = " or ".join(sorted(providers)) or f"no distribution provides {module}"
            problems.setdefault(key, f"{module} in {min(files)}")
    return problems


def test_every_product_import_comes_from_a_declared_distribution() -> None:
    found = third_party_imports()
    assert "nats" in found and "opentelemetry.sdk.trace" in found  # the scan sees real imports
    assert undeclared(found, declared_distributions()) == {}


def test_an_import_through_a_dependency_of_a_dependency_is_reported() -> None:
    found = {"sse_starlette": {"services/x.py"}, "opentelemetry.sdk.trace": {"services/y.py"}}
    problems = undeclared(found, {"mcp", "opentelemetry-api"})
    assert problems == {
        "sse-starlette": "sse_starlette in services/x.py",
        "opentelemetry-sdk": "opentelemetry.sdk.trace in services/y.py",
    }
