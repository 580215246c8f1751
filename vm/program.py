"""Program: the compiled bytecode as plain data (header, constants, code, steps, halts).

FORMAT_VERSION changelog:
  1  first format: Instr [op, a, b, c]; steps, halts and a pc -> [line, col, end_line,
     end_col] source map; program_hash covers everything but the header.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

FORMAT_VERSION = 1
MAGIC = "LBC"


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
    file: str = ""  # the file of the step's source spans, when not the program's own source


@frozen
class HaltSite:
    """Everything a HALT_* instruction needs to build its request, known at compile time."""

    id: str
    kind: str  # "approval" | "input"
    prompt: str
    preview: bool = False  # approval: attach a preview of the first `limit` items
    limit: int = 5
    schema: Any = None  # input: the JSON Schema of the answer
    subject: bool = False  # input: attach the items as the subject
    emit: bool = False  # halt even where an interactive prompt would be possible
    step: str = ""  # workflow gates: the step whose result the gate reads and records
    config: dict[str, Any] = field(factory=dict)  # workflow gates: items, preview, identity...


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
    source_map: tuple[tuple[int, int, int, int] | None, ...] = field(converter=_as_tuple)
    registers: int = 1

    @property
    def hash(self) -> str:
        return self.header.program_hash

    def step_at(self, pc: int) -> StepInfo | None:
        for step in self.steps:
            if step.first_pc <= pc <= step.last_pc:
                return step
        return None
