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
    HALT_APPROVE = 30  #  r H      park at halt site H[b]; resume approve=true continues, items R[a]
    HALT_INPUT = 31  #    r H      park at halt site H[b]; resume sets R[a] := [answer]
    END = 90  #           r        finish; the output is the items R[a]


# operand kinds
REG, CONST, HALT, NONE = "r", "K", "H", "-"


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
    Op.END: OpInfo((REG,), "finish with output R[a]"),
}
