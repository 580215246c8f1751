"""The .lbs text (what vm/isa/dis.py prints) -> a Program, so that tests build programs by
writing them and `disassemble(assemble(text)) == text`.

The text names every operand by value, so the assembler rebuilds the pools: step ids and
payloads become constants, halt site lines become HaltSites, labels (`step.index`,
`step.end`, `@end`) become code addresses and each `step` block a StepInfo. What the text does
not show is made up the same way every time: no spans, a register file just large enough,
halt site ids from their block, a file table of the source alone when the text lists none,
the current format when it has no header lines. A trailing `; file:line` names another file of
the `; files` line; any other trailing comment is a source snippet, which `assemble_listing`
keeps as a stand-in source text so that the listing round-trips with its comments too.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any

import attrs

from vm.isa import ops
from vm.isa.opcodes import CONST, HALT, OPCODE_VERSION, OPS, REG, STEP, TARGET, Op
from vm.isa.ops import Branch, Given, HaltSite
from vm.isa.program import FORMAT_VERSION, MAGIC, Header, Instr, Program, StepInfo

COMPILER = "asm"  # the header's compiler_version, which the text does not show
_RECORDS = {cls.__name__: cls for cls in (*ops.PAYLOADS, ops.Retry, Branch)}
_GATES = {cls.__name__: cls for cls in ops.HALT_SITES}
_COMMENT = "    ; "
_MNEMONIC_WIDTH = max(len(op.name) for op in Op)  # as dis pads them
_DECODER = json.JSONDecoder()


class AsmError(ValueError):
    """The text is not a listing: `line N: what`."""


def assemble(text: str) -> Program:
    """The Program that `text` lists (source snippet comments are accepted and dropped)."""
    return assemble_listing(text)[0]


def assemble_listing(text: str) -> tuple[Program, str]:
    """The Program and a stand-in source text holding each snippet comment on a line of its
    own, so that `disassemble(*assemble_listing(text)) == text` for a listing with snippets."""
    return _Assembler(text).build()


class _Cursor:
    """A position in one line, with the line number for errors."""

    def __init__(self, line: str, number: int) -> None:
        self.text, self.pos, self.number = line, 0, number

    def fail(self, what: str) -> AsmError:
        return AsmError(f"line {self.number}: {what} at column {self.pos + 1}")

    def at(self, prefix: str) -> bool:
        return self.text.startswith(prefix, self.pos)

    def expect(self, prefix: str) -> None:
        if not self.at(prefix):
            raise self.fail(f"expected {prefix!r}")
        self.pos += len(prefix)

    def word(self) -> str:
        """Up to the next space (or the end of the line)."""
        end = self.text.find(" ", self.pos)
        end = len(self.text) if end < 0 else end
        if end == self.pos:
            raise self.fail("expected a word")
        word, self.pos = self.text[self.pos:end], end
        return word

    def json(self) -> Any:
        try:
            value, self.pos = _DECODER.raw_decode(self.text, self.pos)
        except ValueError:
            raise self.fail("expected a JSON value") from None
        return value


class _Assembler:
    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")  # as dis joins them: a JSON string may hold U+2028
        # a listing without header lines is of this format, from no named source
        self.header: dict[str, Any] = {"format_version": FORMAT_VERSION,
                                       "opcode_version": OPCODE_VERSION,
                                       "source_name": "", "source_sha256": "",
                                       "program_hash": ""}
        self.files: tuple[str, ...] = ()
        self.ttl: int | None = None
        self.constants: list[Any] = []
        self.strings: dict[str, int] = {}
        self.halts: list[HaltSite] = []
        self.labels: dict[str, int] = {}
        self.blocks: list[tuple[str, str, int, int]] = []  # kind, name, first, last pc
        self.rows: list[tuple[_Cursor, Op, str]] = []  # each instruction: operands, label
        self.source: list[str] = []
        self.source_map: list[tuple | None] = []
        self.code: list[Instr] = []
        self.registers = 1

    # the outline: header lines, block headers, instruction lines ------------------------
    def build(self) -> tuple[Program, str]:
        for number, line in enumerate(self.lines, 1):
            if line.startswith("; "):
                self._header_line(line, number)
            elif line.startswith("  "):
                self._instruction_line(line, number)
            elif line.startswith(("step ", "@")):
                kind, _, name = line.partition(" ")
                self.blocks.append((kind, name, len(self.rows), len(self.rows) - 1))
            elif line.strip():
                raise AsmError(f"line {number}: not a listing line: {line!r}")
        self.steps = [StepInfo(name, first, last, file=self._file_of(first))
                      for kind, name, first, last in self.blocks if kind == "step"]
        for pc, (cursor, op, label) in enumerate(self.rows):
            self.code.append(self._instruction(cursor, op, label, pc))
        header = Header(MAGIC, compiler_version=COMPILER, **self.header)
        program = Program(header, self.constants, self.code, self.steps, self.halts,
                          self.source_map, registers=self.registers,
                          files=self.files or (self.header["source_name"],),
                          checkpoint_ttl_ms=self.ttl)
        return program, "".join(line + "\n" for line in self.source)

    def _header_line(self, line: str, number: int) -> None:
        if m := re.fullmatch(r"; lobster bytecode format=(\d+) opcodes=(\d+)", line):
            self.header.update(format_version=int(m[1]), opcode_version=int(m[2]))
        elif m := re.fullmatch(r"; source  (.*) sha256:(\S*)", line):
            self.header.update(source_name=m[1], source_sha256=m[2])
        elif m := re.fullmatch(r"; program sha256:(\S*)", line):
            self.header["program_hash"] = m[1]
        elif line.startswith("; files   "):
            self.files = tuple(line[len("; files   "):].split(" "))
        elif m := re.fullmatch(r"; checkpoint_ttl (\d+)ms", line):
            self.ttl = int(m[1])
        else:
            raise AsmError(f"line {number}: unknown header line {line!r}")

    def _instruction_line(self, line: str, number: int) -> None:
        cursor = _Cursor(line, number)
        cursor.pos = 2
        label = cursor.word()
        if label in self.labels:
            raise cursor.fail(f"label {label!r} twice")
        while cursor.at(" "):
            cursor.pos += 1
        start = cursor.pos
        mnemonic = cursor.word()
        if mnemonic not in Op.__members__:
            raise cursor.fail(f"unknown opcode {mnemonic!r}")
        if OPS[Op[mnemonic]].operands:  # they follow the padded column (no padding without)
            cursor.pos = start + _MNEMONIC_WIDTH
        if not self.blocks:
            raise cursor.fail("an instruction before any block header")
        kind, name, first, _ = self.blocks[-1]
        self.blocks[-1] = (kind, name, first, len(self.rows))
        self.labels[label] = len(self.rows)
        self.rows.append((cursor, Op[mnemonic], label))
        self.source_map.append(None)  # filled in once the operands are read

    def _file_of(self, pc: int) -> int:
        """A step's file: that of its first line's `; file:line` comment, else the main one."""
        if 0 <= pc < len(self.rows):
            cursor = self.rows[pc][0]
            comment = cursor.text.rpartition(_COMMENT)[2]
            for k, name in enumerate(self.files[1:], 1):
                if re.fullmatch(re.escape(name) + r":\d+", comment):
                    return k
        return 0

    # one instruction ---------------------------------------------------------------------
    def _instruction(self, cursor: _Cursor, op: Op, label: str, pc: int) -> Instr:
        values = []
        for kind in OPS[op].operands:
            cursor.expect(" ")
            values.append(self._operand(cursor, kind, label, pc))
        if cursor.pos < len(cursor.text):
            cursor.expect(_COMMENT)
            self.source_map[pc] = self._location(cursor.text[cursor.pos:])
        return Instr(op, *values)

    def _operand(self, cursor: _Cursor, kind: str, label: str, pc: int) -> int:
        if kind == REG:
            cursor.expect("r")
            digits = cursor.word()
            if not digits.isdigit():
                raise cursor.fail("expected a register number")
            self.registers = max(self.registers, int(digits) + 1)
            return int(digits)
        if kind == STEP:
            return self._string(cursor.word())
        if kind == TARGET:
            cursor.expect("-> ")
            return self._address(cursor, cursor.word(), pc)
        if kind == HALT:
            self.halts.append(gate(cursor, label, self._label_pc))
            return len(self.halts) - 1
        if kind == CONST:
            return self._const(self._constant(cursor))
        raise cursor.fail(f"operand kind {kind!r}")  # pragma: no cover - the table's kinds

    def _constant(self, cursor: _Cursor) -> Any:
        name = re.match(r"[A-Z][A-Za-z]*(?=\{)", cursor.text[cursor.pos:])
        if name is None:
            return cursor.json()
        cls = _RECORDS.get(name[0])
        if cls is None:
            raise cursor.fail(f"unknown payload {name[0]!r}")
        cursor.pos += len(name[0])
        return record(cursor, cls, self._label_pc)

    def _location(self, comment: str) -> tuple:
        for k, name in enumerate(self.files[1:], 1):
            if m := re.fullmatch(re.escape(name) + r":(\d+)", comment):
                return (k, int(m[1]), 1, int(m[1]), 1)
        self.source.append(comment)
        n = len(self.source)
        return (0, n, 1, n, len(comment) + 1)

    # pools and addresses -----------------------------------------------------------------
    def _string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = self._const(text)
        return self.strings[text]

    def _const(self, value: Any) -> int:
        if isinstance(value, str):
            if value in self.strings:
                return self.strings[value]
            self.strings[value] = len(self.constants)
        self.constants.append(value)
        return len(self.constants) - 1

    def _label_pc(self, cursor: _Cursor, label: str) -> int:
        if label == "@end":
            return -1
        if label not in self.labels:
            raise cursor.fail(f"unknown label {label!r}")
        return self.labels[label]

    def _address(self, cursor: _Cursor, label: str, pc: int) -> int:
        """A jump target: a label, `@end`, or `step.end` (the pc after that step, the one
        around `pc` when the id names several)."""
        if label == "@end":
            return len(self.rows)
        if label.endswith(".end") and label not in self.labels:
            named = [s for s in self.steps if s.id == label[:-4]]
            around = [s for s in named if s.first_pc <= pc <= s.last_pc]
            later = [s for s in named if s.last_pc >= pc]
            if named:
                return (around or later or named)[0].last_pc + 1
        return self._label_pc(cursor, label)


# records and gates: `{field=value ...}` in the order of the class's fields --------------------

def record(cursor: _Cursor, cls: type, label_pc, skip: tuple[str, ...] = (), **given) -> Any:
    """`{field=value ...}`: the fields of `cls` but those in `skip` (`given` sets them)."""
    cursor.expect("{")
    values = _fields(cursor, cls, label_pc, skip)
    cursor.expect("}")
    return cls(**values, **given)


def _fields(cursor: _Cursor, cls: type, label_pc, skip: tuple[str, ...]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    first = True
    for f in attrs.fields(cls):
        if f.name in skip:
            continue
        if not first:
            cursor.expect(" ")
        first = False
        cursor.expect(f"{f.name}=")
        values[f.name] = _field_value(cursor, f.type, label_pc)
    return values


def _field_value(cursor: _Cursor, annotation: Any, label_pc) -> Any:
    if cursor.at("-") and not re.match(r"-\d", cursor.text[cursor.pos:]):
        cursor.pos += 1
        return None
    kinds = _kinds(annotation)
    if Given in kinds:
        return Given(cursor.json())
    if Branch in kinds and cursor.at("[") and not cursor.at("[]"):
        return tuple(_branches(cursor, label_pc))
    nested = [k for k in kinds if attrs.has(k)]
    if nested:
        return record(cursor, nested[0], label_pc)
    value = cursor.json()
    return tuple(value) if tuple in kinds and isinstance(value, list) else value


def _kinds(annotation: Any) -> set:
    """Every class an annotation names, through unions and tuple[...] (strings unresolved)."""
    if isinstance(annotation, type):
        return {annotation}
    origin = typing.get_origin(annotation)
    if origin is None:
        return set()
    own = {origin} if isinstance(origin, type) and origin is not types.UnionType else set()
    return own.union(*(_kinds(a) for a in typing.get_args(annotation) if a is not ...))


def _branches(cursor: _Cursor, label_pc) -> list[Branch]:
    """`[id@label, ...]`: each branch and the label its region starts at."""
    cursor.expect("[")
    out = []
    while True:
        m = re.compile(r"(.*?)@(@end|[^@,\]]+)(?=, |\])").match(cursor.text, cursor.pos)
        if m is None:
            raise cursor.fail("expected a branch id@label")
        cursor.pos = m.end()
        out.append(Branch(m[1], label_pc(cursor, m[2])))
        if cursor.at("]"):
            cursor.pos += 1
            return out
        cursor.expect(", ")


def gate(cursor: _Cursor, label: str, label_pc) -> HaltSite:
    """A halt site, `Kind{field=value ...}` (one of ops.HALT_SITES, every field but its id);
    the id, which the text does not show, is the block the gate is in (`plan` for `plan.3`):
    the label of the step it is in, as the compiler names a gate."""
    name = re.match(r"[A-Z][A-Za-z]*(?=\{)", cursor.text[cursor.pos:])
    cls = _GATES.get(name[0]) if name else None
    if cls is None:
        raise cursor.fail("expected a gate: " + " or ".join(sorted(_GATES)))
    cursor.pos += len(name[0])
    return record(cursor, cls, label_pc, skip=("id",), id=label.rpartition(".")[0])


__all__ = ["AsmError", "assemble", "assemble_listing"]
