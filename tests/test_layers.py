"""Layers point one way and no module takes part in an import cycle.

Every module of ``kafkafs/`` is read with :mod:`ast` (nothing is imported): every ``import``
and ``from ... import`` in it, at module level or inside a function, relative ones resolved
against the module's package. The cycle check runs over the graph of all kafkafs modules,
so a cycle inside one package (or subpackage) and one across packages are both found.

Layers (a module may import its own layer and the ones listed for it):

* ``kafkafs.record`` -- the codec: nothing of kafkafs outside itself;
* ``kafkafs.log`` -- the storage engine: ``kafkafs.record``;
* ``kafkafs.core`` -- the storage core (log manager, tasks, control requests): log, record
  and the leaf helpers;
* ``kafkafs.fs``, ``kafkafs.spark`` -- also ``kafkafs.core`` (the FUSE frontend is given a
  core; Spark's writer asks a daemon through the control requests' client side);
* ``kafkafs.net`` -- the Kafka wire-protocol frontend: also ``kafkafs.core``;
* ``kafkafs.daemon`` -- also ``kafkafs.fs`` and ``kafkafs.net`` (it composes the core with
  its frontends);
* ``kafkafs.cli`` -- also ``kafkafs.fs``, ``kafkafs.net``, ``kafkafs.daemon`` and ``kafkafs.spark`` (commands
  start them) and the root package (``__version__``);
* leaf helpers ``kafkafs.escapes``, ``kafkafs.mounttable`` and the root ``kafkafs`` (its
  ``__init__``): nothing of kafkafs; ``kafkafs.__main__``: ``kafkafs.cli``.

``KAFKAFS_LAYERS_ROOT=/path/to/kafkafs`` checks another checkout's package dir instead of
this one's (e.g. to see the test fail on a tree from before the cycles were broken).
"""

from __future__ import annotations

import ast
import os
from collections import deque

PACKAGE = "kafkafs"
ROOT = os.environ.get("KAFKAFS_LAYERS_ROOT") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE
)

HELPERS = {"kafkafs.escapes", "kafkafs.mounttable"}
LOWER = {"kafkafs.log", "kafkafs.record"} | HELPERS

# layer -> the other layers its modules may import
ALLOWED: dict[str, set[str]] = {
    "kafkafs.record": set(),
    "kafkafs.log": {"kafkafs.record"},
    "kafkafs.core": LOWER,
    "kafkafs.fs": LOWER | {"kafkafs.core"},
    "kafkafs.spark": LOWER | {"kafkafs.core"},
    "kafkafs.net": LOWER | {"kafkafs.core"},
    "kafkafs.daemon": LOWER | {"kafkafs.core", "kafkafs.fs", "kafkafs.net"},
    "kafkafs.cli": LOWER | {"kafkafs.core", "kafkafs.fs", "kafkafs.net", "kafkafs.daemon",
                            "kafkafs.spark", "kafkafs"},
    "kafkafs.escapes": set(),
    "kafkafs.mounttable": set(),
    "kafkafs": set(),
    "kafkafs.__main__": {"kafkafs.cli"},
}

# Import edges (importer, imported) left in a cycle on purpose, each with why; the cycle
# test leaves them out of the graph and fails once one is gone (then drop it here).
KNOWN_CYCLE_EDGES: dict[tuple[str, str], str] = {}


def find_modules(root: str = ROOT) -> dict[str, tuple[str, bool]]:
    """Dotted module name -> (path, is_package) for every ``.py`` file under ``root``, and
    for every built extension (``_speedups.*.so``: path None, it imports nothing of
    kafkafs)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        rel = os.path.relpath(dirpath, root)
        parts = [PACKAGE] + ([] if rel == "." else rel.split(os.sep))
        for f in sorted(filenames):
            if f.endswith((".so", ".pyd")):
                out.setdefault(".".join(parts + [f.split(".")[0]]), (None, False))
                continue
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            if f == "__init__.py":
                out[".".join(parts)] = (path, True)
            else:
                out[".".join(parts + [f[:-3]])] = (path, False)
    return out


def _parse(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _bound_names(body) -> set[str]:
    """The names a module's top level binds (assignments, defs, classes, imports), looking
    into ``if``/``try``/``with`` blocks but not into functions or classes."""
    out = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ExceptHandler)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                out |= _bound_names(getattr(node, block, []))
    return out


_names_cache: dict[str, set[str]] = {}


def _package_names(init_path: str) -> set[str]:
    if init_path not in _names_cache:
        _names_cache[init_path] = _bound_names(_parse(init_path).body)
    return _names_cache[init_path]


def resolve(dotted: str, modules) -> str | None:
    """The kafkafs module an import of ``dotted`` (a module, or a name taken from one)
    depends on: ``dotted`` itself when it is a module, else the longest module prefix of it.
    None outside kafkafs, and when the prefix is a package whose ``__init__`` does not bind
    the next name: that is a submodule with no ``.py`` file (an extension not built here),
    which imports nothing of kafkafs."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE:
        return None
    for i in range(len(parts), 0, -1):
        owner = ".".join(parts[:i])
        if owner in modules:
            break
    else:
        return None
    if i < len(parts):
        path, is_pkg = modules[owner]
        if is_pkg and parts[i] not in _package_names(path):
            return None
    return owner


def imports_of(name: str, modules) -> list[tuple[str, int, str]]:
    """(imported kafkafs module, line, statement) for every import in module ``name``, at any
    depth of its tree (inside functions too); a relative import is resolved against
    ``name``'s package. ``from P import x`` imports the module ``P.x`` when there is one,
    else ``P`` (see :func:`resolve`)."""
    path, is_pkg = modules[name]
    if path is None:
        return []
    package = name if is_pkg else name.rpartition(".")[0]
    out = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            dotted = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            dotted = [base if a.name == "*" else f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for d in dotted:
            target = resolve(d, modules)
            if target is not None:
                out.append((target, node.lineno, ast.unparse(node)))
    return out


def layer_of(module: str) -> str:
    """The layer ``module`` belongs to: its top-level subpackage, a top-level module, or the
    root package."""
    parts = module.split(".")
    return ".".join(parts[:2])


def layer_violations(modules) -> list[str]:
    out = []
    for name in sorted(modules):
        layer = layer_of(name)
        if layer not in ALLOWED:
            out.append(f"{name}: layer {layer} is not placed in test_layers.ALLOWED")
            continue
        for target, line, stmt in imports_of(name, modules):
            t_layer = layer_of(target)
            if t_layer != layer and t_layer not in ALLOWED[layer]:
                rel = os.path.relpath(modules[name][0], os.path.dirname(ROOT))
                out.append(f"{name} ({rel}:{line}) imports {target} ({t_layer}): {stmt}")
    return out


def import_graph(modules, skip=()) -> dict[str, set[str]]:
    """Module -> the modules it imports. A module's own parent package counts when it takes
    a name from the ``__init__`` (``from . import NAME``): a package whose ``__init__``
    imports that module back, even inside a function, is a cycle."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name in modules:
        for target, _, _ in imports_of(name, modules):
            if target == name:
                continue
            if (name, target) in skip:
                continue
            graph[name].add(target)
    return graph


def _shortest_path(graph, start: str, goal: str, within: set[str]) -> list[str] | None:
    prev = {start: None}
    todo = deque([start])
    while todo:
        n = todo.popleft()
        if n == goal:
            path = []
            while n is not None:
                path.append(n)
                n = prev[n]
            return path[::-1]
        for m in sorted(graph[n]):
            if m in within and m not in prev:
                prev[m] = n
                todo.append(m)
    return None


def strongly_connected(graph) -> list[set[str]]:
    """Tarjan's strongly connected components of ``graph`` that hold a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        # iterative DFS: (node, iterator over its successors)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, succ = work[-1]
            advanced = False
            for m in succ:
                if m not in index:
                    index[m] = low[m] = counter
                    counter += 1
                    stack.append(m)
                    on_stack.add(m)
                    work.append((m, iter(sorted(graph[m]))))
                    advanced = True
                    break
                if m in on_stack:
                    low[node] = min(low[node], index[m])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.add(m)
                    if m == node:
                        break
                if len(comp) > 1 or node in graph[node]:
                    out.append(comp)
    return out


def cycles(graph) -> list[list[str]]:
    """Cycles as chains ``[a, b, ..., a]``: for every import edge inside a strongly connected
    component, the shortest way back; each cycle once (rotated to start at its least
    module)."""
    seen = set()
    out = []
    for comp in strongly_connected(graph):
        for a in sorted(comp):
            for b in sorted(graph[a] & comp):
                back = _shortest_path(graph, b, a, comp)
                ring = [a] + back[:-1]
                i = ring.index(min(ring))
                ring = ring[i:] + ring[:i]
                if tuple(ring) not in seen:
                    seen.add(tuple(ring))
                    out.append(ring + [ring[0]])
    return sorted(out)


def test_modules_found():
    modules = find_modules()
    for name in ("kafkafs", "kafkafs.record.batch", "kafkafs.log.log", "kafkafs.cli.main"):
        assert name in modules


def test_imports_resolved():
    modules = find_modules()
    got = {t for t, _, _ in imports_of("kafkafs.log.log", modules)}
    assert "kafkafs.log.safeio" in got  # from . import safeio
    assert "kafkafs.log.segment" in got  # from .segment import ...
    assert not any(t.startswith("kafkafs.cli") for t in got)
    # inside a function: register() imports these when called
    assert {"kafkafs.spark.loadcheck", "kafkafs.spark.source"} <= \
        {t for t, _, _ in imports_of("kafkafs.spark", modules)}
    assert resolve("kafkafs.log.log.Log", modules) == "kafkafs.log.log"  # a name in a module
    assert resolve("kafkafs.spark.session", modules) == "kafkafs.spark"  # a name in __init__
    assert resolve("kafkafs.record._not_built", modules) is None  # an extension not built
    assert resolve("os.path", modules) is None


def test_layers_point_one_way():
    bad = layer_violations(find_modules())
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_import_cycles():
    modules = find_modules()
    graph = import_graph(modules, skip=KNOWN_CYCLE_EDGES)
    found = cycles(graph)
    assert not found, "import cycles (function-level imports count):\n" + "\n".join(
        " -> ".join(c) for c in found
    )


def test_known_cycle_edges_still_exist():
    """A known exception that no longer exists is dropped from KNOWN_CYCLE_EDGES."""
    graph = import_graph(find_modules())
    gone = [e for e in KNOWN_CYCLE_EDGES if e[1] not in graph.get(e[0], ())]
    assert not gone, f"no longer imported, drop from KNOWN_CYCLE_EDGES: {gone}"


def test_cycle_finder_finds_one():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(g) == [["a", "b", "c", "a"], ["e", "e"]]
