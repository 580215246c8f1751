"""The interpreter: one per-run context (Run, vm/engine/run.py), one handler per opcode
(HANDLERS; the handlers live by job in data, control, gates and parallel), one loop.
A handler returns None to go on or the Outcome that ends the call; a trap goes to the
innermost policy, else becomes Failed with its file and span; every exit passes
`suspend`."""

from __future__ import annotations

import time

from vm.engine import control, data, gates, parallel
from vm.engine.outcome import Failed, Finished, Outcome, Parked, location
from vm.engine.run import Run
from vm.host.commands import CommandError
from vm.host.commands.base import timed_out
from vm.isa.frame import Frame
from vm.isa.opcodes import Op
from vm.isa.program import Instr, Program


def execute(program: Program, frame: Frame, host, *, budget: int | None = None,
            branch: bool = False) -> Outcome:
    """Run `frame` until it parks, finishes, fails, or has run `budget` instructions (then it
    returns Parked with no pending halt)."""
    run = Run(program, frame, host, branch=branch)
    try:
        return _loop(run, program.code, budget)
    finally:
        run.suspend()


_NO_STEPS: dict[int, int] = {}


def _loop(run: Run, code: tuple[Instr, ...], budget: int | None) -> Outcome:
    frame, events = run.frame, run.events
    # with no listener both are empty, and the loop pays one dict lookup per instruction
    starts = events.starts if events is not None else _NO_STEPS
    ends = events.ends if events is not None else _NO_STEPS
    claim = run.claim  # a resumed run's claim: it goes on only while the claim is its own
    while True:
        if claim is not None:
            claim.check()
        if budget is not None:
            if budget <= 0:
                return Parked(frame)
            budget -= 1
        pc = frame.pc
        ins = code[pc]
        frame.pc = pc + 1
        try:
            if pc in starts:
                events.started(starts[pc], frame.loops)
            ctx = run.ctx = run.context()
            if ctx.deadline is not None and time.monotonic() > ctx.deadline:
                raise timed_out()
            done = HANDLERS[ins.op](run, ins)
            if done is not None:
                return done
            if pc in ends:
                events.stage_finished(ends[pc])
        except CommandError as exc:
            handled = run.fail(exc)
            if handled is None:
                continue
            if isinstance(handled, Finished):
                return handled
            if events is not None and not run.branch:
                events.failed(None, frame.pc - 1, handled.code, handled.message)
            file, span = location(run.program, frame.pc - 1, frame.source_dir)
            return Failed(handled.code, handled.message, file, span, handled.detail)


HANDLERS = {
    Op.NOP: data.op_nop, Op.LOAD_CONST: data.op_load_const, Op.MOVE: data.op_move,
    Op.STAGE: data.op_stage, Op.EXEC: data.op_exec, Op.RENDER: data.op_render,
    Op.SHELL: data.op_shell, Op.LOAD_STDIN: data.op_load_stdin,
    Op.STORE_PIPELINE: data.op_store_pipeline, Op.SET_RESULT: data.op_set_result,
    Op.INIT_ARGS: data.op_init_args, Op.COST_LIMIT: data.op_cost_limit, Op.JUMP: control.op_jump,
    Op.JUMP_IF_NOT: control.op_jump_if_not, Op.EVAL_COND: control.op_eval_cond,
    Op.SKIP_STEP: control.op_skip_step, Op.HALT_APPROVE: gates.op_halt,
    Op.HALT_INPUT: gates.op_halt, Op.LOOP_BEGIN: control.op_loop_begin,
    Op.LOOP_NEXT: control.op_loop_next, Op.CALL: control.op_call, Op.RETURN: control.op_return,
    Op.TRY: control.op_try, Op.END_TRY: control.op_end_try, Op.PARALLEL: parallel.op_parallel,
    Op.END_BRANCH: parallel.op_end_branch, Op.END: data.op_end,
    Op.END_WORKFLOW: control.op_end_workflow,
}
