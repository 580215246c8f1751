"""AST -> vm Program: constant pool, code, step table, halt table, file table, source map."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lobsterc.syntax import ast
from lobsterc.check.stages import BoundStage, check_pipeline
from lobsterc.diagnostics import CompileError
from lobsterc.syntax.parse import parse_pipeline
from lobsterc.syntax.source import Source, Span
from vm import __version__
from vm.core import js
from vm.core.source import file_name
from vm.isa.codec import seal
from vm.isa.opcodes import OPCODE_VERSION, OPS, Op
from vm.isa.ops import Exec, HaltSite, PipelineApprove, PipelineAsk, Stage
from vm.isa.program import FORMAT_VERSION, MAGIC, Header, Instr, Loc, Program, StepInfo

DEFAULT_ASK_SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject", "redraft"]},
        "feedback": {"type": "string", "description": "Feedback for redraft"},
    },
    "required": ["decision"],
}


class Emitter:
    """Collects instructions and their tables; `program()` seals the result."""

    def __init__(self) -> None:
        self.constants: list[Any] = []
        self._const_index: dict[str, int] = {}
        self.code: list[Instr] = []
        self.source_map: list[Loc | None] = []
        self.steps: list[StepInfo] = []
        self.halts: list[HaltSite] = []
        self.registers = 1
        self.files: list[str] = []
        self.file = 0  # the file table index of what is being emitted

    def enter_file(self, name: str) -> int:
        """Emit from `name` from now on; returns the file it replaces."""
        previous = self.file
        if name not in self.files:
            self.files.append(name)
        self.file = self.files.index(name)
        return previous

    def const(self, value: Any) -> int:
        # repr tells apart what JSON tells apart (1, 1.0, True, "1") at a fraction of the cost;
        # it also keeps a tuple apart from a list, which only costs a duplicate in the pool
        key = repr(value)
        index = self._const_index.get(key)
        if index is None:
            index = self._const_index[key] = len(self.constants)
            self.constants.append(value)
        return index

    def emit(self, op: Op, a: int = 0, b: int = 0, c: int = 0, span: Span | None = None) -> int:
        self.code.append(Instr(int(op), a, b, c))
        self.source_map.append(self.loc(span))
        return len(self.code) - 1

    def loc(self, span: Span | None) -> Loc | None:
        return (self.file, span.line, span.col, span.end_line, span.end_col) if span else None

    def patch(self, pc: int, target: int, slot: int | None = None) -> None:
        """Fill the code-address operand of the instruction at `pc` (its only one, or
        `slot`, as the opcode table names them)."""
        ins = self.code[pc]
        slots = OPS[Op(ins.op)].targets
        if slot is None:
            (slot,) = slots
        elif slot not in slots:
            raise ValueError(f"{Op(ins.op).name} has no code address in slot {slot}")
        operands = [ins.a, ins.b, ins.c]
        operands[slot] = target
        self.code[pc] = Instr(ins.op, *operands)

    def halt(self, site: HaltSite) -> int:
        self.halts.append(site)
        return len(self.halts) - 1

    def step(self, step_id: str, first_pc: int, span: Span | None) -> None:
        self.steps.append(StepInfo(step_id, first_pc, len(self.code) - 1, _span(span),
                                   self.file))

    def program(self, source_name: str, source_text: str,
                checkpoint_ttl_ms: int | None = None) -> Program:
        header = Header(MAGIC, FORMAT_VERSION, OPCODE_VERSION, __version__, source_name,
                        hashlib.sha256(source_text.encode("utf-8")).hexdigest())
        files = self.files or [source_name]
        return seal(Program(header, self.constants, self.code, self.steps, self.halts,
                            self.source_map, self.registers, files, checkpoint_ttl_ms))


def _span(span: Span | None) -> tuple[int, int, int, int] | None:
    return (span.line, span.col, span.end_line, span.end_col) if span else None


def compile_pipeline(text: str, name: str = "<pipeline>", *, path: str | None = None
                     ) -> Program:
    """Pipeline text -> sealed Program. Raises CompileError with every diagnostic found.
    `name` names the program (its header and file table); diagnostics name `path`, the file
    the text was read from, as every location names a file (vm.core.source.file_name)."""
    shown = file_name(path) if path is not None else name
    pipeline = parse_pipeline(text, shown)
    bound, diags = check_pipeline(pipeline)
    if diags:
        raise CompileError(diags, Source(shown, text))
    em = Emitter()
    em.enter_file(name)
    for index, item in enumerate(bound, start=1):
        first = len(em.code)
        emit_stage(em, item, reg=0, step_id=f"{index}:{item.command.name}")
        em.step(f"{index}:{item.command.name}", first, item.stage.span)
    em.emit(Op.END, 0, span=pipeline.span)
    return em.program(name, text)


def emit_stage(em: Emitter, item: BoundStage, reg: int, step_id: str,
               templated: bool = False, in_step: str | None = None) -> None:
    """The instruction one bound stage compiles to, reading and writing register `reg`.
    `templated` stages (workflow pipeline steps) render `${arg}` / `$step.path` in each
    argument word at run time; the words themselves were fixed when the text was parsed.
    `step_id` labels a gate stage; `in_step` names the workflow step (or parallel branch)
    whose pipeline the stage is in, None in a pipeline."""
    cmd, args, span = item.command, item.args, item.stage.span
    if cmd.lowering == "exec":
        em.emit(Op.EXEC, reg, em.const(exec_spec(args, templated)), reg, span)
    elif cmd.lowering == "render":
        em.emit(Op.RENDER, reg, em.const(cmd.name), span=span)
    elif cmd.lowering == "approve":
        em.emit(Op.HALT_APPROVE, reg, em.halt(approval_site(step_id, args)), span=span)
    elif cmd.lowering == "ask":
        em.emit(Op.HALT_INPUT, reg, em.halt(input_site(step_id, args, in_step)), span=span)
    else:
        stage = Stage(cmd.name, dict(args.flags), tuple(args.positionals), templated)
        em.emit(Op.STAGE, reg, em.const(stage), reg, span)


def exec_spec(args, templated: bool = False) -> Exec:
    mode = args.get("stdin")
    stdin = mode.lower() if isinstance(mode, str) else None
    shell = args.get("shell")
    if shell is True and args.positionals:  # a bare `--shell`: the first word is the line
        shell = args.positionals[0]
    elif shell == "":  # `--shell=` names no line: argv, but one word with a space is the line ''
        one_line = len(args.positionals) == 1 and any(ch.isspace() for ch in args.positionals[0])
        shell = "" if one_line else None
    if not isinstance(shell, str) and len(args.positionals) == 1 \
            and any(ch.isspace() for ch in args.positionals[0]):
        shell = args.positionals[0]  # one positional with whitespace is a shell line
    if isinstance(shell, str):
        return Exec(args.get("json") is True, shell=shell, stdin=stdin, templated=templated)
    return Exec(args.get("json") is True, argv=tuple(args.positionals), stdin=stdin,
                templated=templated)


def approval_site(step_id: str, args) -> PipelineApprove:
    prompt = args.get("prompt")
    limit = args.get("limit")
    if limit is True:
        count = 1
    elif isinstance(limit, str):
        number = js.to_number(limit)
        count = 5 if number != number else int(number) if abs(number) != float("inf") else 10**9
    else:
        count = 5
    return PipelineApprove(step_id, prompt if isinstance(prompt, str) else "Approve?",
                           preview=args.get("preview-from-stdin") is True, limit=count,
                           emit=args.get("emit") is True)


def input_site(step_id: str, args, in_step: str | None = None) -> PipelineAsk:
    prompt = args.get("prompt")
    schema_text = args.get("schema")
    schema = json.loads(schema_text) if isinstance(schema_text, str) else DEFAULT_ASK_SCHEMA
    return PipelineAsk(step_id, prompt if isinstance(prompt, str) else "Input required",
                       schema=schema, subject=args.get("subject-from-stdin") is True,
                       emit=args.get("emit") is True, step=in_step)


__all__ = ["Emitter", "compile_pipeline", "emit_stage", "ast"]
