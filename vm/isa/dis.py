"""Program -> stable text disassembly, for code review and golden files.

One block per step, labelled by step id; one instruction per line with a step-relative
index, operands printed by value (never by pool index; payloads and halt sites field by
field) and the source text as a comment. Nothing in a line depends on other steps, so adding
or editing a step changes only its own block and the two hash lines.
"""

from __future__ import annotations

import attrs

from vm.core import json_write
from vm.isa.opcodes import CONST, HALT, OPS, REG, STEP, TARGET, Op
from vm.isa.ops import Branch, Given
from vm.isa.program import Program, StepInfo
from vm.isa.regions import regions_of

_MNEMONIC_WIDTH = max(len(op.name) for op in Op)
_LABEL_WIDTH = 12  # the least label column; a block with longer labels widens its own


def _value(value, labels: list[str]) -> str:
    """A payload value: records as {field=value ...}, Given as its value, None as `-` when
    it means "not given", a branch as its id and the label of its region."""
    if isinstance(value, Branch):
        return f"{value.id}@{_label_at(labels, value.start)}"
    if isinstance(value, Given):
        return json_write.json_compact(value.value)
    if attrs.has(type(value)):
        return "{" + _fields(value, labels) + "}"
    if isinstance(value, tuple) and any(attrs.has(type(v)) for v in value):
        return "[" + ", ".join(_value(v, labels) for v in value) + "]"
    if isinstance(value, tuple):
        value = list(value)
    return json_write.json_compact(value)


def _fields(record, labels: list[str], skip: tuple[str, ...] = ()) -> str:
    parts = []
    for f in attrs.fields(type(record)):
        if f.name in skip:
            continue
        value = getattr(record, f.name)
        shown = "-" if value is None else _value(value, labels)
        parts.append(f"{f.name}={shown}")
    return " ".join(parts)


def _label_at(labels: list[str], pc: int) -> str:
    return labels[pc] if 0 <= pc < len(labels) else "@end"


class _Index:
    """What the disassembler asks about pcs, computed in one pass over the steps: the step at
    each pc (the first listed, as `Program.step_at`), the pcs that start a step and the steps
    that end just before each pc; the regions are the program's own (vm/isa/regions.py). Every
    question is then a lookup, so a program disassembles in time linear in its size."""

    def __init__(self, program: Program) -> None:
        n = len(program.code)
        self.step_of: list[StepInfo | None] = [None] * n
        for step in reversed(program.steps):  # the first listed wins, as in step_at
            for pc in range(max(step.first_pc, 0), min(step.last_pc + 1, n)):
                self.step_of[pc] = step
        self.starts = {step.first_pc for step in program.steps}
        self.ending: dict[int, list[StepInfo]] = {}
        for step in program.steps:
            self.ending.setdefault(step.last_pc + 1, []).append(step)
        self.regions = regions_of(program)

    def step_at(self, pc: int) -> StepInfo | None:
        return self.step_of[pc] if 0 <= pc < len(self.step_of) else None


def _blocks(program: Program, index: _Index) -> tuple[list[str], list[str | None]]:
    """The label of every pc, and the block header that starts at it (or None)."""
    n = len(program.code)
    owner: list[tuple[str, str] | None] = [None] * n  # (block header, label stem)
    for step in program.steps:
        for pc in range(step.first_pc, step.last_pc + 1):
            owner[pc] = (f"step {step.id}", step.id)
    for pc, regions in sorted(index.regions.entered.items()):
        step = index.step_at(pc)
        for region in regions:
            if region.kind == "call":
                if step is None:
                    continue
                at = region.start  # what runs before its first step (its own cost_limit)
                while at < region.end and owner[at] is None:
                    owner[at] = (f"@enter {step.id}", f"{step.id}/(enter)")
                    at += 1
                if owner[region.end] is None:
                    owner[region.end] = (f"@return {step.id}", f"{step.id}/(return)")
                continue
            prefix = f"{step.id}/" if step is not None else ""
            at = region.start
            while at <= region.end and owner[at] is None:
                owner[at] = (f"@branch {prefix}{region.name}", f"{prefix}{region.name}")
                at += 1
    seen_step = False
    for pc in range(n):
        if owner[pc] is None:
            owner[pc] = ("@end", "end") if seen_step else ("@prologue", "prologue")
        elif owner[pc][0].startswith("step "):
            seen_step = True
    labels, headers = [], []
    previous, count = None, 0
    for pc in range(n):
        header, stem = owner[pc]
        if (header, stem) != previous or (header.startswith("step ") and pc in index.starts):
            previous, count = (header, stem), 0
            headers.append(header)
        else:
            headers.append(None)
        labels.append(f"{stem}.{count}")
        count += 1
    return labels, headers


def _target(index: _Index, labels: list[str], pc: int, here: int) -> str:
    """A jump target as a label: `step.index`, or `step.end` for the first pc after the
    current step, so that no line depends on how long other steps are."""
    current = index.step_at(here)
    if current is not None:
        for step in index.ending.get(pc, ()):  # the end of this step, or of one of its blocks
            if step is current or step.id.startswith(current.id + "/"):
                return f"{step.id}.end"
    return _label_at(labels, pc)


def _halt_text(program: Program, value: int, labels: list[str]) -> str:
    """A gate as its kind and its own fields; its id is the label of the step it is in."""
    site = program.halts[value]
    return f"{type(site).__name__}{{{_fields(site, labels, skip=('id',))}}}"


def _operand(program: Program, index: _Index, labels: list[str], kind: str, value: int,
             here: int) -> str:
    if kind == REG:
        return f"r{value}"
    if kind == STEP:
        return str(program.constants[value])
    if kind == TARGET:
        return "-> " + _target(index, labels, value, here)
    if kind == CONST:
        constant = program.constants[value]
        if attrs.has(type(constant)):
            return f"{type(constant).__name__}{{{_fields(constant, labels)}}}"
        return json_write.json_compact(constant)
    if kind == HALT:
        return _halt_text(program, value, labels)
    return str(value)


def disassemble(program: Program, source_text: str | None = None) -> str:
    """The stable text of `program`. With `source_text`, each line shows its source line."""
    h = program.header
    out = [f"; lobster bytecode format={h.format_version} opcodes={h.opcode_version}",
           f"; source  {h.source_name} sha256:{h.source_sha256}",
           f"; program sha256:{h.program_hash}"]
    if len(program.files) > 1:
        out.append(f"; files   {' '.join(program.files)}")
    if program.checkpoint_ttl_ms is not None:
        out.append(f"; checkpoint_ttl {program.checkpoint_ttl_ms}ms")
    lines = source_text.splitlines() if source_text is not None else None
    index = _Index(program)
    labels, headers = _blocks(program, index)
    widths: list[int] = []  # per block, so that a long label moves no other block's columns
    for pc in range(len(labels)):
        if headers[pc] is not None:
            block = pc
        widths.append(block)
    width_of = {}
    for pc, block in enumerate(widths):
        width_of[block] = max(width_of.get(block, _LABEL_WIDTH), len(labels[pc]))
    header = ""
    for pc, ins in enumerate(program.code):
        if headers[pc] is not None:
            header = headers[pc]
            out.append(header)
        op = Op(ins.op)
        operands = [_operand(program, index, labels, kind, value, pc)
                    for kind, value in zip(OPS[op].operands, (ins.a, ins.b, ins.c))]
        width = width_of[widths[pc]]
        text = f"  {labels[pc]:<{width}} {op.name:<{_MNEMONIC_WIDTH}} {' '.join(operands)}"
        text = text.rstrip()
        loc = program.source_map[pc]
        if loc and loc[0] != 0 and loc[0] < len(program.files):
            text += f"    ; {program.files[loc[0]]}:{loc[1]}"  # another file's line
        elif lines is not None and loc and 1 <= loc[1] <= len(lines) \
                and header not in ("@prologue", "@end"):
            line = lines[loc[1] - 1]
            snippet = line[loc[2] - 1:loc[4] - 1] if loc[3] == loc[1] else line[loc[2] - 1:]
            text += f"    ; {snippet.strip()}"
        out.append(text)
    return "\n".join(out) + "\n"
