"""The machine's face to its embedders: the Host, a new frame, run, and applying a decision.

The interpreter itself is vm/engine/interp.py (its run context run.py, its handlers data.py,
control.py, gates.py and parallel.py); a run ends Finished, Parked or Failed (outcome.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from attrs import field

from vm.core.records import define
from vm.core.source import file_name
from vm.host.commands import Context
from vm.isa import cost
from vm.isa.frame import FRAME_FORMAT, Frame, PipelineAskWait, is_wait
from vm.engine.gates import approval_pending, input_pending
from vm.engine.interp import execute
from vm.engine.run import VMBug
from vm.engine.outcome import Failed, Finished, Outcome, Parked
from vm.isa.program import Program

__all__ = ["Failed", "Finished", "Host", "Outcome", "Parked", "VMBug", "apply_decision",
           "approval_pending", "input_pending", "new_frame", "run"]


@define
class Host:
    """What the machine needs from its embedder."""

    ctx: Context
    write: Callable[[str], None] = field(default=lambda text: None)  # human-mode renderer output
    ask_line: Callable[[str], str] | None = None  # interactive prompt, when there is a terminal
    log: Callable[[str], None] = field(default=lambda text: None)  # [RETRY] lines and warnings
    events: Any = None  # a vm.engine.events.Emitter when someone listens to the run's events
    # a renderer wrote output in this process's part of the run: an `ask` in tool mode can no
    # longer pause (the original's requestInput refuses once pipeline output has started)
    rendered: bool = False
    cost_warned: set = field(factory=set)  # model ids warned about as unpriced, in this process


def new_frame(program: Program, *, cwd: str, mode: str, args: dict | None = None,
              source: str | None = None) -> Frame:
    """A frame at pc 0. The caller's environment is not part of it: a resumed run sees the
    environment of the process that resumes it, and no secret of the first is written.
    `source`: the path of the file the program was compiled from (or of its .lbc, which
    `lobsterc compile` writes beside it); the run's locations name files from its directory."""
    source_dir = os.path.dirname(file_name(source)) if source else ""
    return Frame(format=FRAME_FORMAT, program_hash=program.hash, run_id=os.urandom(16).hex(),
                 created_at=time.time(), registers=[[] for _ in range(program.registers)],
                 args=dict(args or {}), cwd=cwd, mode=mode, source_dir=source_dir)


def run(program: Program, frame: Frame, host: Host, *, budget: int | None = None) -> Outcome:
    """Execute until the frame parks, finishes, fails, or has run `budget` instructions
    (then it returns Parked with no pending halt). The returned frame is complete and holds
    no process-local value, whichever way the run stopped."""
    return execute(program, frame, host, budget=budget)


def apply_decision(frame: Frame, answer: Any, approved_by: str | None = None) -> None:
    """Put a validated decision where the halted instruction expects it, and clear the halt."""
    pending = frame.pending
    if pending is None:
        raise VMBug("apply_decision on a frame that is not parked")
    if is_wait(pending, "StepApprovalWait"):
        result = dict(frame.results.get(pending.step) or {"id": pending.step})
        result["approved"] = True
        if pending.approvers.initiated_by is not None:
            result["initiatedBy"] = pending.approvers.initiated_by
        if approved_by:
            result["approvedBy"] = approved_by
        frame.results[pending.step] = result
    elif is_wait(pending, "StepInputWait"):
        frame.results[pending.step] = {"id": pending.step, "subject": pending.subject,
                                       "response": answer}
        frame.last_step = pending.step
    elif isinstance(pending, PipelineAskWait):
        frame.registers[pending.register] = [answer]
    frame.pending = None
    for results, ledger in ((frame.results, frame.cost),
                            *((call.results, call.cost) for call in frame.calls)):
        cost.restore_marks(results, ledger)  # the answers billed before the pause
