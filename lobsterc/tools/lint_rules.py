"""Lint's warning rules over the AST of a workflow file (and the approval proof of a pipeline):
one small generator per rule, each given a LintContext. The registry is lobsterc.tools.lint.RULES;
the rules about values spliced into code are in lobsterc.tools.lint_injection."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from attrs import define, field, frozen

from lobsterc.check.stages import did_you_mean
from lobsterc.diagnostics import Diagnostic
from lobsterc.syntax import ast
from lobsterc.syntax.source import Span
from vm.core import json_write
from vm.engine.refs import ARG, env_name


@frozen
class Rule:
    code: str
    title: str
    check: Callable[[LintContext], Iterator[Diagnostic]]
    needs_program: bool = False


@frozen
class StepRef:
    """The step a compiled step label came from (in this file or a callee)."""

    label: str
    step: ast.Step


@define
class LintContext:
    path: str
    wf: ast.Workflow | None = None  # for workflow files
    program: Any = None  # the compiled Program, when the file compiles
    steps: dict[str, StepRef] = field(factory=dict)  # label -> StepRef (this file and callees)
    require_approval: bool = False
    strict: bool = False


def walk(steps: tuple[ast.Step, ...], prefix: str = "") -> Iterator[tuple[str, ast.Step]]:
    """(label, step) for every step and for_each sub-step of one file, in order."""
    for step in steps:
        label = f"{prefix}{step.id}"
        yield label, step
        if isinstance(step.kind, ast.ForEach):
            yield from walk(step.kind.steps, f"{label}/")


def _can_hang(kind: ast.StepKind) -> bool:
    """A step that waits on something outside the run: a shell line, or a pipeline with an
    exec stage or a gateway call."""
    if isinstance(kind, ast.Shell):
        return True
    if not isinstance(kind, ast.PipelineStep) or kind.pipeline.parsed is None:
        return False
    return any(item.command.effects in ("local_exec", "network") for item in kind.pipeline.bound)


def rule_timeouts(ctx: LintContext) -> Iterator[Diagnostic]:
    """W302: a shell step, a pipeline step with an exec or gateway stage, or a parallel step
    without timeout_ms (the file format has no workflow-wide timeout, so nothing else bounds
    it but the caller's timeoutMs)."""
    for _, step in walk(ctx.wf.steps):
        if step.policy is not None and step.policy.timeout_ms is not ast.ABSENT:
            continue
        kind = step.kind
        if isinstance(kind, ast.Parallel):
            if kind.timeout_ms is not ast.ABSENT:
                continue
            what = "parallel step"
        elif not _can_hang(kind):
            continue
        else:
            what = "shell step" if isinstance(kind, ast.Shell) else "pipeline step"
        yield Diagnostic("W302", f"{what} {step.id} has no timeout_ms", step.span,
                         help="add `timeout_ms: <milliseconds>`: a command that hangs holds "
                              "the run until the caller's timeoutMs", severity="warning")


def rule_unused_args(ctx: LintContext) -> Iterator[Diagnostic]:
    """W303: an arg that nothing uses: no `${name}` in any value, no LOBSTER_ARG_<NAME>, and
    no LOBSTER_ARGS_JSON (which hands every arg over)."""
    wf = ctx.wf
    texts = list(wf.texts())
    if any("LOBSTER_ARGS_JSON" in t for t in texts):
        return
    used = {m[1] for t in texts for m in ARG.finditer(t)}
    env = "\n".join(texts)
    for name in wf.args:
        var = f"LOBSTER_ARG_{env_name(name)}"
        if name in used or re.search(rf"\b{re.escape(var)}\b", env):
            continue
        yield Diagnostic("W303", f"arg '{name}' is never used", wf.loc.key_span("args", name),
                         help=f"reference it as ${{{name}}} or ${var}, or remove it",
                         severity="warning")


def rule_constant_conditions(ctx: LintContext) -> Iterator[Diagnostic]:
    """W304: a condition that references no step and is always true. (One that is always
    false makes its step unreachable: W305 reports that.)"""
    from lobsterc.tools.effects import constant_condition

    for _, step in walk(ctx.wf.steps):
        when = step.when
        if when is not None and when.tree is not None and constant_condition(when.tree) is True:
            yield Diagnostic("W304", "condition is always true", when.span,
                             help=f"remove `{when.key}`: step {step.id} always runs",
                             severity="warning")


def rule_effects_values(ctx: LintContext) -> Iterator[Diagnostic]:
    """W307: `effects:` takes write, read or none."""
    from lobsterc.tools.effects import MARKS

    for _, step in walk(ctx.wf.steps):
        value = step.effects
        if value is not ast.ABSENT and value not in MARKS:
            shown = json_write.to_text(value)
            yield Diagnostic("W307", f"unknown effects value '{shown}'", step.loc.span("effects"),
                             help=did_you_mean(str(shown), MARKS) or "use write, read or none",
                             severity="warning")


def rule_unreachable(ctx: LintContext) -> Iterator[Diagnostic]:
    """W305: a step whose execution no path of the compiled program reaches, a conditional
    jump on a constant condition taking only its feasible edge. Steps inside an unreachable
    step (loop sub-steps, a sub-workflow's steps) are not reported again."""
    from lobsterc.tools.effects import CONTROL_OPS, Cfg, constant_condition, loop_tails

    program = ctx.program
    reached = Cfg(program).reachable(0)
    tails = loop_tails(program)
    reported: list[str] = []
    for info in program.steps:
        if info.id in tails or info.id not in ctx.steps:
            continue
        body = [pc for pc in range(info.first_pc, info.last_pc + 1)
                if program.code[pc].op not in CONTROL_OPS]
        if not body or any(pc in reached for pc in body):
            continue
        if any(info.id.startswith(f"{done}/") for done in reported):
            continue
        reported.append(info.id)
        step = ctx.steps[info.id].step
        cond = step.when.tree if step.when is not None else None
        why = ("its condition is always false" if cond is not None
               and constant_condition(cond) is False else "no path from the start reaches it")
        yield Diagnostic("W305", f"step {step.id} never runs", step.span, help=why,
                         severity="warning")


def rule_approvals(ctx: LintContext) -> Iterator[Diagnostic]:
    """W306: the approval proof (lobsterc.tools.effects). Steps marked `effects: write` are always
    checked; with --require-approval, command classes too (--strict adds local_exec)."""
    from lobsterc.tools.effects import verify_approvals

    marks = {label: ref.step.effects for label, ref in ctx.steps.items()
             if isinstance(ref.step.effects, str)}
    program = ctx.program
    for v in verify_approvals(program, marks, classes=ctx.require_approval, strict=ctx.strict):
        ref = ctx.steps.get(v.label)
        if ref is not None:
            span = ref.step.span
        else:
            info = next(s for s in program.steps if s.id == v.label)
            span = Span(ctx.path, *info.span) if info.span else None
        fix = ("put an `approve` stage before it" if ctx.wf is None else
               "put an approval step before it (a step's own `approval` is asked after the "
               "step has run)")
        yield Diagnostic("W306", v.message, span, help=f"{v.reason}; {fix}", severity="warning")


def rule_ignored_schema_keywords(ctx: LintContext) -> Iterator[Diagnostic]:
    """W308: a responseSchema keyword the input dialect (vm.core.schema: JSON Schema draft-07, as the
    original's Ajv) does not read, e.g. 2020-12's `prefixItems`: it constrains nothing."""
    from vm.core.schema import ignored_keywords

    for _, step in walk(ctx.wf.steps):
        gate = step.kind
        if not isinstance(gate, ast.InputGate) or not isinstance(gate.schema, dict):
            continue
        for pointer, keyword in ignored_keywords(gate.schema):
            path = [_unescape(part) for part in pointer.split("/")[1:] if part]
            at = [int(p) if p.isdigit() and _is_list_at(gate.schema, path[:i]) else p
                  for i, p in enumerate(path)]
            yield Diagnostic(
                "W308", f"responseSchema keyword '{keyword}' at {pointer} is ignored by the "
                "validator", gate.loc.key_span("responseSchema", *at, keyword),
                help="answers are validated as JSON Schema draft-07, which does not read this "
                     "keyword: it constrains nothing", severity="warning")


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def _is_list_at(schema: Any, path: list) -> bool:
    value = schema
    for part in path:
        value = value[int(part)] if isinstance(value, list) else value.get(part)
    return isinstance(value, list)
