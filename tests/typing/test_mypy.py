"""The embedding API is typed where the docs import it: `python -m mypy --strict` (its files and
settings are pyproject's [tool.mypy]) passes on the API's modules and on examples/embed_typed.py,
which may hold no expression of type Any; the example in docs/embedding.md passes the same
check; what a type checker sees of each documented name is its real signature."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "embed_typed.py"
DOCUMENTED = "from vm import Decision, Options, RequestError, handle, resume, run"


@pytest.fixture(scope="module")
def mypy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("mypy-cache")

    def check(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir",
                               str(cache), "--config-file", str(ROOT / "pyproject.toml"), *argv],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
    return check


def test_the_api_modules_and_the_example_pass_strict_with_no_any(mypy):
    proc = mypy()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found in 8 source files" in proc.stdout


def test_an_any_in_the_example_fails_the_check(mypy, tmp_path):
    """The override that forbids Any applies to the example (a check that cannot fail proves
    nothing)."""
    copy = tmp_path / EXAMPLE.name
    copy.write_text(EXAMPLE.read_text() + "\nimport json\nLOADED = json.loads('1')\n")
    proc = mypy(str(copy))
    assert proc.returncode == 1 and 'Expression has type "Any"' in proc.stdout, proc.stdout


def test_the_example_uses_the_documented_imports_and_runs(tmp_path):
    assert DOCUMENTED in EXAMPLE.read_text()
    proc = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[1, 2, 1, 2]\n"


def test_the_embedding_guides_example_passes_the_same_check(mypy, tmp_path):
    text = (ROOT / "docs" / "embedding.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks and "from vm import" in blocks[0]
    for index, block in enumerate(blocks):
        path = tmp_path / f"embedding_{index}.py"
        path.write_text(block)
        proc = mypy("--disallow-any-expr", str(path))
        assert proc.returncode == 0, f"block {index}:\n{block}\n{proc.stdout}"


def test_a_type_checker_sees_each_documented_name(mypy, tmp_path):
    names = ("handle", "Options", "run", "resume", "Decision", "RequestError")
    probe = tmp_path / "probe.py"
    probe.write_text("from vm import " + ", ".join(names) + "\n"
                     + "".join(f"reveal_type({name})\n" for name in names))
    proc = mypy(str(probe))
    revealed = re.findall(r'Revealed type is "(.*)"', proc.stdout)
    assert len(revealed) == len(names), proc.stdout
    seen = dict(zip(names, revealed))
    assert [name for name, shown in seen.items() if shown == "Any"] == [], seen
    assert "-> TypedDict(vm.service.messages.FinishedEnvelope" in seen["handle"]
    assert "TypedDict(vm.service.messages.ErrorEnvelope" in seen["run"]
    assert "TypedDict(vm.service.messages.ApprovalEnvelope" in seen["resume"]
    assert "state_dir: str | None" in seen["Options"]
    assert "-> vm.service.protocol.resuming.Decision" in seen["Decision"]
    assert "-> vm.service.protocol.envelope.RequestError" in seen["RequestError"]


@pytest.mark.parametrize("package", ["vm/__init__.py", "vm/service/protocol/__init__.py"])
def test_what_the_type_checker_reads_is_what_is_loaded(package):
    """A package's names for a type checker (`if TYPE_CHECKING:` imports) are the names it
    loads on first use (`_EXPORTS`), from the same modules."""
    tree = ast.parse((ROOT / package).read_text())
    exports = typed = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_EXPORTS":
            exports = ast.literal_eval(node.value)
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            typed = {alias.asname or alias.name: item.module for item in node.body
                     if isinstance(item, ast.ImportFrom) for alias in item.names}
    assert exports is not None and typed is not None
    prefix = "" if package == "vm/__init__.py" else "vm.service.protocol."
    assert typed == {name: prefix + module for name, module in exports.items()}
