"""Typed gates: each of the four halt site kinds parks with its own pending record, which
holds only its own fields, survives its bytes, and takes its decision; the facts a gate needs
(its step, its approver rules, whether an approval finishes a step) are fields."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import msgpack
import pytest

from lobsterc.generate.codegen import compile_pipeline
from lobsterc.generate.workflow import compile_workflow
from vm.engine import machine
from vm.host.commands import Context
from vm.isa import codec
from vm.isa.codec import LoadError
from vm.isa.frame import (FRAME_FORMAT, PipelineApproveWait, PipelineAskWait, StepApprovalWait,
                          StepInputWait)
from vm.isa.opcodes import Op
from vm.isa.ops import (ApproverRules, Given, PipelineApprove, PipelineAsk, StepApproval,
                        StepInput, StepValue)
from vm.isa.program import FORMAT_VERSION, Instr
from vm.isa.verify import VerifyError, verify, verify_frame

APPROVE = "exec --json --shell 'echo [1,2]' | approve --prompt 'Ok?' --preview-from-stdin | json"
ASK = "exec --json --shell 'echo [1]' | ask --prompt 'Tone?' --subject-from-stdin | json"
STEP_APPROVAL = ("steps:\n  - id: plan\n    run: echo '[1]'\n    approval:\n      prompt: Go?\n"
                 "      initiated_by: ann\n      require_different_approver: true\n")
STEP_INPUT = ("steps:\n  - id: notes\n    input:\n      prompt: Notes?\n"
              "      responseSchema: {type: string}\n      defaults: hi\n")
STAGE_ASK = "steps:\n  - id: review\n    pipeline: ask --prompt 'Why?'\n"


def workflow(tmp_path: Path, text: str):
    path = tmp_path / "flow.lobster"
    path.write_text(text, encoding="utf-8")
    return compile_workflow(str(path))


def park(tmp_path: Path, program, env: dict | None = None):
    frame = machine.new_frame(program, cwd=str(tmp_path), mode="tool")
    ctx = Context(env={"PATH": os.environ.get("PATH", ""), **(env or {})}, cwd=str(tmp_path),
                  store=None)
    outcome = machine.run(program, frame, machine.Host(ctx=ctx))
    assert isinstance(outcome, machine.Parked) and outcome.frame.pending is not None
    return outcome.frame


def test_a_pipeline_approve_parks_with_its_own_record(tmp_path):
    program = compile_pipeline(APPROVE)
    (site,) = program.halts
    assert site == PipelineApprove("2:approve", "Ok?", preview=True)
    pending = park(tmp_path, program).pending
    assert pending == PipelineApproveWait(halt=0, register=0, prompt="Ok?", items=[1, 2],
                                          preview="[\n  1,\n  2\n]")
    assert (pending.kind, pending.step) == ("approval", "")


def test_a_pipeline_ask_parks_with_its_own_record(tmp_path):
    program = compile_pipeline(ASK)
    (site,) = program.halts
    assert isinstance(site, PipelineAsk) and site.step is None and site.subject
    frame = park(tmp_path, program)
    assert frame.pending == PipelineAskWait(halt=0, register=0, prompt="Tone?",
                                            schema=site.schema, items=[1],
                                            subject={"text": "1"})
    machine.apply_decision(frame, "warm")
    assert frame.pending is None and frame.registers[0] == ["warm"]


def test_an_ask_stage_of_a_workflow_step_names_its_step_in_a_field(tmp_path):
    (site,) = workflow(tmp_path, STAGE_ASK).halts
    assert isinstance(site, PipelineAsk) and (site.id, site.step) == ("review:1", "review")


def test_a_step_approval_resolves_its_approver_rules_when_it_halts(tmp_path):
    program = workflow(tmp_path, STEP_APPROVAL)
    (site,) = program.halts
    assert site == StepApproval("plan", "Go?", "plan",
                                approvers=ApproverRules("ann", None, True))
    frame = park(tmp_path, program, {"LOBSTER_APPROVAL_REQUIRED_APPROVER": " bob "})
    assert frame.pending == StepApprovalWait(
        halt=0, prompt="Go?", step="plan", items=[1], preview="[1]",
        approvers=ApproverRules("ann", "bob", True))
    machine.apply_decision(frame, None, approved_by="bob")
    assert frame.results["plan"]["approved"] is True
    assert (frame.results["plan"]["initiatedBy"], frame.results["plan"]["approvedBy"]) == \
        ("ann", "bob")


def test_a_step_input_parks_with_its_own_record(tmp_path):
    program = workflow(tmp_path, STEP_INPUT)
    (site,) = program.halts
    assert isinstance(site, StepInput) and site.defaults == Given("hi")
    frame = park(tmp_path, program)
    assert frame.pending == StepInputWait(halt=0, prompt="Notes?", step="notes",
                                          schema={"type": "string"}, subject=None,
                                          has_subject=True, defaults="hi", has_defaults=True)
    machine.apply_decision(frame, "done")
    assert frame.results["notes"] == {"id": "notes", "subject": None, "response": "done"}
    assert frame.last_step == "notes"


@pytest.mark.parametrize("source", [APPROVE, ASK, STEP_APPROVAL, STEP_INPUT])
def test_each_pending_record_is_tagged_and_survives_its_bytes(tmp_path, source):
    program = compile_pipeline(source) if "steps:" not in source else workflow(tmp_path, source)
    frame = park(tmp_path, program)
    raw = msgpack.unpackb(codec.dump_frame(frame))
    assert raw["pending"]["$type"] == type(frame.pending).__name__
    assert set(raw["pending"]) == {"$type", *attrs.fields_dict(type(frame.pending))}
    assert codec.load_frame(codec.dump_frame(frame), program) == frame
    (site,) = codec.load_program(codec.dump_program(program)).halts
    assert site == program.halts[0]


@pytest.mark.parametrize(("approval", "prompt"), [
    ("{prompt: ''}", ""), ("' required '", " required "), ("required", "Approve a?"),
    ("{}", "Approve a?"), ("true", "Approve a?")])
def test_a_step_approval_prompt_is_kept_as_written(tmp_path, approval, prompt):
    """Only a missing prompt, or the exact word `required`, gives the default, as the
    original's: an empty one is kept."""
    program = workflow(tmp_path, f"steps:\n  - id: a\n    approval: {approval}\n")
    assert park(tmp_path, program).pending.prompt == prompt


@pytest.mark.parametrize(("printed", "prompt", "items", "preview"), [
    ({"requiresApproval": {"prompt": "p", "items": 5, "preview": ["a"]}}, "p", 5, ["a"]),
    ({"prompt": 5, "preview": 7}, 5, [], 7),
    ({"prompt": [], "items": "x"}, [], "x", None),
    ({"requiresApproval": {"prompt": ""}, "prompt": "p2"}, "p2", [], None),
    ({"prompt": 0, "items": [1]}, "cfg", [{"prompt": 0, "items": [1]}],
     '{"prompt": 0, "items": [1]}'),  # not a request: the gate's own, its preview the output
])
def test_a_request_a_step_prints_is_taken_as_printed_and_parks(tmp_path, printed, prompt,
                                                                items, preview):
    """A step that prints its own approval request: taken when its prompt is truthy as
    JavaScript has it, its prompt, items and preview kept whatever their JSON types (a number
    prompt, a string of items), and the frame saved with them loads again (a preview that is
    not a string made a checkpoint no resume could read)."""
    (tmp_path / "out.json").write_text(json.dumps(printed))
    program = workflow(tmp_path, "steps:\n  - id: a\n    run: cat out.json\n"
                                 "    approval: {prompt: cfg}\n")
    frame = park(tmp_path, program)
    pending = frame.pending
    assert (pending.prompt, pending.items, pending.preview) == (prompt, items, preview)
    assert codec.load_frame(codec.dump_frame(frame), program) == frame


def test_a_gated_step_value_says_so(tmp_path):
    # after a policy's END_TRY the step has finished at its value (as before the field)
    program = workflow(tmp_path, "steps:\n  - id: a\n    approval: Go?\n"
                                 "  - id: b\n    approval: Go?\n    on_error: continue\n")
    values = [program.constants[i.b] for i in program.code if i.op == Op.SET_RESULT]
    assert values == [StepValue(None, gated=True), StepValue(None, gated=False)]


def test_a_halt_naming_the_other_kind_of_site_fails_verification():
    program = compile_pipeline(APPROVE)
    (pc,) = [pc for pc, i in enumerate(program.code) if i.op == Op.HALT_APPROVE]
    code = list(program.code)
    code[pc] = Instr(Op.HALT_INPUT, code[pc].a, code[pc].b)
    with pytest.raises(VerifyError, match="HALT_INPUT names a PipelineApprove halt site"):
        verify(attrs.evolve(program, code=code))


def test_a_pending_record_of_the_wrong_kind_is_refused(tmp_path):
    program = compile_pipeline(APPROVE)
    frame = park(tmp_path, program)
    frame.pending = PipelineAskWait(halt=0, register=0, prompt="Ok?")
    with pytest.raises(VerifyError, match="a PipelineAskWait does not wait on a PipelineApprove"):
        verify_frame(frame, program)


def test_a_frame_or_program_of_the_previous_format_is_refused_in_one_line(tmp_path):
    program = compile_pipeline(APPROVE)
    raw = msgpack.unpackb(codec.dump_frame(park(tmp_path, program)))
    raw["format"] = FRAME_FORMAT - 1
    with pytest.raises(LoadError, match="^not a Lobster frame of this format$"):
        codec.load_frame(msgpack.packb(raw))
    raw = msgpack.unpackb(codec.dump_program(program))
    raw["header"]["format_version"] = FORMAT_VERSION - 1
    with pytest.raises(LoadError, match=f"^unsupported bytecode format {FORMAT_VERSION - 1}$"):
        codec.load_program(msgpack.packb(raw))
