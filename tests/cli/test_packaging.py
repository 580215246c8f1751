"""The package a user installs: the wheel's contents and metadata, the grammars as the
compiler's package data, the version's one home, and the embedding API's documentation
(docstrings, the typed messages against the request table, Options and the environment
variables in docs/embedding.md)."""

from __future__ import annotations

import ast
import email
import inspect
import os
import re
import subprocess
import sys
import typing
import zipfile
from pathlib import Path

import attrs
import pytest

import vm
import vm.service.admin
import vm.service.messages as messages
from vm.service.protocol import REQUEST_FIELDS, REQUIRED_FIELDS, Options, handle

ROOT = Path(__file__).resolve().parents[2]
DIST = "lobster-pipelines"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="the test extra installs hatchling to build wheels")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True)
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_installs_vm_and_lobsterc_and_nothing_else_at_the_top(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"vm", "lobsterc", f"lobster_pipelines-{vm.__version__}.dist-info"}
    assert "grammar/pipeline.lark" not in names


def test_the_grammars_and_type_markers_are_package_data(wheel):
    archive = zipfile.ZipFile(wheel)
    for name in ("pipeline.lark", "expr.lark"):
        assert archive.read(f"lobsterc/grammar/{name}") == (ROOT / "grammar" / name).read_bytes()
    assert "vm/py.typed" in archive.namelist()
    assert "lobsterc/py.typed" in archive.namelist()


def test_the_metadata_names_the_distribution_its_version_and_scripts(wheel):
    archive = zipfile.ZipFile(wheel)
    info = f"lobster_pipelines-{vm.__version__}.dist-info"
    meta = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    assert meta["Name"] == DIST
    assert meta["Version"] == vm.__version__
    assert meta["License-Expression"] == "MIT"
    assert f"{info}/licenses/LICENSE" in archive.namelist()
    scripts = archive.read(f"{info}/entry_points.txt").decode()
    assert "lobster = lobsterc.frontend:lobster" in scripts
    assert "lobsterc = lobsterc.tools.cli:main" in scripts
    # the original's package ships these two as well (each runs one gateway call)
    assert "openclaw.invoke = lobsterc.frontend:openclaw_invoke" in scripts
    assert "clawd.invoke = lobsterc.frontend:clawd_invoke" in scripts


def test_the_unpacked_wheel_compiles_and_runs_from_its_own_grammar(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import sys; from lobsterc.syntax import grammars; print(grammars.directory());"
        "from lobsterc.frontend import lobster;"
        "sys.exit(lobster(['run', '--mode', 'tool', "
        "\"exec --json --shell 'echo [7]' | pick x\"]))")
    env = {**os.environ, "PYTHONPATH": str(site), "LOBSTER_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first, _, rest = done.stdout.partition("\n")
    assert Path(first) == site / "lobsterc" / "grammar"
    assert '"ok": true' in rest


def test_the_version_has_one_home():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert 'path = "vm/__init__.py"' in pyproject
    assert not re.search(r'^version\s*=', pyproject, re.M)
    done = subprocess.run([sys.executable, "-m", "vm.cli.main", "version"], capture_output=True,
                          text=True)
    assert done.stdout.strip() == vm.__version__
    assert f"## {vm.__version__}" in (ROOT / "CHANGELOG.md").read_text()


# the embedding API ------------------------------------------------------------------------
def _public_members(cls) -> list[str]:
    return [name for name, value in vars(cls).items()
            if not name.startswith("_")
            and (inspect.isfunction(value) or isinstance(value, (classmethod, staticmethod)))]


def test_every_public_name_of_the_embedding_api_is_documented():
    undocumented = []
    for name in vm.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(vm, name)
        if not inspect.getdoc(obj):
            undocumented.append(name)
        if inspect.isclass(obj):
            for member in _public_members(obj):
                if not inspect.getdoc(getattr(obj, member)):
                    undocumented.append(f"{name}.{member}")
    for name, obj in vars(vm.service.admin).items():
        if inspect.isfunction(obj) and obj.__module__ == "vm.service.admin" and not name.startswith("_"):
            if not inspect.getdoc(obj):
                undocumented.append(f"vm.service.admin.{name}")
    for name in messages.__all__:
        if not inspect.getdoc(getattr(messages, name)) and name not in ("Request", "Envelope", "OkEnvelope", "Json"):
            undocumented.append(f"vm.service.messages.{name}")
    assert undocumented == []


def test_the_request_types_are_the_request_table():
    for action, typed in (("run", messages.RunRequest), ("resume", messages.ResumeRequest)):
        assert set(typed.__annotations__) - {"action"} == set(REQUEST_FIELDS[action])
        assert typed.__required_keys__ == {"action", *REQUIRED_FIELDS[action]}


def _conforms(value: dict, typed) -> None:
    assert set(value) <= set(typed.__annotations__), set(value) - set(typed.__annotations__)
    assert typed.__required_keys__ <= set(value)
    for key, hint in typing.get_type_hints(typed).items():  # the tags a type checker narrows on
        if typing.get_origin(hint) is typing.Literal:
            assert value[key] in typing.get_args(hint), (key, value[key])
        elif hint is type(None):
            assert value[key] is None, key


def test_real_envelopes_have_the_typed_shapes(tmp_path):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={
        **os.environ, "LOBSTER_APPROVAL_INITIATED_BY": "ana"})
    done = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]'"}, options)
    _conforms(done, messages.FinishedEnvelope)
    halt = handle({"action": "run", "pipeline":
                   "exec --json --shell 'echo [1]' | approve --preview-from-stdin --prompt p"},
                  options)
    _conforms(halt, messages.ApprovalEnvelope)
    _conforms(halt["requiresApproval"], messages.ApprovalRequest)
    asked = handle({"action": "run", "pipeline":
                    "exec --json --shell 'echo [1]' | ask --prompt q --schema '{\"type\":\"string\"}'"},
                   options)
    _conforms(asked, messages.InputEnvelope)
    _conforms(asked["requiresInput"], messages.InputRequest)
    failed = handle({"action": "run", "pipeline": "nosuch"}, options)
    _conforms(failed, messages.ErrorEnvelope)
    _conforms(failed["error"], messages.ErrorInfo)
    _conforms(failed["error"]["location"], messages.Location)


def _embedding_section(title: str) -> str:
    """One section of docs/embedding.md, from its heading to the next."""
    text = (ROOT / "docs" / "embedding.md").read_text()
    start = text.index(title)
    end = text.find("\n#", start + len(title))
    return text[start:end]


def test_every_option_is_documented_in_its_docstring_and_the_embedding_guide():
    table = _embedding_section("# Embedding it in Python")
    for field in attrs.fields(Options):
        assert f"`{field.name}`" in Options.__doc__, field.name
        assert f"| `{field.name}` |" in table, field.name


def _variables_read() -> set[str]:
    """Every string constant in vm/ and lobsterc/ that names one of Lobster's variables."""
    pattern = re.compile(r"(LOBSTER|LLM_TASK)_[A-Z][A-Z0-9_]*")
    found = set()
    for package in ("vm", "lobsterc"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and pattern.fullmatch(node.value):
                    found.add(node.value)
    return found


def test_every_environment_variable_lobster_reads_is_in_the_embedding_guide_table():
    table = _embedding_section("## Environment variables")
    found = _variables_read()
    assert "LOBSTER_STATE_DIR" in found and "LOBSTER_CACHE_DIR" in found  # the scan sees them
    assert sorted(name for name in found if name not in table) == []
