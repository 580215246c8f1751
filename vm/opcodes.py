"""The instruction set: opcode numbers (wire format) and each opcode's operand kinds.

Never renumber or reuse a number: retire it, bump FORMAT_VERSION in vm/program.py and add
a changelog line there. Numbers are grouped by family with gaps for growth.
"""

from __future__ import annotations

from enum import IntEnum

from attrs import frozen

OPCODE_VERSION = 1


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
    SET_RESULT = 16  #    S K      results[S] := synthetic result of the stdin value K[b]
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
    PARALLEL = 70  #      S K      results[S] := run the branches K[b] concurrently
    END = 90  #           r        finish; the output is the items R[a]
    END_WORKFLOW = 91  #  -        finish; the output is the last completed step's result


# operand kinds: register, constant, halt site, step id (a constant string), jump target
REG, CONST, HALT, STEP, TARGET = "r", "K", "H", "S", "T"


@frozen
class OpInfo:
    operands: tuple[str, ...]
    summary: str


OPS: dict[Op, OpInfo] = {
    Op.NOP: OpInfo((), "do nothing"),
    Op.LOAD_CONST: OpInfo((REG, CONST), "R[a] := K[b]"),
    Op.MOVE: OpInfo((REG, REG), "R[a] := R[b]"),
    Op.STAGE: OpInfo((REG, CONST, REG), "R[a] := command K[b] over items R[c]"),
    Op.EXEC: OpInfo((REG, CONST, REG), "R[a] := child process K[b] fed items R[c]"),
    Op.RENDER: OpInfo((REG, CONST), "render items R[a] with K[b]; R[a] := []"),
    Op.HALT_APPROVE: OpInfo((REG, HALT), "park for approval H[b] of items R[a]"),
    Op.HALT_INPUT: OpInfo((REG, HALT), "park for input H[b]; resume: R[a] := [answer]"),
    Op.SHELL: OpInfo((STEP, CONST), "results[S] := shell step K[b]"),
    Op.LOAD_STDIN: OpInfo((REG, CONST), "R[a] := items of stdin K[b]"),
    Op.STORE_PIPELINE: OpInfo((STEP, REG), "results[S] := pipeline result of R[b]"),
    Op.SET_RESULT: OpInfo((STEP, CONST), "results[S] := result of stdin K[b]"),
    Op.INIT_ARGS: OpInfo((CONST,), "args := defaults K[a] + caller args"),
    Op.COST_LIMIT: OpInfo((CONST,), "bill LLM usage against limit K[a]"),
    Op.JUMP: OpInfo((TARGET,), "pc := a"),
    Op.JUMP_IF_NOT: OpInfo((REG, TARGET), "if not R[a]: pc := b"),
    Op.EVAL_COND: OpInfo((REG, CONST), "R[a] := condition K[b]"),
    Op.SKIP_STEP: OpInfo((STEP,), "results[S] := skipped"),
    Op.LOOP_BEGIN: OpInfo((STEP, CONST, TARGET), "push loop K[b]; empty: pc := c"),
    Op.LOOP_NEXT: OpInfo((STEP, TARGET), "next iteration at b, or pop the loop"),
    Op.CALL: OpInfo((STEP, CONST, TARGET), "call the sub-workflow at c with K[b]"),
    Op.RETURN: OpInfo((STEP,), "return to the caller; results[S] := output"),
    Op.TRY: OpInfo((STEP, CONST, TARGET), "policy K[b] over the block ending at c"),
    Op.END_TRY: OpInfo((STEP, TARGET), "leave the policy; errors continue at b"),
    Op.PARALLEL: OpInfo((STEP, CONST), "results[S] := branches K[b]"),
    Op.END: OpInfo((REG,), "finish with output R[a]"),
    Op.END_WORKFLOW: OpInfo((), "finish with the last step's output"),
}
