"""The interpreter: one handler per opcode (HANDLERS), one per-run context (Run), one loop.
A handler returns None to go on or the Outcome that ends the call; a trap goes to the
innermost policy, else becomes Failed with its file and span; every exit passes `suspend`."""

from __future__ import annotations

import os
import time
from typing import Any

from attrs import evolve

from vm.core import js
from vm.engine import refs, steps
from vm.host.commands import COMMANDS, Args, CommandError, Context
from vm.host.commands.exec_cmd import process_code, run_exec
from vm.core.condition import MISSING, evaluate
from vm.isa.cost import CostLimit, Ledger
from vm.isa.frame import (CallFrame, Frame, LoopFrame, PipelineApproveWait, PipelineAskWait,
                          StepApprovalWait, StepInputWait, TryFrame)
from vm.isa.opcodes import Op
from vm.isa.ops import (ApproverRules, Loop, Parallel, PipelineApprove,
                       PipelineAsk, Policy, Retry, StepApproval, StepInput)
from vm.engine.outcome import Failed, Finished, Outcome, Parked, location
from vm.host.process import CommandNotFound, ProcessError, env_output_cap, run_process, shell_argv
from vm.isa.program import Instr, Program
from vm.isa.regions import Region, regions_of

SUBJECT_LIMIT = 2000
TRUE_WORDS = ("1", "true", "yes", "on")


class VMBug(Exception):
    """An invariant of ours broke; never the caller's fault."""


class Run:
    """The per-run context of one `execute` call: the program, the frame, the host, and the
    running deadline of each try on the frame's stack (clock readings stay here, never in
    the frame)."""

    def __init__(self, program: Program, frame: Frame, host, *, branch: bool = False) -> None:
        self.program = program
        self.branch = branch  # a parallel branch: its stages see the step's env and cwd
        self.frame = frame
        self.host = host
        self.K = program.constants
        now = time.monotonic()
        self.deadlines: list[float | None] = [
            None if entry.remaining_ms is None else now + entry.remaining_ms / 1000
            for entry in frame.tries]
        self.ctx: Context = host.ctx
        self.events = host.events  # a vm.engine.events.Emitter, or None: no one listens
        if self.events is not None:
            self.events.bind(program, frame.source_dir)

    # contexts --------------------------------------------------------------------------------
    def context(self) -> Context:
        """The host's context, with the innermost try's deadline when that comes first."""
        ctx = self.host.ctx
        for deadline in reversed(self.deadlines):
            if deadline is not None:
                if ctx.deadline is None or deadline < ctx.deadline:
                    ctx = evolve(ctx, deadline=deadline)
                break
        return ctx

    def stage_context(self, ctx: Context) -> Context:
        frame = self.frame
        if frame.stage_env is None:
            return ctx
        return evolve(ctx, env=frame.stage_env, cwd=frame.stage_cwd or ctx.cwd,
                      max_output_bytes=child_cap(ctx.max_output_bytes, frame.stage_env))

    def step_env(self, templates: dict) -> dict[str, str]:
        """The caller's env, the sub-workflow overlay, the injected args, then the workflow's
        and the step's own `env` (templated)."""
        frame = self.frame
        env = dict(self.host.ctx.env)
        env.update(frame.env)
        env.update(refs.injected_env(frame.args))
        for name, template in templates.items():
            env[name] = refs.render(template, frame.args, frame.results)
        return env

    def step_cwd(self, cwd: str | None) -> str:
        """A step's `cwd`, from the run's. One that takes an `${arg}` is the caller's to
        choose, so it is held to the rule of a request `cwd`: relative, inside the run's."""
        base = self.frame.cwd
        if not cwd:
            return base
        chosen = refs.substitute_args(cwd, self.frame.args)
        if chosen == cwd:
            return os.path.join(base, cwd)
        from vm.service.protocol import RequestError, contained_cwd  # the one rule for every cwd

        try:
            return contained_cwd(chosen, base)
        except RequestError as exc:
            raise CommandError(f"step cwd {chosen[:200]!r}: {exc}", code="T412",
                               retryable=False) from None

    def render(self, text: str) -> str:
        return refs.render(text, self.frame.args, self.frame.results)

    def resolve(self, step: str, path: list[str]) -> Any:
        value = refs.strict_ref(step, path, self.frame.results)
        return MISSING if value is js.UNDEFINED else value

    def stdin(self, reference: Any) -> Any:
        return refs.resolve_input(reference, self.frame.args, self.frame.results)

    def record(self, step: str, result: dict, done: bool = True, bill: bool = True) -> None:
        """Store a step's result; bill it (`bill`, and not in a parallel branch: the parent
        bills a branch's result as it joins it) and check the cost limit."""
        self.frame.results[step] = result
        self.frame.last_step = step
        if self.billing():
            if bill:
                self.bill(step, result)
            self.check_cost_limit()
        if done and self.events is not None:
            self.events.finished(step)

    def billing(self) -> bool:
        frame = self.frame
        return not self.branch and (frame.origin == "workflow" or frame.cost.limit is not None)

    def bill(self, step: str, result: dict) -> None:
        """Add the step's LLM usage to the run's ledger (warnings go to the log)."""
        value = result.get("json")
        items = value if isinstance(value, list) else [] if value is None else [value]
        for warning in self.frame.cost.bill(step, items, self.host.ctx.env,
                                            self.host.cost_warned):
            self.host.log(warning + "\n")

    def check_cost_limit(self) -> None:
        """The current workflow's cost_limit against its spend so far: a warning, or a stop.
        A sub-workflow is held to its own limit; its spend counts against the caller's when
        the calling step ends (see `restore_caller`)."""
        error, warning = self.frame.cost.check()
        if warning:
            self.host.log(warning + "\n")
        if error:
            raise CommandError(error, code="T460", retryable=False)

    # the try stack ---------------------------------------------------------------------------
    def push_try(self, entry: TryFrame, policy: Policy) -> None:
        self.frame.tries.append(entry)
        self.deadlines.append(_deadline(policy))

    def pop_try(self) -> TryFrame:
        self.deadlines.pop()
        return self.frame.tries.pop()

    def suspend(self) -> None:
        """Turn the running deadlines back into time left, so the frame can be saved."""
        now = time.monotonic()
        for entry, deadline in zip(self.frame.tries, self.deadlines):
            entry.remaining_ms = None if deadline is None else max(0.0, (deadline - now) * 1000)

    # failures --------------------------------------------------------------------------------
    def fail(self, exc: CommandError) -> Failed | Finished | None:
        """Apply the innermost policy to a trap: retry (None: keep running), record and go on
        (None), end the workflow (Finished), or give up (Failed)."""
        frame, code = self.frame, self.program.code
        message, error_code = exc.message, exc.code
        run_deadline = self.host.ctx.deadline
        while frame.tries:
            entry = frame.tries[-1]
            try_ins = code[entry.site]
            step, policy = self.K[try_ins.a], self.K[try_ins.b]
            deadline = self.deadlines[-1]
            if error_code == "T420" and deadline is not None and (
                    run_deadline is None or deadline <= run_deadline):
                message = f"Step '{step}' timed out after {policy.timeout_ms}ms"
            self.unwind(entry)
            run_over = run_deadline is not None and time.monotonic() >= run_deadline
            retry = policy.retry
            if retry is not None and entry.attempt < retry.max and not run_over \
                    and error_code != "T422" and exc.retryable:
                delay = _retry_delay(retry, entry.attempt - 1)
                if self.events is not None:
                    self.events.retried(step, attempt=entry.attempt, max=retry.max,
                                        delayMs=delay, code=error_code, message=message)
                self.host.log(f"[RETRY] Step '{step}' failed (attempt {entry.attempt}/"
                              f"{retry.max}): {message}. Retrying in {delay}ms...\n")
                try:
                    wait(self.host.ctx, delay)
                except CommandError as stopped:  # the run's deadline or cancellation came first
                    message, error_code, run_over = stopped.message, stopped.code, True
                else:
                    entry.attempt += 1
                    self.deadlines[-1] = _deadline(policy)
                    frame.pc = entry.site + 1
                    return None
            self.pop_try()
            if policy.on_error == "stop" or run_over or error_code == "T422":
                continue
            frame.results[step] = {"id": step, "error": True, "errorMessage": message}
            if self.events is not None:
                self.events.failed(step, frame.pc - 1, error_code, message, policy.on_error)
            if policy.on_error == "continue":
                frame.pc = code[try_ins.c].b
                return None
            return self.finish_workflow()
        return Failed(error_code, message)

    def unwind(self, entry: TryFrame) -> None:
        """Drop loops and calls entered since the policy began."""
        frame = self.frame
        while len(frame.calls) > entry.calls:
            self.restore_caller(frame.calls.pop())
        while len(frame.loops) > entry.loops:
            loop = frame.loops.pop()
            _restore_scope(frame, loop, self.K[self.program.code[loop.site].b])
        frame.capture = frame.stage_env = frame.stage_cwd = None

    def finish_workflow(self) -> Finished | None:
        """The end of the current workflow: return to the caller, or finish the run."""
        frame = self.frame
        output = steps.output_of(frame.results.get(frame.last_step))
        if frame.calls:
            if frame.cost.limit is not None:
                self.check_cost_limit()  # the sub-workflow's own limit, as it ends
            call = frame.calls.pop()
            step = self.restore_caller(call)
            frame.pc = call.site + 1
            # its output was billed in the sub-workflow: only the caller's limit is checked
            self.record(step, steps.call_result(step, output), bill=False)
            return None
        if frame.cost.limit is not None:
            self.check_cost_limit()  # once more as the run ends, as the original
        return Finished(output)

    def restore_caller(self, call: CallFrame) -> str:
        """Back to the caller's scope; the sub-workflow's spend (finished or failed) becomes
        the spend of the calling step, whose id this returns."""
        frame = self.frame
        step = self.K[self.program.code[call.site].a]
        call.cost.absorb(step, frame.cost)
        frame.results, frame.args, frame.env = call.results, call.args, call.env
        frame.last_step, frame.cost = call.last_step, call.cost
        return step

    # gates -----------------------------------------------------------------------------------
    def approval_pending(self, site: StepApproval, halt: int) -> StepApprovalWait:
        result = self.frame.results.get(site.step)
        request = steps.approval_request(result, site.prompt, _gate_config(site))
        return StepApprovalWait(halt=halt, prompt=request["prompt"], step=site.step,
                                items=list(request["items"]), preview=request.get("preview"),
                                approvers=_approvers(site.approvers, self.host.ctx.env))

    def input_pending(self, site: StepInput, halt: int) -> StepInputWait:
        frame = self.frame
        present = True
        if site.stdin is not None:
            subject = self.stdin(site.stdin.value)
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
    while True:
        if budget is not None:
            if budget <= 0:
                return Parked(frame)
            budget -= 1
        pc = frame.pc
        ins = code[pc]
        frame.pc = pc + 1
        try:
            if pc in starts:
                events.started(starts[pc])
            ctx = run.ctx = run.context()
            if ctx.deadline is not None and time.monotonic() > ctx.deadline:
                raise CommandError("lobster runtime timed out", code="T420")
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
            return Failed(handled.code, handled.message, file, span)


# data -----------------------------------------------------------------------------------------
def op_nop(run: Run, ins: Instr) -> None:
    pass


def op_load_const(run: Run, ins: Instr) -> None:
    run.frame.registers[ins.a] = run.K[ins.b]


def op_move(run: Run, ins: Instr) -> None:
    R = run.frame.registers
    R[ins.a] = R[ins.b]


def op_stage(run: Run, ins: Instr) -> None:
    stage, R = run.K[ins.b], run.frame.registers
    flags, positionals = stage.flags, stage.positionals
    if stage.templated:
        flags = {k: run.render(v) if isinstance(v, str) else v for k, v in flags.items()}
        positionals = tuple(run.render(p) for p in positionals)
    # a workflow pipeline step's stages see its env and cwd (LOBSTER_MAX_* included)
    R[ins.a] = COMMANDS[stage.command].run(Args(flags, positionals), R[ins.c],
                                           run.stage_context(run.ctx))


def op_exec(run: Run, ins: Instr) -> None:
    spec, R = run.K[ins.b].spec(), run.frame.registers
    if run.K[ins.b].templated:
        if "shell" in spec:
            spec["shell"] = run.render(spec["shell"])
        if "argv" in spec:
            spec["argv"] = [run.render(a) for a in spec["argv"]]
    R[ins.a] = run_exec(spec, R[ins.c], run.stage_context(run.ctx))


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


# workflow steps -------------------------------------------------------------------------------
def op_shell(run: Run, ins: Instr) -> None:
    step, spec = run.K[ins.a], run.K[ins.b]
    stdin = run.stdin(spec.stdin)
    env = run.step_env(spec.env)
    run.record(step, run_shell_step(step, run.render(spec.run), stdin, env,
                                    run.step_cwd(spec.cwd), run.ctx))


def child_cap(cap: int | None, env: dict) -> int | None:
    """The output cap of a child started with `env`: the run's, and the LOBSTER_MAX_OUTPUT_BYTES
    of that env (a step's own `env:` sets it for that step, as in the original); a bad value
    is left for the child's start to report."""
    try:
        own = env_output_cap(env)
    except ProcessError:
        return cap
    return own if cap is None else cap if own is None else min(cap, own)


def run_shell_step(step: str, line: str, stdin: Any, env: dict, cwd: str, ctx: Context) -> dict:
    """A workflow shell line in a child process; its result, or the reference's failure."""
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


# control --------------------------------------------------------------------------------------
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


def op_halt(run: Run, ins: Instr) -> Parked | None:
    """HALT_APPROVE and HALT_INPUT: the handler of the site's kind (verify lets each opcode
    name only its own kinds)."""
    site = run.program.halts[ins.b]
    return GATES[type(site)](run, ins, site)


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
    run.frame.pending = run.approval_pending(site, ins.b)
    return Parked(run.frame)


def halt_step_input(run: Run, ins: Instr, site: StepInput) -> Parked:
    run.frame.pending = run.input_pending(site, ins.b)
    return Parked(run.frame)


GATES = {PipelineApprove: halt_pipeline_approve, PipelineAsk: halt_pipeline_ask,
         StepApproval: halt_step_approval, StepInput: halt_step_input}


def op_end_workflow(run: Run, ins: Instr) -> Finished | None:
    return run.finish_workflow()


# loops ----------------------------------------------------------------------------------------
def op_loop_begin(run: Run, ins: Instr) -> None:
    frame = run.frame
    step, spec = run.K[ins.a], run.K[ins.b]
    source = run.stdin(spec.source)
    if not isinstance(source, list):
        raise CommandError(f"Workflow step {step} for_each: expected array, got "
                           f"{_typeof(source)}", code="T441")
    names = [spec.item_var, spec.index_var, *spec.steps]
    loop = LoopFrame(site=frame.pc - 1, items=source,
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
        "stdout": js.to_text(item)}
    frame.results[spec.index_var] = {"id": spec.index_var, "json": index, "stdout": str(index)}


def _restore_scope(frame: Frame, loop: LoopFrame, spec: Loop) -> None:
    for name in [spec.item_var, spec.index_var, *spec.steps]:
        frame.results.pop(name, None)
    frame.results.update(loop.shadow)


def _finish_loop(run: Run, loop: LoopFrame, spec: Loop, step: str) -> None:
    _restore_scope(run.frame, loop, spec)
    run.record(step, {"id": step, "json": loop.outputs, "stdout": js.json_compact(loop.outputs)})


# calls ----------------------------------------------------------------------------------------
def op_call(run: Run, ins: Instr) -> None:
    frame, spec = run.frame, run.K[ins.b]
    args = dict(spec.defaults)
    for name, value in spec.args.items():
        args[name] = run.render(value) if isinstance(value, str) else value
    overlay = {**frame.env, **refs.injected_env(frame.args),
               **{k: run.render(v) for k, v in spec.env.items()}}
    frame.calls.append(CallFrame(site=frame.pc - 1, results=frame.results, args=frame.args,
                                 env=frame.env, last_step=frame.last_step, cost=frame.cost))
    frame.results, frame.args, frame.env, frame.last_step = {}, args, overlay, None
    frame.cost = Ledger()  # its own cost_limit, if it has one, is its first instruction
    frame.pc = ins.c


def op_return(run: Run, ins: Instr) -> None:
    run.finish_workflow()


# policies -------------------------------------------------------------------------------------
def op_try(run: Run, ins: Instr) -> None:
    frame = run.frame
    run.push_try(TryFrame(site=frame.pc - 1, loops=len(frame.loops), calls=len(frame.calls)),
                 run.K[ins.b])


def op_end_try(run: Run, ins: Instr) -> None:
    run.pop_try()


def _deadline(policy: Policy) -> float | None:
    timeout = policy.timeout_ms
    return None if timeout is None else time.monotonic() + timeout / 1000


WAIT_SLICE_S = 0.05  # how often a wait looks at its scope's cancellation


def wait(ctx: Context, ms: float) -> None:
    """Sleep `ms` milliseconds, but never past `ctx`'s deadline or its scope's cancellation:
    either ends the wait at once with the trap a child would give (T420, T422)."""
    end = time.monotonic() + ms / 1000
    deadline = ctx.deadline
    while True:
        scope = ctx.scope
        while scope is not None:
            if scope.cancelled:
                raise CommandError("lobster run cancelled", code="T422", retryable=False)
            scope = scope.parent
        now = time.monotonic()
        if deadline is not None and deadline <= end and now >= deadline - 0.001:
            raise CommandError("lobster runtime timed out", code="T420", retryable=False)
        if now >= end:
            return
        stop = end if deadline is None else min(end, deadline)
        time.sleep(max(0.0, min(stop - now, WAIT_SLICE_S)))


def _retry_delay(retry: Retry, k: int) -> int:
    base = retry.delay_ms
    delay = base if retry.backoff == "fixed" else min(base * 2**k, retry.max_delay_ms)
    if retry.jitter:
        import random  # rare: not worth its import at every start

        delay = delay * (1 + random.uniform(-0.1, 0.1))
        delay = min(delay, retry.max_delay_ms) if retry.backoff != "fixed" else delay
    return max(0, round(delay))


# parallel -------------------------------------------------------------------------------------
def op_parallel(run: Run, ins: Instr) -> None:
    """Each branch runs its code region on a thread, in a frame of its own that sees the
    step's args and results; the results merge into this frame."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait  # rare, 5 ms

    frame = run.frame
    step, spec = run.K[ins.a], run.K[ins.b]
    deadline = run.ctx.deadline
    if spec.timeout_ms is not None:
        own = time.monotonic() + spec.timeout_ms / 1000
        deadline = own if deadline is None else min(deadline, own)
    scope = run.ctx.scope.child()  # the branches' children: `wait: any` stops only these
    host = evolve(run.host, ctx=evolve(run.ctx, deadline=deadline, scope=scope))
    regions = regions_of(run.program).regions(frame.pc - 1)
    with ThreadPoolExecutor(max_workers=max(len(regions), 1)) as pool:
        futures = {pool.submit(_run_branch, run, region, host): region.name
                   for region in regions}
        if spec.wait == "any":
            done, pending = wait(futures, return_when=FIRST_COMPLETED)
            if pending:
                scope.cancel()  # the losers' children; nothing outside this step
            winner = next(iter(done))
            result = _branch_outcome(winner, step, spec, prefix="")
            _join(run, {futures[winner]: result})  # a loser is neither kept nor billed
            # the winner's JSON under its id (nothing when it printed none), its own stdout
            won = {futures[winner]: result["json"]} if "json" in result else {}
            run.record(step, {"id": step, "json": won, "stdout": result.get("stdout", "")})
            return
        results = {branch_id: _branch_outcome(future, step, spec)
                   for future, branch_id in futures.items()}
    _join(run, results)
    merged = {bid: r["json"] for bid, r in results.items() if "json" in r}  # JSON branches only
    run.record(step, {"id": step, "json": merged, "stdout": js.json_compact(merged)})


def _join(run: Run, results: dict[str, dict]) -> None:
    """Branch results back into the frame, each billed under its branch id in declaration
    order; the limit is checked once, as the parallel step itself is recorded."""
    run.frame.join(results)
    if run.billing():
        for branch_id, result in results.items():
            run.bill(branch_id, result)


def _run_branch(run: Run, region: Region, host) -> dict:
    frame = run.frame.fork(region.start)
    outcome = execute(run.program, frame, host, branch=True)
    if isinstance(outcome, Failed):
        raise CommandError(outcome.message, code=outcome.code)
    if isinstance(outcome, Parked) and frame.origin == "workflow":
        # an `ask` stage of a branch's pipeline: a branch cannot pause (as in the original)
        raise CommandError("requestInput is not supported in this pipeline context")
    if not isinstance(outcome, Finished):
        raise VMBug(f"parallel branch {region.name} parked")
    return outcome.output


def op_end_branch(run: Run, ins: Instr) -> Finished:
    return Finished(run.frame.results[run.K[ins.a]])


def _branch_outcome(future, step: str, spec: Parallel,
                    prefix: str = "Parallel branch failed: ") -> dict:
    """A branch's result, or its failure as the step's (`wait: any` passes the first
    branch's own message on unprefixed, as the reference does)."""
    try:
        return future.result()
    except CommandError as exc:
        if exc.code == "T420" and spec.timeout_ms is not None:
            raise CommandError(f"Parallel step {step} timed out after {spec.timeout_ms}ms",
                               code="T420") from None
        raise CommandError(f"{prefix}{exc.message}", code=exc.code) from None


HANDLERS = {
    Op.NOP: op_nop, Op.LOAD_CONST: op_load_const, Op.MOVE: op_move, Op.STAGE: op_stage,
    Op.EXEC: op_exec, Op.RENDER: op_render, Op.SHELL: op_shell, Op.LOAD_STDIN: op_load_stdin,
    Op.STORE_PIPELINE: op_store_pipeline, Op.SET_RESULT: op_set_result,
    Op.INIT_ARGS: op_init_args, Op.COST_LIMIT: op_cost_limit, Op.JUMP: op_jump,
    Op.JUMP_IF_NOT: op_jump_if_not, Op.EVAL_COND: op_eval_cond, Op.SKIP_STEP: op_skip_step,
    Op.HALT_APPROVE: op_halt, Op.HALT_INPUT: op_halt,
    Op.LOOP_BEGIN: op_loop_begin, Op.LOOP_NEXT: op_loop_next, Op.CALL: op_call,
    Op.RETURN: op_return, Op.TRY: op_try, Op.END_TRY: op_end_try, Op.PARALLEL: op_parallel,
    Op.END_BRANCH: op_end_branch, Op.END: op_end, Op.END_WORKFLOW: op_end_workflow,
}


# halts ----------------------------------------------------------------------------------------
def approval_pending(site: PipelineApprove, halt: int, register: int,
                     items: list) -> PipelineApproveWait:
    preview = None
    if site.preview:
        shown = items[: max(site.limit, 0)]
        if all(isinstance(item, str) for item in shown):
            preview = "\n".join(shown)
        else:
            preview = js.json_pretty(shown)
        preview = preview or None
    return PipelineApproveWait(halt=halt, register=register, prompt=site.prompt,
                               items=list(items), preview=preview)


def input_pending(site: PipelineAsk, halt: int, register: int, items: list) -> PipelineAskWait:
    subject: Any = None
    text = "\n".join(js.to_text(i) for i in items) if site.subject else ""
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


def _typeof(value: Any) -> str:
    """JavaScript `typeof`, in which null is an "object"."""
    return "object" if value is None else js.js_type(value)


def _previous_value(result: dict | None) -> Any:
    if not result:
        return None
    for key in ("json", "response", "stdout"):
        if key in result:
            return result[key]
    return None


def _approvers(rules: ApproverRules, env) -> ApproverRules:
    """The site's rules, each one it leaves open (None) read from the environment."""
    initiated = rules.initiated_by if rules.initiated_by is not None else (
        (env.get("LOBSTER_APPROVAL_INITIATED_BY") or "").strip() or None)
    required = rules.required_approver if rules.required_approver is not None else (
        (env.get("LOBSTER_APPROVAL_REQUIRED_APPROVER") or "").strip() or None)
    different = rules.require_different_approver
    if different is None:
        different = (env.get("LOBSTER_APPROVAL_REQUIRE_DIFFERENT_APPROVER") or "").strip() \
            .lower() in TRUE_WORDS
    return ApproverRules(initiated or None, required or None, True if different else None)
