"""Public ground: vm/ and lobsterc/ use only the public interfaces of CPython, the standard
library and their dependencies, read statically from every module's source (function bodies
included):

- no import of a private name from outside the project (a module or a name with a leading
  underscore: `_imp`, `_sha2`, `attrs._make`, `from operator import _compare_digest`), and no
  private attribute read off an imported outside module (`attrs._make`, `hmac._hashopenssl`);
- no patching: no assignment to (or `del`, or `setattr` of) an attribute of an imported outside
  module or of anything reached through one;
- no import machinery: nothing names `sys.meta_path`, `sys.path_hooks`,
  `sys.path_importer_cache`, or imports `importlib.abc`, `importlib.machinery` or
  `importlib.util` (the pieces a finder or loader is made of).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

OURS = ("vm", "lobsterc")
SOURCES = sorted([*(ROOT / "vm").rglob("*.py"), *(ROOT / "lobsterc").rglob("*.py")])
IMPORT_MACHINERY_ATTRS = frozenset({"meta_path", "path_hooks", "path_importer_cache"})
IMPORT_MACHINERY_MODULES = ("importlib.abc", "importlib.machinery", "importlib._bootstrap",
                            "importlib.util.spec_from", "importlib.util.module_from_spec",
                            "importlib.util.LazyLoader", "importlib.util.MAGIC_NUMBER")
# documented public functions whose names start with an underscore
DOCUMENTED = frozenset({"os._exit", "sys._getframe"})
# attributes the standard library documents as assignable (the standard streams)
ASSIGNABLE = frozenset({"sys.stdin", "sys.stdout", "sys.stderr"})


def private(name: str) -> bool:
    return any(part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
               for part in name.split("."))


def ours(module: str) -> bool:
    return module.split(".")[0] in OURS or module == "conftest"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[:len(package.split(".")) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def dotted(node: ast.AST) -> str | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(names)])


def violations(source: str, module: str, is_package: bool) -> list[str]:
    """Every breach of the rules above in one module's source, as `line: what`."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    outside: dict[str, str] = {}  # local name -> the outside module (or module.name) it binds
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name):
                    continue
                if private(alias.name):
                    found.append(f"{node.lineno}: imports private {alias.name}")
                if alias.name.startswith(IMPORT_MACHINERY_MODULES):
                    found.append(f"{node.lineno}: imports import machinery {alias.name}")
                local = alias.asname or alias.name.partition(".")[0]
                outside[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node, package)
            if ours(base) or base == "__future__":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if private(full):
                    found.append(f"{node.lineno}: imports private {full}")
                if full.startswith(IMPORT_MACHINERY_MODULES):
                    found.append(f"{node.lineno}: imports import machinery {full}")
                outside[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = dotted(node)
            root = root_name(node)
            if root in outside and name is not None:
                full = outside[root] + name[len(root):]
                if (node.attr.startswith("_") and not private(outside[root]) and
                        not (node.attr.startswith("__") and node.attr.endswith("__")) and
                        full not in DOCUMENTED):
                    found.append(f"{node.lineno}: reads private {full}")
            if (root in outside and name is not None and (outside[root] + name[len(root):])
                    .startswith(IMPORT_MACHINERY_MODULES)):
                found.append(f"{node.lineno}: uses import machinery {name}")
            if node.attr in IMPORT_MACHINERY_ATTRS:
                found.append(f"{node.lineno}: names import machinery .{node.attr}")
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("setattr", "delattr") and node.args):
            if root_name(node.args[0]) in outside:
                found.append(f"{node.lineno}: patches {outside[root_name(node.args[0])]} "
                             f"({node.func.id})")
        for target in targets:
            for part in ast.walk(target):
                root = root_name(part)
                name = dotted(part) if isinstance(part, ast.Attribute) else None
                if name is not None and root in outside and (
                        outside[root] + name[len(root):]) in ASSIGNABLE:
                    break
                if isinstance(part, (ast.Attribute, ast.Subscript)) and root_name(part) in outside:
                    found.append(f"{node.lineno}: patches {outside[root_name(part)]}")
                    break
    return found


def tree_violations(root: Path) -> dict[str, list[str]]:
    result = {}
    for path in sorted([*(root / "vm").rglob("*.py"), *(root / "lobsterc").rglob("*.py")]):
        parts = list(path.relative_to(root).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = violations(path.read_text(encoding="utf-8"), module, parts[-1] == "__init__")
        if found:
            result[str(path.relative_to(root))] = found
    return result


def test_vm_and_lobsterc_stand_on_public_ground():
    assert tree_violations(ROOT) == {}


@pytest.mark.parametrize("source, expected", [
    ("from _frozen_importlib_external import SourceFileLoader", "imports private"),
    ("import _imp", "imports private _imp"),
    ("from _sha2 import sha256", "imports private _sha2.sha256"),
    ("from operator import _compare_digest", "imports private operator._compare_digest"),
    ("import attrs\nattrs._make._compile_and_eval = None", "patches attrs"),
    ("import attrs\nx = attrs._make", "reads private attrs._make"),
    ("from attr import _make", "imports private attr._make"),
    ("import sys\nsys.meta_path.insert(0, object())", "names import machinery .meta_path"),
    ("import sys\nsys.path_hooks.append(len)", "names import machinery .path_hooks"),
    ("import importlib.machinery", "imports import machinery importlib.machinery"),
    ("import importlib.util\nimportlib.util.spec_from_loader('x', None)",
     "uses import machinery importlib.util.spec_from_loader"),
    ("import sys\nsys.modules['x'] = None", "patches sys"),
    ("from importlib.abc import MetaPathFinder", "imports import machinery"),
    ("import json\njson.dumps = repr", "patches json"),
    ("import json\nsetattr(json, 'dumps', repr)", "patches json (setattr)"),
    ("from attrs import Attribute\nAttribute.x = 1", "patches attrs.Attribute"),
    ("def f():\n    import re\n    re._cache.clear()", "reads private re._cache"),
])
def test_each_rule_can_fail(source, expected):
    found = violations(source, "vm.core.probe", False)
    assert any(expected in line for line in found), found


@pytest.mark.parametrize("source", [
    "import os\nos._exit(0)",  # documented
    "import sys, io\nsys.stdout = io.StringIO()",  # documented as assignable
    "import importlib.util\nimportlib.util.find_spec('yaml')",  # a question, no finder
    "from vm.core import js\njs.x = 1",  # ours
    "from . import _private",  # ours, relative
    "import json\nx = json.__name__",
    "import threading\nlocal = threading.local()\nlocal.value = 1",  # an instance, not the module
])
def test_what_the_rules_allow(source):
    assert violations(source, "vm.core.probe", False) == []
