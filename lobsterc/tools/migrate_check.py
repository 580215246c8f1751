"""Whether a paused run may move onto a new program (`lobster migrate`): the compiler's half of
vm.service.migrate, reached through the Frontend's `check_migration`.

A move is sound when all three hold:
1. the halt site exists in the new program (same step label, same gate kind) and is unchanged;
2. nothing before the gate would have run differently: the steps on a path from the start to
   the gate (and, when the run is past the first item of a for_each it is inside, every step
   of that for_each: its earlier iterations ran past the gate) are the same steps with the
   same content, and the prologue (arg defaults, cost limit) is unchanged;
3. every step result that the new program reads after the gate is in the frame (with the
   reference's path present in it), is produced after the gate, or is a loop variable.
Then `pc_map` places the frame's pcs (the next pc, loop, call and try sites) in the new
program. The safety diff (lobsterc.tools.diff) of the two programs says what changes after the
gate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lobsterc.tools.effects import Cfg, step_labels
from lobsterc.tools.diff.compare import compare
from lobsterc.tools.diff.model import build_model, plain, step_facts, step_pcs
from lobsterc.tools.diff.render import render_text
from lobsterc.tools.diff.versions import reviewed_ids
from vm.core import js
from vm.engine.refs import REF, lookup
from vm.isa.frame import Frame
from vm.isa.opcodes import CONST, HALT, OPS, STEP, Op
from vm.isa.program import Program
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.service.migrate import MigrationCheck


def _halt_pc(program: Program, index: int) -> int | None:
    for pc, ins in enumerate(program.code):
        if ins.op in (Op.HALT_APPROVE, Op.HALT_INPUT) and ins.b == index:
            return pc
    return None


def _backward(cfg: Cfg, target: int) -> set[int]:
    preds: dict[int, list[int]] = {}
    for pc, edges in cfg.edges.items():
        for edge in edges:
            preds.setdefault(edge.target, []).append(pc)
    seen = {target}
    todo = [target]
    while todo:
        pc = todo.pop()
        for prev in preds.get(pc, ()):
            if prev not in seen:
                seen.add(prev)
                todo.append(prev)
    return seen


def _before(program: Program, halt_pc: int, loop_labels: list[str]) -> set[str]:
    """Labels of the steps that run on a path from the start to the gate, and of every step of
    the loops the run is inside."""
    cfg = Cfg(program)
    on_path = cfg.forward(blocked=halt_pc) & _backward(cfg, halt_pc)
    labels = step_labels(program)
    found = {labels[pc] for pc in on_path if labels[pc] is not None}
    for loop in loop_labels:
        found |= {s.id for s in program.steps if s.id == loop or s.id.startswith(loop + "/")}
    return found


def _content(program: Program, label: str) -> Any:
    step = next(s for s in program.steps if s.id == label)
    pcs = step_pcs(program, step.first_pc, step.last_pc)
    halts = [plain(program.halts[program.code[pc].b]) for pc in pcs
             if program.code[pc].op in (Op.HALT_APPROVE, Op.HALT_INPUT)]
    ops = [program.code[pc].op for pc in range(step.first_pc, step.last_pc + 1)]
    return step_facts(program, pcs), halts, ops


def _prologue(program: Program) -> list[Any]:
    return [program.constants[ins.a] for ins in program.code
            if ins.op in (Op.INIT_ARGS, Op.COST_LIMIT)]


def _refs(value: Any) -> Iterator[tuple[str, list[str]]]:
    """(step id, path) of every step reference in a payload: `$id.path` in text, and the
    `["ref", id, [path]]` nodes of compiled conditions."""
    if isinstance(value, str):
        for m in REF.finditer(value):
            yield m[1], m[2][1:].split(".")
    elif isinstance(value, list):
        if len(value) == 3 and value[0] == "ref" and isinstance(value[1], str) \
                and isinstance(value[2], list):
            yield value[1], [str(p) for p in value[2]]
        else:
            for item in value:
                yield from _refs(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _refs(item)


def _reads_and_writes(program: Program, pcs: set[int]) -> tuple[set[tuple[str, str]], set[str]]:
    """The references the instructions at `pcs` read ((step, dotted path)), and the step ids
    and loop variables they bind."""
    K = program.constants
    reads: set[tuple[str, str]] = set()
    binds: set[str] = set()
    for pc in pcs:
        ins = program.code[pc]
        info = OPS[Op(ins.op)]
        for kind, value in zip(info.operands, (ins.a, ins.b, ins.c)):
            if kind == STEP:
                binds.add(K[value])
            elif kind == CONST:
                payload = plain(K[value])
                if isinstance(payload, dict) and payload.get("$") == "Loop":
                    binds |= {payload["item_var"], payload["index_var"]}
                if isinstance(payload, dict) and payload.get("$") == "Parallel":
                    binds |= {b["id"] for b in payload["branches"]}
                reads |= {(step, ".".join(path)) for step, path in _refs(payload)}
            elif kind == HALT:
                site = plain(program.halts[value])
                reads |= {(step, ".".join(path)) for step, path in _refs(site)}
    return reads, binds


def _after(program: Program, halt_pc: int) -> set[int]:
    cfg = Cfg(program)
    return cfg.forward(halt_pc + 1) if halt_pc + 1 < len(program.code) else set()


def _all_results(frame: Frame) -> dict[str, Any]:
    results = {}
    for call in frame.calls:
        results.update(call.results)
    results.update(frame.results)
    return results


def check_migration(old: Program, new: Program, frame: Frame, accept: tuple[str, ...] = (),
                    source: str | None = None) -> MigrationCheck:
    """Whether `frame`, paused in `old`, may continue in `new` (see the module docstring), the
    safety diff, and where the frame's pcs land in `new`. `source`: the new version's workflow
    file, whose `x-reviewed:` ids count as accepted."""
    if source is not None and source.lower().endswith(WORKFLOW_EXTENSIONS):
        accept = (*accept, *reviewed_ids(source))
    reasons: list[str] = []
    checked: list[str] = []
    pending = frame.pending
    site = old.halts[pending.halt] if pending is not None and pending.halt < len(old.halts) \
        else None
    old_pc = _halt_pc(old, pending.halt) if site is not None else None
    if site is None or old_pc is None:
        return MigrationCheck(False, ("the paused frame names no halt of its program",))
    gate = f"{site.kind} gate {site.id}"
    match = [i for i, s in enumerate(new.halts) if s.id == site.id and s.kind == site.kind]
    if not match:
        reasons.append(f"the {gate} does not exist in the new program")
        return MigrationCheck(False, tuple(reasons), gate=gate, diff=_diff(old, new, accept)[0])
    index = match[0]
    new_pc = _halt_pc(new, index)
    if plain(new.halts[index]) != plain(site):
        reasons.append(f"the {gate} changed (what the person was asked is not what the new "
                       "program asks)")
    checked.append(f"the {gate} exists in the new program, unchanged")
    labels_old = step_labels(old)
    loops = [labels_old[loop.site] for loop in frame.loops  # only loops past their first item
             if loop.index > 0 and 0 <= loop.site < len(old.code) and labels_old[loop.site]]
    before_old = _before(old, old_pc, loops)
    before_new = _before(new, new_pc, loops) if new_pc is not None else set()
    for label in sorted(before_new - before_old):
        reasons.append(f"step {label} would run before the gate in the new program, and did "
                       "not run in this paused run")
    for label in sorted(before_old - before_new):
        reasons.append(f"step {label} ran before the gate, but the new program would not run "
                       "it there")
    for label in sorted(before_old & before_new):
        if _content(old, label) != _content(new, label):
            reasons.append(f"step {label} ran before the gate, and the new program changes it")
    if _prologue(old) != _prologue(new):
        reasons.append("the arg defaults or the cost limit changed (the run began with the old "
                       "ones)")
    if not reasons:
        checked.append(f"the {len(before_old)} steps before it are unchanged")
    # results the rest of the new program reads
    after = _after(new, new_pc) if new_pc is not None else set()
    reads, binds = _reads_and_writes(new, after)
    old_reads, _ = _reads_and_writes(old, _after(old, old_pc))
    results = _all_results(frame)
    binds.add(site.step or "")
    for loop in frame.loops:
        payload = old.constants[old.code[loop.site].b]
        binds |= {payload.item_var, payload.index_var}
    missing = 0
    for step, path in sorted(reads):
        if step in binds or (step, path) in old_reads:
            continue
        if step not in results:
            reasons.append(f"the new program reads ${step}.{path} after the gate, and the paused "
                           f"run has no result for step {step}")
            missing += 1
        elif lookup(results[step], path.split(".")) is js.UNDEFINED:
            reasons.append(f"the new program reads ${step}.{path} after the gate, and the result "
                           f"of step {step} in the paused run has no such field")
            missing += 1
    if not missing:
        checked.append("every step result the new program reads after the gate is in the frame "
                       "or produced after it")
    text, weakened = _diff(old, new, accept)
    if reasons:
        return MigrationCheck(False, tuple(reasons), tuple(checked), text, weakened, gate=gate)
    pc_map = {old_pc: new_pc, old_pc + 1: new_pc + 1}
    for label in before_old:
        a = next(s for s in old.steps if s.id == label)
        b = next(s for s in new.steps if s.id == label)
        if a.last_pc - a.first_pc == b.last_pc - b.first_pc:
            for pc in range(a.first_pc, a.last_pc + 1):
                pc_map.setdefault(pc, b.first_pc + pc - a.first_pc)
    return MigrationCheck(True, (), tuple(checked), text, weakened, pc_map, index, gate)


def _diff(old: Program, new: Program, accept: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    report = compare(build_model(old, f"program {old.hash[:12]}"),
                     build_model(new, f"program {new.hash[:12]}"), accept)
    return render_text(report), tuple(f.id for f in report.weakened)
