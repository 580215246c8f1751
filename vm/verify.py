"""Load-time checks of a Program: known opcodes, operands in range. After this, an
IndexError inside the machine is a bug of ours, never a trap."""

from __future__ import annotations

from vm.opcodes import CONST, HALT, OPS, REG, STEP, TARGET, Op
from vm.program import Program


class VerifyError(Exception):
    """The program is not well formed."""


def verify(program: Program) -> None:
    limits = {REG: program.registers, CONST: len(program.constants), HALT: len(program.halts),
              STEP: len(program.constants), TARGET: len(program.code)}
    if not program.code or program.code[-1].op not in (Op.END, Op.END_WORKFLOW, Op.RETURN):
        raise VerifyError("program must end with END, END_WORKFLOW or RETURN")
    if len(program.source_map) != len(program.code):
        raise VerifyError("source map does not cover the code")
    for pc, ins in enumerate(program.code):
        try:
            info = OPS[Op(ins.op)]
        except ValueError:
            raise VerifyError(f"pc {pc}: unknown opcode {ins.op}") from None
        for kind, value in zip(info.operands, (ins.a, ins.b, ins.c)):
            if kind in limits and not 0 <= value < limits[kind]:
                raise VerifyError(f"pc {pc}: {Op(ins.op).name} operand {value} out of range")
            if kind == STEP and not isinstance(program.constants[value], str):
                raise VerifyError(f"pc {pc}: {Op(ins.op).name} step operand is not a step id")
