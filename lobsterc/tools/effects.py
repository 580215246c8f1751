"""The safety verifier: the control-flow graph of a compiled Program, and the proof that every
side-effecting step is preceded by an approval gate on every path that reaches it.

The graph is built from the instructions alone (never from the YAML), by the control-flow
kind of each opcode's row in vm/isa/opcodes.py (one rule per kind in `Cfg.RULES`):
  next      fall: pc+1 (HALT_APPROVE included)
  jump      jump: JUMP a; branch: JUMP_IF_NOT r T (both ways, unless the condition is a
            constant)
  loop      loop_enter: LOOP_BEGIN's "no items" edge to c; loop_back: LOOP_NEXT's back edge
  call      enter: CALL into its sub-workflow region; leave: the region's RETURN back to the
            CALL's pc+1; fork: PARALLEL into each branch region; join: END_BRANCH back to
            the PARALLEL's pc+1
  error     every instruction a TRY covers (its body, and the regions the body calls) may
            fail: retry goes back to the body's start, on_error continue to END_TRY's b,
            skip_rest to the end of the current workflow; stop adds no edge (the error
            propagates to an outer TRY, which covers the same pcs, or fails the run)
HALT_APPROVE continues only when approved (a rejection ends the run), so it is the gate.

A step is side-effecting when the workflow file marks it `effects: write`, or, when classes
are checked, when it runs a command whose class needs approval: `writes_state` and `network`
always; `local_exec` (shell steps, exec stages, run branches) only with `strict`. A step
marked `effects: read` or `effects: none` is exempt from the class rule. A step's own
`approval` does not protect it: the gate runs after the step.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from attrs import frozen

from vm.host.commands import COMMANDS
from vm.core.condition import evaluate
from vm.isa.opcodes import (BRANCH, ENTER, EXIT as EXIT_FLOW, FALL, FORK, JOIN, JUMP, LEAVE,
                        LOOP_BACK, LOOP_ENTER, OPS, Op)
from vm.isa.program import Program
from vm.isa.regions import regions_of

EFFECT_CLASSES = ("none", "reads", "reads_state", "writes_state", "local_exec", "network", "halts")
ALWAYS_GATED = ("writes_state", "network")
STRICT_GATED = ("local_exec",)
MARKS = ("write", "read", "none")  # values of a step's `effects:` key
EXIT = -1
_ERROR_COST = 10_000  # per error edge on a path

CONTROL_OPS = {op for op, info in OPS.items() if info.control}


def constant_condition(tree) -> bool | None:
    """The value of a compiled condition that references no step, else None."""
    from lobsterc.syntax.expr import condition_refs

    if condition_refs(tree):
        return None
    return evaluate(tree, lambda step, path: None)


@frozen
class Edge:
    target: int
    kind: str  # next | jump | skip | loop | call | return | error


class Cfg:
    """Successor edges of every pc of a program; EXIT (-1) is the end of the run."""

    def __init__(self, program: Program, *, fold_constants: bool = True) -> None:
        self.program = program
        self.code = program.code
        self.structure = regions_of(program)
        self.regions = self._regions()
        self.edges: dict[int, list[Edge]] = {pc: self._successors(pc, fold_constants)
                                             for pc in range(len(self.code))}
        self._add_error_edges()

    # regions: the program's own (vm/isa/regions.py) ---------------------------------------
    def _regions(self) -> dict[int, list[tuple[int, int]]]:
        """CALL or PARALLEL pc -> the (start, end pc) of each region it enters: a CALL's
        region ends at its RETURN, a branch region at its END_BRANCH."""
        return {pc: [(r.start, r.end) for r in regions]
                for pc, regions in self.structure.entered.items()}

    def _return_target(self, end_pc: int) -> int:
        return self.structure.exits.get(end_pc, EXIT)

    def workflow_end(self, pc: int) -> int:
        """The END_WORKFLOW / RETURN that ends the workflow `pc` belongs to."""
        return self.structure.workflow_end[pc] if 0 <= pc < len(self.code) else EXIT

    # edges: one rule per control-flow kind ---------------------------------------------------
    def _successors(self, pc: int, fold: bool) -> list[Edge]:
        ins = self.code[pc]
        info = OPS[Op(ins.op)]
        operands = (ins.a, ins.b, ins.c)
        targets = [operands[slot] for slot in info.targets]
        return self.RULES[info.flow](self, pc, targets, fold)

    def _fall(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(pc + 1, "next")]

    def _exit(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(EXIT, "next")]

    def _jump(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(targets[0], "jump")]

    def _branch(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        nxt, skip = Edge(pc + 1, "next"), Edge(targets[0], "skip")
        value = self._constant_register(pc, self.code[pc].a) if fold else None
        if value is True:
            return [nxt]
        if value is False:
            return [skip]
        return [nxt, skip]

    def _loop_enter(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(pc + 1, "next"), Edge(targets[0], "loop")]

    def _loop_back(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(targets[0], "loop"), Edge(pc + 1, "next")]

    def _enter(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(targets[0], "call")]

    def _fork(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(start, "call") for start, _ in self.regions.get(pc, [])]

    def _leave(self, pc: int, targets: list[int], fold: bool) -> list[Edge]:
        return [Edge(self._return_target(pc), "return")]

    RULES = {FALL: _fall, EXIT_FLOW: _exit, JUMP: _jump, BRANCH: _branch,
             LOOP_ENTER: _loop_enter, LOOP_BACK: _loop_back, ENTER: _enter, FORK: _fork,
             LEAVE: _leave, JOIN: _leave}

    def _constant_register(self, pc: int, reg: int) -> bool | None:
        prev = self.code[pc - 1] if pc > 0 else None
        if prev is None or prev.op != Op.EVAL_COND or prev.a != reg:
            return None
        return constant_condition(self.program.constants[prev.b])

    def _covered(self, body: Iterable[int]) -> list[int]:
        """A TRY body's pcs plus every region it calls, transitively."""
        seen: list[int] = []
        todo = list(body)
        done: set[int] = set()
        while todo:
            pc = todo.pop(0)
            if pc in done:
                continue
            done.add(pc)
            seen.append(pc)
            for start, end in self.regions.get(pc, ()):
                todo.extend(range(start, end + 1))
        return seen

    def _add_error_edges(self) -> None:
        K = self.program.constants
        for pc, ins in enumerate(self.code):
            if ins.op != Op.TRY:
                continue
            policy = K[ins.b]
            end_try = ins.c
            targets = []
            if policy.retry is not None:
                targets.append(pc + 1)
            if policy.on_error == "continue":
                targets.append(self.code[end_try].b)
            elif policy.on_error == "skip_rest":
                targets.append(self.workflow_end(end_try))
            for covered in self._covered(range(pc + 1, end_try)):
                for target in targets:
                    edge = Edge(target, "error")
                    if edge not in self.edges[covered]:
                        self.edges[covered].append(edge)

    # queries ---------------------------------------------------------------------------------
    def forward(self, start: int = 0, *, blocked: int | None = None) -> set[int]:
        """Every pc reachable from `start` (the exit left out); the instruction at `blocked`
        is reached but not passed."""
        seen = {start}
        todo = [start]
        while todo:
            pc = todo.pop()
            if pc == blocked or pc == EXIT:
                continue
            for edge in self.edges[pc]:
                if edge.target not in seen:
                    seen.add(edge.target)
                    todo.append(edge.target)
        seen.discard(EXIT)
        return seen

    def reachable(self, start: int = 0, *, stop_at: Iterable[Op] = ()
                  ) -> dict[int, tuple[int, str] | None]:
        """Cheapest paths from `start`: pc -> (predecessor pc, edge kind), None for `start`.
        Instructions whose op is in `stop_at` are reached but not passed."""
        stops = {int(op) for op in stop_at}
        parent: dict[int, tuple[int, str] | None] = {start: None}
        cost = {start: 0}
        heap = [(0, start)]
        done: set[int] = set()
        while heap:  # Dijkstra: an error edge costs more, so paths prefer steps that succeed
            here, pc = heapq.heappop(heap)
            if pc in done:
                continue
            done.add(pc)
            if pc == EXIT or self.code[pc].op in stops:
                continue
            for edge in self.edges[pc]:
                step = here + (_ERROR_COST if edge.kind == "error" else 1)
                if step < cost.get(edge.target, step + 1):
                    cost[edge.target] = step
                    parent[edge.target] = (pc, edge.kind)
                    heapq.heappush(heap, (step, edge.target))
        return parent


def path_to(parent: Mapping[int, tuple[int, str] | None], pc: int) -> list[tuple[int, str]]:
    """The breadth-first path to `pc`, as (pc, kind of the edge that entered it)."""
    out = []
    at = pc
    while True:
        entry = parent[at]
        out.append((at, entry[1] if entry else "start"))
        if entry is None:
            break
        at = entry[0]
    out.reverse()
    return out


def step_labels(program: Program) -> list[str | None]:
    """pc -> the label of the step block it belongs to (None outside steps)."""
    labels: list[str | None] = [None] * len(program.code)
    for step in program.steps:
        for pc in range(step.first_pc, step.last_pc + 1):
            labels[pc] = step.id
    return labels


def describe_path(program: Program, path: list[tuple[int, str]]) -> str:
    """Step labels along a path: `build -> check (skipped) -> deploy`. Consecutive pcs of one
    step collapse; a loop's tail block is shown as its loop. Notes: `skipped` (its condition
    was false), `no items` (a for_each over an empty list), `fails` (left by an error edge)."""
    tails = loop_tails(program)
    labels = [_shown(label, tails) for label in step_labels(program)]
    names: list[str] = []
    notes: list[set[str]] = []

    def note(label: str | None, text: str) -> None:
        for i in range(len(names) - 1, -1, -1):
            if names[i] == label:
                notes[i].add(text)
                return

    prev: int | None = None
    for pc, kind in path:
        label = labels[pc] if 0 <= pc < len(labels) else None
        if prev is not None and kind == "error":
            note(labels[prev], "fails")
        if prev is not None and kind == "loop" and program.code[prev].op == Op.LOOP_BEGIN:
            note(labels[prev], "no items")
        prev = pc
        if label is None:
            continue
        if not names or names[-1] != label:
            names.append(label)
            notes.append(set())
        if program.code[pc].op == Op.SKIP_STEP:
            notes[-1].add("skipped")
    parts = [f"{name} ({', '.join(sorted(n))})" if n else name for name, n in zip(names, notes)]
    return " -> ".join(parts)


def loop_tails(program: Program) -> set[str]:
    """Labels of the blocks that hold a loop's LOOP_NEXT (`each/next`): not steps."""
    return {s.id for s in program.steps if program.code[s.first_pc].op == Op.LOOP_NEXT}


def _shown(label: str | None, tails: set[str]) -> str | None:
    return label.rsplit("/", 1)[0] if label is not None and label in tails else label


@frozen
class EffectSite:
    pc: int
    label: str
    reason: str  # why the step counts as side-effecting


def command_class(program: Program, pc: int) -> tuple[str, str] | None:
    """(effect class, what runs) of one instruction, or None for control and data moves."""
    ins = program.code[pc]
    K = program.constants
    if ins.op in (Op.SHELL, Op.EXEC):
        return "local_exec", "a shell command" if ins.op == Op.SHELL else "exec"
    if ins.op == Op.STAGE:
        name = K[ins.b].command
        cmd = COMMANDS.get(name)
        return (cmd.effects if cmd else "none"), name
    if ins.op == Op.PARALLEL:  # the worst of what its branch regions run
        worst: tuple[str, str] | None = None
        for region in regions_of(program).regions(pc):
            for at in range(region.start, region.end):
                item = command_class(program, at)
                if item is not None and (worst is None or _rank(item[0]) > _rank(worst[0])):
                    worst = item
        return worst
    return None


def _rank(cls: str) -> int:
    return 2 if cls in ALWAYS_GATED else 1 if cls in STRICT_GATED else 0


_CLASS_WORDS = {"writes_state": "writes state", "network": "uses the network",
                "local_exec": "runs a local program"}


def effect_sites(program: Program, marks: Mapping[str, str], *, classes: bool = True,
                 strict: bool = False) -> list[EffectSite]:
    """The first side-effecting instruction of every side-effecting step (see the module
    docstring for the definition)."""
    gated = set(ALWAYS_GATED) | (set(STRICT_GATED) if strict else set())
    sites = []
    for step in program.steps:
        mark = marks.get(step.id)
        if mark in ("read", "none"):
            continue
        block = range(step.first_pc, step.last_pc + 1)
        if mark == "write":
            pc = next((p for p in block if program.code[p].op not in CONTROL_OPS), None)
            if pc is not None:
                sites.append(EffectSite(pc, step.id, "it is marked `effects: write`"))
            continue
        if not classes:
            continue
        for pc in block:
            found = command_class(program, pc)
            if found is not None and found[0] in gated:
                cls, what = found
                sites.append(EffectSite(pc, step.id, f"{what} {_CLASS_WORDS[cls]} ({cls})"))
                break
    return sites


@frozen
class Violation:
    label: str
    pc: int
    path: str  # `build -> deploy`
    reason: str

    @property
    def message(self) -> str:
        return f"step {self.label} can run without approval: {self.path}"


def verify_approvals(program: Program, marks: Mapping[str, str], *, classes: bool = True,
                     strict: bool = False) -> list[Violation]:
    """Every side-effecting step that some path from the start reaches without passing an
    HALT_APPROVE, with the shortest such path. Empty: the property is proved."""
    cfg = Cfg(program)
    parent = cfg.reachable(0, stop_at=(Op.HALT_APPROVE,))
    out = []
    for site in effect_sites(program, marks, classes=classes, strict=strict):
        if site.pc in parent:
            path = describe_path(program, path_to(parent, site.pc))
            out.append(Violation(site.label, site.pc, path, site.reason))
    return out
