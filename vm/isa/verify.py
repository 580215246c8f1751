"""Load-time checks of a Program (opcodes, operand ranges, payload types, block pairing) and
of a Frame against its Program. After these, an IndexError or a wrong type inside the
machine is a bug of ours, never a trap."""

from __future__ import annotations

from vm.isa.frame import Frame, PipelineApproveWait, PipelineAskWait
from vm.isa.opcodes import CONST, HALT, OPS, REG, STEP, TARGET, Op
from vm.isa.ops import HaltSite
from vm.isa.program import Program
from vm.isa.regions import LAST, regions_of

# by class name (the codec's tags): the workflow steps' gates are built on their first use
_HALTS = {Op.HALT_APPROVE: ("PipelineApprove", "StepApproval"),
          Op.HALT_INPUT: ("PipelineAsk", "StepInput")}  # the halt sites each opcode may name
_WAITS = {"PipelineApprove": "PipelineApproveWait", "PipelineAsk": "PipelineAskWait",
          "StepApproval": "StepApprovalWait", "StepInput": "StepInputWait"}  # site -> its wait


class VerifyError(Exception):
    """The program (or a frame of it) is not well formed."""


def verify(program: Program) -> None:
    code, K = program.code, program.constants
    limits = {REG: program.registers, CONST: len(K), HALT: len(program.halts),
              STEP: len(K), TARGET: len(code)}
    if not code or code[-1].op not in LAST:
        raise VerifyError("program must end with END, END_WORKFLOW, RETURN or END_BRANCH")
    if len(program.source_map) != len(code):
        raise VerifyError("source map does not cover the code")
    files = len(program.files)
    for pc, loc in enumerate(program.source_map):
        if loc is not None and files and not 0 <= loc[0] < files:
            raise VerifyError(f"pc {pc}: source map names file {loc[0]} of {files}")
    for pc, ins in enumerate(code):
        try:
            op = Op(ins.op)
        except ValueError:
            raise VerifyError(f"pc {pc}: unknown opcode {ins.op}") from None
        info = OPS[op]
        for kind, value in zip(info.operands, (ins.a, ins.b, ins.c)):
            if kind in limits and not 0 <= value < limits[kind]:
                raise VerifyError(f"pc {pc}: {op.name} operand {value} out of range")
            if kind == STEP and not isinstance(K[value], str):
                raise VerifyError(f"pc {pc}: {op.name} step operand is not a step id")
        if op in _HALTS:
            site = program.halts[ins.b]
            if not (isinstance(site, HaltSite) and type(site).__name__ in _HALTS[op]):
                raise VerifyError(f"pc {pc}: {op.name} names a {type(site).__name__} halt site")
        slot = info.const_slot
        if info.payload is not None and slot is not None:
            value = K[(ins.a, ins.b, ins.c)[slot]]
            payload = info.payload_type
            if not isinstance(value, payload):
                raise VerifyError(f"pc {pc}: {op.name} payload is not a {payload.__name__}")
    problems = regions_of(program).problems  # block pairing: computed once, kept for the readers
    if problems:
        raise VerifyError(problems[0])


def verify_frame(frame: Frame, program: Program) -> None:
    """A frame that `program` can be parked in: pc, registers, stack records pointing at the
    LOOP_BEGIN / CALL / TRY sites they came from, and the pending halt at pc - 1."""
    code = program.code
    if frame.program_hash != program.hash:
        raise VerifyError("the frame belongs to another program")
    if not 0 <= frame.pc < len(code):
        raise VerifyError(f"pc {frame.pc} is outside the code")
    if len(frame.registers) != program.registers:
        raise VerifyError(f"{len(frame.registers)} registers, the program has "
                          f"{program.registers}")
    for name, stack, op in (("loop", frame.loops, Op.LOOP_BEGIN), ("call", frame.calls, Op.CALL),
                            ("try", frame.tries, Op.TRY)):
        for entry in stack:
            if not 0 <= entry.site < len(code) or code[entry.site].op != op:
                raise VerifyError(f"a {name} record names pc {entry.site}, not a {op.name}")
    for loop in frame.loops:
        if not isinstance(loop.items, list) or not 0 <= loop.index < len(loop.items):
            raise VerifyError(f"loop at pc {loop.site} is past its items")
    for entry in frame.tries:
        if entry.attempt < 1 or not 0 <= entry.loops <= len(frame.loops) \
                or not 0 <= entry.calls <= len(frame.calls) \
                or (entry.remaining_ms is not None and entry.remaining_ms < 0):
            raise VerifyError(f"try at pc {entry.site} has an impossible state")
    pending = frame.pending
    if pending is not None:
        if not 0 <= pending.halt < len(program.halts):
            raise VerifyError(f"pending halt {pending.halt} does not exist")
        halted = code[frame.pc - 1] if frame.pc > 0 else None
        if halted is None or halted.op not in _HALTS or halted.b != pending.halt:
            raise VerifyError(f"pending {pending.kind} halt is not the instruction before pc")
        site = program.halts[pending.halt]
        if type(pending).__name__ != _WAITS[type(site).__name__]:
            raise VerifyError(f"a {type(pending).__name__} does not wait on a "
                              f"{type(site).__name__}")
        if isinstance(pending, (PipelineApproveWait, PipelineAskWait)) \
                and not 0 <= pending.register < program.registers:
            raise VerifyError(f"pending register {pending.register} out of range")
