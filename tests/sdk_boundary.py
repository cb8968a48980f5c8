"""Where the project's code reaches into the MCP SDK's private members and modules.

A module "touches the SDK" when it imports ``mcp`` or ``mcp_types``. In such a module every
``obj._name`` attribute access (and ``getattr``/``setattr``/``hasattr`` with a ``"_name"`` literal)
counts as a use of an SDK private unless a class of the project defines ``_name`` (a method, a class
attribute, ``self._name = …``): that is the project's own. A class derived from an SDK class that
defines a private name the SDK defines too overrides the SDK's: that counts as a use where the class
is. Imports of a private SDK module (``mcp.client._transport``) or of a private name from a public
one (``from mcp.server.streamable_http import _x``) count too. Each use is a ``(path, name)`` pair;
the committed allow-list (``sdk_private_allowlist.txt``) names every pair with the reason it is
needed.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("shared", "services")
ALLOWLIST = Path(__file__).resolve().parent / "sdk_private_allowlist.txt"
SDK_PACKAGES = frozenset({"mcp", "mcp_types"})
ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "hasattr", "delattr"})
# The namedtuple API is public although its names start with an underscore.
PUBLIC_UNDERSCORE = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})
_ENTRY = re.compile(r"^(?P<path>[^:#\s]+):\s*(?P<name>[\w.]+)\s*(?:#\s*(?P<reason>.*))?$")


@dataclass(frozen=True, order=True)
class Access:
    """One private SDK name used by one project module (``path`` relative to the repository)."""

    path: str
    name: str

    def __str__(self) -> str:
        return f"{self.path}: {self.name}"


def is_private(name: str) -> bool:
    """A single-underscore name (not a dunder, not the namedtuple API)."""
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORE


def _is_sdk(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in SDK_PACKAGES


def imports_sdk(tree: ast.AST) -> bool:
    """Whether a module imports ``mcp`` or ``mcp_types`` (anywhere in it)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_is_sdk(alias.name) for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_sdk(node.module):
            return True
    return False


def _target_names(target: ast.expr, owner: str | None) -> Iterator[str]:
    """Names an assignment target binds: a plain name, or ``owner._x`` (``owner`` is ``self``/``cls``)."""
    if isinstance(target, ast.Name) and owner is None:
        yield target.id
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == owner:
        yield target.attr
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _target_names(element, owner)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value, owner)


def _assigned(node: ast.AST, owner: str | None) -> Iterator[str]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _target_names(target, owner)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        yield from _target_names(node.target, owner)


def class_members(cls: ast.ClassDef) -> set[str]:
    """The private members a class defines: methods and class attributes in its body, ``self._x = …``
    in its methods, ``setattr(self, "_x", …)``."""
    names: set[str] = set()
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(statement.name)
        names.update(_assigned(statement, None))
    methods = [item for item in cls.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)]
    for node in (node for method in methods for node in ast.walk(method)):
        names.update(_assigned(node, "self"))
        names.update(_assigned(node, "cls"))
        if isinstance(node, ast.Call) and _called(node) == "setattr" and _attribute_literal(node) is not None:
            names.add(str(_attribute_literal(node)))
    return {name for name in names if is_private(name)}


def sdk_bound_names(tree: ast.AST) -> set[str]:
    """The names a module binds to something of the SDK by importing it."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names if _is_sdk(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_sdk(node.module):
            bound.update(alias.asname or alias.name for alias in node.names)
    return bound


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def classes(tree: ast.AST) -> Iterator[ast.ClassDef]:
    """Every class a module defines (nested ones too)."""
    yield from (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef))


def _called(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


def _attribute_literal(call: ast.Call) -> str | None:
    """The ``"_name"`` of ``getattr(obj, "_name")`` and its kin."""
    if _called(call) not in ATTRIBUTE_FUNCTIONS or len(call.args) < 2:
        return None
    name = call.args[1]
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        return name.value
    return None


def _private_imports(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if _is_sdk(alias.name) and any(is_private(part) for part in alias.name.split(".")):
                yield alias.name
        return
    if node.level != 0 or not _is_sdk(node.module):
        return
    module = str(node.module)
    private_module = any(is_private(part) for part in module.split("."))
    for alias in node.names:
        if private_module or is_private(alias.name):
            yield f"{module}.{alias.name}"


def private_uses(tree: ast.AST) -> set[str]:
    """Private SDK imports and every private attribute name a module uses (own names not removed)."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            used.update(_private_imports(node))
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            used.add(node.attr)
        elif isinstance(node, ast.Call):
            literal = _attribute_literal(node)
            if literal is not None and is_private(literal):
                used.add(literal)
    return used


def sdk_derived(trees: Iterable[ast.AST]) -> set[str]:
    """The project's classes that derive from an SDK class, directly or through another such class."""
    modules = list(trees)
    derived: set[str] = set()
    grown = True
    while grown:
        grown = False
        for tree in modules:
            bases = sdk_bound_names(tree) | derived
            for cls in classes(tree):
                if cls.name not in derived and any(_root_name(base) in bases for base in cls.bases):
                    derived.add(cls.name)
                    grown = True
    return derived


def scan(sources: dict[str, str], sdk_names: set[str]) -> set[Access]:
    """The private SDK accesses in ``{path: source}``.

    ``sdk_names`` are the private names the SDK defines. A private member a class of the sources
    defines is the project's own, unless the class derives from an SDK class and the SDK defines
    that name too: then it overrides an SDK private and counts as an access where it is defined.
    """
    trees = {path: ast.parse(source, filename=path) for path, source in sources.items()}
    derived = sdk_derived(trees.values())
    own: set[str] = set()
    found: set[Access] = set()
    for path, tree in trees.items():
        for cls in classes(tree):
            members = class_members(cls)
            overridden = members & sdk_names if cls.name in derived else set()
            own |= members - overridden
            found.update(Access(path, name) for name in overridden)
    own -= {access.name for access in found}
    for path, tree in trees.items():
        if imports_sdk(tree):
            found.update(Access(path, name) for name in private_uses(tree) if "." in name or name not in own)
    return found


def defined_anywhere(tree: ast.AST) -> set[str]:
    """Every private name a module defines: functions, classes, attributes and names assigned."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        for target in _assignment_targets(node):
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    names.add(leaf.id)
                elif isinstance(leaf, ast.Attribute):
                    names.add(leaf.attr)
    return {name for name in names if is_private(name)}


def _assignment_targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def installed_sdk_names() -> set[str]:
    """The private names the installed SDK (``mcp`` and ``mcp_types``) defines."""
    names: set[str] = set()
    for package in sorted(SDK_PACKAGES):
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"the MCP SDK package {package!r} is not installed")
        for path in sorted(Path(spec.origin).parent.rglob("*.py")):
            names |= defined_anywhere(ast.parse(path.read_text(), filename=str(path)))
    return names


def project_sources(root: Path = ROOT) -> dict[str, str]:
    """The project's own code: every Python file under shared/ and services/."""
    files = (path for folder in SCANNED for path in sorted((root / folder).rglob("*.py")))
    return {path.relative_to(root).as_posix(): path.read_text() for path in files}


def parse_allowlist(lines: Iterable[str]) -> dict[Access, str]:
    """``path: name  # reason`` per line (blank lines and ``#`` comments skipped) → reason by access."""
    entries: dict[Access, str] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        match = _ENTRY.match(text)
        if match is None:
            raise ValueError(f"allow-list line {number} is not 'path: name  # reason': {text!r}")
        access = Access(match["path"], match["name"])
        if access in entries:
            raise ValueError(f"allow-list line {number} repeats {access}")
        entries[access] = (match["reason"] or "").strip()
    return entries
