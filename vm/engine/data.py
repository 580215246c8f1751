"""Handlers of data and step instructions: registers, stages, child processes, renderers,
workflow shell and pipeline steps, stdin references, args and the cost limit."""

from __future__ import annotations

from typing import Any

from vm.engine import steps
from vm.engine.outcome import Finished
from vm.engine.run import Run, child_cap
from vm.host import commands
from vm.host.commands import Args, CommandError, Context
from vm.isa.cost import CostLimit
from vm.isa.opcodes import Op
from vm.isa.program import Instr


def op_nop(run: Run, ins: Instr) -> None:
    pass


def op_load_const(run: Run, ins: Instr) -> None:
    run.frame.registers[ins.a] = run.K[ins.b]


def op_move(run: Run, ins: Instr) -> None:
    R = run.frame.registers
    R[ins.a] = R[ins.b]


def op_stage(run: Run, ins: Instr) -> None:
    stage, R = run.K[ins.b], run.frame.registers
    if run.kept is not None:
        pc, kept = run.kept
        run.kept = None
        if pc == run.frame.pc - 1 and R[ins.c] is kept:  # this where's work is done (op_exec)
            R[ins.a] = kept
            return
    flags, positionals = stage.flags, stage.positionals
    if stage.templated:
        flags = {k: run.render(v) if isinstance(v, str) else v for k, v in flags.items()}
        positionals = tuple(run.render(p) for p in positionals)
    # a workflow pipeline step's stages see its env and cwd (LOBSTER_MAX_* included); the
    # registry is loaded by the first stage of a process (vm.host.commands names it lazily)
    command = commands.COMMANDS[stage.command]
    R[ins.a] = command.run(Args(flags, positionals), R[ins.c], run.stage_context(run.ctx))


def op_exec(run: Run, ins: Instr) -> None:
    from vm.host.commands.exec_cmd import run_exec, run_exec_kept  # with its first child

    spec, R = run.K[ins.b].spec(), run.frame.registers
    if run.K[ins.b].templated:
        if "shell" in spec:
            spec["shell"] = run.render(spec["shell"])
        if "argv" in spec:
            spec["argv"] = [run.render(a) for a in spec["argv"]]
    keep = _where_next(run, ins) if spec.get("json") else None
    if keep is None:
        R[ins.a] = run_exec(spec, R[ins.c], run.stage_context(run.ctx))
        return
    R[ins.a], filtered = run_exec_kept(spec, R[ins.c], run.stage_context(run.ctx), keep)
    if filtered:
        run.kept = (run.frame.pc, R[ins.a])  # the where's own pc, and what it would keep


def _where_next(run: Run, ins: Instr):
    """The test of a `where` stage that takes this exec's items next and puts its own in their
    place (`exec --json ... | where ...`): the items it would drop are dropped as they are
    parsed, so a large output is never held whole. The where op, next, finds its work done
    (run.kept: its own pc and the very list, from this run) and passes the list on; the
    where's step, its events and a frame parked between the two are as before (a where on a
    resumed frame filters the kept items again, and keeps them all)."""
    code = run.program.code
    if run.frame.pc >= len(code):
        return None
    nxt = code[run.frame.pc]
    if nxt.op != Op.STAGE or nxt.c != ins.a or nxt.a != ins.a:
        return None
    stage = run.K[nxt.b]
    if stage.command != "where" or stage.templated:
        return None
    from vm.host.commands.data import where_predicate

    return where_predicate(Args(stage.flags, stage.positionals))


def op_render(run: Run, ins: Instr) -> None:
    from vm.host.commands.data import render  # 8 ms of import that most runs never need

    frame = run.frame
    text = render(run.K[ins.b], frame.registers[ins.a])
    run.host.rendered = True
    if frame.capture is not None:
        frame.capture.append(text)
    else:
        run.host.write(text)
    frame.registers[ins.a] = []


def op_end(run: Run, ins: Instr) -> Finished:
    return Finished(run.frame.registers[ins.a])


def op_shell(run: Run, ins: Instr) -> None:
    step, spec = run.K[ins.a], run.K[ins.b]
    stdin = run.stdin(spec.stdin)
    env = run.step_env(spec.env)
    run.record(step, run_shell_step(step, run.render(spec.run), stdin, env,
                                    run.step_cwd(spec.cwd), run.ctx))


def run_shell_step(step: str, line: str, stdin: Any, env: dict, cwd: str, ctx: Context) -> dict:
    """A workflow shell line in a child process; its result, or the reference's failure."""
    from vm.host.commands.exec_cmd import process_code
    from vm.host.process import CommandNotFound, ProcessError, run_process, shell_argv

    try:
        result = run_process(shell_argv(line, env), stdin=steps.stdin_bytes(stdin), cwd=cwd,
                             env=env, deadline=ctx.deadline,
                             max_output_bytes=child_cap(ctx.max_output_bytes, env),
                             shell=True, scope=ctx.scope)
    except ProcessError as exc:
        message = exc.message
        if isinstance(exc, CommandNotFound) and exc.shell:
            message = "workflow shell not found; check LOBSTER_SHELL or ComSpec"
        raise CommandError(message, code=process_code(exc)) from None
    stdout = result.stdout.decode("utf-8", "replace")
    if result.code != 0:
        detail = result.stderr.decode("utf-8", "replace").strip() or stdout.strip() or line
        raise CommandError(f"workflow command failed ({result.code}): {detail}", code="T410")
    return steps.shell_result(step, stdout)


def op_load_stdin(run: Run, ins: Instr) -> None:
    frame, spec = run.frame, run.K[ins.b]
    frame.registers[ins.a] = steps.stdin_items(run.stdin(spec.stdin))
    frame.capture = []
    frame.stage_env = run.step_env(spec.env)
    frame.stage_cwd = run.step_cwd(spec.cwd)


def op_store_pipeline(run: Run, ins: Instr) -> None:
    frame = run.frame
    rendered = "".join(frame.capture or [])
    step = run.K[ins.a]
    run.record(step, steps.pipeline_result(step, frame.registers[ins.b], rendered or None))
    frame.registers[ins.b] = []
    frame.capture = frame.stage_env = frame.stage_cwd = None


def op_set_result(run: Run, ins: Instr) -> None:
    step, value = run.K[ins.a], run.K[ins.b]
    # a gated step is finished by its approval, not here
    run.record(step, steps.value_result(step, run.stdin(value.stdin)), done=not value.gated)


def op_init_args(run: Run, ins: Instr) -> None:
    """Resolved args: the file's defaults overlaid by the caller's."""
    run.frame.args = {**run.K[ins.a], **run.frame.args}


def op_cost_limit(run: Run, ins: Instr) -> None:
    run.frame.cost.limit = CostLimit.of(run.K[ins.a])
