"""The core promise as a property: halting, saving the frame and resuming it in a new process
gives the same result as answering every gate in one process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import LOBSTER
from lobsterc.codegen import compile_pipeline
from vm import codec, machine
from vm.protocol import Options

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
        assert codec.load_frame(blob) == frame
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
            assert drive_in_process(text, answers, workdir, cut=cut) == straight
            expected.append(straight)
            chains.append((workdir, cli_chain(text, answers)))
        got = drive_through_the_cli(chains, str(base / "pycache"))
        for (text, *_), (result, halts), (cli_result, cli_halts) in zip(batch, expected, got):
            assert cli_result == result, text
            assert [(k, p) for k, p, _ in cli_halts] == [(k, p) for k, p, _ in halts], text
            for (kind, _, items), (_, _, cli_items) in zip(halts, cli_halts):
                if kind == "approval":
                    assert cli_items == items, text
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
        assert drive_in_process(text, answers, workdir, cut=cut) == \
            drive_in_process(text, answers, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
