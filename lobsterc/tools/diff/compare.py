"""The comparison of two versions: every Finding between their Models (gates, effects and the
gates before them, steps, the program's settings), sorted into a Report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
from attrs import define, frozen

from lobsterc.syntax.expr import condition_text
from lobsterc.tools.diff.model import Effect, Model, Where, plain
from lobsterc.tools.diff.renames import match_renames, rename_labels
from lobsterc.tools.diff.rules import SEVERITIES, Finding
from lobsterc.tools.diff.schemas import schema_at_least
from vm.core import json_write
from vm.isa.ops import ApproverRules, HaltSite, PipelineApprove, StepApproval


def _show(value: Any) -> str:
    if value is None:
        return "-"
    text = json_write.json_compact(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


@frozen
class _Shown:
    """What an approval gate shows and who may decide it, whichever kind of gate it is."""

    flag: bool = False  # a pipeline `approve --preview-from-stdin`
    limit: int = 5
    items: Any = None  # a step approval's items (Given)
    preview: Any = None  # a step approval's preview (Given)
    rules: ApproverRules = ApproverRules()

    @staticmethod
    def of(site: HaltSite) -> _Shown:
        if isinstance(site, PipelineApprove):
            return _Shown(site.preview, site.limit)
        if isinstance(site, StepApproval):
            return _Shown(items=site.items, preview=site.preview, rules=site.approvers)
        return _Shown()


_DETAILS = {"defaults": None, "subject": False, "stdin": None, "emit": False}  # and when unset


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
        a_plain = rename_labels(plain(a), self.renames)
        b_plain = plain(b)
        if a.prompt != b.prompt and a_plain["prompt"] != b_plain["prompt"]:
            yield Finding("S603", "warning", f"{name}: prompt changed from {_show(a.prompt)!r} "
                          f"to {_show(b.prompt)!r}", (nkey[0], nkey[1], "prompt"), **at)
        if a.kind == "approval":
            shown = []
            old, new = _Shown.of(a), _Shown.of(b)
            if old.flag and not new.flag:
                shown.append("the preview was removed")
            elif old.flag and new.limit < old.limit:
                shown.append(f"the preview shows {new.limit} items instead of {old.limit}")
            if rename_labels(plain(old.items), self.renames) != plain(new.items):
                shown.append(f"items {_show(_given(old.items))} -> {_show(_given(new.items))}")
            if rename_labels(plain(old.preview), self.renames) != plain(new.preview):
                shown.append(f"preview {_show(_given(old.preview))} -> "
                             f"{_show(_given(new.preview))}")
            if shown:
                yield Finding("S604", "error", f"{name}: {'; '.join(shown)}",
                              (nkey[0], nkey[1], "shown"), **at)
            relaxed = []
            for attr in ("required_approver", "initiated_by"):
                x, y = getattr(old.rules, attr), getattr(new.rules, attr)
                if x is not None and x != y:
                    relaxed.append(f"{attr} {_show(x)} -> {_show(y)}")
            if old.rules.require_different_approver \
                    and not new.rules.require_different_approver:
                relaxed.append("require_different_approver true -> "
                               f"{_show(new.rules.require_different_approver)}")
            if relaxed:
                yield Finding("S605", "error", f"{name}: {'; '.join(relaxed)}",
                              (nkey[0], nkey[1], "approver"), **at)
        else:
            if a_plain["schema"] != b_plain["schema"] and not schema_at_least(b.schema,
                                                                               a.schema):
                yield Finding("S606", "error", f"{name}: the answer schema accepts answers the "
                              f"old one refused ({_show(a.schema)} -> {_show(b.schema)})",
                              (nkey[0], nkey[1], "schema"), **at)
        details = [f for f, unset in _DETAILS.items()
                   if a_plain.get(f, unset) != b_plain.get(f, unset)]
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
            a = rename_labels(old.steps[olabel], self.renames)
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
        if rename_labels(old.defaults, self.renames) != new.defaults:
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
