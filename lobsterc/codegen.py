"""AST -> vm Program: constant pool, code, step table, halt table, source map."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lobsterc import ast
from lobsterc.check import BoundStage, check_pipeline
from lobsterc.diagnostics import CompileError
from lobsterc.parse import parse_pipeline
from lobsterc.source import Source, Span
from vm import __version__, js
from vm.codec import seal
from vm.opcodes import OPCODE_VERSION, Op
from vm.program import FORMAT_VERSION, MAGIC, HaltSite, Header, Instr, Program, StepInfo

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
        self.source_map: list[tuple[int, int, int, int] | None] = []
        self.steps: list[StepInfo] = []
        self.halts: list[HaltSite] = []
        self.registers = 1

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
        self.source_map.append(_loc(span))
        return len(self.code) - 1

    def halt(self, site: HaltSite) -> int:
        self.halts.append(site)
        return len(self.halts) - 1

    def step(self, step_id: str, first_pc: int, span: Span | None, file: str = "") -> None:
        self.steps.append(StepInfo(step_id, first_pc, len(self.code) - 1, _loc(span), file))

    def program(self, source_name: str, source_text: str) -> Program:
        header = Header(MAGIC, FORMAT_VERSION, OPCODE_VERSION, __version__, source_name,
                        hashlib.sha256(source_text.encode("utf-8")).hexdigest())
        return seal(Program(header, self.constants, self.code, self.steps, self.halts,
                            self.source_map, self.registers))


def _loc(span: Span | None) -> tuple[int, int, int, int] | None:
    return (span.line, span.col, span.end_line, span.end_col) if span else None


def compile_pipeline(text: str, name: str = "<pipeline>") -> Program:
    """Pipeline text -> sealed Program. Raises CompileError with every diagnostic found."""
    pipeline = parse_pipeline(text, name)
    bound, diags = check_pipeline(pipeline)
    if diags:
        raise CompileError(diags, Source(name, text))
    em = Emitter()
    for index, item in enumerate(bound, start=1):
        first = len(em.code)
        emit_stage(em, item, reg=0, step_id=f"{index}:{item.command.name}")
        em.step(f"{index}:{item.command.name}", first, item.stage.span)
    em.emit(Op.END, 0, span=pipeline.span)
    return em.program(name, text)


def emit_stage(em: Emitter, item: BoundStage, reg: int, step_id: str,
               templated: bool = False) -> None:
    """The instruction one bound stage compiles to, reading and writing register `reg`.
    `templated` stages (workflow pipeline steps) render `${arg}` / `$step.path` in each
    argument word at run time; the words themselves were fixed when the text was parsed."""
    cmd, args, span = item.command, item.args, item.stage.span
    if cmd.lowering == "exec":
        spec = exec_spec(args)
        if templated:
            spec["tpl"] = True
        em.emit(Op.EXEC, reg, em.const(spec), reg, span)
    elif cmd.lowering == "render":
        em.emit(Op.RENDER, reg, em.const(cmd.name), span=span)
    elif cmd.lowering == "approve":
        em.emit(Op.HALT_APPROVE, reg, em.halt(approval_site(step_id, args)), span=span)
    elif cmd.lowering == "ask":
        em.emit(Op.HALT_INPUT, reg, em.halt(input_site(step_id, args)), span=span)
    else:
        spec = [cmd.name, dict(args.flags), list(args.positionals), templated]
        em.emit(Op.STAGE, reg, em.const(spec), reg, span)


def exec_spec(args) -> dict:
    spec: dict[str, Any] = {"json": args.get("json") is True}
    shell = args.get("shell")
    if isinstance(shell, str):
        spec["shell"] = shell
    elif len(args.positionals) == 1 and any(ch.isspace() for ch in args.positionals[0]):
        spec["shell"] = args.positionals[0]  # one positional with whitespace is a shell line
    else:
        spec["argv"] = list(args.positionals)
    mode = args.get("stdin")
    if isinstance(mode, str):
        spec["stdin"] = mode.lower()
    return spec


def approval_site(step_id: str, args) -> HaltSite:
    prompt = args.get("prompt")
    limit = args.get("limit")
    if limit is True:
        count = 1
    elif isinstance(limit, str):
        number = js.to_number(limit)
        count = 5 if number != number else int(number) if abs(number) != float("inf") else 10**9
    else:
        count = 5
    return HaltSite(step_id, "approval", prompt if isinstance(prompt, str) else "Approve?",
                    preview=args.get("preview-from-stdin") is True, limit=count,
                    emit=args.get("emit") is True)


def input_site(step_id: str, args) -> HaltSite:
    prompt = args.get("prompt")
    schema_text = args.get("schema")
    schema = json.loads(schema_text) if isinstance(schema_text, str) else DEFAULT_ASK_SCHEMA
    return HaltSite(step_id, "input", prompt if isinstance(prompt, str) else "Input required",
                    schema=schema, subject=args.get("subject-from-stdin") is True,
                    emit=args.get("emit") is True)


__all__ = ["Emitter", "compile_pipeline", "emit_stage", "ast"]
