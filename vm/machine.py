"""The interpreter: one instruction at a time until END, a HALT_*, or a trap.

Conventions: `R` is the frame's registers, `K` the program's constants, `ins` the current
instruction, `pc` always names the next instruction. A trap (a command's refusal, a child
that failed, a timeout) becomes a Failed outcome with the source location of its pc.
"""

from __future__ import annotations

import time
import secrets
from collections.abc import Callable
from typing import Any

from attrs import define, field

from vm import js
from vm.commands import COMMANDS, Args, CommandError, Context
from vm.frame import FRAME_FORMAT, Frame, Pending
from vm.opcodes import Op
from vm.program import HaltSite, Program
from vm.outcome import Failed, Finished, Outcome, Parked
from vm.workflow_ops import WORKFLOW_OPS, Workflow

SUBJECT_LIMIT = 2000


class VMBug(Exception):
    """An invariant of ours broke; never the caller's fault."""


@define
class Host:
    """What the machine needs from its embedder."""

    ctx: Context
    write: Callable[[str], None] = field(default=lambda text: None)  # human-mode renderer output
    ask_line: Callable[[str], str] | None = None  # interactive prompt, when there is a terminal
    log: Callable[[str], None] = field(default=lambda text: None)  # [RETRY] lines and warnings


def new_frame(program: Program, *, cwd: str, mode: str, args: dict | None = None) -> Frame:
    """A frame at pc 0. The caller's environment is not part of it: a resumed run sees the
    environment of the process that resumes it, and no secret of the first is written."""
    return Frame(format=FRAME_FORMAT, program_hash=program.hash, run_id=secrets.token_hex(16),
                 created_at=time.time(), registers=[[] for _ in range(program.registers)],
                 args=dict(args or {}), cwd=cwd, mode=mode)


def run(program: Program, frame: Frame, host: Host, *, budget: int | None = None) -> Outcome:
    """Execute until the frame parks, finishes, fails, or has run `budget` instructions
    (then it returns Parked with no pending halt). The returned frame is complete."""
    code, K, R = program.code, program.constants, frame.registers
    workflow = Workflow(program, frame, host)
    while True:
        if budget is not None:
            if budget <= 0:
                return Parked(frame)
            budget -= 1
        ins = code[frame.pc]
        frame.pc += 1
        op = ins.op
        try:
            ctx = workflow.context()
            if ctx.deadline is not None and time.monotonic() > ctx.deadline:
                raise CommandError("lobster runtime timed out", code="T420")
            if op == Op.STAGE:
                name, flags, positionals, *tpl = K[ins.b]
                if tpl and tpl[0]:
                    flags, positionals = workflow.render_args(flags, positionals)
                R[ins.a] = COMMANDS[name].run(Args(flags, tuple(positionals)), R[ins.c], ctx)
            elif op == Op.EXEC:
                from vm.commands.exec_cmd import run_exec

                spec = K[ins.b]
                R[ins.a] = run_exec(workflow.render_exec(spec) if spec.get("tpl") else spec,
                                    R[ins.c], workflow.stage_context(ctx))
            elif op == Op.RENDER:
                from vm.commands.data import render

                text = render(K[ins.b], R[ins.a])
                if frame.capture is not None:
                    frame.capture.append(text)
                else:
                    host.write(text)
                R[ins.a] = []
            elif op == Op.HALT_APPROVE:
                site = program.halts[ins.b]
                if site.step:
                    frame.pending = workflow.approval_pending(site, ins.b)
                    return workflow.park()
                if _interactive(host, site):
                    answer = host.ask_line(f"{site.prompt} [y/N] ").strip().lower()
                    if answer not in ("y", "yes"):
                        raise CommandError("Not approved")
                    continue
                frame.pending = approval_pending(site, ins.b, ins.a, R[ins.a])
                return workflow.park()
            elif op == Op.HALT_INPUT:
                site = program.halts[ins.b]
                frame.pending = (workflow.input_pending(site, ins.b) if site.step
                                 else input_pending(site, ins.b, ins.a, R[ins.a]))
                return workflow.park()
            elif op == Op.END:
                return Finished(R[ins.a])
            elif op in WORKFLOW_OPS:
                done = WORKFLOW_OPS[op](workflow, ins, K)
                if done is not None:
                    return done
            elif op == Op.LOAD_CONST:
                R[ins.a] = K[ins.b]
            elif op == Op.MOVE:
                R[ins.a] = R[ins.b]
            elif op == Op.NOP:
                pass
            else:
                raise VMBug(f"unhandled opcode {op} at pc {frame.pc - 1}")
        except CommandError as exc:
            handled = workflow.fail(exc)
            if handled is None:
                continue
            if isinstance(handled, Finished):
                return handled
            return Failed(handled.code, handled.message, _location(program, frame.pc - 1))


def _interactive(host: Host, site: HaltSite) -> bool:
    return (host.ask_line is not None and host.ctx.mode == "human" and host.ctx.stdin_is_tty
            and not site.emit)


def _location(program: Program, pc: int) -> tuple[int, int] | None:
    loc = program.source_map[pc] if 0 <= pc < len(program.source_map) else None
    return (loc[0], loc[1]) if loc else None


def approval_pending(site: HaltSite, halt: int, register: int, items: list) -> Pending:
    preview = None
    if site.preview:
        shown = items[: max(site.limit, 0)]
        if all(isinstance(item, str) for item in shown):
            preview = "\n".join(shown)
        else:
            preview = js.json_pretty(shown)
        preview = preview or None
    return Pending(kind="approval", halt=halt, register=register, prompt=site.prompt,
                   items=list(items), preview=preview)


def input_pending(site: HaltSite, halt: int, register: int, items: list) -> Pending:
    subject: Any = None
    if site.subject:
        text = "\n".join(i if isinstance(i, str) else js.json_compact(i) for i in items)
        subject = {"text": text[:SUBJECT_LIMIT]}
    return Pending(kind="input", halt=halt, register=register, prompt=site.prompt,
                   items=list(items), schema=site.schema, subject=subject,
                   has_subject=site.subject)


def apply_decision(frame: Frame, answer: Any, approved_by: str | None = None) -> None:
    """Put a validated decision where the halted instruction expects it, and clear the halt."""
    pending = frame.pending
    if pending is None:
        raise VMBug("apply_decision on a frame that is not parked")
    if pending.step:
        result = dict(frame.results.get(pending.step) or {"id": pending.step})
        if pending.kind == "input":
            result = {"id": pending.step, "subject": pending.subject, "response": answer}
            frame.last_step = pending.step
        else:
            result["approved"] = True
            for key in ("initiatedBy",):
                if pending.identity.get(key) is not None:
                    result[key] = pending.identity[key]
            if approved_by:
                result["approvedBy"] = approved_by
        frame.results[pending.step] = result
    elif pending.kind == "input":
        frame.registers[pending.register] = [answer]
    now = time.monotonic()
    for entry in frame.tries:
        entry["deadline"] = None if entry.get("remaining") is None else now + entry["remaining"]
    frame.pending = None
