"""Frame: the complete state of a paused run, as plain data.

`pc` always names the next instruction. Encoding a frame, decoding it and running on
behaves exactly as if the run had never stopped. A frame holds no process-local value
(no clock reading, no handle): running deadlines live in the interpreter's run context.

FRAME_FORMAT changelog:
  1  first format: loops / calls / tries as loose maps; tries held a monotonic deadline.
  2  typed stack records (LoopFrame, CallFrame, TryFrame) that name their LOOP_BEGIN /
     CALL / TRY pc; a try keeps `remaining_ms`, never a clock reading.
     Later, additively (no new number): `source_dir`; a frame without it reads as "".
  3  the pending halt is one of four tagged variants (`$type`: PipelineApproveWait,
     PipelineAskWait, StepApprovalWait, StepInputWait), each with only its own fields; the
     approver rules are an ApproverRules record instead of an identity map.
  4  the cost ledger is a typed record (vm/isa/cost.py: Ledger with its CostLimit and one
     Charge per billed item) instead of a loose {limit, ledger} map; a CallFrame keeps the
     caller's ledger while the sub-workflow bills one of its own.
     Later, additively (no new number): the ledger's `billed_calls` and `open_calls` (the
     live llm.invoke calls billed, and not yet billed, at a pause), written only when not
     empty, so a frame of a run that made no such call reads in a reader without them; a
     frame without them reads as none.
"""

from typing import Any, ClassVar

from attrs import field

from vm.core.records import built_on_first_use, define
from vm.isa.cost import Ledger

FRAME_FORMAT = 4


class Pending:
    """The halt a parked frame waits on: one of the four variants below, each the match of
    its halt site (Program.halts[halt]). Every variant answers `kind`, `halt`, `prompt`,
    `step` (the workflow step the decision is recorded in; "" for a pipeline's gate), `items`
    (what the approver or answerer was shown) and `approval_id`; the rest is its own."""

    __slots__ = ()
    kind: ClassVar[str]
    step: str = ""
    items: Any = ()
    approval_id: str | None = None


@define
class PipelineApproveWait(Pending):
    """An `approve` stage waits; approving continues with the items in `register`."""

    kind: ClassVar[str] = "approval"
    halt: int  # index into Program.halts
    register: int
    prompt: str
    items: list[Any] = field(factory=list)
    preview: str | None = None
    approval_id: str | None = None


@define
class PipelineAskWait(Pending):
    """An `ask` stage waits; the answer becomes the items in `register`."""

    kind: ClassVar[str] = "input"
    halt: int
    register: int
    prompt: str
    schema: Any = None
    items: list[Any] = field(factory=list)
    subject: Any = None  # {"text": ...} when the site attaches the items and there are some


# the four variants, by name (the codec's `$type`; the two of workflow steps are built on
# first use, below)
PENDING_NAMES = ("PipelineApproveWait", "PipelineAskWait", "StepApprovalWait", "StepInputWait")
# The records only a workflow's frame holds: built on their first use, not at import (attrs
# builds each class as it is defined, about 0.3 ms a class). Frame names the stack records in
# its annotations (`list["LoopFrame"]`), which the codec resolves when a frame holds one.
WORKFLOW_RECORDS = ("LoopFrame", "CallFrame", "TryFrame", "StepApprovalWait", "StepInputWait")


@define
class Frame:
    """A paused run (the module's docstring). Its loop, call and policy records are named in
    its annotations, not referenced, so that a pipeline never builds them: resolving the
    annotations (typing.get_type_hints) needs them built first (reading `frame.LoopFrame`
    builds them)."""

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
    source_dir: str = ""  # the main file's directory (vm.core.source.file_name form), from
    # which Program.files are named; "" for an inline pipeline (and in frames saved before it)
    pending: Pending | None = None
    loops: list["LoopFrame"] = field(factory=list)  # innermost last
    calls: list["CallFrame"] = field(factory=list)  # innermost last
    tries: list["TryFrame"] = field(factory=list)  # innermost last
    last_step: str | None = None  # the last completed step: the workflow's output
    capture: list[str] | None = None  # renderer output of the running pipeline step
    stage_env: dict[str, str] | None = None  # env and cwd of the running pipeline step
    stage_cwd: str | None = None
    cost: Ledger = field(factory=Ledger)
    steps_run: int = 0

    def fork(self, pc: int) -> "Frame":
        """The frame of a parallel branch whose region starts at `pc`. It inherits the run's
        identity, a copy of the results (what the branch records stays its own until `join`),
        the args, env, cwd, mode, origin and source_dir (its traps and events name files as
        the run's do); it gets registers of its own, no stacks (a branch
        enters no loop, call or policy of its parent) and an empty ledger without a limit: a
        branch bills nothing itself, the parent bills the result each branch returns as it
        joins them, in the order the branches are declared (as the original)."""
        return Frame(format=self.format, program_hash=self.program_hash, run_id=self.run_id,
                     created_at=self.created_at, pc=pc,
                     registers=[[] for _ in self.registers], results=dict(self.results),
                     args=self.args, env=self.env, cwd=self.cwd, mode=self.mode,
                     origin=self.origin, source_dir=self.source_dir)

    def join(self, results: dict[str, Any]) -> None:
        """Take the results of finished branches (branch id -> result) back into this frame."""
        self.results.update(results)


def _workflow_records() -> tuple[type, ...]:
    """The records only a workflow's frame holds, built on their first use (as vm/isa/ops.py
    builds its workflow records): a pipeline's frame has no loop, call or policy and never
    parks on a step."""
    from vm.isa.ops import ApproverRules  # a workflow record too

    @define
    class LoopFrame:
        """A running for_each; its names and sub-steps are the Loop payload of LOOP_BEGIN `site`."""

        site: int  # pc of the LOOP_BEGIN
        items: list[Any]
        index: int = 0
        outputs: list[Any] = field(factory=list)
        shadow: dict[str, Any] = field(factory=dict)  # results the iteration's names hid

    @define
    class CallFrame:
        """The caller's scope while a sub-workflow runs; it resumes at `site` + 1."""

        site: int  # pc of the CALL
        results: dict[str, Any]
        args: dict[str, Any]
        env: dict[str, str]
        last_step: str | None = None
        cost: Ledger = field(factory=Ledger)  # the caller's; its `workflow:` step takes the spend

    @define
    class TryFrame:
        """A policy in force over the block after TRY `site`."""

        site: int  # pc of the TRY
        attempt: int = 1
        remaining_ms: float | None = None  # the step's time left; None: no timeout
        loops: int = 0  # depth of the loop stack when the policy began
        calls: int = 0  # depth of the call stack when the policy began

    @define
    class StepApprovalWait(Pending):
        """A workflow step's approval waits; approving marks the step's result approved."""

        kind: ClassVar[str] = "approval"
        halt: int
        # prompt a string, items a list, preview a string or None; a request the step printed
        # is kept as printed (vm.engine.steps.approval_request): then any JSON value
        prompt: Any
        step: str
        items: Any = field(factory=list)
        preview: Any = None
        approvers: ApproverRules = field(factory=ApproverRules)  # resolved when the gate halted
        approval_id: str | None = None

    @define
    class StepInputWait(Pending):
        """A workflow input step waits; the answer and the subject become the step's result."""

        kind: ClassVar[str] = "input"
        halt: int
        prompt: str
        step: str
        schema: Any = None
        subject: Any = None
        has_subject: bool = False  # a subject that is null is still shown
        defaults: Any = None
        has_defaults: bool = False

    return LoopFrame, CallFrame, TryFrame, StepApprovalWait, StepInputWait


def is_wait(pending: Pending | None, name: str) -> bool:
    """`isinstance(pending, <the variant called name>)`, without building a variant that was
    not built yet (none of its instances can exist then)."""
    if name not in PENDING_NAMES:
        raise ValueError(f"no pending variant is called {name!r}")
    variant = globals().get(name)
    return variant is not None and isinstance(pending, variant)


# the workflow records, built on first use
__getattr__ = built_on_first_use(globals(), WORKFLOW_RECORDS, _workflow_records)
