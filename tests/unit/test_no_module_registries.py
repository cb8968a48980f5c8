"""No module of shared/ or services/ keeps mutable state of its own (issue 24).

What the roles of one process share lives in objects passed in (``Backends``, its
``ProcessContext``), never in a module's globals, which no signature shows and which carry over
from one test to the next. The check walks the AST of every module and reports:

* a module-level name bound to a mutable container or a lock: an empty ``{}``, ``[]``, or a call
  of ``dict``, ``list``, ``set``, ``defaultdict``, ``WeakKeyDictionary``, ``Lock``, ...;
* a module-level name a function changes, its module's own or one imported from another project
  module: ``NAME[k] = v``, ``del NAME[k]``, ``NAME.add(...)`` and the other mutating methods, or a
  ``global`` statement.

Constant tables (``ROLES = {...}`` read, never written) pass; so do ``ContextVar``s (per task by
design) and ``frozenset``/``MappingProxyType``. The allow-list below says why each entry may stay.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "shared", ROOT / "services"]

MUTABLE_CALLS = frozenset(
    {
        "dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "Counter", "deque", "ChainMap",
        "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "Lock", "RLock", "Semaphore",
        "BoundedSemaphore", "Condition", "Event", "Queue", "LifoQueue", "PriorityQueue", "SimpleQueue",
    }
)  # fmt: skip
MUTATING_METHODS = frozenset(
    {
        "append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "clear", "remove",
        "discard", "appendleft", "move_to_end",
    }
)  # fmt: skip

# "path: name" -> why it may stay module-level. Only state that mirrors something process-wide by
# nature belongs here (the logging module's handlers hold the log redactor, so it needs no entry).
ALLOWED = {
    "shared/toolmesh/platform/telemetry.py: _tracing": (
        "mirrors OpenTelemetry's tracer provider, which the SDK sets once per process; read on every"
        " hop, where asking the SDK (trace.get_tracer_provider()) costs ~0.8 us a read"
    ),
}


def _called_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _is_mutable(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set) and not getattr(value, "keys", getattr(value, "elts", None)):
        return True  # an empty display: something fills it later
    return _called_name(value) in MUTABLE_CALLS if value is not None else False


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at import, including those under a module-level ``if``/``try``/``with``."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_statements(handler.body)


def _targets(node: ast.stmt) -> list[tuple[str, ast.expr | None]]:
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, node.value)]
    return []


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function binds itself (arguments, assignments): those shadow a module's name."""
    names = {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
    names |= {a.arg for a in (function.args.vararg, function.args.kwarg) if a is not None}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _changed_in_functions(tree: ast.Module, module_names: set[str]) -> Iterator[tuple[str, int, str]]:
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        visible = module_names - _local_names(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                yield from ((name, node.lineno, "rebound through `global`") for name in node.names)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
                if isinstance(node.value, ast.Name) and node.value.id in visible:
                    yield node.value.id, node.lineno, "an item set or deleted in a function"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id in visible and node.func.attr in MUTATING_METHODS:
                    yield owner.id, node.lineno, f"changed by .{node.func.attr}() in a function"


def _project_imports(node: ast.stmt) -> list[str]:
    """Names ``from toolmesh... import NAME`` binds: another module's globals, changed from here."""
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolmesh"):
        return [alias.asname or alias.name for alias in node.names]
    return []


def module_registries(path: Path) -> Iterator[tuple[str, int, str]]:
    """(name, line, why) for each piece of mutable module-level state in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    module_names: set[str] = set()
    for node in _module_statements(tree.body):
        module_names.update(_project_imports(node))
        for name, value in _targets(node):
            module_names.add(name)
            if _is_mutable(value):
                yield name, node.lineno, "a mutable container or lock at module level"
    yield from _changed_in_functions(tree, module_names)


def _findings() -> list[str]:
    found = []
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for name, line, why in module_registries(path):
                if f"{relative}: {name}" not in ALLOWED:
                    found.append(f"{relative}:{line}: {name}: {why}")
    return found


def test_issue24_no_module_level_registry_in_shared_or_services() -> None:
    assert _findings() == [], "module-level state: pass it in an object instead (Backends, ProcessContext)"


def test_issue24_the_allow_list_names_only_state_that_still_exists() -> None:
    present = {
        f"{path.relative_to(ROOT).as_posix()}: {name}"
        for source in SOURCES
        for path in source.rglob("*.py")
        for name, _, _ in module_registries(path)
    }
    assert set(ALLOWED) <= present


def test_issue24_the_check_sees_each_kind_of_registry(tmp_path: Path) -> None:
    module = tmp_path / "registry.py"
    module.write_text(
        "import threading, weakref\n"
        "TABLE = {'a': 1}\n"
        "_seen = {}\n"
        "_lock = threading.Lock()\n"
        "_lanes: weakref.WeakKeyDictionary[object, object] = weakref.WeakKeyDictionary()\n"
        "_later = None\n"
        "ORDER = ['a']\n"
        "def remember(key):\n"
        "    global _later\n"
        "    _later = key\n"
        "    ORDER.append(key)\n"
        "from toolmesh.redaction import REDACTOR\n"
        "def mask(value):\n"
        "    REDACTOR.add([value])\n"
        "def local(TABLE):\n"
        "    TABLE['b'] = 2\n"
    )
    found = {(name, why.split()[0]) for name, _, why in module_registries(module)}
    assert found == {("_seen", "a"), ("_lock", "a"), ("_lanes", "a"), ("_later", "rebound"), ("ORDER", "changed")} | {
        ("REDACTOR", "changed")
    }
