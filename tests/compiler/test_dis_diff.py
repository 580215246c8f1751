"""Diff-locality of the disassembly (SPEC 2): adding, removing or editing one step of a workflow
changes only that step's block and the two hash lines, checked with real diffs (difflib)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from lobsterc.generate.workflow import compile_workflow
from vm.isa.dis import disassemble

HASH_LINES = ("; source ", "; program ")

BASE = """\
# a workflow to edit
name: ship
steps:
  - id: build
    run: make build
    timeout_ms: 60000
  - id: test
    when: $build.json.ok
    run: make test
    retry:
      max: 2
  - id: report
    stdin: $test.json
    pipeline: pick name,status | table
  - id: review
    approval: Ship it?
  - id: deploy
    run: ./deploy.sh
    on_error: continue
"""

CHECK_STEP = """\
  - id: lint
    run: make lint
    timeout_ms: 1000
"""


def dis(tmp_path: Path, text: str, name: str = "flow.lobster") -> list[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return disassemble(compile_workflow(str(path)), text).splitlines()


def blocks(lines: list[str]) -> list[str]:
    """The block (step label, @prologue, @end) each line belongs to; `` for the header."""
    out, current = [], ""
    for line in lines:
        if line.startswith("step "):
            current = line[5:]
        elif line.startswith("@"):
            current = line
        out.append(current)
    return out


def changes(old: list[str], new: list[str]) -> list[tuple[str, str, str]]:
    """(sign, block, line) of every line a unified diff would mark."""
    out = []
    old_blocks, new_blocks = blocks(old), blocks(new)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        out += [("-", old_blocks[i], old[i]) for i in range(i1, i2)]
        out += [("+", new_blocks[j], new[j]) for j in range(j1, j2)]
    return out


def assert_local(old: list[str], new: list[str], step: str) -> None:
    diff = changes(old, new)
    assert [line for _, _, line in diff if line.startswith(HASH_LINES)], "hash lines changed"
    stray = [(sign, line) for sign, block, line in diff
             if not line.startswith(HASH_LINES) and block != step]
    assert not stray, "\n".join(f"{s} {line}" for s, line in stray)
    assert any(block == step for _, block, _ in diff)


def test_adding_a_step_changes_only_its_block(tmp_path):
    old = dis(tmp_path, BASE)
    new = dis(tmp_path, BASE.replace("  - id: test\n", CHECK_STEP + "  - id: test\n"))
    assert_local(old, new, "lint")
    assert all(sign == "+" for sign, _, line in changes(old, new)
               if not line.startswith(HASH_LINES))


def test_removing_a_step_changes_only_its_block(tmp_path):
    with_lint = BASE.replace("  - id: review\n", CHECK_STEP + "  - id: review\n")
    assert_local(dis(tmp_path, with_lint), dis(tmp_path, BASE), "lint")


def test_editing_a_step_changes_only_its_block(tmp_path):
    old = dis(tmp_path, BASE)
    new = dis(tmp_path, BASE.replace("    retry:\n      max: 2\n",
                                     "    retry:\n      max: 5\n    timeout_ms: 9\n"))
    assert_local(old, new, "test")


def test_editing_a_conditional_step_keeps_jump_labels_local(tmp_path):
    old = dis(tmp_path, BASE)
    new = dis(tmp_path, BASE.replace("    run: make test\n", "    run: make test-all\n"
                                     "    cwd: src\n"))
    assert_local(old, new, "test")


def test_adding_a_step_before_a_pipeline_and_a_gate(tmp_path):
    old = dis(tmp_path, BASE)
    new = dis(tmp_path, BASE.replace("  - id: report\n", CHECK_STEP + "  - id: report\n"))
    assert_local(old, new, "lint")


LOOP = """\
# a loop
steps:
  - id: hosts
    run: echo '["a"]'
  - id: each
    for_each: $hosts.json
    steps:
      - id: roll
        run: echo $item.stdout
  - id: done
    run: echo done
"""


def test_editing_a_loop_sub_step_changes_only_its_block(tmp_path):
    old = dis(tmp_path, LOOP)
    new = dis(tmp_path, LOOP.replace("echo $item.stdout", "echo rolling $item.stdout"))
    assert_local(old, new, "each/roll")


def test_adding_a_step_after_a_loop_changes_only_its_block(tmp_path):
    old = dis(tmp_path, LOOP)
    new = dis(tmp_path, LOOP.replace("  - id: done\n", CHECK_STEP + "  - id: done\n"))
    assert_local(old, new, "lint")


def test_adding_a_step_at_the_top_of_a_caller_changes_only_its_block(tmp_path):
    (tmp_path / "child.lobster").write_text(
        "steps:\n  - id: inner\n    run: echo inner\n", encoding="utf-8")
    parent = "steps:\n  - id: first\n    run: echo 1\n  - id: call\n    workflow: child.lobster\n"
    old = dis(tmp_path, parent)
    new = dis(tmp_path, parent.replace("  - id: first\n", CHECK_STEP + "  - id: first\n"))
    assert_local(old, new, "lint")


def test_editing_the_header_comment_changes_only_the_hash_lines(tmp_path):
    old = dis(tmp_path, BASE)
    new = dis(tmp_path, BASE.replace("# a workflow to edit", "# a workflow, edited"))
    stray = [line for _, _, line in changes(old, new) if not line.startswith(HASH_LINES)]
    assert not stray, stray
