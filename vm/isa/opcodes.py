"""The instruction set: opcode numbers (wire format) and one row per opcode (operands, payload
class, control-flow kind, semantics) that dis, verify, back-patching and the CFG all read.
Never renumber or reuse a number: retire it, bump FORMAT_VERSION (vm/isa/program.py), log it."""

from __future__ import annotations

from enum import IntEnum

from vm.core.records import frozen
from vm.isa import ops

OPCODE_VERSION = 2  # 2: END_BRANCH


class Op(IntEnum):
    NOP = 0  #            -
    LOAD_CONST = 1  #     r K      R[a] := K[b]
    MOVE = 2  #           r r      R[a] := R[b]
    STAGE = 10  #         r K r    R[a] := stdlib command K[b] over the items R[c]
    EXEC = 11  #          r K r    R[a] := items of a child process K[b] fed the items R[c]
    RENDER = 12  #        r K      write renderer K[b] of the items R[a] to the output; R[a] := []
    SHELL = 13  #         S K      results[S] := run the shell step K[b] (templated line, stdin, env)
    LOAD_STDIN = 14  #    r K      R[a] := items of a pipeline step's stdin K[b]; capture renders
    STORE_PIPELINE = 15  # S r     results[S] := pipeline result of the items R[b] and renders
    SET_RESULT = 16  #    S K      results[S] := synthetic result of the stdin reference K[b]
    INIT_ARGS = 17  #     K        args := the defaults K[a] overlaid by the caller's args
    COST_LIMIT = 18  #    K        bill LLM usage of every step against the limit K[a]
    JUMP = 20  #          T        pc := a
    JUMP_IF_NOT = 21  #   r T      if not R[a]: pc := b
    EVAL_COND = 22  #     r K      R[a] := the condition K[b] holds
    SKIP_STEP = 23  #     S        results[S] := {id, skipped: true}
    HALT_APPROVE = 30  #  r H      park at halt site H[b]; resume approve=true continues, items R[a]
    HALT_INPUT = 31  #    r H      park at halt site H[b]; resume sets R[a] := [answer]
    LOOP_BEGIN = 40  #    S K T    push for_each K[b] over its source; no items: pc := c
    LOOP_NEXT = 41  #     S T      record the iteration; more items: pc := b, else pop the loop
    CALL = 50  #          S K T    enter the sub-workflow at c with args K[b]; push a call frame
    RETURN = 51  #        S        pop the call frame; the sub-workflow's output is results[S]
    TRY = 60  #           S K T    policy K[b] (retry, timeout_ms, on_error) over pc+1 .. c
    END_TRY = 61  #       S T      leave the policy; on_error continue / skip_rest land at b
    PARALLEL = 70  #      S K      results[S] := run the branch regions of K[b] concurrently
    END_BRANCH = 71  #    S        finish a parallel branch; its result is results[S]
    END = 90  #           r        finish; the output is the items R[a]
    END_WORKFLOW = 91  #  -        finish; the output is the last completed step's result


# operand kinds: register, constant, halt site, step id (a constant string), code address
REG, CONST, HALT, STEP, TARGET = "r", "K", "H", "S", "T"

# control-flow kinds: the successors of an instruction at pc with code addresses t
FALL = "fall"  #             pc+1
JUMP = "jump"  #             t
BRANCH = "branch"  #         pc+1, t
LOOP_ENTER = "loop_enter"  # pc+1, t (no items)
LOOP_BACK = "loop_back"  #   t (next item), pc+1
ENTER = "enter"  #           t (the region), which comes back to pc+1 at its RETURN
LEAVE = "leave"  #           back to the instruction after the CALL of its region
FORK = "fork"  #             the start of each branch region in the payload, joining at pc+1
JOIN = "join"  #             back to the instruction after the PARALLEL of its region
EXIT = "exit"  #             the end of the run
FLOWS = (FALL, JUMP, BRANCH, LOOP_ENTER, LOOP_BACK, ENTER, LEAVE, FORK, JOIN, EXIT)


@frozen
class OpInfo:
    operands: tuple[str, ...]
    summary: str
    flow: str = FALL
    # what K[b] (K[a] without a register) holds: a type, or the name of a record of
    # vm.isa.ops (the workflow records are built on first use); None: plain JSON
    payload: type | str | None = None
    control: bool = False  # moves control or bookkeeping only: no work of the step itself

    @property
    def payload_type(self) -> type | None:
        """The type of the payload (a named record is built here if it was not yet)."""
        return getattr(ops, self.payload) if isinstance(self.payload, str) else self.payload

    @property
    def targets(self) -> tuple[int, ...]:
        """The operand slots (0 a, 1 b, 2 c) that hold code addresses."""
        return tuple(i for i, kind in enumerate(self.operands) if kind == TARGET)

    @property
    def const_slot(self) -> int | None:
        return self.operands.index(CONST) if CONST in self.operands else None


OPS: dict[Op, OpInfo] = {
    Op.NOP: OpInfo((), "do nothing", control=True),
    Op.LOAD_CONST: OpInfo((REG, CONST), "R[a] := K[b]"),
    Op.MOVE: OpInfo((REG, REG), "R[a] := R[b]"),
    Op.STAGE: OpInfo((REG, CONST, REG), "R[a] := command K[b] over items R[c]",
                     payload=ops.Stage),
    Op.EXEC: OpInfo((REG, CONST, REG), "R[a] := child process K[b] fed items R[c]",
                    payload=ops.Exec),
    Op.RENDER: OpInfo((REG, CONST), "render items R[a] with K[b]; R[a] := []", payload=str),
    Op.HALT_APPROVE: OpInfo((REG, HALT), "park for approval H[b] of items R[a]"),
    Op.HALT_INPUT: OpInfo((REG, HALT), "park for input H[b]; resume: R[a] := [answer]"),
    Op.SHELL: OpInfo((STEP, CONST), "results[S] := shell step K[b]", payload="Shell"),
    Op.LOAD_STDIN: OpInfo((REG, CONST), "R[a] := items of stdin K[b]", payload="LoadStdin"),
    Op.STORE_PIPELINE: OpInfo((STEP, REG), "results[S] := pipeline result of R[b]"),
    Op.SET_RESULT: OpInfo((STEP, CONST), "results[S] := value of the stdin reference in K[b]",
                          payload="StepValue"),
    Op.INIT_ARGS: OpInfo((CONST,), "args := defaults K[a] + caller args", payload=dict),
    Op.COST_LIMIT: OpInfo((CONST,), "bill LLM usage against limit K[a] {max_usd, action}",
                          payload=dict),
    Op.JUMP: OpInfo((TARGET,), "pc := a", JUMP, control=True),
    Op.JUMP_IF_NOT: OpInfo((REG, TARGET), "if not R[a]: pc := b", BRANCH, control=True),
    Op.EVAL_COND: OpInfo((REG, CONST), "R[a] := condition K[b]", control=True),
    Op.SKIP_STEP: OpInfo((STEP,), "results[S] := skipped", control=True),
    Op.LOOP_BEGIN: OpInfo((STEP, CONST, TARGET), "push loop K[b]; empty: pc := c", LOOP_ENTER,
                          payload="Loop"),
    Op.LOOP_NEXT: OpInfo((STEP, TARGET), "next iteration at b, or pop the loop", LOOP_BACK,
                         control=True),
    Op.CALL: OpInfo((STEP, CONST, TARGET), "call the sub-workflow at c with K[b]", ENTER,
                    payload="Call"),
    Op.RETURN: OpInfo((STEP,), "return to the caller; results[S] := output", LEAVE,
                      control=True),
    Op.TRY: OpInfo((STEP, CONST, TARGET), "policy K[b] over the block ending at END_TRY c",
                   payload="Policy", control=True),
    Op.END_TRY: OpInfo((STEP, TARGET), "leave the policy; errors continue at b", control=True),
    Op.PARALLEL: OpInfo((STEP, CONST), "results[S] := branch regions K[b], run at once", FORK,
                        payload="Parallel"),
    Op.END_BRANCH: OpInfo((STEP,), "finish the branch with results[S]", JOIN, control=True),
    Op.END: OpInfo((REG,), "finish with output R[a]", EXIT, control=True),
    Op.END_WORKFLOW: OpInfo((), "finish with the last step's output", EXIT, control=True),
}
