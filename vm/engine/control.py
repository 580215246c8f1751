"""Handlers of control flow: jumps and conditions, skipped steps, the end of a workflow,
for_each loops, sub-workflow calls and the policies (TRY / END_TRY)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vm.core import js, json_write
from vm.core.condition import evaluate
from vm.engine import refs
from vm.engine.outcome import Finished
from vm.engine.run import Run, restore_scope, wait
from vm.host.commands import CommandError
from vm.isa.cost import Ledger
from vm.isa import frame as frames
from vm.isa.frame import Frame
from vm.isa.program import Instr

if TYPE_CHECKING:  # workflow records, built on first use (vm.isa.ops, vm.isa.frame: read as
    # frames.LoopFrame below, so that reading one builds them)
    from vm.isa.frame import LoopFrame
    from vm.isa.ops import Loop


def op_jump(run: Run, ins: Instr) -> None:
    run.frame.pc = ins.a


def op_jump_if_not(run: Run, ins: Instr) -> None:
    if not run.frame.registers[ins.a]:
        run.frame.pc = ins.b


def op_eval_cond(run: Run, ins: Instr) -> None:
    run.frame.registers[ins.a] = evaluate(run.K[ins.b], run.resolve)


def op_skip_step(run: Run, ins: Instr) -> None:
    step = run.K[ins.a]
    run.frame.results[step] = {"id": step, "skipped": True}
    if run.events is not None:
        run.events.skipped(run.frame.pc - 1, "condition false")


def op_end_workflow(run: Run, ins: Instr) -> Finished | None:
    return run.finish_workflow()


def op_loop_begin(run: Run, ins: Instr) -> None:
    frame = run.frame
    step, spec = run.K[ins.a], run.K[ins.b]
    source = run.stdin(spec.source)
    if not isinstance(source, list):
        raise CommandError(f"Workflow step {step} for_each: expected array, got "
                           f"{_typeof(source)}", code="T441")
    names = [spec.item_var, spec.index_var, *spec.steps]
    loop = frames.LoopFrame(site=frame.pc - 1, items=source,
                            shadow={n: frame.results[n] for n in names if n in frame.results})
    if not source:
        _finish_loop(run, loop, spec, step)
        frame.pc = ins.c
        return
    frame.loops.append(loop)
    _enter_iteration(frame, loop, spec)


def op_loop_next(run: Run, ins: Instr) -> None:
    frame = run.frame
    loop = frame.loops[-1]
    spec: Loop = run.K[run.program.code[loop.site].b]
    output = {spec.item_var: loop.items[loop.index], spec.index_var: loop.index}
    for sub in spec.steps:
        result = frame.results.pop(sub, None)
        if result and not result.get("skipped"):
            value = next((result[k] for k in ("json", "response", "stdout")
                          if result.get(k) is not None), None)
            if value is not None:
                output[sub] = value
    loop.outputs.append(output)
    loop.index += 1
    if loop.index < len(loop.items):
        if spec.pause_ms and loop.index % max(spec.batch_size, 1) == 0:
            wait(run.ctx, spec.pause_ms)
        _enter_iteration(frame, loop, spec)
        frame.pc = ins.b
        return
    frame.loops.pop()
    _finish_loop(run, loop, spec, run.K[ins.a])


def _enter_iteration(frame: Frame, loop: LoopFrame, spec: Loop) -> None:
    item, index = loop.items[loop.index], loop.index
    frame.results[spec.item_var] = {
        "id": spec.item_var, "json": item,
        "stdout": json_write.to_text(item)}
    frame.results[spec.index_var] = {"id": spec.index_var, "json": index, "stdout": str(index)}


def _finish_loop(run: Run, loop: LoopFrame, spec: Loop, step: str) -> None:
    restore_scope(run.frame, loop, spec)
    run.record(step, {"id": step, "json": loop.outputs,
                      "stdout": json_write.json_compact(loop.outputs)})


def _typeof(value: Any) -> str:
    """JavaScript `typeof`, in which null is an "object"."""
    return "object" if value is None else js.js_type(value)


def op_call(run: Run, ins: Instr) -> None:
    frame, spec = run.frame, run.K[ins.b]
    args = dict(spec.defaults)
    for name, value in spec.args.items():
        args[name] = run.render(value) if isinstance(value, str) else value
    overlay = {**frame.env, **refs.injected_env(frame.args),
               **{k: run.render(v) for k, v in spec.env.items()}}
    frame.calls.append(frames.CallFrame(site=frame.pc - 1, results=frame.results,
                                        args=frame.args, env=frame.env,
                                        last_step=frame.last_step, cost=frame.cost))
    frame.results, frame.args, frame.env, frame.last_step = {}, args, overlay, None
    frame.cost = Ledger()  # its own cost_limit, if it has one, is its first instruction
    frame.pc = ins.c


def op_return(run: Run, ins: Instr) -> None:
    run.finish_workflow()


def op_try(run: Run, ins: Instr) -> None:
    frame = run.frame
    entry = frames.TryFrame(site=frame.pc - 1, loops=len(frame.loops), calls=len(frame.calls))
    run.push_try(entry, run.K[ins.b])


def op_end_try(run: Run, ins: Instr) -> None:
    run.pop_try()
