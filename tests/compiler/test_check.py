"""The workflow AST and its one checker: every diagnostic at once, the same words and positions
from `run`, `lint` and `--dry-run`, sub-workflows loaded once, a builder that never raises."""

from __future__ import annotations

import os

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import LOBSTERC
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process
from lobsterc.syntax import ast
from lobsterc.load.build import build, load
from lobsterc.check.checker import check_file
from lobsterc.diagnostics import CompileError
from lobsterc.load import parse_text
from lobsterc.generate.workflow import compile_workflow


def write(tmp_path: Path, text: str, name: str = "flow.lobster") -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def found(path: str) -> list[tuple]:
    """(code, message, file name, line, col) of every diagnostic, in the checker's order."""
    return [(d.code, d.message, Path(d.span.source).name if d.span else None,
             d.span.line if d.span else None, d.span.col if d.span else None)
            for d in check_file(path)[1]]


# one diagnostic, three commands -----------------------------------------------------------

SAME_EVERYWHERE = [
    ("steps:\n  - id: p\n    pipeline: where x=1 | head --nn 3\n",
     ("E202", "Unknown flag --nn for head", 3, 32)),
    ("steps:\n  - id: a\n    run: echo 1\n  - id: b\n    run: echo 2\n    when: $a.json.ok && $biuld.json.ok\n",
     ("E211", "Unknown step reference: biuld.json.ok", 6, 25)),
    ("steps:\n  - id: p\n    pipeline: \"exec --json 'x\"\n",
     ("E210", "Workflow step p pipeline parse failed: Unclosed quote", 3, 28)),
]


@pytest.mark.parametrize("text, expected", SAME_EVERYWHERE)
def test_run_lint_and_dry_run_report_one_problem_alike(cli, text, expected):
    (cli.work / "flow.lobster").write_text(text, encoding="utf-8")
    run, code = cli.tool("run", "--mode", "tool", "flow.lobster")
    assert code == 1
    dry, code = cli.tool("run", "--mode", "tool", "--dry-run", "flow.lobster")
    assert code == 1
    lint = cli.run("lint", "--format", "json", "flow.lobster", exe=LOBSTERC)
    assert lint.returncode == 1
    errors = [d for d in json.loads(lint.stdout) if d["severity"] == "error"]
    assert [(d["code"], d["message"], d["line"], d["column"]) for d in errors] == [expected]
    for envelope in (run, dry):
        error = envelope["error"]
        assert (error["code"], error["message"], error["location"]["line"],
                error["location"]["column"]) == expected
        assert error["location"]["file"].endswith("flow.lobster")
    human = cli.run("run", "--dry-run", "flow.lobster")
    assert f"flow.lobster:{expected[2]}:{expected[3]}" in human.stderr


# every diagnostic at once -------------------------------------------------------------------

def test_every_error_of_every_step_at_once(tmp_path):
    path = write(tmp_path, """\
steps:
  - id: a
    pipeline: sortt | head --nn 1
  - id: b
    stdin: $zz.json
    when: $a.json ==
    approval: true
  - id: loop
    for_each: $a.json
    steps:
      - id: inner
        pipeline: approve --prompt ok
        when: $item.json.x && $nope.json
  - id: fan
    parallel:
      branches:
        - {id: x, pipeline: "ask --prompt why --emit"}
        - {id: y, run: echo}
  - id: dyn
    workflow: ./w-${env}.lobster
  - id: gone
    workflow: nowhere.lobster
""")
    assert sorted(found(path), key=lambda f: (f[3], f[4])) == [
        ("E201", "Unknown command: sortt", "flow.lobster", 3, 15),
        ("E202", "Unknown flag --nn for head", "flow.lobster", 3, 28),
        ("E211", "Unknown step reference: zz.json", "flow.lobster", 5, 12),
        ("E212", "Unsupported condition: $a.json ==", "flow.lobster", 6, 21),
        ("E214", "Workflow step inner halted for approval inside pipeline stage approve. Use a "
                 "separate approval step in the workflow file.", "flow.lobster", 12, 19),
        ("E211", "Unknown step reference: nope.json", "flow.lobster", 13, 31),
        ("E214", "Parallel branch failed: Workflow step x halted before completion at pipeline "
                 "stage ask", "flow.lobster", 17, 30),
        ("E215", "Workflow step dyn workflow path must be a literal path (it is resolved when the "
                 "file is compiled)", "flow.lobster", 20, 15),
        ("E210", f"Workflow step gone workflow file not found: {tmp_path / 'nowhere.lobster'}",
         "flow.lobster", 22, 15),
    ]


def test_the_compiler_refuses_with_every_error_of_the_file(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    pipeline: sortt\n  - id: b\n    pipeline: headd\n")
    with pytest.raises(CompileError) as info:
        compile_workflow(path)
    assert [(d.code, d.message) for d in info.value.diagnostics] == [
        ("E201", "Unknown command: sortt"), ("E201", "Unknown command: headd")]


def test_a_structural_problem_stops_the_file(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    pipeline: sortt\n    retry: 3\n")
    assert found(path) == [("E210", "Workflow step a retry must be an object", "flow.lobster", 4, 12)]


def test_a_later_step_or_a_branch_reference(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    stdin: $b.json\n    approval: true\n"
                           "  - id: fan\n    parallel:\n      branches: [{id: b, run: echo 1}]\n"
                           "  - id: c\n    stdin: $b.stdout\n    approval: true\n")
    (diag,) = check_file(path)[1]
    assert (diag.code, diag.message, diag.span.line) == ("E211", "Unknown step reference: b.json", 3)
    assert diag.help == "'b' is a later step; a step can only read the steps before it"


def test_a_steps_condition_is_met_before_its_stdin_or_loop_source(tmp_path):
    """The original decides whether a step runs before it reads anything else of it: with an
    unknown reference in the condition and in stdin (or for_each), the compile is refused by
    the condition's, wherever the fields stand in the step; the file's other errors come in
    the order a run meets them, every one still listed."""
    for fields in ("    stdin: $x.json\n    run: cat\n    when: $y.approved\n",
                   "    for_each: $x.json\n    condition: $y.approved\n    steps: [{id: b, run: cat}]\n",
                   "    when: $y.approved\n    stdin: $x.json\n    run: cat\n"):
        path = write(tmp_path, "steps:\n  - id: a\n" + fields + "  - id: c\n    stdin: $z.json\n"
                               "    run: cat\n")
        with pytest.raises(CompileError) as info:
            compile_workflow(path)
        assert [d.message for d in info.value.diagnostics] == [
            "Unknown step reference: y.approved", "Unknown step reference: x.json",
            "Unknown step reference: z.json"], fields
        # each keeps where it is written
        lines = [d.span.line for d in info.value.diagnostics]
        assert lines[0] == 3 + fields.split("\n").index(
            next(line for line in fields.split("\n") if "$y" in line))


def test_a_steps_input_is_met_before_its_command_and_its_sub_steps(tmp_path):
    """A step's stdin, or a loop's source, is read before its command runs or its sub-steps
    do, as in the original, wherever the fields are written."""
    for text, first in (
            ("steps:\n  - id: a\n    pipeline: nope\n    stdin: $zz.json\n",
             "Unknown step reference: zz.json"),
            ("steps:\n  - id: a\n    steps:\n      - {id: b, run: x, when: $q.approved}\n"
             "    for_each: $s7.json\n", "Unknown step reference: s7.json")):
        with pytest.raises(CompileError) as info:
            compile_workflow(write(tmp_path, text))
        assert info.value.first.message == first, text


# sub-workflows ------------------------------------------------------------------------------

def test_errors_inside_a_sub_workflow_point_into_it(tmp_path):
    write(tmp_path, "steps:\n  - id: s\n    pipeline: head --bogus 1\n", "lib/child.lobster")
    path = write(tmp_path, "steps:\n  - id: call\n    workflow: lib/child.lobster\n")
    assert found(path) == [("E202", "Unknown flag --bogus for head", "child.lobster", 3, 20)]
    with pytest.raises(CompileError) as info:
        compile_workflow(path)
    assert info.value.first.span.source.endswith("lib/child.lobster")


def test_a_cycle_through_files_reached_twice_is_found(tmp_path):
    # main calls b and c; b calls c and c calls b: a cycle whichever file is checked first
    write(tmp_path, "steps:\n  - id: to_c\n    workflow: c.lobster\n", "b.lobster")
    write(tmp_path, "steps:\n  - id: to_b\n    workflow: b.lobster\n", "c.lobster")
    path = write(tmp_path, "steps:\n  - id: one\n    workflow: b.lobster\n"
                           "  - id: two\n    workflow: c.lobster\n")
    real = os.path.realpath(tmp_path / "b.lobster")  # named absolute and resolved (SPEC 9.9)
    assert found(path) == [("E216", f"Workflow step to_b creates a cycle: {real} is already "
                            "being executed", "c.lobster", 3, 15)]


def test_a_sub_workflow_is_loaded_once_and_reachable_from_its_call(tmp_path):
    write(tmp_path, "args: {n: {default: 2}}\nsteps:\n  - id: s\n    run: echo\n", "child.lobster")
    path = write(tmp_path, "steps:\n  - id: one\n    workflow: child.lobster\n"
                           "  - id: two\n    workflow: ./child.lobster\n    workflow_args: {n: 3}\n")
    wf = load(path).workflow
    one, two = (step.kind for step in wf.steps)
    assert isinstance(one, ast.SubWorkflow) and one.path == two.path
    assert wf.callee(one) is wf.callee(two)
    assert wf.callee(one).workflow.defaults == {"n": 2} and two.args == {"n": 3}


def test_a_missing_or_broken_file_is_a_diagnostic(tmp_path):
    assert found(str(tmp_path / "no.lobster"))[0][:2] == (
        "E210", f"Workflow file not found: {tmp_path / 'no.lobster'}")
    path = write(tmp_path, "steps: [\n")
    (code, message, *_), = found(path)
    assert code == "E210" and message.startswith("Workflow file parse error")


# the nodes ---------------------------------------------------------------------------------

def test_nodes_of_every_step_kind(tmp_path):
    path = write(tmp_path, """\
name: demo
args: {who: {default: me}, bare: {}}
env: {A: "1"}
steps:
  - id: sh
    command: echo hi
    timeout_ms: 50
    retry: {max: 3, jitter: true}
    approval: {prompt: Go?, required_approver: ann}
  - id: p
    pipeline: head --n 1
    stdin: $sh.json
    condition: $sh.approved
    on_error: continue
  - id: loop
    for_each: $p.json
    item_var: row
    steps:
      - {id: inner, run: echo $row.json}
  - id: fan
    parallel:
      wait: any
      branches:
        - {id: b1, run: echo 1, env: {B: x}}
        - {id: b2, pipeline: json}
  - id: ask
    input: {prompt: Why?, responseSchema: {type: string}}
  - id: gate
    approval: true
""")
    wf = load(path).workflow
    assert (wf.name, wf.defaults, wf.env) == ("demo", {"who": "me"}, {"A": "1"})
    sh, p, loop, fan, ask, gate = wf.steps
    assert sh.kind == ast.Shell("echo hi", "command") and sh.kind.tag == "shell"
    retry = ast.Retry(max=3, backoff="fixed", delay_ms=1000, max_delay_ms=30000, jitter=True)
    assert sh.policy == ast.Policy(50, ast.ABSENT, retry)
    assert (sh.approval.prompt, sh.approval.config) == ("Go?", {"requiredApprover": "ann"})
    assert (sh.span.line, sh.span.col) == (5, 9)
    assert p.kind.pipeline.parsed.stages[0].name.text == "head"
    assert (p.stdin, p.when.key, p.when.tree) == ("$sh.json", "condition",
                                                   ["ref", "sh", ["approved"]])
    assert p.when.span.line == 13 and p.policy.on_error == "continue" and p.policy.retry is None
    assert (loop.kind.tag, loop.kind.item_var, loop.kind.index_var) == ("for_each", "row", "index")
    assert [s.id for s in loop.kind.steps] == ["inner"]
    assert fan.kind.wait == "any" and fan.kind.timeout_ms is ast.ABSENT
    b1, b2 = fan.kind.branches
    assert (b1.shell.line, b1.env, b1.pipeline, b2.shell) == ("echo 1", {"B": "x"}, None, None)
    assert ask.kind == ast.InputGate("Why?", {"type": "string"}, ast.ABSENT, ask.kind.loc)
    assert ask.policy is None and ask.approval is None
    assert (gate.kind, gate.approval.prompt, gate.approval.written) == (
        ast.NoOp("approval"), "Approve gate?", None)
    assert gate.when is None
    assert list(wf.texts())[:3] == ["demo", "1", "sh"]


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(
        ["", " ", "x", "$a.json", "echo ${x}", "head --n 1", "approve", "true", "a b", "./w.lobster"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["id", "run", "command", "pipeline", "workflow", "workflow_args", "parallel", "branches",
         "for_each", "steps", "approval", "input", "prompt", "when", "condition", "stdin", "env",
         "retry", "timeout_ms", "on_error", "effects", "args", "default", "wait"]), inner,
        max_size=5),
    max_leaves=12)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["steps", "args", "env", "cwd", "name"]), _VALUES))
@example({"steps": [{"for_each": "x", "steps": None}]})  # found by this test: steps: null
def test_the_builder_never_raises(data):
    wf = build(parse_text(json.dumps(data), "odd.json"))
    assert isinstance(wf, ast.Workflow)


# `ask` in a workflow pipeline step (as the original: tool mode pauses, the answer is the stage's
# output; human mode and `--emit` stop the run) ------------------------------------------------

ASK_FLOW = ("steps:\n  - id: a\n    pipeline: exec --json --shell 'echo [1,2]' | ask --prompt q{emit}"
            " | map --wrap v\n  - id: b\n    run: echo \"$a.json\"\n")


def test_ask_in_a_workflow_pipeline_pauses_in_tool_mode_and_the_answer_flows_on(cli):
    (cli.work / "flow.lobster").write_text(ASK_FLOW.format(emit=""), encoding="utf-8")
    halted, code = cli.tool("run", "--mode", "tool", "flow.lobster")
    assert code == 0 and halted["status"] == "needs_input", halted
    assert halted["requiresInput"]["prompt"] == "q"
    assert halted["requiresInput"]["responseSchema"]["required"] == ["decision"]
    done, code = cli.tool("resume", "--token", halted["requiresInput"]["resumeToken"],
                          "--response-json", '{"decision":"approve"}')
    assert (code, done["status"], done["output"]) == (0, "ok", ["{v:{decision:approve}}\n"])


def test_ask_in_a_workflow_pipeline_stops_a_human_mode_run(cli):
    (cli.work / "flow.lobster").write_text(ASK_FLOW.format(emit=""), encoding="utf-8")
    human = cli.run("run", "flow.lobster")
    assert human.returncode == 1
    assert "Workflow step a halted before completion at pipeline stage ask" in human.stderr


def test_ask_emit_in_a_workflow_pipeline_is_refused_before_running(tmp_path):
    path = write(tmp_path, ASK_FLOW.format(emit=" --emit"))
    assert [d[:2] for d in found(path)] == [
        ("E214", "Workflow step a halted before completion at pipeline stage ask")]
