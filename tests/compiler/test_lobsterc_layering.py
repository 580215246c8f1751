"""lobsterc's phases, read statically from the source: syntax < load < check < generate < tools
< frontend. A module imports only its own phase and the phases before it (function-level,
`if TYPE_CHECKING:`, relative and importlib.import_module imports all count), so no cycle can
run between phases (a cycle inside one phase is tests/machine/test_import_cycles.py's), and no
module reads a private name (a leading underscore) of another module, by `from M import _x` or
by `M._x`.

`lobsterc` itself and `lobsterc.diagnostics` (Diagnostic, CompileError, the renderer) belong to
the first phase: every phase reports through them.

KNOWN lists the upward imports not yet removed, each with the engineer who owns it; the list
only shrinks (a listed import that is gone fails until its line is deleted).
`python tests/compiler/test_lobsterc_layering.py` prints every upward or private import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("syntax", "load", "check", "generate", "tools", "frontend", "__main__")  # -m lobsterc last
FIRST = {"lobsterc", "lobsterc.diagnostics"}  # shared by every phase: the first one's

# (importing module, imported module) -> owner: the load <-> check cycle, which "front" removes
# (lobsterc/load/build.py moves under check/).
KNOWN: dict[tuple[str, str], str] = {
    ("lobsterc.load.build", "lobsterc.check.checker"): "front",
    ("lobsterc.load.build", "lobsterc.check.stages"): "front",
    ("lobsterc.load.build", "lobsterc.check.problems"): "front",
    ("lobsterc.load.build", "lobsterc.check.values"): "front",
}


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "lobsterc").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def phase(module: str) -> str:
    if module in FIRST:
        return PHASES[0]
    part = module.split(".")[1]
    if part not in PHASES:
        raise AssertionError(f"{module} is in no phase: put it under one of {PHASES}")
    return part


class Import:
    def __init__(self, module: str, line: int, target: str, name: str | None = None):
        self.module, self.line, self.target, self.name = module, line, target, name

    def __repr__(self) -> str:
        what = f"{self.target}.{self.name}" if self.name else self.target
        return f"{self.module}:{self.line} imports {what}"


def scan(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """Every import of a lobsterc module by `name` (the module, or the module a `from` names),
    and every private name it reads from one (`name` set)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[Import] = []
    bound: dict[str, str] = {}  # local name -> the lobsterc module it stands for

    def add(target: str, line: int, private: str | None = None) -> None:
        if target in known and target != name:
            found.append(Import(name, line, target, private))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
                if alias.asname and alias.name in known:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                inner = f"{base}.{alias.name}"
                if inner in known:
                    add(inner, node.lineno)
                    bound[alias.asname or alias.name] = inner
                else:
                    add(base, node.lineno, alias.name if alias.name.startswith("_") else None)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if (called in ("import_module", "__import__") and isinstance(first, ast.Constant)
                    and isinstance(first.value, str)):
                add(first.value, node.lineno)
    for node in ast.walk(tree):  # M._x where M is a lobsterc module bound above
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                and node.value.id in bound):
            add(bound[node.value.id], node.lineno, node.attr)
    return found


def every_import(root: Path = ROOT) -> list[Import]:
    known = modules(root)
    return [found for name, path in known.items() for found in scan(name, path, known)]


def upward(imports: list[Import]) -> list[Import]:
    return [i for i in imports if PHASES.index(phase(i.target)) > PHASES.index(phase(i.module))]


def private(imports: list[Import]) -> list[Import]:
    return [i for i in imports if i.name is not None]


def test_every_module_is_in_a_phase():
    for name in modules():
        phase(name)


def test_no_module_imports_a_later_phase():
    found = [i for i in upward(every_import()) if (i.module, i.target) not in KNOWN]
    assert found == []


def test_every_known_exception_is_still_there():
    """A removed upward import comes off KNOWN: the list only shrinks."""
    present = {(i.module, i.target) for i in upward(every_import())}
    assert [pair for pair in KNOWN if pair not in present] == []


def test_no_module_reads_a_private_name_of_another():
    assert private(every_import()) == []


def phase_cycles(imports: list[Import]) -> set[frozenset[str]]:
    """The phases that reach each other through imports (every import counts, KNOWN too)."""
    edges: dict[str, set[str]] = {p: set() for p in PHASES}
    for i in imports:
        edges[phase(i.module)].add(phase(i.target))
    reach = {p: set(edges[p]) for p in PHASES}
    for _ in PHASES:
        for p in PHASES:
            reach[p] |= {r for q in reach[p] for r in reach[q]}
    return {frozenset({p, q}) for p in PHASES for q in PHASES
            if p != q and q in reach[p] and p in reach[q]}


def test_the_phases_have_no_cycle_but_the_known_one():
    known = {frozenset({phase(a), phase(b)}) for a, b in KNOWN}
    assert phase_cycles(every_import()) == known


@pytest.mark.parametrize("source, expected", [
    ("def f():\n    from lobsterc.tools.cli import main\n", ["tools.cli"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..generate import codegen\n",
     ["generate.codegen"]),
    ("import importlib\nimportlib.import_module('lobsterc.frontend')\n", ["frontend"]),
    ("import lobsterc.tools.lint as lint\n", ["tools.lint"]),
    ("from lobsterc.syntax import ast\nfrom lobsterc.load import build\n", []),
])
def test_the_scan_sees_every_kind_of_upward_import(tmp_path: Path, source: str, expected):
    tree = tmp_path / "lobsterc"
    for name in ("__init__", "frontend", "syntax/__init__", "syntax/ast", "load/__init__",
                 "load/build", "check/__init__", "check/x", "generate/__init__",
                 "generate/codegen", "tools/__init__", "tools/cli", "tools/lint"):
        (tree / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
        (tree / f"{name}.py").write_text(source if name == "check/x" else "")
    found = upward(every_import(tmp_path))
    assert [i.target.removeprefix("lobsterc.") for i in found] == expected
    assert all(i.module == "lobsterc.check.x" for i in found)


def test_the_scan_sees_a_private_name_read_either_way(tmp_path: Path):
    tree = tmp_path / "lobsterc" / "tools"
    tree.mkdir(parents=True)
    (tmp_path / "lobsterc" / "__init__.py").write_text("")
    (tree / "__init__.py").write_text("")
    (tree / "a.py").write_text("_x = 1\ndef _own():\n    return _x\n")
    (tree / "b.py").write_text("from lobsterc.tools.a import _x\nfrom lobsterc.tools import a\n"
                               "y = a._own()\nz = a.__name__\n")
    found = private(every_import(tmp_path))
    assert [(i.module, i.line, i.name) for i in found] == [
        ("lobsterc.tools.b", 1, "_x"), ("lobsterc.tools.b", 3, "_own")]


if __name__ == "__main__":
    for item in upward(every_import()) + private(every_import()):
        owner = KNOWN.get((item.module, item.target), "")
        print(f"{item!r}  {f'[known: {owner}]' if owner else ''}")
