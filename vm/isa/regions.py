"""The structure of a Program, found in one pass and kept: the code regions a CALL or a PARALLEL
enters (each ending in its RETURN / END_BRANCH), the LOOP_BEGIN / LOOP_NEXT and TRY / END_TRY
pairs, and the instruction that ends each pc's workflow. verify, dis, the effect checker and
the interpreter all read `regions_of(program)`; none of them scans for a block's end again."""

from __future__ import annotations

import weakref

from vm.core.records import frozen
from vm.isa.opcodes import Op
from vm.isa.program import Program

ENDS = (Op.END, Op.END_WORKFLOW, Op.RETURN)  # the instructions that end a workflow
LAST = (*ENDS, Op.END_BRANCH)  # ... or a branch region
NONE = -1  # no such pc


@frozen
class Region:
    """Code that a CALL (kind "call") or one branch of a PARALLEL (kind "branch") enters at
    `start` and leaves at `end`, its RETURN / END_BRANCH."""

    kind: str
    entry: int  # pc of the CALL / PARALLEL
    start: int
    end: int
    name: str  # the calling step's id, or the branch's id


class Regions:
    """What `regions_of` found. A region whose end is missing or wrong is left out and named
    in `problems` (verify refuses such a program; the other readers see what is there)."""

    def __init__(self, program: Program) -> None:
        code, K = program.code, program.constants
        n = len(code)
        self.entered: dict[int, tuple[Region, ...]] = {}  # CALL / PARALLEL pc -> its regions
        self.exits: dict[int, int] = {}  # RETURN / END_BRANCH pc -> where control comes back
        self.loops: dict[int, int] = {}  # LOOP_BEGIN pc -> its LOOP_NEXT
        self.tries: dict[int, int] = {}  # TRY pc -> its END_TRY
        self.problems: list[str] = []
        # pc -> the next pc at or after it that ends a workflow (ENDS), or a region (LAST)
        self.workflow_end = [NONE] * (n + 1)
        next_last = [NONE] * (n + 1)
        for pc in range(n - 1, -1, -1):
            op = code[pc].op
            self.workflow_end[pc] = pc if op in ENDS else self.workflow_end[pc + 1]
            next_last[pc] = pc if op in LAST else next_last[pc + 1]
        for pc, ins in enumerate(code):
            if ins.op == Op.CALL:
                # a CALL's region runs to the first workflow end after its start
                end = self.workflow_end[ins.c] if 0 <= ins.c < n else NONE
                if end == NONE or code[end].op != Op.RETURN or K[code[end].a] != K[ins.a]:
                    self.problems.append(f"pc {pc}: CALL region does not end in a RETURN of "
                                         "its step")
                    continue
                self._enter(Region("call", pc, ins.c, end, K[ins.a]))
            elif ins.op == Op.PARALLEL:
                for branch in K[ins.b].branches:
                    start = branch.start
                    end = next_last[start] if 0 <= start < n else NONE
                    if end == NONE or code[end].op != Op.END_BRANCH \
                            or K[code[end].a] != branch.id:
                        self.problems.append(f"pc {pc}: branch {branch.id!r} is not a region "
                                             "ending in its END_BRANCH")
                        continue
                    self._enter(Region("branch", pc, start, end, branch.id))
            elif ins.op == Op.TRY:
                end = ins.c
                if not pc < end < n or code[end].op != Op.END_TRY or K[code[end].a] != K[ins.a]:
                    self.problems.append(f"pc {pc}: TRY does not pair with an END_TRY of its "
                                         "step")
                    continue
                self.tries[pc] = end
            elif ins.op == Op.LOOP_BEGIN:
                tail = ins.c - 1
                if not pc < tail < n or code[tail].op != Op.LOOP_NEXT \
                        or K[code[tail].a] != K[ins.a] or not pc < code[tail].b < ins.c:
                    self.problems.append(f"pc {pc}: LOOP_BEGIN does not pair with a LOOP_NEXT "
                                         "of its loop")
                    continue
                self.loops[pc] = tail

    def _enter(self, region: Region) -> None:
        self.entered[region.entry] = (*self.entered.get(region.entry, ()), region)
        self.exits.setdefault(region.end, region.entry + 1)  # the first entry wins

    def regions(self, pc: int) -> tuple[Region, ...]:
        """The regions the instruction at `pc` enters (none for most)."""
        return self.entered.get(pc, ())

    def branch(self, pc: int, branch_id: str) -> Region:
        """The region of one branch of the PARALLEL at `pc`."""
        return next(r for r in self.entered[pc] if r.name == branch_id)


_FOUND: dict[int, tuple[weakref.ref, Regions]] = {}


def regions_of(program: Program) -> Regions:
    """The structure of `program`, computed on first use and kept while the program lives
    (verify computes it as a program loads)."""
    key = id(program)
    found = _FOUND.get(key)
    if found is not None and found[0]() is program:
        return found[1]
    regions = Regions(program)
    _FOUND[key] = (weakref.ref(program, lambda _, key=key: _FOUND.pop(key, None)), regions)
    return regions
