"""The PARALLEL handler: each branch region runs on a thread in a frame forked from the
step's (Frame.fork); the results join back in declaration order and are billed there."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from attrs import evolve

from vm.core import json_write
from vm.engine.outcome import Failed, Finished, Parked
from vm.engine.run import Run, VMBug
from vm.host.commands import CommandError
from vm.isa import cost
from vm.isa.program import Instr
from vm.isa.regions import Region, regions_of

if TYPE_CHECKING:  # a workflow record, built on first use (vm.isa.ops)
    from vm.isa.ops import Parallel


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
    regions = regions_of(run.program).regions(frame.pc - 1)
    # a scope per branch: what a loser's LLM calls cost is not the run's (cost.drop_calls)
    scopes = [scope.child() for _ in regions]
    with ThreadPoolExecutor(max_workers=max(len(regions), 1)) as pool:
        futures = {pool.submit(_run_branch, run, region, evolve(run.host, ctx=evolve(
            run.ctx, deadline=deadline, scope=branch_scope))): region.name
                   for region, branch_scope in zip(regions, scopes)}
        if spec.wait == "any":
            done, pending = wait(futures, return_when=FIRST_COMPLETED)
            if pending:
                scope.cancel()  # the losers' children; nothing outside this step
            winner = next(iter(done))
            cost.drop_calls([s for s, f in zip(scopes, futures) if f is not winner])
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
    run.record(step, {"id": step, "json": merged, "stdout": json_write.json_compact(merged)})


def _join(run: Run, results: dict[str, dict]) -> None:
    """Branch results back into the frame, each billed under its branch id in declaration
    order; the limit is checked once, as the parallel step itself is recorded."""
    run.frame.join(results)
    if run.billing():
        for branch_id, result in results.items():
            run.bill(branch_id, result)


def _run_branch(run: Run, region: Region, host) -> dict:
    from vm.engine.interp import execute  # interp imports this module for its table

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
