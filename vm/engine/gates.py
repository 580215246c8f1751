"""Handlers of the gates (HALT_APPROVE, HALT_INPUT) and the pending records a parked frame
keeps: what the envelope shows and what the decision needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vm.core import js, json_write
from vm.engine import steps
from vm.engine.outcome import Parked
from vm.engine.run import Run
from vm.host.commands import CommandError
from vm.isa.frame import PipelineApproveWait, PipelineAskWait
from vm.isa.ops import PipelineApprove, PipelineAsk
from vm.isa.program import Instr

if TYPE_CHECKING:  # the workflow steps' gates: built on their first use (vm/isa/ops.py)
    from vm.isa.frame import StepApprovalWait, StepInputWait
    from vm.isa.ops import ApproverRules, StepApproval, StepInput


SUBJECT_LIMIT = 2000
TRUE_WORDS = ("1", "true", "yes", "on")


def op_halt(run: Run, ins: Instr) -> Parked | None:
    """HALT_APPROVE and HALT_INPUT: the handler of the site's kind (verify lets each opcode
    name only its own kinds)."""
    site = run.program.halts[ins.b]
    return GATES[type(site).__name__](run, ins, site)


def halt_pipeline_approve(run: Run, ins: Instr, site: PipelineApprove) -> Parked | None:
    frame, host = run.frame, run.host
    if (host.ask_line is not None and host.ctx.mode == "human" and host.ctx.stdin_is_tty
            and not site.emit):
        answer = host.ask_line(f"{site.prompt} [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            raise CommandError("Not approved")
        return None
    frame.pending = approval_pending(site, ins.b, ins.a, frame.registers[ins.a])
    return Parked(frame)


def halt_pipeline_ask(run: Run, ins: Instr, site: PipelineAsk) -> Parked:
    frame = run.frame
    from vm.core.schema_compile import compile_notes

    compile_notes(site.schema, run.host.log)  # the original compiles it as the stage runs
    if site.step is not None and run.host.ctx.mode != "tool":
        # an `ask` stage of a workflow's pipeline step pauses in tool mode only (as the original)
        raise CommandError(f"Workflow step {site.step} halted before completion at pipeline "
                           "stage ask", code="E214", retryable=False)
    if run.host.ctx.mode == "tool" and (run.host.rendered or frame.capture):
        raise CommandError("requestInput cannot suspend after this command has produced output",
                           retryable=False)
    frame.pending = input_pending(site, ins.b, ins.a, frame.registers[ins.a])
    return Parked(frame)


def halt_step_approval(run: Run, ins: Instr, site: StepApproval) -> Parked:
    run.frame.pending = step_approval_pending(run, site, ins.b)
    return Parked(run.frame)


def halt_step_input(run: Run, ins: Instr, site: StepInput) -> Parked:
    run.frame.pending = step_input_pending(run, site, ins.b)
    return Parked(run.frame)


GATES = {"PipelineApprove": halt_pipeline_approve, "PipelineAsk": halt_pipeline_ask,
         "StepApproval": halt_step_approval, "StepInput": halt_step_input}  # by halt site


def step_approval_pending(run: Run, site: StepApproval, halt: int) -> StepApprovalWait:
    """What a workflow step's approval gate waits on: the request its result makes."""
    from vm.isa.frame import StepApprovalWait

    result = run.frame.results.get(site.step)
    request = steps.approval_request(result, site.prompt, _gate_config(site))
    items = request["items"]  # a list, unless the step printed a request with other items
    return StepApprovalWait(halt=halt, prompt=request["prompt"], step=site.step,
                            items=list(items) if isinstance(items, list) else items,
                            preview=request.get("preview"),
                            approvers=_approvers(site.approvers, run.host.ctx.env))


def step_input_pending(run: Run, site: StepInput, halt: int) -> StepInputWait:
    """What a workflow step's input gate waits on: its subject (the stdin reference, else the
    previous step's value) and its defaults."""
    from vm.isa.frame import StepInputWait

    frame = run.frame
    present = True
    if site.stdin is not None:
        subject = run.stdin(site.stdin.value)
        # a stdin that resolves to nothing (the json of text output): no subject at all
        present = subject is not js.UNDEFINED
        subject = subject if present else None
    else:
        subject = _previous_value(frame.results.get(frame.last_step))
    defaults = site.defaults
    return StepInputWait(halt=halt, prompt=site.prompt, step=site.step, schema=site.schema,
                         subject=subject, has_subject=present,
                         defaults=None if defaults is None else defaults.value,
                         has_defaults=defaults is not None)


def approval_pending(site: PipelineApprove, halt: int, register: int,
                     items: list) -> PipelineApproveWait:
    preview = None
    if site.preview:
        shown = items[: max(site.limit, 0)]
        if all(isinstance(item, str) for item in shown):
            preview = "\n".join(shown)
        else:
            preview = json_write.json_pretty(shown)
        preview = preview or None
    return PipelineApproveWait(halt=halt, register=register, prompt=site.prompt,
                               items=list(items), preview=preview)


def input_pending(site: PipelineAsk, halt: int, register: int, items: list) -> PipelineAskWait:
    subject: Any = None
    text = json_write.joined_text(items, "\n") if site.subject else ""
    if text:  # no text, no subject (as the reference)
        subject = {"text": text[:SUBJECT_LIMIT]}
    return PipelineAskWait(halt=halt, register=register, prompt=site.prompt, schema=site.schema,
                           items=list(items), subject=subject)


def _gate_config(site: StepApproval) -> dict:
    config = {}
    if site.items is not None:
        config["items"] = site.items.value
    if site.preview is not None:
        config["preview"] = site.preview.value
    return config


def _previous_value(result: dict | None) -> Any:
    if not result:
        return None
    for key in ("json", "response", "stdout"):
        if key in result:
            return result[key]
    return None


def _approvers(rules: ApproverRules, env) -> ApproverRules:
    """The site's rules, each one it leaves open (None) read from the environment."""
    from vm.isa.ops import ApproverRules

    initiated = rules.initiated_by if rules.initiated_by is not None else (
        (env.get("LOBSTER_APPROVAL_INITIATED_BY") or "").strip() or None)
    required = rules.required_approver if rules.required_approver is not None else (
        (env.get("LOBSTER_APPROVAL_REQUIRED_APPROVER") or "").strip() or None)
    different = rules.require_different_approver
    if different is None:
        different = (env.get("LOBSTER_APPROVAL_REQUIRE_DIFFERENT_APPROVER") or "").strip() \
            .lower() in TRUE_WORDS
    return ApproverRules(initiated or None, required or None, True if different else None)
