"""`lobsterc diff`: the safety diff of two versions of a workflow or pipeline, read from the two
compiled programs and their effect analysis (lobsterc.check.effects), never from the text.

A version is summarised as a `Model`: its gates (every HALT_APPROVE / HALT_INPUT site, keyed by
step label and kind), its effects (every side-effecting thing a step does, keyed by step label
and effect kind), which gates dominate each effect on the compiled control-flow graph (every
path from the start to the effect passes the gate), and the plain facts of each step
(condition, policy, env, cwd, what it runs) and of the program (arg defaults, cost limit,
checkpoint TTL). Steps whose label changed but whose content did not are matched as renames
first, so a rename reports nothing. `compare` then yields Findings; RULES names each kind.

Severity: `error` is a weakened safety property (exit 1 unless accepted), `warning` a change a
reviewer should read, `note` a strengthening or neutral fact. A finding has a stable id
(`RULE:subject...`); `--accept ID` or the NEW file's top-level `x-reviewed:` list accepts it.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from attrs import define, field, frozen

from lobsterc.syntax.expr import condition_text
from vm.core import js
from vm.host.commands import COMMANDS
from vm.isa.opcodes import OPS, STEP, Op
from vm.isa.ops import HaltSite
from vm.isa.program import Program

# ---------------------------------------------------------------------------------------------
# rules


@frozen
class DiffRule:
    id: str
    name: str  # a short PascalCase name (SARIF `name`)
    title: str
    help: str  # what to check, in a sentence or two

    @property
    def level(self) -> str:
        """The severity its findings usually have (SARIF defaultConfiguration)."""
        if self.id in ("S601", "S604", "S605", "S606", "S607", "S608", "S616"):
            return "error"
        if self.id in ("S602", "S610", "S617", "S618", "S619"):
            return "note"
        return "warning"


RULES: dict[str, DiffRule] = {r.id: r for r in (
    DiffRule("S601", "GateRemoved", "gate removed",
             "An approval or input gate of the old version is gone: what it guarded now runs "
             "without a person deciding. Restore the gate, or accept the finding after review."),
    DiffRule("S602", "GateAdded", "gate added",
             "A new approval or input gate: a strengthening; nothing to do."),
    DiffRule("S603", "GatePromptChanged", "gate prompt changed",
             "The text a person reads before deciding changed; check that it still says what "
             "the approval lets happen."),
    DiffRule("S604", "GateShowsLess", "gate shows the approver less or something else",
             "The items or preview shown at an approval changed or were reduced: the approver "
             "decides on different evidence."),
    DiffRule("S605", "ApproverRuleRelaxed", "approver rule relaxed",
             "Who may approve was widened: a required approver or initiator was removed or "
             "changed, or require_different_approver was dropped."),
    DiffRule("S606", "InputSchemaLoosened", "input schema loosened",
             "The schema an input answer must satisfy accepts answers the old one refused (or "
             "could not be proved at least as strict)."),
    DiffRule("S607", "EffectMovedBeforeGate", "effect moved before a gate",
             "A side effect that the gate used to precede on every path can now run before "
             "(or without) that gate."),
    DiffRule("S608", "NewEffectWithoutApproval", "new effect before any approval",
             "A step gained a side effect (shell, exec, network, state write, sub-workflow, "
             "LLM call) that no approval gate precedes."),
    DiffRule("S609", "NewEffect", "new effect after an approval",
             "A step gained a side effect; an approval gate precedes it on every path."),
    DiffRule("S610", "EffectMovedAfterGate", "effect moved behind a gate",
             "A side effect is now preceded by a gate that did not precede it: a "
             "strengthening."),
    DiffRule("S611", "StepChanged", "what a step runs changed",
             "A step's command, arguments, stdin or sub-workflow arguments changed."),
    DiffRule("S612", "PolicyChanged", "timeout, retry or on_error changed",
             "A step's timeout, retry or on_error policy changed: retries repeat its effects, "
             "a longer or missing timeout lets it hold the run."),
    DiffRule("S613", "EnvChanged", "env or cwd changed",
             "A step's environment or working directory changed."),
    DiffRule("S614", "ConditionChanged", "condition changed",
             "A step's `when` / `condition` changed: it runs in other cases than before."),
    DiffRule("S615", "DefaultsChanged", "arg defaults changed",
             "The workflow's arg defaults changed."),
    DiffRule("S616", "CostLimitRaised", "cost limit raised or removed",
             "The LLM cost limit was raised, removed or set to warn instead of stop."),
    DiffRule("S617", "CostLimitChanged", "cost limit lowered or added",
             "The LLM cost limit got stricter."),
    DiffRule("S618", "StepAdded", "step added", "A step that the old version does not have."),
    DiffRule("S619", "StepRemoved", "step removed", "A step of the old version is gone."),
    DiffRule("S620", "CheckpointTtlChanged", "checkpoint TTL changed",
             "How long a paused run stays resumable changed."),
    DiffRule("S621", "GateChanged", "gate detail changed",
             "A gate's defaults, subject or emit setting changed."),
)}

SEVERITIES = ("error", "warning", "note")


# ---------------------------------------------------------------------------------------------
# the model of one version

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


def _region(program: Program, start: int) -> range:
    end = start
    while end < len(program.code) and program.code[end].op != Op.END_BRANCH:
        end += 1
    return range(start, end + 1)


def step_pcs(program: Program, first: int, last: int) -> list[int]:
    """A step's pcs, plus the branch regions of its PARALLEL (they live after the program)."""
    pcs = list(range(first, last + 1))
    for pc in range(first, last + 1):
        ins = program.code[pc]
        if ins.op == Op.PARALLEL:
            for branch in program.constants[ins.b].branches:
                pcs += list(_region(program, branch.start))
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
    from lobsterc.check.effects import Cfg, loop_tails

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


# ---------------------------------------------------------------------------------------------
# renames

def _rename(value: Any, renames: Mapping[str, str]) -> Any:
    """`value` with step labels renamed: equal strings, `label/` and `label.` prefixes, and
    `$label` references inside text."""
    if not renames:
        return value
    if isinstance(value, str):
        if value in renames:
            return renames[value]
        for old, new in renames.items():
            if value.startswith(old + "/"):
                value = new + value[len(old):]
            value = re.sub(rf"\${re.escape(old)}(?![\w-])", lambda m: "$" + new, value)
        return value
    if isinstance(value, list):
        return [_rename(v, renames) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, renames) for k, v in value.items()}
    return value


def _short(label: str) -> str:
    return label.rsplit("/", 1)[-1]


def match_renames(old: Model, new: Model) -> dict[str, str]:
    """Old label -> new label for steps that only changed their id (content equal once the
    rename is applied everywhere), in order; a pipeline's `2:head` -> `3:head` is one too."""
    renames: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        gone = [s for s in old.order if s not in new.steps and s not in renames]
        fresh = [s for s in new.order if s not in old.steps and s not in renames.values()]
        for o in gone:
            for n in fresh:
                trial = {**renames, o: n, _short(o): _short(n)}
                if _rename(old.steps[o], trial) == _rename(new.steps[n], renames) and \
                        _gates_equal(old, o, new, n, trial):
                    renames[o] = n
                    if _short(o) != o:
                        renames[_short(o)] = _short(n)
                    changed = True
                    break
            if changed:
                break
    return {o: n for o, n in renames.items() if o in old.steps}


def _gates_equal(old: Model, o: str, new: Model, n: str, renames: Mapping[str, str]) -> bool:
    for kind in ("approval", "input"):
        a, b = old.gates.get((o, kind)), new.gates.get((n, kind))
        if (a is None) != (b is None):
            return False
        if a is not None and _rename(plain(a.site), renames) != plain(b.site):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# findings

@frozen
class Finding:
    rule: str
    severity: str  # error | warning | note
    message: str
    keys: tuple[str, ...]  # what the finding is about (labels, kinds): its identity
    old: Where | None = None
    new: Where | None = None
    accepted: bool = False

    @property
    def id(self) -> str:
        return ":".join((self.rule, *self.keys))

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.id.encode()).hexdigest()[:32]

    @property
    def title(self) -> str:
        return RULES[self.rule].title


def _show(value: Any) -> str:
    if value is None:
        return "-"
    text = js.json_compact(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def _gate_name(key: tuple[str, str]) -> str:
    return f"{key[1]} gate {key[0]}"


class _Compare:
    def __init__(self, old: Model, new: Model) -> None:
        self.old, self.new = old, new
        self.renames = match_renames(old, new)
        self.back = {n: o for o, n in self.renames.items()}

    def old_label(self, new_label: str) -> str:
        return self.back.get(new_label, new_label)

    def new_label(self, old_label: str) -> str:
        return self.renames.get(old_label, old_label)

    def at(self, old_label: str | None, new_label: str | None) -> dict[str, Where | None]:
        return {"old": self.old.where.get(old_label) if old_label else None,
                "new": self.new.where.get(new_label) if new_label else None}

    def run(self) -> Iterator[Finding]:
        yield from self.gates()
        yield from self.effects()
        yield from self.steps()
        yield from self.program()

    # gates -----------------------------------------------------------------------------------
    def gates(self) -> Iterator[Finding]:
        old, new = self.old, self.new
        for key, gate in old.gates.items():
            nkey = (self.new_label(key[0]), key[1])
            if nkey not in new.gates:
                guarded = sorted({e[0] for e, gs in old.guards.items() if key in gs})
                tail = f"; it preceded {', '.join(guarded)}" if guarded else ""
                yield Finding("S601", "error", f"{_gate_name(key)} was removed{tail}", key,
                              **self.at(key[0], None))
                continue
            yield from self.gate_fields(gate.site, new.gates[nkey].site, key, nkey)
        for key in new.gates:
            okey = (self.old_label(key[0]), key[1])
            if okey not in old.gates:
                yield Finding("S602", "note", f"{_gate_name(key)} was added", key,
                              **self.at(None, key[0]))

    def gate_fields(self, a: HaltSite, b: HaltSite, okey, nkey) -> Iterator[Finding]:
        at = self.at(okey[0], nkey[0])
        name = _gate_name(nkey)
        a_plain = _rename(plain(a), self.renames)
        b_plain = plain(b)
        if a.prompt != b.prompt and a_plain["prompt"] != b_plain["prompt"]:
            yield Finding("S603", "warning", f"{name}: prompt changed from {_show(a.prompt)!r} "
                          f"to {_show(b.prompt)!r}", (nkey[0], nkey[1], "prompt"), **at)
        if a.kind == "approval":
            shown = []
            if a.preview and not b.preview:
                shown.append("the preview was removed")
            elif a.preview and b.limit < a.limit:
                shown.append(f"the preview shows {b.limit} items instead of {a.limit}")
            if a_plain["items"] != b_plain["items"]:
                shown.append(f"items {_show(_given(a.items))} -> {_show(_given(b.items))}")
            if a_plain["preview_text"] != b_plain["preview_text"]:
                shown.append(f"preview {_show(_given(a.preview_text))} -> "
                             f"{_show(_given(b.preview_text))}")
            if shown:
                yield Finding("S604", "error", f"{name}: {'; '.join(shown)}",
                              (nkey[0], nkey[1], "shown"), **at)
            relaxed = []
            for attr in ("required_approver", "initiated_by"):
                x, y = getattr(a, attr), getattr(b, attr)
                if x is not None and x != y:
                    relaxed.append(f"{attr} {_show(x)} -> {_show(y)}")
            if a.require_different_approver and not b.require_different_approver:
                relaxed.append("require_different_approver true -> "
                               f"{_show(b.require_different_approver)}")
            if relaxed:
                yield Finding("S605", "error", f"{name}: {'; '.join(relaxed)}",
                              (nkey[0], nkey[1], "approver"), **at)
        else:
            if a_plain["schema"] != b_plain["schema"] and not schema_at_least(b.schema,
                                                                               a.schema):
                yield Finding("S606", "error", f"{name}: the answer schema accepts answers the "
                              f"old one refused ({_show(a.schema)} -> {_show(b.schema)})",
                              (nkey[0], nkey[1], "schema"), **at)
        details = [f for f in ("defaults", "subject", "stdin", "emit")
                   if a_plain[f] != b_plain[f]]
        if details:
            yield Finding("S621", "warning", f"{name}: {', '.join(details)} changed",
                          (nkey[0], nkey[1], "detail"), **at)

    # effects ---------------------------------------------------------------------------------
    def effects(self) -> Iterator[Finding]:
        """Per step: new effect kinds, and gates that stopped (or started) preceding it."""
        old, new = self.old, self.new
        fresh: dict[str, list[Effect]] = {}
        moved: dict[tuple[str, tuple[str, str]], list[Effect]] = {}
        behind: dict[tuple[str, tuple[str, str]], list[Effect]] = {}
        for key, effect in new.effects.items():
            okey = (self.old_label(key[0]), key[1])
            if okey not in old.effects:
                fresh.setdefault(key[0], []).append(effect)
                continue
            guards = new.guards[key]
            before = {(self.new_label(g[0]), g[1]) for g in old.guards[okey]}
            for gate in before - guards:
                if gate in new.gates:
                    moved.setdefault((key[0], gate), []).append(effect)
            for gate in guards - before:
                if (self.old_label(gate[0]), gate[1]) in old.gates:
                    behind.setdefault((key[0], gate), []).append(effect)
        for label, effects in fresh.items():
            approvals = sorted({g[0] for e in effects for g in new.guards[(label, e.kind)]
                                if g[1] == "approval"})
            what = f"step {label} gained {_kinds(effects)}"
            if any(e.kind == "llm" for e in effects):
                limit = new.cost_limit
                what += (f" (cost limit ${limit.get('max_usd')}, {limit.get('action', 'warn')})"
                         if limit else " (no cost limit)")
            if approvals and all(any(g[1] == "approval" for g in new.guards[(label, e.kind)])
                                 for e in effects):
                yield Finding("S609", "warning", f"{what}; approval {', '.join(approvals)} "
                              "precedes it", (label,), **self.at(self.old_label(label), label))
            else:
                yield Finding("S608", "error", f"{what} and no approval gate precedes it",
                              (label,), **self.at(self.old_label(label), label))
        for (label, gate), effects in sorted(moved.items()):
            yield Finding("S607", "error" if gate[1] == "approval" else "warning",
                          f"step {label} ({_kinds(effects)}) can now run before {gate[1]} gate "
                          f"{gate[0]}, which preceded it", (label, gate[0]),
                          **self.at(self.old_label(label), label))
        for (label, gate), effects in sorted(behind.items()):
            yield Finding("S610", "note", f"step {label} ({_kinds(effects)}) now runs after "
                          f"{gate[1]} gate {gate[0]}", (label, gate[0]),
                          **self.at(self.old_label(label), label))

    # steps -----------------------------------------------------------------------------------
    def steps(self) -> Iterator[Finding]:
        old, new = self.old, self.new
        for label in old.order:
            if self.new_label(label) not in new.steps:
                yield Finding("S619", "note", f"step {label} was removed", (label,),
                              **self.at(label, None))
        for label in new.order:
            olabel = self.old_label(label)
            if olabel not in old.steps:
                yield Finding("S618", "note", f"step {label} was added", (label,),
                              **self.at(None, label))
                continue
            a = _rename(old.steps[olabel], self.renames)
            b = new.steps[label]
            at = self.at(olabel, label)
            if a["runs"] != b["runs"]:
                yield Finding("S611", "warning", f"step {label} runs something else: "
                              f"{_delta(a['runs'], b['runs'])}", (label, "runs"), **at)
            if a["policy"] != b["policy"]:
                yield Finding("S612", "warning", f"step {label}: "
                              f"{_delta(a['policy'], b['policy'])}", (label, "policy"), **at)
            if a["env"] != b["env"] or a["cwd"] != b["cwd"]:
                where_a, where_b = ({"env": x["env"], "cwd": x["cwd"]} for x in (a, b))
                yield Finding("S613", "warning", f"step {label}: {_delta(where_a, where_b)}",
                              (label, "env"), **at)
            if a["condition"] != b["condition"]:
                yield Finding("S614", "warning", f"step {label}: condition "
                              f"{_show(condition_text(a['condition']))} -> "
                              f"{_show(condition_text(b['condition']))}",
                              (label, "condition"), **at)

    # program ---------------------------------------------------------------------------------
    def program(self) -> Iterator[Finding]:
        old, new = self.old, self.new
        if _rename(old.defaults, self.renames) != new.defaults:
            yield Finding("S615", "warning", f"arg defaults: {_delta(old.defaults, new.defaults)}",
                          ("args",), Where(old.name), Where(new.name))
        a, b = old.cost_limit, new.cost_limit
        if a != b:
            looser = a is not None and (b is None or b.get("max_usd", 0) > a.get("max_usd", 0)
                                        or (a.get("action") == "stop"
                                            and b.get("action") != "stop"))
            yield Finding("S616" if looser else "S617", "error" if looser else "note",
                          f"cost limit {_show(a)} -> {_show(b)}", ("cost_limit",),
                          Where(old.name), Where(new.name))
        ta, tb = old.program.checkpoint_ttl_ms, new.program.checkpoint_ttl_ms
        if ta != tb:
            yield Finding("S620", "warning" if tb is None or (ta is not None and tb > ta)
                          else "note", f"checkpoint_ttl {_show(ta)} ms -> {_show(tb)} ms",
                          ("checkpoint_ttl",), Where(old.name), Where(new.name))


def _kinds(effects: list[Effect]) -> str:
    return ", ".join(f"{e.kind} {_show(e.what)!r}" if e.kind != "marked write" else e.what
                     for e in effects)


def _given(value: Any) -> Any:
    return value.value if value is not None else None


def _delta(a: Any, b: Any) -> str:
    """The leaves that differ, as `path: old -> new` (at most four)."""
    parts: list[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if x == y:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for key in [*x, *(k for k in y if k not in x)]:
                if key == "$":
                    continue
                if key == "with":
                    walk(x.get(key), y.get(key), path)
                    continue
                walk(x.get(key), y.get(key), f"{path}.{key}" if path else str(key))
            return
        if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (p, q) in enumerate(zip(x, y)):
                name = p.get("op", "").lower() if isinstance(p, dict) else ""
                walk(p, q, f"{path}.{name}" if name else f"{path}[{i}]")
            return
        parts.append(f"{path.lstrip('.') or 'value'} {_show(x)} -> {_show(y)}")

    walk(a, b, "")
    more = f" (and {len(parts) - 4} more)" if len(parts) > 4 else ""
    return "; ".join(parts[:4]) + more


# ---------------------------------------------------------------------------------------------
# input schemas: is NEW at least as strict as OLD?

_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_EQUAL = ("pattern", "format", "const", "multipleOf", "uniqueItems", "$schema", "title",
          "description", "default", "examples")


def schema_at_least(new: Any, old: Any) -> bool:
    """True when every answer `new` accepts, `old` accepts too, as far as a structural check
    of the common draft-07 keywords can tell; anything it cannot judge counts as looser."""
    if new == old or old in (None, True, {}):
        return True
    if new is False:
        return True
    if not isinstance(new, dict) or not isinstance(old, dict):
        return False
    for key, value in old.items():
        if key in _EQUAL and key in ("title", "description", "default", "examples", "$schema"):
            continue
        mine = new.get(key)
        if key == "type":
            want = {value} if isinstance(value, str) else set(value)
            have = {mine} if isinstance(mine, str) else set(mine or ())
            if not have or not have <= want | ({"integer"} if "number" in want else set()):
                return False
        elif key == "required":
            if not set(value) <= set(mine or ()):
                return False
        elif key == "enum":
            if mine is None or any(v not in value for v in mine):
                if not ("const" in new and new["const"] in value):
                    return False
        elif key in _LOWER:
            if mine is None or mine < value:
                return False
        elif key in _UPPER:
            if mine is None or mine > value:
                return False
        elif key == "properties":
            props = mine or {}
            extra_closed = new.get("additionalProperties") is False
            for name, sub in value.items():
                if name in props:
                    if not schema_at_least(props[name], sub):
                        return False
                elif not extra_closed:
                    return False
        elif key == "additionalProperties":
            if value is False:
                if mine is not False:
                    return False
            elif mine is not False and not schema_at_least(mine if mine is not None else True,
                                                           value):
                return False
        elif key == "items":
            if not schema_at_least(mine if mine is not None else True, value):
                return False
        elif key in _EQUAL:
            if mine != value:
                return False
        elif mine != value:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# the whole diff

@define
class Report:
    old: Model
    new: Model
    renames: dict[str, str]
    findings: list[Finding]

    @property
    def weakened(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error" and not f.accepted]

    @property
    def exit_code(self) -> int:
        return 1 if self.weakened else 0


def compare(old: Model, new: Model, accept: tuple[str, ...] = ()) -> Report:
    """Every finding between two versions; ids in `accept` or in NEW's `x-reviewed` are marked
    accepted (a reviewed weakening no longer fails the diff)."""
    cmp = _Compare(old, new)
    ok = set(accept) | set(new.reviewed)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found = [attrs.evolve(f, accepted=f.id in ok or f.fingerprint in ok) for f in cmp.run()]
    found.sort(key=lambda f: (order[f.severity], f.rule, f.id))
    return Report(old, new, cmp.renames, found)


# ---------------------------------------------------------------------------------------------
# loading a version

def load_version(path: str, shown: str | None = None) -> Model:
    """Compile one version (a workflow file, a .pipeline or a .lbc) into its Model. `shown`
    is how findings name the file (default: `path`). Raises CompileError."""
    from lobsterc.tools.cli import compile_target
    from vm.service.frontend import WORKFLOW_EXTENSIONS

    program, _ = compile_target(path)
    marks: dict[str, str] = {}
    reviewed: tuple[str, ...] = ()
    if path.lower().endswith(WORKFLOW_EXTENSIONS):
        from lobsterc.check.checker import check_file
        from lobsterc.check.lint import _index

        loaded, _ = check_file(path, lenient=True)
        if loaded.workflow is not None:
            marks = {label: ref.step.effects for label, ref in
                     _index(loaded.workflow, "", ()).items()
                     if isinstance(ref.step.effects, str)}
        reviewed = reviewed_ids(path)
    return build_model(program, shown or path, marks=marks, reviewed=reviewed)


def reviewed_ids(path: str) -> tuple[str, ...]:
    """The finding ids a workflow file accepts in its top-level `x-reviewed:` key (a list of
    ids, or a mapping of id -> the reviewer's note)."""
    from lobsterc.load import load_document

    data = load_document(path).data
    value = data.get("x-reviewed") if isinstance(data, dict) else None
    if isinstance(value, dict):
        return tuple(str(k) for k in value)
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    if isinstance(value, str):
        return (value,)
    return ()


class RevError(Exception):
    """A `--rev` that git cannot read (not a repository, unknown revision, no such path)."""


def _git(cwd: str, *args: str) -> bytes:
    import subprocess

    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except OSError as exc:
        raise RevError(f"cannot run git: {exc.strerror}") from None
    if done.returncode != 0:
        raise RevError(done.stderr.decode("utf-8", "replace").strip() or f"git {args[0]} failed")
    return done.stdout


def checkout_rev(rev: str, path: str, into: str) -> tuple[str, str]:
    """Write `path` as it is at `rev` (its blob read with `git show REV:PATH`), and every
    sub-workflow it calls, into the directory `into`, mirroring the repository layout.
    Returns (the written path, the name findings show: `REV:path`)."""
    from lobsterc.check.checker import check_file
    from lobsterc.check.lint import walk
    from lobsterc.syntax import ast

    where = os.path.dirname(os.path.abspath(path)) or "."
    top = _git(where, "rev-parse", "--show-toplevel").decode().strip()
    rel = os.path.relpath(os.path.realpath(os.path.abspath(path)), os.path.realpath(top))
    rel = rel.replace(os.sep, "/")
    todo, done = [rel], set()
    while todo:
        name = todo.pop()
        if name in done or name.startswith("../"):
            continue
        done.add(name)
        blob = _git(top, "show", f"{rev}:{name}")
        target = os.path.join(into, *name.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(blob)
        if not name.lower().endswith((".lobster", ".yaml", ".yml", ".json")):
            continue
        try:
            loaded, _ = check_file(target, lenient=True)
        except Exception:  # noqa: BLE001 - the compile that follows reports the problem
            continue
        if loaded.workflow is None:
            continue
        for _, step in walk(loaded.workflow.steps):
            if isinstance(step.kind, ast.SubWorkflow) and "$" not in step.kind.target:
                callee = os.path.normpath(os.path.join(os.path.dirname(name),
                                                       step.kind.target)).replace(os.sep, "/")
                todo.append(callee)
    return os.path.join(into, *rel.split("/")), f"{rev}:{rel}"


# ---------------------------------------------------------------------------------------------
# output

def _where_pair(f: Finding) -> str:
    parts = []
    if f.old is not None:
        parts.append(f"old {f.old}")
    if f.new is not None:
        parts.append(f"new {f.new}")
    return ", ".join(parts)


def _tally(report: Report) -> str:
    counts = {s: sum(f.severity == s for f in report.findings) for s in SEVERITIES}
    accepted = sum(f.accepted for f in report.findings)
    text = (f"{counts['error']} weakened, {counts['warning']} changed, "
            f"{counts['note']} strengthened or neutral")
    return text + (f" ({accepted} accepted after review)" if accepted else "")


def render_text(report: Report) -> str:
    old, new = report.old, report.new
    lines = [f"lobsterc diff {old.name} -> {new.name}",
             f"program sha256:{old.program.hash} -> sha256:{new.program.hash}"
             if old.program.hash != new.program.hash else
             f"program sha256:{new.program.hash} (unchanged)"]
    if report.renames:
        lines.append("renamed: " + ", ".join(f"{o} -> {n}" for o, n in report.renames.items()))
    for f in report.findings:
        mark = " (accepted)" if f.accepted else ""
        lines.append(f"{f.severity}[{f.rule}]{mark}: {f.message}")
        lines.append(f"  at {_where_pair(f)}")
        lines.append(f"  id {f.id}")
    if not report.findings:
        lines.append("no safety-relevant change")
    else:
        lines.append(_tally(report))
    return "\n".join(lines) + "\n"


def as_dict(f: Finding) -> dict[str, Any]:
    def place(w: Where | None) -> dict[str, Any] | None:
        return None if w is None else {"file": w.file, "line": w.line or None}

    return {"id": f.id, "rule": f.rule, "title": f.title, "severity": f.severity,
            "accepted": f.accepted, "message": f.message, "old": place(f.old),
            "new": place(f.new), "fingerprint": f.fingerprint}


def render_json(report: Report) -> str:
    import json

    doc = {"old": {"name": report.old.name, "programHash": report.old.program.hash},
           "new": {"name": report.new.name, "programHash": report.new.program.hash},
           "renamed": report.renames, "weakened": bool(report.weakened),
           "findings": [as_dict(f) for f in report.findings]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def render_markdown(report: Report) -> str:
    old, new = report.old, report.new
    icon = {"error": "**weakened**", "warning": "changed", "note": "note"}
    out = [f"### Workflow safety diff: `{old.name}` → `{new.name}`", ""]
    if report.weakened:
        out.append(f"**{len(report.weakened)} safety propert"
                   f"{'y' if len(report.weakened) == 1 else 'ies'} weakened.** Review each; "
                   "accept a reviewed one with `--accept ID` or `x-reviewed:` in the file.")
    elif report.findings:
        out.append("No safety property weakened (or every weakening was accepted).")
    else:
        out.append("No safety-relevant change.")
    out += ["", f"Program `{old.program.hash[:12]}` → `{new.program.hash[:12]}`"]
    if report.renames:
        out.append("Renamed: " + ", ".join(f"`{o}` → `{n}`" for o, n in report.renames.items()))
    if report.findings:
        out += ["", "| | rule | finding | old | new | id |", "|---|---|---|---|---|---|"]
        for f in report.findings:
            state = icon[f.severity] + (" (accepted)" if f.accepted else "")
            cells = [state, f"{f.rule} {f.title}", f.message.replace("|", "\\|"),
                     f"`{f.old}`" if f.old else "", f"`{f.new}`" if f.new else "", f"`{f.id}`"]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _at_rev(d: Any, tmp: str, rev: str | None) -> tuple[Any, Any, Any]:
    """A compile error of a version: as text shows it, with its Source, and as code scanning
    shows it. A file git wrote under `tmp` is named `REV:path` in text, and is the repository
    path with the revision in the message for code scanning (never the temporary checkout)."""
    from lobsterc.syntax.source import Source

    if rev is None or d.span is None:
        return d, None, d
    for side, name in zip("ab", rev.split("..", 1)):
        root = os.path.join(tmp, side) + os.sep
        if name and d.span.source.startswith(root):
            with open(d.span.source, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            path = d.span.source[len(root):].replace(os.sep, "/")
            shown = attrs.evolve(d, span=attrs.evolve(d.span, source=f"{name}:{path}"))
            scanned = attrs.evolve(d, span=attrs.evolve(d.span, source=path),
                                   message=f"{d.message} (at revision {name})")
            return shown, Source(f"{name}:{path}", text), scanned
    return d, None, d


FORMATS = ("text", "json", "markdown", "sarif", "github")
RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown}


def run_diff(files: list[str], *, rev: str | None = None, fmt: str = "text",
             accept: tuple[str, ...] = (), out: Any = None, err: Any = None) -> int:
    """The `lobsterc diff` command: 0 no weakening (or all accepted), 1 a safety property
    weakened or a version does not compile, 2 usage error."""
    import sys
    import tempfile

    from lobsterc.diagnostics import CompileError, render

    out = out or sys.stdout
    err = err or sys.stderr
    if rev is not None:
        if len(files) != 1 or ".." not in rev or not rev.split("..", 1)[0]:
            err.write("usage: lobsterc diff --rev A..B PATH (B empty: the working tree)\n")
            return 2
    elif len(files) != 2:
        err.write("usage: lobsterc diff OLD NEW | lobsterc diff --rev A..B PATH\n")
        return 2
    accept = tuple(a.strip() for item in accept for a in item.split(",") if a.strip())
    with tempfile.TemporaryDirectory(prefix="lobsterc-diff-") as tmp:
        try:
            if rev is None:
                versions = [(files[0], files[0]), (files[1], files[1])]
            else:
                a, b = rev.split("..", 1)
                versions = [checkout_rev(a, files[0], os.path.join(tmp, "a"))]
                versions.append(checkout_rev(b, files[0], os.path.join(tmp, "b")) if b
                                else (files[0], files[0]))
            for path, _ in versions:
                if not os.path.isfile(path):
                    what = "Is a directory" if os.path.isdir(path) else "No such file"
                    err.write(f"lobsterc: {what}: {path}\n")
                    return 2
            models = []
            for path, shown in versions:
                try:
                    models.append(load_version(path, shown))
                    if shown != path:
                        models[-1].rev = shown.split(":", 1)[0]
                except CompileError as exc:
                    found = [_at_rev(d, tmp, rev) for d in exc.diagnostics]
                    err.write(f"lobsterc: {shown} does not compile:\n")
                    err.writelines(render(d, source) + "\n" for d, source, _ in found)
                    if fmt in ("sarif", "github"):  # what code scanning reads: the errors
                        from lobsterc.tools.sarif import lint_github, lint_sarif

                        lint = lint_sarif if fmt == "sarif" else lint_github
                        out.write(lint([(path, d) for _, _, d in found]))
                    return 1
        except RevError as exc:
            err.write(f"lobsterc: --rev {rev}: {exc}\n")
            return 2
        report = compare(models[0], models[1], accept)
    if fmt == "sarif":
        from lobsterc.tools.sarif import diff_sarif
        out.write(diff_sarif(report))
    elif fmt == "github":
        from lobsterc.tools.sarif import diff_github
        out.write(diff_github(report))
    else:
        out.write(RENDERERS[fmt](report))
    return report.exit_code
