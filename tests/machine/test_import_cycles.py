"""No import cycles in vm/ and lobsterc/: the import graph read statically from the source
(top-level, function-level and `if TYPE_CHECKING:` imports, relative imports resolved,
importlib.import_module of a literal name) has no strongly connected component of more than
one module. `import a.b` is an edge to a.b; `from a import b` is an edge to a.b when that is a
module, else to a.

STILL_PRESENT lists the cycles not yet removed, each with the engineer who owns it. The test
fails when a cycle appears that is not listed, and when a listed one is gone (then delete its
line): the list only shrinks. `python tests/machine/test_import_cycles.py` prints the cycles."""

from __future__ import annotations

import ast
import sys
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("vm", "lobsterc")

# Cycles still in the tree (the modules of each strongly connected component) -> owner.
STILL_PRESENT: dict[frozenset[str], str] = {
    frozenset({"vm.host.store.base", "vm.host.store.claims"}): "store",
    frozenset({"vm.host.store.leases", "vm.host.store.lifecycle"}): "store",
    frozenset({"vm.core.schema", "vm.core.schema_compile", "vm.core.schema_refs"}): "libs",
    frozenset({"lobsterc.check.checker", "lobsterc.check.problems", "lobsterc.check.values",
               "lobsterc.load.build"}): "front",
    frozenset({"vm.engine.interp", "vm.engine.parallel"}): "kernel",
}

Graph = dict[str, dict[str, int]]  # module -> {imported module: line of the first such import}


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Graph:
    """Every module's imports of the other modules under `packages`."""
    known = modules(root, packages)
    graph: Graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}

        def add(target: str, line: int) -> None:
            if target in known and target != name:
                edges.setdefault(target, line)

        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                inner = [f"{base}.{alias.name}" for alias in node.names
                         if f"{base}.{alias.name}" in known]
                for target in inner or [base]:
                    add(target, node.lineno)
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                first = node.args[0]
                if (called in ("import_module", "__import__") and isinstance(first, ast.Constant)
                        and isinstance(first.value, str)):
                    add(first.value, node.lineno)
        graph[name] = edges
    return graph


def components(graph: Graph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(frozenset(members))
    return sorted(found, key=sorted)


def one_cycle(graph: Graph, members: frozenset[str]) -> list[str]:
    """A shortest cycle through the component's first module, as `module:line` hops."""
    start = min(members)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child not in members:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                path.reverse()
                hops = [*path, start]
                return [f"{a} (line {graph[a][b]})" for a, b in zip(hops, hops[1:])] + [start]
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"no cycle through {start}")


def describe(graph: Graph, members: frozenset[str]) -> str:
    return " -> ".join(one_cycle(graph, members))


def report(graph: Graph) -> str:
    lines = []
    for members in components(graph):
        owner = STILL_PRESENT.get(members, "NEW")
        lines.append(f"[{owner}] {', '.join(sorted(members))}\n    {describe(graph, members)}")
    return "\n".join(lines) or "no import cycles"


def test_no_import_cycle_beyond_the_listed_ones():
    graph = import_graph()
    new = [members for members in components(graph) if members not in STILL_PRESENT]
    assert not new, "import cycles not in STILL_PRESENT (a new one, or a listed one changed):\n" + \
        "\n".join(describe(graph, members) for members in new)


def test_every_listed_cycle_is_still_there():
    """A cycle that is gone comes off the list, so the list only shrinks."""
    found = set(components(import_graph()))
    gone = [sorted(members) for members in STILL_PRESENT if members not in found]
    assert not gone, f"these cycles are gone: delete them from STILL_PRESENT: {gone}"


def test_the_scan_sees_every_kind_of_import(tmp_path: Path):
    files = {
        "p/__init__.py": "",
        "p/a.py": "from . import b\n",  # relative: p.b
        "p/b.py": "def f():\n    from .sub import c\n",  # function level: p.sub.c
        "p/sub/__init__.py": "",
        "p/sub/c.py": ("from typing import TYPE_CHECKING\n"
                       "if TYPE_CHECKING:\n    from ..a import X\n"),  # type only: p.a
        "p/d.py": "import p.e\n",  # `import a.b`: p.e
        "p/e.py": "import importlib\nimportlib.import_module('p.d')\n",
        "p/f.py": "from p.sub import c\nfrom p import g\n",  # no cycle: f -> c, f -> g
        "p/g.py": "import os\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, ("p",))
    assert graph["p.a"] == {"p.b": 1} and graph["p.b"] == {"p.sub.c": 2}
    assert graph["p.sub.c"] == {"p.a": 3} and graph["p.d"] == {"p.e": 1}
    assert graph["p.f"] == {"p.sub.c": 1, "p.g": 2}
    assert components(graph) == [frozenset({"p.a", "p.b", "p.sub.c"}),
                                 frozenset({"p.d", "p.e"})]
    assert describe(graph, frozenset({"p.a", "p.b", "p.sub.c"})) == \
        "p.a (line 1) -> p.b (line 2) -> p.sub.c (line 3) -> p.a"


if __name__ == "__main__":
    print(report(import_graph()))
    sys.exit(0)
