"""Golden disassemblies: every golden/ source compiles to its committed .lbs text; together they
use every opcode; `lobsterc dis --check` reports drift; builds are deterministic.

Rewrite the .lbs files after an intended change with `pytest tests/compiler/test_golden.py --update-golden`
(then review the diff like code).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lobsterc.tools.cli import compile_target, main
from vm.isa import codec
from vm.isa.dis import disassemble
from vm.isa.opcodes import Op

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
SOURCES = sorted(p for p in GOLDEN.iterdir() if p.suffix in (".lobster", ".pipeline"))
NAMES = [p.name for p in SOURCES]
# Emitted by nothing the compiler produces today (the VM still implements them).
NOT_EMITTED = {Op.NOP, Op.LOAD_CONST, Op.MOVE}


def listing(src: Path) -> str:
    program, text = compile_target(str(src))
    return disassemble(program, text)


def test_there_are_enough_golden_sources():
    assert len(SOURCES) >= 8
    assert {p.suffix for p in SOURCES} == {".lobster", ".pipeline"}


@pytest.mark.parametrize("name", NAMES)
def test_golden_disassembly(name, request):
    src = GOLDEN / name
    golden = src.with_suffix(".lbs")
    text = listing(src)
    if request.config.getoption("--update-golden"):
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no {golden.name}: run pytest --update-golden"
    assert golden.read_text(encoding="utf-8") == text


def test_every_opcode_appears_in_a_golden_file():
    mnemonics = set()
    for src in SOURCES:
        for line in src.with_suffix(".lbs").read_text(encoding="utf-8").splitlines():
            if line.startswith("  "):
                mnemonics.add(line.split()[1])
    missing = {op for op in Op if op.name not in mnemonics} - NOT_EMITTED
    assert not missing, f"no golden file uses {sorted(op.name for op in missing)}"


def test_ops_listed_as_not_emitted_really_are_not():
    for src in SOURCES:
        program, _ = compile_target(str(src))
        assert not {Op(ins.op) for ins in program.code} & NOT_EMITTED


def test_dis_check_passes_on_the_committed_golden(capsys):
    src = GOLDEN / "approval.lobster"
    assert main(["dis", str(src), "--check", str(src.with_suffix(".lbs"))]) == 0
    assert capsys.readouterr().out == ""


def test_dis_check_infers_the_source_from_the_golden_header(capsys):
    goldens = [str(p.with_suffix(".lbs")) for p in SOURCES]
    assert main(["dis", "--check", *goldens]) == 0
    assert main(["dis", "--check", str(GOLDEN / "policies.lobster")]) == 0  # a source: its .lbs
    assert capsys.readouterr().out == ""


def test_dis_check_prints_a_unified_diff_on_drift(tmp_path, capsys):
    src = tmp_path / "flow.lobster"
    src.write_text("steps:\n  - id: a\n    run: echo a\n", encoding="utf-8")
    golden = tmp_path / "flow.lbs"
    assert main(["dis", str(src)]) == 0
    golden.write_text(capsys.readouterr().out, encoding="utf-8")
    src.write_text("steps:\n  - id: a\n    run: echo b\n", encoding="utf-8")
    assert main(["dis", "--check", str(golden)]) == 1
    diff = capsys.readouterr().out
    assert diff.startswith(f"--- {golden}\n+++ {src} (compiled)\n@@ ")
    changed = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
    assert [line[:10] for line in changed] == ["-; source ", "-; program", "+; source ",
                                                "+; program", "-  a.0    ", "+  a.0    "]
    assert changed[-1].endswith("; echo b")
    assert main(["dis", str(src), "--check", str(golden)]) == 1  # the explicit form


def test_dis_check_without_a_file_or_golden_is_a_usage_error(capsys):
    assert main(["dis"]) == 2


# determinism ----------------------------------------------------------------------------------

def _compile_in_child(src: Path, out: Path, seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    lobsterc = Path(sys.executable).parent / "lobsterc"
    subprocess.run([str(lobsterc), "compile", src.name, "-o", str(out)], cwd=src.parent,
                   env=env, check=True, capture_output=True, timeout=60)
    return out.read_bytes()


_COMPILE_ALL = """
import sys
from lobsterc.tools.cli import main
out = sys.argv[1]
for i, src in enumerate(sys.argv[2:]):
    assert main(["compile", src, "-o", f"{out}/{i}.lbc"]) == 0
"""


def test_compiling_twice_in_separate_processes_gives_identical_bytes(tmp_path):
    """One child process per build (different hash seeds, so set order would show)."""
    builds = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        out.mkdir()
        subprocess.run([sys.executable, "-c", _COMPILE_ALL, str(out), *map(str, SOURCES)],
                       env={**os.environ, "PYTHONHASHSEED": seed}, check=True,
                       capture_output=True, timeout=60)
        builds.append([(out / f"{i}.lbc").read_bytes() for i in range(len(SOURCES))])
    for name, first, second in zip(NAMES, *builds):
        assert first == second, name


def test_lbc_has_no_absolute_paths_or_timestamps(tmp_path):
    src = GOLDEN / "sub-workflow.lobster"  # compiles a second file too
    data = _compile_in_child(src, tmp_path / "out.lbc", "0")
    program = codec.load_program(data)
    assert program.header.source_name == "sub-workflow.lobster"
    for needle in (str(GOLDEN), str(GOLDEN.parent), str(tmp_path), os.path.expanduser("~")):
        assert needle.encode() not in data
    # the same bytes whatever directory it was compiled from
    copy = tmp_path / "elsewhere"
    (copy / "lib").mkdir(parents=True)
    for rel in ("sub-workflow.lobster", "lib/notes.lobster"):
        (copy / rel).write_bytes((GOLDEN / rel).read_bytes())
    assert _compile_in_child(copy / "sub-workflow.lobster", tmp_path / "b.lbc", "3") == data


def test_pre_commit_hooks_run_the_real_commands(capsys):
    import re

    from ruamel.yaml import YAML

    hooks = YAML(typ="safe").load((GOLDEN.parent / ".pre-commit-hooks.yaml").read_text())
    by_id = {hook["id"]: hook for hook in hooks}
    assert set(by_id) == {"lobsterc-lint", "lobsterc-dis-check"}
    for hook in hooks:
        assert hook["language"] == "python" and hook["entry"].startswith("lobsterc ")
    check = by_id["lobsterc-dis-check"]
    staged = [str(p) for p in sorted(GOLDEN.rglob("*")) if re.search(check["files"], p.name)]
    assert main(check["entry"].split()[1:] + staged) == 0  # sources without a .lbs: skipped
    lint = by_id["lobsterc-lint"]
    assert re.search(lint["files"], "deploy.lobster") and not re.search(lint["files"], "a.json")
