"""Program: the compiled bytecode as plain data (header, files, constants, code, steps, halts).

FORMAT_VERSION changelog:
  1  first format: Instr [op, a, b, c]; steps, halts and a pc -> [line, col, end_line,
     end_col] source map; program_hash covers everything but the header.
  2  typed payloads: constants that an opcode row types are `$type`-tagged records
     (vm/isa/ops.py); halt sites carry typed gate fields instead of a loose config map; a file
     table, source map entries [file, line, col, end_line, end_col] and StepInfo.file as an
     index into it.
  3  checkpoint_ttl_ms: a workflow's `checkpoint_ttl` (how long its checkpoints stay
     resumable), None when the file sets none (always None for a pipeline).
  4  typed gates: a halt site is one of four `$type`-tagged records (PipelineApprove,
     PipelineAsk, StepApproval, StepInput) with only its own fields; the step of a workflow
     stage's `ask` is a field, the approver rules one ApproverRules record; SET_RESULT's
     constant is a StepValue that says whether an approval follows.
"""

from typing import Any  # annotations stay objects: vm/isa/codec.py reads them

from attrs import field

from vm.core.records import frozen
from vm.isa.ops import HaltSite

FORMAT_VERSION = 4
MAGIC = "LBC"

Loc = tuple[int, int, int, int, int]  # file index, line, col, end_line, end_col


def _as_tuple(value: Any) -> tuple:
    # a plain function: attrs inspects the builtin `tuple` at class creation, 0.4 ms a field
    return tuple(value)


@frozen
class Instr:
    op: int
    a: int = 0
    b: int = 0
    c: int = 0


@frozen
class StepInfo:
    """A labelled block of code: a pipeline stage or a workflow step."""

    id: str
    first_pc: int
    last_pc: int
    span: tuple[int, int, int, int] | None = None  # line, col, end_line, end_col
    file: int = 0  # index into Program.files


@frozen
class Header:
    magic: str
    format_version: int
    opcode_version: int
    compiler_version: str
    source_name: str
    source_sha256: str
    program_hash: str = ""


@frozen
class Program:
    header: Header
    constants: tuple[Any, ...] = field(converter=_as_tuple)
    code: tuple[Instr, ...] = field(converter=_as_tuple)
    steps: tuple[StepInfo, ...] = field(converter=_as_tuple)
    halts: tuple[HaltSite, ...] = field(converter=_as_tuple)
    source_map: tuple[Loc | None, ...] = field(converter=_as_tuple)
    registers: int = 1
    files: tuple[str, ...] = field(default=(), converter=_as_tuple)  # 0: the main source
    checkpoint_ttl_ms: int | None = None  # the workflow's checkpoint_ttl; None: not set

    @property
    def hash(self) -> str:
        return self.header.program_hash

    def step_at(self, pc: int) -> StepInfo | None:
        for step in self.steps:
            if step.first_pc <= pc <= step.last_pc:
                return step
        return None


__all__ = ["FORMAT_VERSION", "MAGIC", "HaltSite", "Header", "Instr", "Loc", "Program",
           "StepInfo"]
