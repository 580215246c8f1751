"""The safety verifier: approval gates proved on the compiled program's control-flow graph."""

from __future__ import annotations

from pathlib import Path

from lobsterc.generate.codegen import compile_pipeline
from lobsterc.tools.effects import EFFECT_CLASSES, Cfg, constant_condition, verify_approvals
from lobsterc.tools.lint import lint_file
from lobsterc.generate.workflow import compile_workflow
from vm.host.commands import COMMANDS
from vm.isa.opcodes import Op


def violations(tmp_path: Path, text: str, marks=None, *, name="flow.lobster", **kw) -> list[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    program = compile_workflow(str(path))
    return [v.message for v in verify_approvals(program, marks or {}, **kw)]


def lint_messages(tmp_path: Path, text: str, **kw) -> list[str]:
    path = tmp_path / "flow.lobster"
    path.write_text(text, encoding="utf-8")
    return [d.message for d in lint_file(str(path), **kw) if d.code == "W306"]


def test_every_command_declares_a_known_effect_class():
    assert {cmd.effects for cmd in COMMANDS.values()} <= set(EFFECT_CLASSES)
    assert COMMANDS["state.set"].effects == "writes_state"
    assert COMMANDS["apus.invoke"].effects == "network"


GATED = """\
steps:
  - id: build
    run: make
  - id: review
    approval: Deploy?
  - id: deploy
    effects: write
    run: ./deploy
"""


def test_a_gate_before_the_step_proves_it(tmp_path):
    assert violations(tmp_path, GATED, {"deploy": "write"}) == []


def test_no_gate_fails_with_the_path(tmp_path):
    text = GATED.replace("  - id: review\n    approval: Deploy?\n", "")
    assert violations(tmp_path, text, {"deploy": "write"}) == [
        "step deploy can run without approval: build -> deploy"]


def test_the_steps_own_approval_comes_too_late(tmp_path):
    text = "steps:\n  - id: deploy\n    run: ./deploy\n    approval: Done, keep it?\n"
    assert violations(tmp_path, text, {"deploy": "write"}) == [
        "step deploy can run without approval: deploy"]


def test_a_gate_on_one_branch_of_a_when_fails(tmp_path):
    text = GATED.replace("    approval: Deploy?\n",
                         "    when: $build.json.risky\n    approval: Deploy?\n")
    assert violations(tmp_path, text, {"deploy": "write"}) == [
        "step deploy can run without approval: build -> review (skipped) -> deploy"]


def test_a_gate_under_a_constant_true_condition_counts(tmp_path):
    text = GATED.replace("    approval: Deploy?\n", "    when: true\n    approval: Deploy?\n")
    assert violations(tmp_path, text, {"deploy": "write"}) == []


LOOP = """\
steps:
  - id: hosts
    run: echo '["a","b"]'
  - id: each
    for_each: $hosts.json
    steps:
      - id: check
        approval: Roll $item.stdout?
      - id: roll
        run: ./roll $item.stdout
  - id: after
    run: ./cleanup
"""


def test_a_gate_inside_the_loop_covers_each_iteration(tmp_path):
    assert violations(tmp_path, LOOP, {"each/roll": "write"}) == []


def test_a_gate_after_the_effect_inside_the_loop_fails(tmp_path):
    text = LOOP.replace(
        "      - id: check\n        approval: Roll $item.stdout?\n"
        "      - id: roll\n        run: ./roll $item.stdout\n",
        "      - id: roll\n        run: ./roll $item.stdout\n"
        "      - id: check\n        approval: Next?\n")
    assert violations(tmp_path, text, {"each/roll": "write"}) == [
        "step each/roll can run without approval: hosts -> each -> each/roll"]


def test_a_step_after_a_gated_loop_is_reachable_when_the_loop_has_no_items(tmp_path):
    assert violations(tmp_path, LOOP, {"after": "write"}) == [
        "step after can run without approval: hosts -> each (no items) -> after"]


def test_on_error_continue_jumps_over_the_failing_steps_own_gate(tmp_path):
    text = """\
steps:
  - id: check
    run: ./check
    approval: Checks passed. Deploy?
    on_error: continue
  - id: deploy
    run: ./deploy
"""
    assert violations(tmp_path, text, {"deploy": "write"}) == [
        "step deploy can run without approval: check (fails) -> deploy"]
    without = text.replace("    on_error: continue\n", "")
    assert violations(tmp_path, without, {"deploy": "write"}) == []


def test_retry_and_skip_rest_edges(tmp_path):
    program = compile_workflow(str(_write(tmp_path, """\
steps:
  - id: a
    run: ./a
    retry: {max: 2}
    on_error: skip_rest
  - id: b
    run: ./b
""")))
    cfg = Cfg(program)
    shell = next(pc for pc, ins in enumerate(program.code) if ins.op == Op.SHELL)
    kinds = {(edge.kind, program.code[edge.target].op if edge.target >= 0 else None)
             for edge in cfg.edges[shell]}
    assert ("error", Op.SHELL) in kinds  # retry: back to the body's start
    assert ("error", Op.END_WORKFLOW) in kinds  # skip_rest: the end of the workflow


def test_a_gate_in_the_caller_covers_a_sub_workflow(tmp_path):
    (tmp_path / "child.lobster").write_text(
        "steps:\n  - id: push\n    effects: write\n    run: git push\n", encoding="utf-8")
    caller = "steps:\n  - id: ok\n    approval: Push?\n  - id: call\n    workflow: child.lobster\n"
    assert lint_messages(tmp_path, caller) == []
    ungated = "steps:\n  - id: prep\n    run: make\n  - id: call\n    workflow: child.lobster\n"
    assert lint_messages(tmp_path, ungated) == [
        "step call/push can run without approval: prep -> call -> call/push"]


def test_a_gate_inside_a_sub_workflow_covers_what_follows_the_call(tmp_path):
    (tmp_path / "child.lobster").write_text(
        "steps:\n  - id: ok\n    approval: Go on?\n", encoding="utf-8")
    text = "steps:\n  - id: call\n    workflow: child.lobster\n  - id: deploy\n" \
           "    effects: write\n    run: ./deploy\n"
    assert lint_messages(tmp_path, text) == []


def test_command_classes_need_require_approval(tmp_path):
    text = "steps:\n  - id: save\n    pipeline: state.set last\n  - id: ping\n" \
           "    pipeline: apus.invoke --tool t --action a\n  - id: sh\n    run: make\n"
    assert lint_messages(tmp_path, text) == []
    assert lint_messages(tmp_path, text, require_approval=True) == [
        "step save can run without approval: save",
        "step ping can run without approval: save -> ping"]
    assert lint_messages(tmp_path, text, require_approval=True, strict=True)[-1] == \
        "step sh can run without approval: save -> ping -> sh"


def test_effects_read_exempts_a_step_from_its_class(tmp_path):
    text = "steps:\n  - id: status\n    effects: read\n    run: git status\n"
    assert lint_messages(tmp_path, text, require_approval=True, strict=True) == []


def test_parallel_branches_take_their_worst_class(tmp_path):
    text = """\
steps:
  - id: fan
    parallel:
      branches:
        - id: a
          pipeline: pick x
        - id: b
          pipeline: state.set k
"""
    assert lint_messages(tmp_path, text, require_approval=True) == [
        "step fan can run without approval: fan"]


def test_pipelines_are_verified_too(tmp_path):
    ok = compile_pipeline("exec --json --shell 'ls' | approve --prompt 'Save?' | state.set k")
    assert verify_approvals(ok, {}) == []
    bad = compile_pipeline("exec --json --shell 'ls' | state.set k | approve")
    assert [v.message for v in verify_approvals(bad, {})] == [
        "step 2:state.set can run without approval: 1:exec -> 2:state.set"]
    assert [v.message for v in verify_approvals(bad, {}, strict=True)][0] == \
        "step 1:exec can run without approval: 1:exec"


def test_constant_conditions():
    assert constant_condition(["const", False]) is False
    assert constant_condition(["cmp", "==", ["lit", 1], ["lit", 1]]) is True
    assert constant_condition(["ref", "a", ["ok"]]) is None


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "flow.lobster"
    path.write_text(text, encoding="utf-8")
    return path
