"""The workflow half of the machine: step results, conditions, loops, calls, policies, gates.

Every piece of state that must survive a halt lives in the Frame (results, loop / call / try
stacks, the last completed step); `Workflow` only holds references to it for one run() call.
"""

from __future__ import annotations

import os
import time
from typing import Any

from attrs import evolve

from vm import js, refs, steps
from vm.commands import COMMANDS, Args, CommandError, Context
from vm.condition import MISSING, evaluate
from vm.frame import Frame, Pending
from vm.opcodes import Op
from vm.outcome import Failed, Finished, Parked
from vm.process import ProcessError, kill_all, run_process, shell_argv
from vm.program import HaltSite, Instr, Program

TRUE_WORDS = ("1", "true", "yes", "on")


class Workflow:
    def __init__(self, program: Program, frame: Frame, host) -> None:
        self.program = program
        self.frame = frame
        self.host = host

    # contexts --------------------------------------------------------------------------------
    def context(self) -> Context:
        ctx = self.host.ctx
        for entry in reversed(self.frame.tries):
            deadline = entry.get("deadline")
            if deadline is not None:
                if ctx.deadline is None or deadline < ctx.deadline:
                    ctx = evolve(ctx, deadline=deadline)
                break
        return ctx

    def stage_context(self, ctx: Context) -> Context:
        frame = self.frame
        if frame.stage_env is None:
            return ctx
        return evolve(ctx, env=frame.stage_env, cwd=frame.stage_cwd or ctx.cwd)

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
        base = self.frame.cwd
        if not cwd:
            return base
        return os.path.join(base, refs.substitute_args(cwd, self.frame.args))

    def render(self, text: str) -> str:
        return refs.render(text, self.frame.args, self.frame.results)

    def render_args(self, flags: dict, positionals: list) -> tuple[dict, list]:
        flags = {k: self.render(v) if isinstance(v, str) else v for k, v in flags.items()}
        return flags, [self.render(p) for p in positionals]

    def render_exec(self, spec: dict) -> dict:
        spec = dict(spec)
        if "shell" in spec:
            spec["shell"] = self.render(spec["shell"])
        if "argv" in spec:
            spec["argv"] = [self.render(a) for a in spec["argv"]]
        return spec

    def resolve(self, step: str, path: list[str]) -> Any:
        value = refs.strict_ref(step, path, self.frame.results)
        return MISSING if value is js.UNDEFINED else value

    def record(self, step: str, result: dict) -> None:
        self.frame.results[step] = result
        self.frame.last_step = step
        if "limit" in self.frame.cost:
            self.bill(step, result)

    def bill(self, step: str, result: dict) -> None:
        """Add the step's LLM usage to the run's ledger; warn or stop at the cost limit."""
        from vm import cost

        ledger = self.frame.cost
        value = result.get("json")
        items = value if isinstance(value, list) else [] if value is None else [value]
        for warning in cost.bill(ledger["ledger"], step, items, self.host.ctx.env):
            self.host.log(warning + "\n")
        error, warning = cost.check_limit(ledger["ledger"], ledger["limit"])
        if warning:
            self.host.log(warning + "\n")
        if error:
            raise CommandError(error, code="T460", retryable=False)

    # gates -----------------------------------------------------------------------------------
    def approval_pending(self, site: HaltSite, halt: int) -> Pending:
        frame = self.frame
        request = steps.approval_request(frame.results.get(site.step), site.prompt, site.config)
        identity = _identity(site.config, self.host.ctx.env)
        return Pending(kind="approval", halt=halt, register=0, prompt=request["prompt"],
                       items=list(request["items"]), preview=request.get("preview"),
                       step=site.step, identity=identity)

    def input_pending(self, site: HaltSite, halt: int) -> Pending:
        frame = self.frame
        config = site.config
        if "stdin" in config:
            subject = refs.resolve_input(config["stdin"], frame.args, frame.results)
            subject = None if subject is js.UNDEFINED else subject
        else:
            subject = _previous_value(frame.results.get(frame.last_step))
        return Pending(kind="input", halt=halt, register=0, prompt=site.prompt,
                       schema=site.schema, subject=subject, has_subject=True, step=site.step,
                       defaults=config.get("defaults"), has_defaults="defaults" in config)

    def park(self) -> Parked:
        now = time.monotonic()
        for entry in self.frame.tries:
            deadline = entry.get("deadline")
            entry["remaining"] = None if deadline is None else max(0.0, deadline - now)
            entry["deadline"] = None
        return Parked(self.frame)

    # failures --------------------------------------------------------------------------------
    def fail(self, exc: CommandError) -> Failed | Finished | None:
        """Apply the innermost policy to a trap: retry (None: keep running), record and go on
        (None), end the workflow (Finished), or give up (Failed)."""
        frame = self.frame
        message, code = exc.message, exc.code
        run_deadline = self.host.ctx.deadline
        while frame.tries:
            entry = frame.tries[-1]
            policy = entry["policy"]
            step = entry["step"]
            deadline = entry.get("deadline")
            if code == "T420" and deadline is not None and (
                    run_deadline is None or deadline <= run_deadline):
                message = f"Step '{step}' timed out after {policy['timeout_ms']}ms"
            self.unwind(entry)
            run_over = run_deadline is not None and time.monotonic() >= run_deadline
            retry = policy.get("retry")
            if retry and entry["attempt"] < retry["max"] and not run_over and code != "T422" \
                    and exc.retryable:
                delay = _retry_delay(retry, entry["attempt"] - 1)
                self.host.log(f"[RETRY] Step '{step}' failed (attempt {entry['attempt']}/"
                              f"{retry['max']}): {message}. Retrying in {delay}ms...\n")
                time.sleep(delay / 1000)
                entry["attempt"] += 1
                entry["deadline"] = _deadline(policy)
                frame.pc = entry["start"]
                return None
            frame.tries.pop()
            on_error = policy.get("on_error", "stop")
            if on_error == "stop" or run_over or code == "T422":
                continue
            frame.results[step] = {"id": step, "error": True, "errorMessage": message}
            if on_error == "continue":
                frame.pc = entry["resume"]
                return None
            return self.finish_workflow()
        return Failed(code, message)

    def unwind(self, entry: dict) -> None:
        """Drop loops and calls entered since the policy began."""
        frame = self.frame
        while len(frame.calls) > entry["calls"]:
            call = frame.calls.pop()
            frame.results, frame.args, frame.env = call["results"], call["args"], call["env"]
            frame.last_step = call["last_step"]
        while len(frame.loops) > entry["loops"]:
            _restore_scope(frame, frame.loops.pop())
        frame.capture = frame.stage_env = frame.stage_cwd = None

    def finish_workflow(self) -> Finished | None:
        """The end of the current workflow: return to the caller, or finish the run."""
        frame = self.frame
        output = steps.output_of(frame.results.get(frame.last_step))
        if frame.calls:
            self.return_to_caller(output)
            return None
        return Finished(output)

    def return_to_caller(self, output: list) -> None:
        frame = self.frame
        call = frame.calls.pop()
        frame.results, frame.args, frame.env = call["results"], call["args"], call["env"]
        frame.pc = call["return_pc"]
        self.record(call["step"], steps.call_result(call["step"], output))


# instruction handlers -------------------------------------------------------------------------
def op_shell(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    step, spec = K[ins.a], K[ins.b]
    stdin = refs.resolve_input(spec["stdin"], frame.args, frame.results)
    env = wf.step_env(spec["env"])
    wf.record(step, run_shell_step(step, wf.render(spec["run"]), stdin, env,
                                   wf.step_cwd(spec["cwd"]), wf.context()))


def run_shell_step(step: str, line: str, stdin: Any, env: dict, cwd: str, ctx: Context) -> dict:
    """A workflow shell line in a child process; its result, or the reference's failure."""
    try:
        result = run_process(shell_argv(line, env), stdin=steps.stdin_bytes(stdin), cwd=cwd,
                             env=env, deadline=ctx.deadline, max_output_bytes=ctx.max_output_bytes,
                             shell=True)
    except ProcessError as exc:
        from vm.commands.exec_cmd import process_code

        raise CommandError(exc.message, code=process_code(exc)) from None
    stdout = result.stdout.decode("utf-8", "replace")
    if result.code != 0:
        detail = result.stderr.decode("utf-8", "replace").strip() or stdout.strip() or line
        raise CommandError(f"workflow command failed ({result.code}): {detail}", code="T410")
    return steps.shell_result(step, stdout)


def op_load_stdin(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    spec = K[ins.b]
    value = refs.resolve_input(spec["stdin"], frame.args, frame.results)
    frame.registers[ins.a] = steps.stdin_items(value)
    frame.capture = []
    frame.stage_env = wf.step_env(spec["env"])
    frame.stage_cwd = wf.step_cwd(spec["cwd"])


def op_store_pipeline(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    rendered = "".join(frame.capture or [])
    step = K[ins.a]
    wf.record(step, steps.pipeline_result(step, frame.registers[ins.b], rendered or None))
    frame.registers[ins.b] = []
    frame.capture = frame.stage_env = frame.stage_cwd = None


def op_set_result(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    step = K[ins.a]
    value = refs.resolve_input(K[ins.b]["stdin"], frame.args, frame.results)
    wf.record(step, steps.value_result(step, value))


def op_init_args(wf: Workflow, ins: Instr, K) -> None:
    """Resolved args: the file's defaults overlaid by the caller's."""
    wf.frame.args = {**K[ins.a], **wf.frame.args}


def op_cost_limit(wf: Workflow, ins: Instr, K) -> None:
    wf.frame.cost = {"limit": K[ins.a], "ledger": {}}


def op_jump(wf: Workflow, ins: Instr, K) -> None:
    wf.frame.pc = ins.a


def op_jump_if_not(wf: Workflow, ins: Instr, K) -> None:
    if not wf.frame.registers[ins.a]:
        wf.frame.pc = ins.b


def op_eval_cond(wf: Workflow, ins: Instr, K) -> None:
    wf.frame.registers[ins.a] = evaluate(K[ins.b], wf.resolve)


def op_skip_step(wf: Workflow, ins: Instr, K) -> None:
    step = K[ins.a]
    wf.frame.results[step] = {"id": step, "skipped": True}


def op_loop_begin(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    step, spec = K[ins.a], K[ins.b]
    source = refs.resolve_input(spec["source"], frame.args, frame.results)
    if not isinstance(source, list):
        raise CommandError(f"Workflow step {step} for_each: expected array, got "
                           f"{_typeof(source)}", code="T441")
    names = [spec["item_var"], spec["index_var"], *spec["steps"]]
    loop = {"step": step, "items": source, "index": 0, "item_var": spec["item_var"],
            "index_var": spec["index_var"], "steps": spec["steps"], "outputs": [],
            "batch_size": spec["batch_size"], "pause_ms": spec["pause_ms"],
            "shadow": {n: frame.results[n] for n in names if n in frame.results}}
    if not source:
        _finish_loop(wf, loop)
        frame.pc = ins.c
        return
    frame.loops.append(loop)
    _enter_iteration(frame, loop)


def op_loop_next(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    loop = frame.loops[-1]
    output = {loop["item_var"]: loop["items"][loop["index"]], loop["index_var"]: loop["index"]}
    for sub in loop["steps"]:
        result = frame.results.pop(sub, None)
        if result and not result.get("skipped"):
            value = next((result[k] for k in ("json", "response", "stdout")
                          if result.get(k) is not None), None)
            if value is not None:
                output[sub] = value
    loop["outputs"].append(output)
    loop["index"] += 1
    if loop["index"] < len(loop["items"]):
        if loop["pause_ms"] and loop["index"] % max(loop["batch_size"], 1) == 0:
            time.sleep(loop["pause_ms"] / 1000)
        _enter_iteration(frame, loop)
        frame.pc = ins.b
        return
    frame.loops.pop()
    _finish_loop(wf, loop)


def _enter_iteration(frame: Frame, loop: dict) -> None:
    item, index = loop["items"][loop["index"]], loop["index"]
    frame.results[loop["item_var"]] = {
        "id": loop["item_var"], "json": item,
        "stdout": item if isinstance(item, str) else js.json_compact(item)}
    frame.results[loop["index_var"]] = {"id": loop["index_var"], "json": index,
                                        "stdout": str(index)}


def _restore_scope(frame: Frame, loop: dict) -> None:
    for name in [loop["item_var"], loop["index_var"], *loop["steps"]]:
        frame.results.pop(name, None)
    frame.results.update(loop["shadow"])


def _finish_loop(wf: Workflow, loop: dict) -> None:
    _restore_scope(wf.frame, loop)
    outputs = loop["outputs"]
    wf.record(loop["step"], {"id": loop["step"], "json": outputs,
                             "stdout": js.json_compact(outputs)})


def op_call(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    step, spec = K[ins.a], K[ins.b]
    args = dict(spec["defaults"])
    for name, value in spec["args"].items():
        args[name] = wf.render(value) if isinstance(value, str) else value
    overlay = {**frame.env, **refs.injected_env(frame.args),
               **{k: wf.render(v) for k, v in spec["env"].items()}}
    frame.calls.append({"step": step, "return_pc": frame.pc, "results": frame.results,
                        "args": frame.args, "env": frame.env, "last_step": frame.last_step})
    frame.results, frame.args, frame.env, frame.last_step = {}, args, overlay, None
    frame.pc = ins.c


def op_return(wf: Workflow, ins: Instr, K) -> None:
    wf.finish_workflow()


def op_try(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    policy = K[ins.b]
    end_try = wf.program.code[ins.c]
    frame.tries.append({"step": K[ins.a], "policy": policy, "start": frame.pc, "attempt": 1,
                        "deadline": _deadline(policy), "resume": end_try.b,
                        "loops": len(frame.loops), "calls": len(frame.calls)})


def op_end_try(wf: Workflow, ins: Instr, K) -> None:
    wf.frame.tries.pop()


def op_end_workflow(wf: Workflow, ins: Instr, K) -> Finished | None:
    return wf.finish_workflow()


def op_parallel(wf: Workflow, ins: Instr, K) -> None:
    frame = wf.frame
    step, spec = K[ins.a], K[ins.b]
    ctx = wf.context()
    deadline = ctx.deadline
    if "timeout_ms" in spec:
        own = time.monotonic() + spec["timeout_ms"] / 1000
        deadline = own if deadline is None else min(deadline, own)
    branch_ctx = evolve(ctx, deadline=deadline)
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    with ThreadPoolExecutor(max_workers=len(spec["branches"])) as pool:
        futures = {pool.submit(_run_branch, wf, branch, branch_ctx): branch["id"]
                   for branch in spec["branches"]}
        if spec["wait"] == "any":
            done, pending = wait(futures, return_when=FIRST_COMPLETED)
            if pending:
                kill_all()
            winner = next(iter(done))
            branch_id = futures[winner]
            result = _branch_outcome(winner, step, spec)
            frame.results[branch_id] = result
            wf.record(step, {"id": step, "json": result.get("json"),
                             "stdout": result.get("stdout", "")})
            return
        results = {}
        for future, branch_id in futures.items():
            results[branch_id] = _branch_outcome(future, step, spec)
    for branch_id, result in results.items():
        frame.results[branch_id] = result
    merged = {bid: r.get("json", r.get("stdout")) for bid, r in results.items()}
    wf.record(step, {"id": step, "json": merged, "stdout": js.json_compact(merged)})


def _branch_outcome(future, step: str, spec: dict) -> dict:
    try:
        return future.result()
    except CommandError as exc:
        if exc.code == "T420" and "timeout_ms" in spec:
            raise CommandError(f"Parallel step {step} timed out after {spec['timeout_ms']}ms",
                               code="T420") from None
        raise CommandError(f"Parallel branch failed: {exc.message}", code=exc.code) from None


def _run_branch(wf: Workflow, branch: dict, ctx: Context) -> dict:
    frame = wf.frame
    env = wf.step_env(branch["env"])
    cwd = wf.step_cwd(branch["cwd"])
    stdin = refs.resolve_input(branch.get("stdin"), frame.args, frame.results)
    if "run" in branch:
        return run_shell_step(branch["id"], wf.render(branch["run"]), stdin, env, cwd, ctx)
    items = steps.stdin_items(stdin)
    rendered: list[str] = []
    stage_ctx = evolve(ctx, env=env, cwd=cwd)
    from vm.commands.exec_cmd import run_exec

    for kind, data in branch["stages"]:
        if kind == "exec":
            items = run_exec(wf.render_exec(data), items, stage_ctx)
        elif kind == "render":
            from vm.commands.data import render

            rendered.append(render(data, items))
            items = []
        else:
            name, flags, positionals, _ = data
            flags, positionals = wf.render_args(flags, positionals)
            items = COMMANDS[name].run(Args(flags, tuple(positionals)), items, stage_ctx)
    return steps.pipeline_result(branch["id"], items, "".join(rendered) or None)


WORKFLOW_OPS = {
    Op.SHELL: op_shell, Op.LOAD_STDIN: op_load_stdin, Op.STORE_PIPELINE: op_store_pipeline,
    Op.SET_RESULT: op_set_result, Op.INIT_ARGS: op_init_args, Op.COST_LIMIT: op_cost_limit,
    Op.JUMP: op_jump, Op.JUMP_IF_NOT: op_jump_if_not, Op.EVAL_COND: op_eval_cond,
    Op.SKIP_STEP: op_skip_step, Op.LOOP_BEGIN: op_loop_begin, Op.LOOP_NEXT: op_loop_next,
    Op.CALL: op_call, Op.RETURN: op_return, Op.TRY: op_try, Op.END_TRY: op_end_try,
    Op.PARALLEL: op_parallel, Op.END_WORKFLOW: op_end_workflow,
}


# helpers --------------------------------------------------------------------------------------
def _deadline(policy: dict) -> float | None:
    timeout = policy.get("timeout_ms")
    return None if timeout is None else time.monotonic() + timeout / 1000


def _retry_delay(retry: dict, k: int) -> int:
    base = retry["delay_ms"]
    delay = base if retry["backoff"] == "fixed" else min(base * 2**k, retry["max_delay_ms"])
    if retry["jitter"]:
        import random

        delay = delay * (1 + random.uniform(-0.1, 0.1))
        delay = min(delay, retry["max_delay_ms"]) if retry["backoff"] != "fixed" else delay
    return max(0, round(delay))


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


def _identity(config: dict, env) -> dict:
    identity: dict[str, Any] = {}
    initiated = config.get("initiatedBy", (env.get("LOBSTER_APPROVAL_INITIATED_BY") or "").strip()
                           or None)
    required = config.get("requiredApprover",
                          (env.get("LOBSTER_APPROVAL_REQUIRED_APPROVER") or "").strip() or None)
    different = config.get("requireDifferentApprover")
    if different is None:
        different = (env.get("LOBSTER_APPROVAL_REQUIRE_DIFFERENT_APPROVER") or "").strip().lower() \
            in TRUE_WORDS
    if initiated:
        identity["initiatedBy"] = initiated
    if required:
        identity["requiredApprover"] = required
    if different:
        identity["requireDifferentApprover"] = True
    return identity
