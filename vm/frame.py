"""Frame: the complete state of a paused run, as plain data.

`pc` always names the next instruction. Encoding a frame, decoding it and running on
behaves exactly as if the run had never stopped.
"""

from __future__ import annotations

from typing import Any

from attrs import define, field

FRAME_FORMAT = 1


@define
class Pending:
    """The halt a parked frame waits on: what the envelope shows and the decision needs."""

    kind: str  # "approval" | "input"
    halt: int  # index into Program.halts
    register: int  # where the decision lands
    prompt: str
    items: list[Any] = field(factory=list)
    preview: str | None = None
    schema: Any = None
    subject: Any = None
    has_subject: bool = False
    approval_id: str | None = None
    step: str = ""  # workflow gates: the step whose result records the decision
    defaults: Any = None
    has_defaults: bool = False
    identity: dict[str, Any] = field(factory=dict)  # initiatedBy, requiredApprover, ...


@define
class Frame:
    format: int
    program_hash: str
    run_id: str
    created_at: float
    pc: int = 0
    registers: list[Any] = field(factory=list)
    results: dict[str, Any] = field(factory=dict)
    args: dict[str, Any] = field(factory=dict)
    env: dict[str, str] = field(factory=dict)  # overlay on the caller's env (sub-workflows)
    cwd: str = "."
    mode: str = "tool"
    origin: str = "pipeline"  # "pipeline" | "workflow": which resume wording applies
    pending: Pending | None = None
    loops: list[Any] = field(factory=list)  # for_each frames, innermost last
    calls: list[Any] = field(factory=list)  # sub-workflow return frames, innermost last
    tries: list[Any] = field(factory=list)  # retry / timeout / on_error frames, innermost last
    last_step: str | None = None  # the last completed step: the workflow's output
    capture: list[str] | None = None  # renderer output of the running pipeline step
    stage_env: dict[str, str] | None = None  # env and cwd of the running pipeline step
    stage_cwd: str | None = None
    cost: dict[str, Any] = field(factory=dict)
    steps_run: int = 0
