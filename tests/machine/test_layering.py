"""`vm` never imports the compiler: no import of lark, lobsterc or grammar anywhere in its
source, and importing the VM or resuming a real halted run loads none of them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import lobsterc.frontend
from conftest import LOBSTER, ROOT, imported_by_lobster
from vm.service.frontend import Frontend
from vm.service.protocol import Options, handle

PARSER = ("lark", "lobsterc", "grammar")
VM_SOURCES = sorted((ROOT / "vm").rglob("*.py"))


def forbidden_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import of the compiler: statements anywhere (function bodies
    included) and string literals handed to importlib.import_module / __import__."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names = [first.value]
        found += [(node.lineno, name) for name in names if name.split(".")[0] in PARSER]
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
    proc = python(f"import vm, vm.service.protocol, vm.engine.machine, vm.cli.main, vm.isa.codec, vm.host.store\n{REPORT}",
                  cli)
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
