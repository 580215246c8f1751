"""Dry runs: `lobster run --dry-run` of pipelines (reference §2) and workflow files (§4.12).
Exact plan texts, in process and through the real executable."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from lobsterc.tools.plan import pipeline_plan, workflow_plan
from lobsterc.diagnostics import CompileError
from lobsterc.frontend import error_fields
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process


def write(tmp_path: Path, text: str, name: str = "wf.lobster") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def plan(tmp_path: Path, text: str, args: dict | None = None, name: str = "wf.lobster") -> str:
    return workflow_plan(write(tmp_path, text, name), args or {})


def lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


# (workflow text, args, expected plan)
PLANS = [
    pytest.param(
        """
        steps:
          - id: hello
            run: echo hi
        """, {},
        lines("[DRY RUN] Would execute 1 step:", "",
              "  1. hello  [shell]",
              "     run: echo hi"),
        id="one-shell-step"),
    pytest.param(
        """
        args:
          who: {default: world}
          n: {default: 3}
        steps:
          - id: greet
            command: echo ${who} ${n} ${HOME}
          - id: sub
            workflow: ./child-${who}.lobster
            workflow_args: {target: "${who}", count: 2}
        """, {"who": "moon"},
        lines("[DRY RUN] Would execute 2 steps:", "",
              "  1. greet  [shell]",
              "     run: echo moon 3 ${HOME}",
              "  2. sub  [workflow]",
              "     workflow: ./child-moon.lobster",
              "     args: target, count"),
        id="args-over-defaults-unknown-left-verbatim"),
    pytest.param(
        """
        steps:
          - id: fetch
            run: echo '[1,2]'
            timeout_ms: 5000
            on_error: continue
            retry: {max: 3, backoff: exponential, delay_ms: 250, jitter: true}
          - id: plain
            run: "true"
            retry: {max: 2}
            on_error: stop
        """, {},
        lines("[DRY RUN] Would execute 2 steps:", "",
              "  1. fetch  [shell]",
              "     run: echo '[1,2]'",
              "     timeout: 5000ms",
              "     on_error: continue",
              "     retry: up to 3 attempts, exponential backoff (base: 250ms, jitter)",
              "  2. plain  [shell]",
              "     run: true",
              "     retry: up to 2 attempts, fixed backoff (base: 1000ms)"),
        id="timeout-on_error-retry"),
    pytest.param(
        """
        steps:
          - id: fetch
            run: echo ok
          - id: shape
            pipeline: "where 'ok==true' | pick ok"
            stdin: $fetch.json
          - id: say
            run: cat
            stdin: "got: $fetch.stdout and $nobody.stdout"
          - id: lit
            run: cat
            stdin: {a: [1, "x"]}
          - id: text
            run: cat
            stdin: "plain $nobody.stdout"
        """, {},
        lines("[DRY RUN] Would execute 5 steps:", "",
              "  1. fetch  [shell]",
              "     run: echo ok",
              "  2. shape  [pipeline]",
              "     pipeline: where 'ok==true' | pick ok",
              "     stdin: $fetch.json  [output unknown at plan time]",
              "  3. say  [shell]",
              "     run: cat",
              "     stdin: got: $fetch.stdout and $nobody.stdout  "
              "[contains step output refs — unknown at plan time]",
              "  4. lit  [shell]",
              "     run: cat",
              "  5. text  [shell]",
              "     run: cat",
              "     stdin: plain $nobody.stdout  [contains step output refs — unknown at plan time]"),
        id="stdin-notes"),
    pytest.param(
        """
        steps:
          - id: review
            approval: Ship it?
          - id: shipped
            when: $review.approved
            run: echo ship
          - id: rejected
            when: "!$review.approved"
            run: echo stop
          - id: plain_gate
            run: echo '[1]'
            approval: true
          - id: after_gate
            condition: $plain_gate.approved && !$plain_gate.skipped
            run: echo next
        """, {},
        lines("[DRY RUN] Would execute 5 steps:", "",
              "  1. review  [no-op]",
              "     [approval required]",
              "  2. shipped  [shell]",
              "     run: echo ship",
              "  3. rejected  [skipped — condition: false]",
              "  4. plain_gate  [shell]",
              "     run: echo '[1]'",
              "     [approval required]",
              "  5. after_gate  [shell]",
              "     run: echo next"),
        id="approvals-modelled-as-approved"),
    pytest.param(
        """
        steps:
          - id: ask
            input:
              prompt: Pick one
              responseSchema: {type: object}
          - id: pending
            when: $ask.response.pending == true
            run: echo waiting
          - id: decided
            when: $ask.response.decision == approve
            run: echo approved
          - id: skipped_ref
            when: $decided.skipped
            run: echo was skipped
        """, {},
        lines("[DRY RUN] Would execute 4 steps:", "",
              "  1. ask  [input]",
              "     prompt: Pick one",
              "     [input required]",
              "  2. pending  [shell]",
              "     run: echo waiting",
              "  3. decided  [skipped — condition: false]",
              "  4. skipped_ref  [shell]",
              "     run: echo was skipped"),
        id="input-modelled-as-pending"),
    pytest.param(
        """
        steps:
          - id: fetch
            run: echo ok
          - id: depends
            when: $fetch.json.ok == true
            run: echo ok
          - id: decided_anyway
            when: false && $fetch.json.ok
            run: echo never
          - id: or_true
            when: "true || $fetch.json.ok"
            run: echo always
          - id: not_skipped
            when: "!$fetch.skipped"
            run: echo ran
        """, {},
        lines("[DRY RUN] Would execute 5 steps:", "",
              "  1. fetch  [shell]",
              "     run: echo ok",
              "  2. depends  [shell]",
              "     when: $fetch.json.ok == true  [depends on step output — unknown at plan time]",
              "     run: echo ok",
              "  3. decided_anyway  [skipped — condition: false]",
              "  4. or_true  [shell]",
              "     run: echo always",
              "  5. not_skipped  [shell]",
              "     run: echo ran"),
        id="conditions-on-unknown-output"),
    pytest.param(
        """
        steps:
          - id: fan
            parallel:
              wait: any
              timeout_ms: 1000
              branches:
                - {id: a, run: echo a}
                - {id: b, pipeline: "exec --json --shell 'echo 2'", stdin: [1, 2]}
            timeout_ms: 9000
          - id: after
            run: cat
            stdin: $b.stdout
        """, {},
        lines("[DRY RUN] Would execute 2 steps:", "",
              "  1. fan  [parallel]",
              "     wait: any",
              "     timeout: 1000ms",
              "     branch a: [shell] echo a",
              "     branch b: [pipeline] exec --json --shell 'echo 2'",
              "     timeout: 9000ms",
              "  2. after  [shell]",
              "     run: cat",
              "     stdin: $b.stdout  [output unknown at plan time]"),
        id="parallel"),
    pytest.param(
        """
        steps:
          - id: list
            run: echo '[1,2]'
          - id: loop
            for_each: $list.json
            item_var: row
            steps:
              - {id: show, run: "echo $row.json"}
              - {id: off, when: false, run: echo no}
              - {id: maybe, when: "$row.json > 1", pipeline: "exec --shell 'echo $row.json'"}
        """, {},
        lines("[DRY RUN] Would execute 2 steps:", "",
              "  1. list  [shell]",
              "     run: echo '[1,2]'",
              "  2. loop  [for_each]",
              "     for_each: $list.json  [contains step output refs — unknown at plan time]",
              "     item_var: row, index_var: index",
              "     sub-steps: 3",
              "       1. show  [shell] run: echo $row.json",
              "       2. off  [skipped — condition: false]",
              "       3. maybe  [pipeline] pipeline: exec --shell 'echo $row.json'"),
        id="for_each"),
    pytest.param(  # batch_size and pause_ms as given (a batch of 1 too), a pause of 0 left out
        """
        steps:
          - {id: one, for_each: "[1]", batch_size: 1, steps: [{id: s, run: x}]}
          - {id: paced, for_each: "[1]", pause_ms: 250, steps: [{id: s, run: x}]}
          - {id: both, for_each: "[1]", batch_size: 3, pause_ms: 0, steps: [{id: s, run: x}]}
          - {id: plain, for_each: "[1]", steps: [{id: s, run: x}]}
        """, {},
        lines("[DRY RUN] Would execute 4 steps:", "",
              "  1. one  [for_each]", "     for_each: [1]", "     item_var: item, index_var: index",
              "     batch_size: 1", "     sub-steps: 1", "       1. s  [shell] run: x",
              "  2. paced  [for_each]", "     for_each: [1]",
              "     item_var: item, index_var: index", "     pause_ms: 250", "     sub-steps: 1",
              "       1. s  [shell] run: x",
              "  3. both  [for_each]", "     for_each: [1]", "     item_var: item, index_var: index",
              "     batch_size: 3", "     sub-steps: 1", "       1. s  [shell] run: x",
              "  4. plain  [for_each]", "     for_each: [1]",
              "     item_var: item, index_var: index", "     sub-steps: 1",
              "       1. s  [shell] run: x"),
        id="for_each_batches"),
    pytest.param(  # a for_each source as written: not trimmed, no arg substituted, noted
        # only for a stdout or json reference
        """
        args:
          src: {default: "$a.json"}
        steps:
          - {id: a, approval: ok}
          - {id: raw, for_each: " $a.json ", steps: [{id: s, run: x}]}
          - {id: arg, for_each: "${src}", steps: [{id: s, run: x}]}
          - {id: approved, for_each: "$a.approved", steps: [{id: s, run: x}]}
        """, {},
        lines("[DRY RUN] Would execute 4 steps:", "",
              "  1. a  [no-op]",
              "     [approval required]",
              "  2. raw  [for_each]",
              "     for_each:  $a.json   [contains step output refs — unknown at plan time]",
              "     item_var: item, index_var: index",
              "     sub-steps: 1",
              "       1. s  [shell] run: x",
              "  3. arg  [for_each]",
              "     for_each: ${src}",
              "     item_var: item, index_var: index",
              "     sub-steps: 1",
              "       1. s  [shell] run: x",
              "  4. approved  [for_each]",
              "     for_each: $a.approved",
              "     item_var: item, index_var: index",
              "     sub-steps: 1",
              "       1. s  [shell] run: x"),
        id="for_each-source-as-written"),
    pytest.param(
        """
        steps:
          - id: multi
            run: |
              echo one
              echo two
          - id: stage_from_output
            pipeline: "$multi.stdout --x 1 | head --n $multi.json"
        """, {},
        lines("[DRY RUN] Would execute 2 steps:", "",
              "  1. multi  [shell]",
              "     run: echo one",
              "echo two",
              "",
              "  2. stage_from_output  [pipeline]",
              "     pipeline: $multi.stdout --x 1 | head --n $multi.json  "
              "[contains step output refs — unknown at plan time]",
              "     [command validation deferred — stage name depends on step output]"),
        id="multiline-and-stage-names-from-output"),
    pytest.param(
        """
        args:
          cmd: {default: head}
        steps:
          - id: p
            pipeline: "${cmd} --key n"
        """, {"cmd": "sort"},
        lines("[DRY RUN] Would execute 1 step:", "",
              "  1. p  [pipeline]",
              "     pipeline: sort --key n"),
        id="stage-name-from-arg"),
]


@pytest.mark.parametrize("text, args, expected", PLANS)
def test_workflow_plan(tmp_path, text, args, expected):
    assert plan(tmp_path, text, args) == expected


def test_workflow_plan_counts_ten_steps(tmp_path):
    steps = "".join(f"  - {{id: s{i}, run: echo {i}}}\n" for i in range(1, 11))
    out = plan(tmp_path, "steps:\n" + steps)
    assert out.splitlines()[0] == "[DRY RUN] Would execute 10 steps:", ""
    assert out.splitlines()[-2:] == ["  10. s10  [shell]", "      run: echo 10"]


def test_json_workflow_file(tmp_path):
    text = json.dumps({"steps": [{"id": "a", "run": "echo a"}]})
    assert plan(tmp_path, text, name="wf.json") == lines(
        "[DRY RUN] Would execute 1 step:", "", "  1. a  [shell]", "     run: echo a")


# (workflow text, args, error message, code)
ERRORS = [
    ("steps:\n  - {id: p, pipeline: 'nope --x 1'}\n", {}, "Workflow step p pipeline references unknown command: nope", "E201"),
    # a step's condition is met before its templated pipeline is planned
    ("args: {c: {default: nope}}\nsteps:\n  - id: p\n    pipeline: '${c} --x'\n"
     "    when: $zz.approved\n", {}, "Unknown step reference: zz.approved", "E211"),
    ("steps:\n  - {id: p, pipeline: \"exec 'x\"}\n", {},
     "Workflow step p pipeline parse failed: Unclosed quote", "E210"),
    ("args: {c: {default: bogus}}\nsteps:\n  - {id: p, pipeline: '${c}'}\n", {},
     "Workflow step p pipeline references unknown command: bogus", "E201"),
    ("steps:\n  - {id: a, run: x}\n  - {id: p, pipeline: 'nope $a.stdout'}\n", {},
     "Workflow step p pipeline references unknown command: nope", "E201"),
    ("steps:\n  - {id: p, pipeline: 'head --bogus 1'}\n", {}, None, "E202"),
    ("steps:\n  - {id: p, pipeline: \"approve --prompt 'ok?'\"}\n", {},
     "Workflow step p halted for approval inside pipeline stage approve. Use a separate "
     "approval step in the workflow file.", "E214"),
    ("steps:\n  - {id: a, run: cat, stdin: $ghost.stdout}\n", {},
     "Workflow step a stdin: Unknown step reference: ghost.stdout", "E211"),
    ("steps:\n  - {id: a, run: cat, when: $ghost.json.ok}\n", {},
     "Unknown step reference: ghost.json.ok", "E211"),
    ("steps:\n  - {id: a, run: x, when: '!$later.approved'}\n  - {id: later, run: y}\n", {},
     "Unknown step reference: later.approved", "E211"),
    ("steps:\n  - {id: l, for_each: $ghost.json, steps: [{id: s, run: x}]}\n", {},
     "Workflow step l for_each: Unknown step reference: ghost.json", "E211"),
    ("steps:\n  - {id: l, for_each: $LOBSTER_ARGS_JSON, steps: [{id: s, run: x, "
     "stdin: $ghost.stdout}]}\n", {},
     "Workflow step l for_each sub-step s stdin: Unknown step reference: ghost.stdout", "E211"),
    ("steps:\n  - {id: a, run: x, when: 'a b'}\n", {}, "Unsupported condition: a b", "E212"),
    # the first error in step order: planning the templated pipeline fails before the stdin
    ("args:\n  who: {default: w}\nsteps:\n  - {id: n, pipeline: \"exec --shell 'echo ${who}' | "
     "nosuch\"}\n  - {id: s, run: cat, stdin: $m.stdout}\n", {},
     "Workflow step n pipeline references unknown command: nosuch", "E201"),
    ("steps:\n  - {id: a}\n", {},
     "Workflow step a requires run, command, pipeline, workflow, parallel, for_each, approval, "
     "or input", "E210"),
]


@pytest.mark.parametrize("text, args, message, code", ERRORS)
def test_workflow_plan_errors(tmp_path, text, args, message, code):
    with pytest.raises(CompileError) as info:
        plan(tmp_path, text, args)
    error = error_fields(info.value)
    assert error["code"] == code
    if message is not None:
        assert error["message"] == message
    assert error["location"]["file"].endswith("wf.lobster")


def test_missing_file():
    with pytest.raises(CompileError) as info:
        workflow_plan("/nonexistent/wf.lobster", {})
    assert info.value.first.message == "Workflow file not found: /nonexistent/wf.lobster"


PIPELINES = [
    ("head --n 2", lines("[DRY RUN] Pipeline (1 stage):", "  1. head  args: n=2")),
    ("exec --json --shell 'echo 1' | sort | json",
     lines("[DRY RUN] Pipeline (3 stages):", "  1. exec  args: json=true, shell=echo 1",
           "  2. sort", "  3. json")),
    # a flag shows under the name it was written with (an alias too), first written first
    ("gog.gmail.send --dryRun", lines("[DRY RUN] Pipeline (1 stage):",
                                      "  1. gog.gmail.send  args: dryRun=true")),
    ("clawd.invoke --tool t --sessionKey k --action a --dryRun=no",
     lines("[DRY RUN] Pipeline (1 stage):",
           "  1. clawd.invoke  args: tool=t, sessionKey=k, action=a, dryRun=no")),
    # under each name its own value, as the original's parser keeps two keys
    ("clawd.invoke --tool t --action a --session-key A --sessionKey=B --session-key C",
     lines("[DRY RUN] Pipeline (1 stage):",
           "  1. clawd.invoke  args: tool=t, action=a, session-key=C, sessionKey=B")),
    ("approve --prompt p --limit 3 --preview-limit 7",
     lines("[DRY RUN] Pipeline (1 stage):", "  1. approve  args: prompt=p, limit=3, preview-limit=7")),
]


@pytest.mark.parametrize("text, expected", PIPELINES)
def test_pipeline_plan(text, expected):
    assert pipeline_plan(text) == expected


# through the real executable --------------------------------------------------------------
WF = """\
args:
  who: {default: world}
steps:
  - id: hi
    run: echo ${who}
  - id: gate
    approval: required
    stdin: $hi.stdout
"""
WF_PLAN = lines("[DRY RUN] Would execute 2 steps:", "",
                "  1. hi  [shell]",
                "     run: echo {who}",
                "  2. gate  [no-op]",
                "     stdin: $hi.stdout  [output unknown at plan time]",
                "     [approval required]")


@pytest.mark.parametrize("argv", [
    ("run", "--dry-run", "wf.lobster"),
    ("run", "wf.lobster", "--dry-run"),
    ("run", "--file", "wf.lobster", "--dry-run"),
    ("run", "--dry-run", "--file=wf.lobster"),
    ("--dry-run", "wf.lobster"),
])
def test_cli_workflow_dry_run(cli, argv):
    (cli.work / "wf.lobster").write_text(WF, encoding="utf-8")
    proc = cli.run(*argv)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr == WF_PLAN.format(who="world")
    assert not cli.state.exists() or not any(cli.state.iterdir())


def test_cli_workflow_dry_run_args_and_tool_mode(cli):
    (cli.work / "wf.lobster").write_text(WF, encoding="utf-8")
    proc = cli.run("run", "--mode", "tool", "--args-json", '{"who": "moon"}', "--dry-run",
                   "wf.lobster")
    assert proc.returncode == 0
    assert proc.stderr == WF_PLAN.format(who="moon")
    assert json.loads(proc.stdout) == {"protocolVersion": 1, "ok": True, "status": "ok",
                                       "output": [], "requiresApproval": None,
                                       "requiresInput": None}


def test_cli_workflow_dry_run_runs_nothing(cli):
    (cli.work / "wf.lobster").write_text("steps:\n  - {id: t, run: touch made}\n",
                                         encoding="utf-8")
    proc = cli.run("run", "--dry-run", "wf.lobster")
    assert proc.returncode == 0, proc.stderr
    assert not (cli.work / "made").exists()


def test_cli_workflow_dry_run_errors(cli):
    (cli.work / "bad.lobster").write_text("steps:\n  - {id: p, pipeline: 'nope'}\n",
                                          encoding="utf-8")
    proc = cli.run("run", "--dry-run", "bad.lobster")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == "Error: Workflow step p pipeline references unknown command: nope"
    proc = cli.run("run", "--mode", "tool", "--dry-run", "bad.lobster")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"]["message"] == "Workflow step p pipeline references unknown command: nope"
    (cli.work / "wf.lobster").write_text(WF, encoding="utf-8")
    proc = cli.run("run", "--args-json", "{", "--dry-run", "wf.lobster")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == "run --args-json must be valid JSON"  # bare (D22)


def test_cli_pipeline_dry_run(cli):
    proc = cli.run("run", "--dry-run", "head --n 2 | sort")
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr == lines("[DRY RUN] Pipeline (2 stages):", "  1. head  args: n=2",
                                "  2. sort")
