"""The diff's view of one compiled version (a `Model`): its steps' plain facts, its gates, its
effects, and which gates precede each effect on every path of the control-flow graph."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs
from attrs import define, field, frozen

from vm.host.commands import COMMANDS
from vm.isa.opcodes import OPS, STEP, Op
from vm.isa.ops import HaltSite
from vm.isa.program import Program
from vm.isa.regions import regions_of


@frozen
class Where:
    """A place in one version: a file (as shown to the user) and a line (0: unknown)."""

    file: str
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@frozen
class Effect:
    label: str  # the step label
    kind: str  # shell | exec | network | llm | state | sub-workflow | marked write
    what: str  # the command, argv[0], file...
    pc: int


@frozen
class Gate:
    label: str
    kind: str  # approval | input
    site: HaltSite
    pc: int


@define
class Model:
    program: Program
    name: str  # how the version is shown: a path, or REV:path
    steps: dict[str, dict[str, Any]] = field(factory=dict)  # label -> facts
    order: list[str] = field(factory=list)
    where: dict[str, Where] = field(factory=dict)
    gates: dict[tuple[str, str], Gate] = field(factory=dict)
    effects: dict[tuple[str, str], Effect] = field(factory=dict)
    guards: dict[tuple[str, str], set[tuple[str, str]]] = field(factory=dict)  # effect -> gates
    defaults: Any = field(factory=dict)  # no INIT_ARGS (a pipeline): no defaults
    cost_limit: Any = None
    reviewed: tuple[str, ...] = ()
    rev: str | None = None  # the git revision the version was read at (its name is REV:path)


def plain(value: Any) -> Any:
    """A payload as JSON-like data: records as dicts (with their class name), tuples as lists."""
    if attrs.has(type(value)):
        out = {"$": type(value).__name__}
        for f in attrs.fields(type(value)):
            out[f.name] = plain(getattr(value, f.name))
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


_NON_WORK = {Op.TRY, Op.END_TRY, Op.JUMP, Op.JUMP_IF_NOT, Op.EVAL_COND, Op.SKIP_STEP,
             Op.HALT_APPROVE, Op.HALT_INPUT, Op.LOOP_NEXT, Op.END, Op.END_WORKFLOW, Op.NOP,
             Op.RETURN, Op.END_BRANCH}


def step_pcs(program: Program, first: int, last: int) -> list[int]:
    """A step's pcs, plus the branch regions of its PARALLEL (they live after the program)."""
    pcs = list(range(first, last + 1))
    structure = regions_of(program)
    for pc in range(first, last + 1):
        if program.code[pc].op == Op.PARALLEL:
            for region in structure.regions(pc):
                pcs += list(range(region.start, region.end + 1))
    return pcs


def step_facts(program: Program, pcs: list[int]) -> dict[str, Any]:
    """What a step is, as plain data: its condition, policy, env, cwd and the work it does."""
    K = program.constants
    facts: dict[str, Any] = {"condition": None, "policy": None, "env": {}, "cwd": None,
                             "runs": []}
    for pc in pcs:
        ins = program.code[pc]
        op = Op(ins.op)
        if op == Op.EVAL_COND:
            facts["condition"] = K[ins.b]
        elif op == Op.TRY:
            facts["policy"] = plain(K[ins.b])
        if op in _NON_WORK:
            continue
        info = OPS[op]
        slot = info.const_slot
        item: dict[str, Any] = {"op": op.name}
        for i, kind in enumerate(info.operands):
            if kind == STEP:
                item["step"] = K[(ins.a, ins.b, ins.c)[i]]
        if slot is not None:
            payload = plain(K[(ins.a, ins.b, ins.c)[slot]])
            if isinstance(payload, dict) and "env" in payload:
                facts["env"].update(payload.pop("env") or {})
                cwd = payload.pop("cwd", None)
                facts["cwd"] = cwd if cwd is not None else facts["cwd"]
            if isinstance(payload, dict) and payload.get("$") == "Parallel":
                payload["branches"] = [b["id"] for b in payload["branches"]]
            if isinstance(payload, dict) and payload.get("$") == "Loop":
                payload.pop("steps", None)
            item["with"] = payload
        if op == Op.CALL:
            item["file"] = _file_at(program, ins.c)
        facts["runs"].append(item)
    return facts


def _file_at(program: Program, pc: int) -> str:
    loc = program.source_map[pc] if 0 <= pc < len(program.source_map) else None
    index = loc[0] if loc else 0
    return program.files[index] if index < len(program.files) else "?"


def _effects_of(program: Program, pc: int) -> list[tuple[str, str]]:
    """(effect kind, what) of one instruction."""
    ins = program.code[pc]
    K = program.constants
    if ins.op == Op.SHELL:
        return [("shell", K[ins.b].run)]
    if ins.op == Op.EXEC:
        spec = K[ins.b]
        if spec.shell is not None:
            return [("shell", spec.shell)]
        return [("exec", (spec.argv or ("?",))[0])]
    if ins.op == Op.STAGE:
        name = K[ins.b].command
        cmd = COMMANDS.get(name)
        cls = cmd.effects if cmd else "none"
        if name == "llm.invoke" or (cmd is not None and cmd.name == "llm.invoke"):
            return [("llm", name)]
        kind = {"network": "network", "writes_state": "state", "local_exec": "exec"}.get(cls)
        return [(kind, name)] if kind else []
    if ins.op == Op.CALL:
        return [("sub-workflow", _file_at(program, ins.c))]
    return []


def build_model(program: Program, name: str, *, marks: Mapping[str, str] | None = None,
                reviewed: tuple[str, ...] = ()) -> Model:
    """The diff's view of one compiled version. `marks`: step label -> its `effects:` value."""
    from lobsterc.tools.effects import Cfg, loop_tails

    marks = marks or {}
    model = Model(program, name, reviewed=reviewed)
    tails = loop_tails(program)
    base = os.path.dirname(name)
    for step in program.steps:
        if step.id in tails:
            continue
        pcs = step_pcs(program, step.first_pc, step.last_pc)
        model.order.append(step.id)
        model.steps[step.id] = step_facts(program, pcs)
        file = name if step.file == 0 or step.file >= len(program.files) \
            else os.path.join(base, program.files[step.file])
        model.where[step.id] = Where(file, step.span[0] if step.span else 0)
        for pc in pcs:
            ins = program.code[pc]
            if ins.op in (Op.HALT_APPROVE, Op.HALT_INPUT):
                site = program.halts[ins.b]
                model.gates[(step.id, site.kind)] = Gate(step.id, site.kind, site, pc)
            for kind, what in _effects_of(program, pc):
                model.effects.setdefault((step.id, kind), Effect(step.id, kind, what, pc))
        if marks.get(step.id) == "write":
            work = [pc for pc in pcs if program.code[pc].op not in _NON_WORK]
            if work:
                model.effects.setdefault((step.id, "marked write"),
                                         Effect(step.id, "marked write", "effects: write",
                                                work[0]))
    prologue = min((step.first_pc for step in program.steps), default=len(program.code))
    for ins in program.code[:prologue]:  # the main workflow's (a sub-workflow's heads its region)
        if ins.op == Op.INIT_ARGS:
            model.defaults = program.constants[ins.a]
        elif ins.op == Op.COST_LIMIT:
            model.cost_limit = program.constants[ins.a]
    cfg = Cfg(program)
    blocked_reach = {key: cfg.forward(blocked=gate.pc) for key, gate in model.gates.items()}
    for key, effect in model.effects.items():
        model.guards[key] = {g for g, reach in blocked_reach.items() if effect.pc not in reach}
    return model
