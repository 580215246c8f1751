"""Program -> stable text disassembly, for code review and golden files.

One block per step, labelled by step id; one instruction per line with a step-relative
index, operands printed by value (never by pool index) and the source text as a comment.
Nothing in a line depends on other steps, so adding or editing a step changes only its own
block and the two hash lines.
"""

from __future__ import annotations

from vm import js
from vm.opcodes import CONST, HALT, OPS, REG, STEP, TARGET, Op
from vm.program import HaltSite, Program

_MNEMONIC_WIDTH = 14


def _halt_text(site: HaltSite) -> str:
    parts = [site.kind, f"prompt={js.json_compact(site.prompt)}"]
    if site.kind == "approval":
        if site.preview:
            parts.append(f"preview limit={site.limit}")
    else:
        parts.append(f"schema={js.json_compact(site.schema)}")
        if site.subject:
            parts.append("subject")
    if site.emit:
        parts.append("emit")
    return " ".join(parts)


def _target(program: Program, pc: int, here: int) -> str:
    """A jump target as a label: `step.index`, or `step.end` for the first pc after the
    current step, so that no line depends on how long other steps are."""
    current = program.step_at(here)
    if current is not None:
        for step in program.steps:  # the end of this step, or of one of its own blocks
            if pc == step.last_pc + 1 and (step is current or step.id.startswith(current.id + "/")):
                return f"{step.id}.end"
    step = program.step_at(pc)
    if step is not None:
        return f"{step.id}.{pc - step.first_pc}"
    return "@end"


def _operand(program: Program, kind: str, value: int, here: int) -> str:
    if kind == REG:
        return f"r{value}"
    if kind == STEP:
        return str(program.constants[value])
    if kind == TARGET:
        return "-> " + _target(program, value, here)
    if kind == CONST:
        return js.json_compact(program.constants[value])
    if kind == HALT:
        return _halt_text(program.halts[value])
    return str(value)


def disassemble(program: Program, source_text: str | None = None) -> str:
    """The stable text of `program`. With `source_text`, each line shows its source line."""
    h = program.header
    out = [f"; lobster bytecode format={h.format_version} opcodes={h.opcode_version}",
           f"; source  {h.source_name} sha256:{h.source_sha256}",
           f"; program sha256:{h.program_hash}"]
    lines = source_text.splitlines() if source_text is not None else None
    labels = {}
    for step in program.steps:
        labels[step.first_pc] = step
    current = None
    for pc, ins in enumerate(program.code):
        step = labels.get(pc)
        if step is not None:
            current, index = step.id, 0
            out.append(f"step {step.id}")
        elif current is None or program.step_at(pc) is None:
            name = "@prologue" if current is None else "@end"
            if current != name:
                current, index = name, 0
                out.append(name)
        op = Op(ins.op)
        operands = [_operand(program, kind, value, pc)
                    for kind, value in zip(OPS[op].operands, (ins.a, ins.b, ins.c))]
        label = f"{current.lstrip('@')}.{index}"
        text = f"  {label:<12} {op.name:<{_MNEMONIC_WIDTH}} {' '.join(operands)}".rstrip()
        loc = program.source_map[pc]
        owner = program.step_at(pc)
        if owner is not None and owner.file and loc:
            text += f"    ; {owner.file}:{loc[0]}"  # a sub-workflow's line, not this source's
        elif lines is not None and loc and 1 <= loc[0] <= len(lines) and current[0] != "@":
            line = lines[loc[0] - 1]
            snippet = line[loc[1] - 1:loc[3] - 1] if loc[2] == loc[0] else line[loc[1] - 1:]
            text += f"    ; {snippet.strip()}"
        out.append(text)
        index += 1
    return "\n".join(out) + "\n"
