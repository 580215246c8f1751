"""The import rules, read statically from the source (function bodies and importlib calls
included): `vm` never imports the compiler (lark, lobsterc, grammar), each `vm` layer imports
only the layers below it (core < isa < host < engine < service < cli), and `lobsterc` imports
only the VM's public interface (vm.PUBLIC_MODULES, no private names). Then, at run time:
importing the VM or resuming a real halted run loads no parser."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lobsterc.frontend
import vm
from conftest import LOBSTER, ROOT, imported_by_lobster
from vm.service.frontend import Frontend
from vm.service.protocol import Options, handle

PARSER = ("lark", "lobsterc", "grammar")
VM_SOURCES = sorted((ROOT / "vm").rglob("*.py"))


LAYERS = ("core", "isa", "host", "engine", "service", "cli",  # each imports only those before it
          "__main__")  # `python -m vm`: the command line, above everything
LOBSTERC_SOURCES = sorted((ROOT / "lobsterc").rglob("*.py"))


def imports(tree: ast.AST, package: str = "") -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names) of every import: statements anywhere (function bodies included;
    a relative one resolved from `package`) and string literals handed to
    importlib.import_module / __import__. `names` are a `from` import's, else ()."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[:len(parts) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            if module:
                found.append((node.lineno, module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.append((node.lineno, first.value, ()))
    return found


def forbidden_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import of the compiler."""
    return [(line, module) for line, module, _ in imports(tree)
            if module.split(".")[0] in PARSER]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_name(path: Path) -> str:
    """The package a relative import in `path` starts from."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def targets(module: str, names: tuple[str, ...]) -> list[str]:
    """What an import reaches: the module, or for `from PACKAGE import MODULE` the module."""
    inner = [f"{module}.{name}" for name in names if is_module(f"{module}.{name}")]
    return inner or [module]


def layer(module: str) -> str | None:
    """`vm.LAYER....` -> LAYER; None for `vm` itself (the lazy facade) and other packages."""
    parts = module.split(".")
    return parts[1] if parts[0] == "vm" and len(parts) > 1 and parts[1] in LAYERS else None


def upward_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a layer above the one `path` is in."""
    own = layer(module_name(path))
    if own is None:
        return []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for line, module, names in imports(tree, package_name(path)):
        for target in targets(module, names):
            other = layer(target)
            if other is not None and LAYERS.index(other) > LAYERS.index(own):
                found.append((line, target))
    return found


def is_public(module: str) -> bool:
    for entry in vm.PUBLIC_MODULES:
        if module == entry.removesuffix(".*") or (entry.endswith(".*")
                                                  and module.startswith(entry[:-1])):
            return True
    return False


def private_imports(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every import of the VM outside its public interface: a module not in
    vm.PUBLIC_MODULES, a name with a leading underscore, or a name a module with `__all__`
    leaves out of it (`vm.service.protocol`'s helpers live in its modules, not in it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for line, module, names in imports(tree, package_name(path)):
        if module.split(".")[0] != "vm":
            continue
        for target in targets(module, names):
            if not is_public(target):
                found.append((line, target))
        exported = getattr(importlib.import_module(module), "__all__", None)
        found += [(line, f"{module}.{name}") for name in names
                  if not is_module(f"{module}.{name}") and name != "__version__"
                  and (name.startswith("_") or (exported is not None and name not in exported))]
    return found


def test_the_scan_sees_every_kind_of_import():
    source = ("import os\n"
              "def f():\n    import lark\n    from lobsterc.generate.codegen import x\n"
              "    import importlib\n    importlib.import_module('lobsterc.generate.workflow')\n"
              "    return __import__('grammar')\n"
              "from vm import lobsterc_like\n")
    assert [name for _, name in forbidden_imports(ast.parse(source))] == [
        "lark", "lobsterc.generate.codegen", "lobsterc.generate.workflow", "grammar"]


@pytest.mark.parametrize("path", VM_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_vm_module_imports_the_compiler(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    assert forbidden_imports(tree) == []


def test_every_vm_module_is_in_a_layer():
    assert [module_name(p) for p in VM_SOURCES if layer(module_name(p)) is None] == ["vm"]


@pytest.mark.parametrize("path", VM_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_vm_module_imports_a_higher_layer(path: Path):
    assert upward_imports(path) == []


def test_the_layer_scan_sees_every_kind_of_upward_import():
    source = ("from vm.core import js\n"  # down: fine
              "from vm.isa import codec\n"  # the same layer: fine
              "def f():\n    from vm.service.protocol import handle\n"
              "    import vm.cli.main\n"
              "    from vm import engine\n"
              "    from ..host import process\n"
              "    import importlib\n    importlib.import_module('vm.service.admin')\n"
              "from vm import __version__\n")  # the facade: fine
    tree = ast.parse(source)
    found = []
    for line, module, names in imports(tree, "vm.isa"):
        found += [target for target in targets(module, names)
                  if layer(target) and LAYERS.index(layer(target)) > LAYERS.index("isa")]
    assert found == ["vm.service.protocol", "vm.cli.main", "vm.engine", "vm.host.process",
                     "vm.service.admin"]


@pytest.mark.parametrize("path", LOBSTERC_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_lobsterc_imports_only_the_public_interface_of_the_vm(path: Path):
    assert private_imports(path) == []


def test_the_public_interface_is_written_down_and_exists():
    doc = vm.__doc__ or ""
    for entry in vm.PUBLIC_MODULES:
        assert f"`{entry}`" in doc, entry
        assert is_module(entry.removesuffix(".*")), entry
    assert is_public("vm.isa.codec") and is_public("vm.service.frontend")
    assert not is_public("vm.service.protocol.running") and not is_public("vm.cli.run")
    assert not is_public("vm.host.process") and not is_public("vm.engine.interp")


def test_lobsterc_provides_the_frontend_vm_declares():
    members = [name for name in dir(Frontend) if not name.startswith("_")]
    members += list(Frontend.__annotations__)
    missing = [name for name in members if not hasattr(lobsterc.frontend, name)]
    assert members and missing == []
REPORT = ("import sys, json; print(json.dumps(sorted(m for m in sys.modules "
          f"if m.split('.')[0] in {PARSER!r})), file=sys.stderr)")


def park(cli, pipeline: str) -> dict:
    """A real checkpoint in the fixture's state dir (compiled here, in the test process)."""
    options = Options(state_dir=str(cli.state), cwd=str(cli.work), env=dict(cli.env),
                      mode="tool")
    return handle({"action": "run", "pipeline": pipeline}, options)


def python(code: str, cli) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cli.work, env=cli.env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def parser_modules(proc: subprocess.CompletedProcess) -> list[str]:
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_importing_the_vm_loads_no_parser(cli):
    proc = python("import vm, vm.service.protocol.request, vm.service.admin, vm.engine.machine, "
                  f"vm.cli.main, vm.cli.run, vm.isa.codec, vm.host.store\n{REPORT}", cli)
    assert proc.returncode == 0, proc.stderr
    assert parser_modules(proc) == []


def resume_in_fresh_python(cli, *argv: str) -> tuple[dict, list[str]]:
    code = (f"import sys, vm.cli.main\nrc = vm.cli.main.main({list(argv)!r})\nsys.stdout.flush()\n"
            f"{REPORT}\nsys.exit(rc)")
    proc = python(code, cli)
    return json.loads(proc.stdout), parser_modules(proc)


def test_resuming_a_halted_run_loads_no_parser(cli):
    envelope = park(cli, "exec --json echo '[{\"a\":1},{\"a\":2}]' | approve"
                         " | where a>=2 | template --text '{{a | upper}}' | ask"
                         " | map --wrap answer")
    token = envelope["requiresApproval"]["resumeToken"]
    envelope, loaded = resume_in_fresh_python(cli, "resume", "--token", token, "--approve", "yes")
    assert envelope["status"] == "needs_input", envelope
    assert loaded == []
    token = envelope["requiresInput"]["resumeToken"]
    envelope, loaded = resume_in_fresh_python(cli, "resume", "--token", token,
                                              "--response-json", '{"decision":"approve"}')
    assert envelope["output"] == [{"answer": {"decision": "approve"}}], envelope
    assert loaded == []


def test_resume_by_id_through_lobster_tool_loads_no_parser(cli):
    envelope = park(cli, "exec --json echo '[1]' | approve | sort")
    approval_id = envelope["requiresApproval"]["approvalId"]
    request = json.dumps({"action": "resume", "approvalId": approval_id, "approve": True})
    envelope, loaded = resume_in_fresh_python(cli, "tool", request)
    assert envelope["output"] == [1], envelope
    assert loaded == []


def test_running_a_pipeline_does_compile_it(cli):
    # the check above means something: running pipeline text does import the parser
    code = (f"import sys, vm.cli.main\nrc = vm.cli.main.main(['run', '--mode', 'tool', 'exec echo hi'])\n"
            f"sys.stdout.flush()\n{REPORT}")
    proc = python(code, cli)
    assert "lark" in parser_modules(proc)


def test_the_lobster_script_resumes_without_the_parser_or_an_entry_point_lookup(cli):
    token = park(cli, "exec --json echo '[1]' | approve | sort")["requiresApproval"]["resumeToken"]
    out, modules = imported_by_lobster(cli, "resume", "--token", token, "--approve", "yes")
    assert json.loads(out)["output"] == [1]
    assert "lobsterc.frontend" in modules  # the script is lobsterc's wiring of vm's CLI
    assert not modules & {"lark", "lobsterc.syntax.parse", "lobsterc.generate.cache", "lobsterc.diagnostics",
                          "importlib.metadata"}


def test_lobster_help_loads_none_of_the_machine(cli):
    out, modules = imported_by_lobster(cli, "--help")
    assert out.startswith("lobster - run tool pipelines")
    assert "vm.cli.help" in modules
    assert sorted(m for m in modules if m.startswith(("vm.engine", "vm.isa", "vm.host",
                                                      "vm.service.protocol.running"))) == []


def layout_map(layout: str) -> dict[str, set[str]]:
    """docs/layout.md's map (its first fenced block), read as folder -> every word written
    under it (its entry
    lines and their continuation lines). Entries are indented by depth; descriptions start in
    a column past any entry, so a line indented that far continues the entry above. A folder's
    own name counts as written under its parent."""
    block = layout.split("```\n", 2)[1]
    words: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = []
    folder = ""
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        tokens = re.findall(r"[\w.]+/?", line)
        if indent < 20 and tokens:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1] if stack else ""
            if tokens[0].endswith("/"):
                words.setdefault(parent, set()).add(tokens[0].rstrip("/"))
                folder = parent + tokens[0]
                stack.append((indent, folder))
            else:
                folder = parent
        words.setdefault(folder, set()).update(token.rstrip("/") for token in tokens)
    return words


def test_the_layout_map_names_every_module_under_its_folder():
    words = layout_map((ROOT / "docs" / "layout.md").read_text(encoding="utf-8"))
    missing = []
    for package in ("vm", "lobsterc"):
        for path in sorted((ROOT / package).rglob("*.py")):
            named = path.parent if path.name == "__init__.py" else path
            if named.parent == ROOT:
                continue  # vm/ and lobsterc/ themselves
            folder = str(named.parent.relative_to(ROOT)) + "/"
            if not {named.stem, named.name} & words.get(folder, set()):
                missing.append(str(named.relative_to(ROOT)))
    assert missing == []


def test_the_layout_check_sees_a_module_named_in_the_wrong_folder():
    layout = ("# Layout\n```\nvm/    x\n  core/   y\n    js.py   z\n"
              "                         bounds continues js's entry\n  isa/   w\n```\n")
    words = layout_map(layout)
    assert {"js.py", "bounds"} <= words["vm/core/"] and "core" in words["vm/"]
    assert "js.py" not in words["vm/isa/"] and "js.py" not in words["vm/"]

def test_no_module_is_over_500_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for package in ("vm", "lobsterc") for p in (ROOT / package).rglob("*.py")}
    assert sizes["vm/core/js.py"] > 0
    assert {name: n for name, n in sizes.items() if n > 500} == {}
