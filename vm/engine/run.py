"""The per-run context of the interpreter (Run): the frame, the host, contexts and env,
recording and billing results, the try stack with its running deadlines, what a trap
does under a policy, and the end of a workflow; plus the waits a policy or a loop makes."""

from __future__ import annotations

import os
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from attrs import evolve

from vm.core import js
from vm.core.condition import MISSING
from vm.engine import refs, steps
from vm.engine.outcome import Failed, Finished
from vm.host.commands import CommandError, Context
from vm.host.commands.base import timed_out
from vm.isa import cost
from vm.isa.frame import Frame
from vm.isa.program import Program

if TYPE_CHECKING:  # workflow records, built on first use (vm.isa.ops, vm.isa.frame)
    from vm.isa.frame import CallFrame, LoopFrame, TryFrame
    from vm.isa.ops import Loop, Policy, Retry


# The claim a resumed run holds (vm/host/store/lifecycle.Claim), or None: the loop calls its
# `check()` before each instruction, which raises (a StoreError, not a trap: no policy takes
# it) once the claim is no longer this holder's (a fenced claim, issue 47).
CLAIM: ContextVar[Any] = ContextVar("lobster_claim", default=None)


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
        # (pc of a where, the items an exec already passed through it): see data.op_exec
        self.kept: tuple[int, list] | None = None
        now = time.monotonic()
        self.deadlines: list[float | None] = [
            None if entry.remaining_ms is None else now + entry.remaining_ms / 1000
            for entry in frame.tries]
        self.ctx: Context = host.ctx
        self.claim = CLAIM.get()  # a parallel branch's thread has none: its step's is checked
        if not branch:
            cost.reopen(cost.run_of(self.ctx.scope), self.ledgers())
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
        from vm.host.workdir import WorkdirRefused, contained_cwd  # the one rule for every cwd

        try:
            return contained_cwd(chosen, base)
        except WorkdirRefused as exc:
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
            self.settle(step)
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
        for warning in self.frame.cost.bill(step, items, self.host.ctx.env, self.host.cost_warned,
                                            cost.run_of(self.ctx.scope), len(self.frame.calls)):
            self.host.log(warning + "\n")

    def settle(self, step: str) -> None:
        """Bill to `step` the live LLM calls no result billed at this level (see Ledger.settle),
        before the next step runs, as the original."""
        for warning in self.frame.cost.settle(step, self.host.ctx.env, self.host.cost_warned,
                                              cost.run_of(self.ctx.scope), len(self.frame.calls)):
            self.host.log(warning + "\n")

    def check_cost_limit(self) -> None:
        """The current workflow's cost_limit against its spend so far: a warning, or a stop.
        A sub-workflow is held to its own limit; its caller bills its output and the LLM calls
        made in it when the calling step ends (see `finish_workflow`)."""
        error = self.over_limit()
        if error:
            raise CommandError(error, code="T460", retryable=False)

    def over_limit(self) -> str | None:
        """The cost_limit check: its warning goes to the log, its stop is returned."""
        error, warning = self.frame.cost.check()
        if warning:
            self.host.log(warning + "\n")
        return error

    # the try stack ---------------------------------------------------------------------------
    def push_try(self, entry: TryFrame, policy: Policy) -> None:
        self.frame.tries.append(entry)
        self.deadlines.append(_deadline(policy))

    def pop_try(self) -> TryFrame:
        self.deadlines.pop()
        return self.frame.tries.pop()

    def ledgers(self) -> list:
        """The ledger of each workflow level, the outermost first."""
        return [*(call.cost for call in self.frame.calls), self.frame.cost]

    def suspend(self) -> None:
        """Turn the running deadlines back into time left and the calls not yet billed into
        ledger entries, so the frame can be saved."""
        if not self.branch:
            cost.carry_open(cost.run_of(self.ctx.scope), self.ledgers())
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
            # a cancellation, and a cost limit (a sub-workflow's own too), end the run whatever
            # the policy says, as the original
            if policy.on_error == "stop" or run_over or error_code in ("T422", "T460"):
                continue
            frame.results[step] = {"id": step, "error": True, "errorMessage": message}
            if self.billing():  # the calls it paid for before failing, before going on
                self.settle(step)
                over = self.over_limit()
                if over:
                    return Failed("T460", over)
            if self.events is not None:
                self.events.failed(step, frame.pc - 1, error_code, message, policy.on_error)
            if policy.on_error == "continue":
                frame.pc = code[try_ins.c].b
                return None
            return self.finish_workflow()
        detail = exc.detail if message == exc.message else None  # of the error it reports
        return Failed(error_code, message, detail=detail)

    def unwind(self, entry: TryFrame) -> None:
        """Drop loops and calls entered since the policy began."""
        frame = self.frame
        while len(frame.calls) > entry.calls:
            self.restore_caller(frame.calls.pop())
        while len(frame.loops) > entry.loops:
            loop = frame.loops.pop()
            restore_scope(frame, loop, self.K[self.program.code[loop.site].b])
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
            # the caller bills its output and the live calls made in it (its other spend is
            # the sub-workflow's own, as in the original)
            self.record(step, steps.call_result(step, output))
            return None
        if frame.cost.limit is not None:
            self.check_cost_limit()  # once more as the run ends, as the original
        return Finished(output)

    def restore_caller(self, call: CallFrame) -> str:
        """Back to the caller's scope; returns the id of the calling step."""
        frame = self.frame
        step = self.K[self.program.code[call.site].a]
        frame.results, frame.args, frame.env = call.results, call.args, call.env
        frame.last_step, frame.cost = call.last_step, call.cost
        return step


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
            raise timed_out(retryable=False)
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


def child_cap(cap: int | None, env: dict) -> int | None:
    """The output cap of a child started with `env`: the run's, and the LOBSTER_MAX_OUTPUT_BYTES
    of that env (a step's own `env:` sets it for that step, as in the original); a bad value
    is left for the child's start to report."""
    from vm.host.process import ProcessError, env_output_cap  # with the first child

    try:
        own = env_output_cap(env)
    except ProcessError:
        return cap
    return own if cap is None else cap if own is None else min(cap, own)


def restore_scope(frame: Frame, loop: LoopFrame, spec: Loop) -> None:
    """Drop a loop's names (item, index, sub-steps) and put back the results they hid."""
    for name in [spec.item_var, spec.index_var, *spec.steps]:
        frame.results.pop(name, None)
    frame.results.update(loop.shadow)
