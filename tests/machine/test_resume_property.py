"""The core promise as a property: halting, saving the frame and resuming it in a new process
gives the same result as answering every gate in one process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import LOBSTER
from lobsterc.generate.codegen import compile_pipeline
from vm.core import json_write
from vm.isa import codec
from vm.engine import machine
from vm.service.protocol import Options

ASK_SCHEMA = {"type": "object", "required": ["n"],
              "properties": {"id": {"type": "integer"}, "n": {"type": "integer"},
                             "g": {"type": "string"}}}

STAGES = st.one_of(
    st.integers(0, 5).map(lambda k: f"where n>={k}"),
    st.sampled_from(["a", "b", "c"]).map(lambda g: f"where g!={g}"),
    st.sampled_from(["sort --key n", "sort --key n --desc", "sort --key g", "sort"]),
    st.integers(0, 4).map(lambda k: f"head --n {k}"),
    st.sampled_from(["pick id,n,g", "pick id,n", "pick g,n", "dedupe --key g", "dedupe",
                     "map 'tag={{g}}-{{n}}'", "map --wrap row | map --unwrap row",
                     "groupBy --key g | map --unwrap items | map --wrap grp",
                     "template --text '{{id}}:{{g | upper}}'", "map --wrap r"]),
)

ROWS = st.lists(st.fixed_dictionaries({"id": st.integers(0, 99), "n": st.integers(0, 5),
                                       "g": st.sampled_from(["a", "b", "c"])}), max_size=6)


@st.composite
def gates(draw):
    """One gate: its stage text and the answer it gets."""
    kind = draw(st.sampled_from(["approve", "approve-preview", "ask", "ask-default"]))
    prompt = draw(st.sampled_from(["ok", "go on", "next"]))
    if kind == "approve":
        return f"approve --prompt '{prompt}'", draw(st.sampled_from([True, True, True, False]))
    if kind == "approve-preview":
        limit = draw(st.integers(1, 3))
        return (f"approve --preview-from-stdin --limit {limit} --prompt '{prompt}'",
                draw(st.sampled_from([True, True, True, False])))
    if kind == "ask":
        row = draw(ROWS.filter(len).map(lambda rows: rows[0]))
        return f"ask --prompt '{prompt}' --schema '{json.dumps(ASK_SCHEMA)}'", row
    decision = {"decision": draw(st.sampled_from(["approve", "reject", "redraft"]))}
    return "ask --subject-from-stdin", decision


@st.composite
def cases(draw):
    stages = draw(st.lists(STAGES, max_size=4))
    chosen = draw(st.lists(gates(), min_size=1, max_size=3))
    for gate in chosen:
        stages.insert(draw(st.integers(0, len(stages))), gate)
    answers = [stage[1] for stage in stages if isinstance(stage, tuple)]
    text = " | ".join(["exec --json cat rows.json"] +
                      [stage[0] if isinstance(stage, tuple) else stage for stage in stages])
    return text, answers, draw(ROWS), draw(st.integers(0, 40))


def drive_in_process(text: str, answers: list, workdir: str, *, cut: int | None = None):
    """Run with each answer applied as its halt comes. With `cut`, also park after `cut`
    instructions, and continue every park from the frame's decoded bytes."""
    program = compile_pipeline(text)
    options = Options(state_dir=os.path.join(workdir, "state"), cwd=workdir,
                      env=dict(os.environ), mode="tool")
    ctx = options.context()
    host = machine.Host(ctx=ctx)
    frame = machine.new_frame(program, cwd=ctx.cwd, mode="tool")
    halts, pending_answers, budget = [], list(answers), cut
    while True:
        outcome = machine.run(program, frame, host, budget=budget)
        budget = None
        if isinstance(outcome, machine.Finished):
            return ("ok", outcome.output), halts
        assert not isinstance(outcome, machine.Failed), outcome
        frame = outcome.frame
        blob = codec.dump_frame(frame)
        assert codec.load_frame(blob) == frame or _holds_undefined(frame)
        if cut is not None:
            frame = codec.load_frame(blob)
        if frame.pending is None:  # parked by the budget, not by a gate
            continue
        pending = frame.pending
        halts.append((pending.kind, pending.prompt, pending.items))
        answer = pending_answers.pop(0)
        if pending.kind == "approval" and answer is False:
            return ("cancelled", []), halts
        machine.apply_decision(frame, None if pending.kind == "approval" else answer)


def _holds_undefined(frame) -> bool:
    """Whether the frame holds an undefined property (a field `pick` set that an item lacks):
    it is saved as JSON would save it, as the original persists a paused run, so the loaded
    frame lacks the property (and the run's JSON output is the same: `as_json`)."""
    from vm.isa.frame import Frame

    raw = codec._UNSTRUCTURE[Frame](frame)
    return json_write.without_undefined(raw) is not raw


def as_json(result: tuple) -> tuple:
    """A run's (status, output) as its JSON envelope carries it."""
    return result[0], json_write.without_undefined(result[1])


def halts_as_json(halts: list) -> list:
    return [(kind, prompt, json_write.without_undefined(items)) for kind, prompt, items in halts]


def cli_chain(text: str, answers: list):
    """The `lobster` calls of one run, as a generator: yields argv, receives the envelope.
    Every halt is resumed by a new process. Returns ((status, output), halts)."""
    envelope = yield ["run", "--mode", "tool", text]
    halts = []
    for answer in answers:
        if envelope["status"] not in ("needs_approval", "needs_input"):
            break
        if envelope["status"] == "needs_approval":
            request = envelope["requiresApproval"]
            halts.append(("approval", request["prompt"], request["items"]))
            decision = ["--approve", "yes" if answer else "no"]
        else:
            request = envelope["requiresInput"]
            halts.append(("input", request["prompt"], None))
            decision = ["--response-json", json.dumps(answer)]
        envelope = yield ["resume", "--token", request["resumeToken"], *decision]
    assert envelope["ok"] is True, envelope
    return (envelope["status"], envelope["output"]), halts


def drive_through_the_cli(chains: list[tuple], pycache: str) -> list:
    """Drive several chains (workdir, generator) in lockstep: each round starts one process
    per unfinished chain at once, so the runs overlap on the available cores."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("LOBSTER_") and k != "PYTHONDONTWRITEBYTECODE"}
    base["PYTHONPYCACHEPREFIX"] = pycache
    results: list = [None] * len(chains)
    sent: list = [None] * len(chains)
    live = set(range(len(chains)))
    while live:
        procs = {}
        for i in sorted(live):
            workdir, chain = chains[i]
            try:
                argv = chain.send(sent[i])
            except StopIteration as stop:
                results[i] = stop.value
                continue
            env = {**base, "LOBSTER_STATE_DIR": os.path.join(workdir, "cli-state")}
            procs[i] = subprocess.Popen([LOBSTER, *argv], cwd=workdir, env=env, text=True,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        live = set(procs)
        for i, proc in procs.items():
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, (out, err)
            sent[i] = json.loads(out)
    return results


BATCH = 4  # pipelines per example, driven through the CLI side by side (2 cores)


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(cases(), min_size=BATCH, max_size=BATCH))
def test_resuming_in_new_processes_gives_the_same_output(batch, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    workdirs = [tempfile.mkdtemp(dir=base) for _ in batch]
    try:
        expected, chains = [], []
        for (text, answers, rows, cut), workdir in zip(batch, workdirs):
            Path(workdir, "rows.json").write_text(json.dumps(rows))
            straight = drive_in_process(text, answers, workdir)
            cut_result, cut_halts = drive_in_process(text, answers, workdir, cut=cut)
            assert as_json(cut_result) == as_json(straight[0])
            assert halts_as_json(cut_halts) == halts_as_json(straight[1])
            expected.append(straight)
            chains.append((workdir, cli_chain(text, answers)))
        got = drive_through_the_cli(chains, str(base / "pycache"))
        for (text, *_), (result, halts), (cli_result, cli_halts) in zip(batch, expected, got):
            assert cli_result == as_json(result), text
            assert [(k, p) for k, p, _ in cli_halts] == [(k, p) for k, p, _ in halts], text
            for (kind, _, items), (_, _, cli_items) in zip(halts, cli_halts):
                if kind == "approval":
                    assert cli_items == json_write.without_undefined(items), text
    finally:
        for workdir in workdirs:
            shutil.rmtree(workdir, ignore_errors=True)


@settings(max_examples=25, deadline=None)
@given(case=cases())
def test_pausing_anywhere_and_resuming_from_bytes_changes_nothing(case, tmp_path_factory):
    text, answers, rows, cut = case
    workdir = tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())
    try:
        Path(workdir, "rows.json").write_text(json.dumps(rows))
        (cut_result, cut_halts), (result, halts) = (
            drive_in_process(text, answers, workdir, cut=cut), drive_in_process(text, answers, workdir))
        assert as_json(cut_result) == as_json(result)  # undefined: stored as JSON stores it
        assert halts_as_json(cut_halts) == halts_as_json(halts)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# workflows: loops, sub-workflows, retries, parallel branches and gates -----------------------

WORKFLOW = """\
args:
  who: {default: world}
steps:
  - id: hosts
    run: echo '["a","b","c"]'
  - id: flaky
    retry: {max: 3, delay_ms: 0}
    timeout_ms: 30000
    run: >-
      echo x >> attempts.txt; n=$(wc -l < attempts.txt | tr -d ' ');
      if [ "$n" -lt 2 ]; then exit 7; fi; echo "{\\"attempts\\":$n}"
  - id: each
    for_each: $hosts.json
    steps:
      - id: check
        approval: Roll out?
      - id: roll
        run: echo "rolled $item.stdout"
        timeout_ms: 20000
  - id: fetch
    parallel:
      wait: all
      branches:
        - id: users
          run: echo '[1,2]'
        - id: orders
          pipeline: exec --json --shell "echo '[{\\"id\\":7},{\\"id\\":8}]'" | pick id
  - id: notes
    workflow: lib/notes.lobster
    workflow_args: {who: "${who}"}
  - id: answer
    input:
      prompt: Ship it?
      responseSchema: {type: object}
  - id: final
    stdin: $fetch.json
    pipeline: map --wrap fetched
"""

NOTES = """\
args:
  who: {default: nobody}
steps:
  - id: greet
    run: echo "hello $LOBSTER_ARG_WHO"
  - id: confirm
    approval: Publish notes?
  - id: draft
    stdin: $greet.stdout
    pipeline: template --text 'notes {{.}}'
"""


def workflow_dir(base: Path) -> Path:
    workdir = Path(tempfile.mkdtemp(dir=base))
    (workdir / "lib").mkdir()
    (workdir / "flow.lobster").write_text(WORKFLOW, encoding="utf-8")
    (workdir / "lib" / "notes.lobster").write_text(NOTES, encoding="utf-8")
    return workdir


def drive_workflow(workdir: Path, *, cut: int | None = None):
    """Answer every gate (approve, or {"ok": true}); with `cut`, also park every `cut`
    instructions. Every park goes through bytes, checked against the program."""
    from lobsterc.generate.workflow import compile_workflow

    program = codec.load_program(codec.dump_program(compile_workflow(str(workdir / "flow.lobster"))))
    options = Options(state_dir=str(workdir / "state"), cwd=str(workdir), env=dict(os.environ),
                      mode="tool")
    host = machine.Host(ctx=options.context())
    frame = machine.new_frame(program, cwd=str(workdir), mode="tool")
    halts, parks = [], 0
    while True:
        outcome = machine.run(program, frame, host, budget=cut)
        if isinstance(outcome, machine.Finished):
            return outcome.output, halts, parks
        assert not isinstance(outcome, machine.Failed), outcome
        parks += 1
        frame = codec.load_frame(codec.dump_frame(outcome.frame), program)
        for entry in frame.tries:
            assert entry.remaining_ms is None or 0 <= entry.remaining_ms <= 30000
        if frame.pending is not None:
            halts.append((frame.pending.kind, frame.pending.prompt))
            machine.apply_decision(frame, {"ok": True} if frame.pending.kind == "input" else None)


def test_workflows_resume_from_bytes_at_every_instruction(tmp_path):
    """Loops, a sub-workflow, a retried step, parallel branches and both kinds of gate: a
    park after any number of instructions, through bytes, gives the same run."""
    straight, halts, _ = drive_workflow(workflow_dir(tmp_path))
    assert straight == [{"fetched": {"users": [1, 2], "orders": [{"id": 7}, {"id": 8}]}}]
    assert halts == [("approval", "Roll out?")] * 3 + [
        ("approval", "Publish notes?"), ("input", "Ship it?")]
    for cut in (1, 2, 3, 5, 8, 13):
        output, cut_halts, parks = drive_workflow(workflow_dir(tmp_path), cut=cut)
        assert (output, cut_halts) == (straight, halts), cut
        assert parks > len(halts) or cut > 3, cut


@pytest.mark.slow
def test_a_workflow_resumed_by_new_processes_gives_the_same_output(tmp_path):
    expected, halts, _ = drive_workflow(workflow_dir(tmp_path))
    workdir = workflow_dir(tmp_path)

    def chain():
        envelope = yield ["run", "--mode", "tool", "--file", "flow.lobster"]
        seen = []
        while envelope["status"] in ("needs_approval", "needs_input"):
            if envelope["status"] == "needs_approval":
                request = envelope["requiresApproval"]
                decision = ["--approve", "yes"]
            else:
                request = envelope["requiresInput"]
                decision = ["--response-json", json.dumps({"ok": True})]
            seen.append(request["prompt"])
            envelope = yield ["resume", "--token", request["resumeToken"], *decision]
        assert envelope["ok"] is True, envelope
        return envelope["output"], seen

    [(output, prompts)] = drive_through_the_cli([(str(workdir), chain())],
                                                str(tmp_path / "pycache"))
    assert output == expected
    assert prompts == [prompt for _, prompt in halts]
