"""`lobsterc lint`: every diagnostic of a pipeline or workflow file at once. Errors reuse the
compiler's codes (E1xx syntax, E2xx checks); warnings are W3xx. RULES is the registry: one
small generator per rule, each yielding Diagnostics.

How far lint gets in a workflow file: a YAML/JSON syntax error stops it; duplicate step ids
and invalid JSON Schemas are all reported and then set aside, so the file's structure can
still be validated (its first structural error stops it); after that every step is checked
on its own (references, conditions, pipelines), and the warning rules run. The rules that
need the compiled program (unreachable steps, the approval proof) run when nothing above
was an error.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from attrs import define, field, frozen

from lobsterc.check import check_pipeline, did_you_mean
from lobsterc.diagnostics import CompileError, Diagnostic, render
from lobsterc.source import Source, Span
from vm.refs import ARG, WHOLE_REF, env_name

WORKFLOW_SUFFIXES = (".lobster", ".yaml", ".yml", ".json")


@frozen
class Rule:
    code: str
    title: str
    check: Callable[[LintContext], Iterator[Diagnostic]]
    needs_program: bool = False


@frozen
class StepRef:
    """Where a compiled step label came from: its file, its path in the file and its data."""

    label: str
    wf: Any  # WorkflowFile
    at: tuple
    data: dict
    cond: Any = None  # the compiled condition tree, when it has one


@define
class LintContext:
    path: str
    wf: Any = None  # WorkflowFile, for workflow files
    program: Any = None  # the compiled Program, when the file compiles
    steps: dict[str, StepRef] = field(factory=dict)  # label -> StepRef (this file and callees)
    require_approval: bool = False
    strict: bool = False
    errors: list[Diagnostic] = field(factory=list)


# ---------------------------------------------------------------------------------------------
# helpers

def _sub_span(span: Span, value: str, start: int, end: int) -> Span:
    """The span of value[start:end] inside the scalar at `span`, when the scalar sits on one
    line as written (plain, or quoted without escapes); else the scalar's own span."""
    if span.line != span.end_line or "\n" in value:
        return span
    extent = span.end_col - span.col
    if extent == len(value):
        quote = 0
    elif extent == len(value) + 2:
        quote = 1
    else:
        return span
    col = span.col + quote + start
    return Span(span.source, span.line, col, span.line, col + max(1, end - start))


def _span_in(span: Span, value: str, inner: Span | None) -> Span:
    """A span the pipeline parser gave (relative to `value`), placed in the file."""
    if inner is None or inner.line != 1 or inner.end_line != 1:
        return span
    return _sub_span(span, value, inner.col - 1, inner.end_col - 1)


def _walk_steps(wf, steps: list, at: tuple, prefix: str) -> Iterator[tuple[str, tuple, dict, str]]:
    """(label, path, step, prefix) for every step and for_each sub-step of one file, in order."""
    for index, step in enumerate(steps):
        path = (*at, index)
        label = f"{prefix}{step['id']}"
        yield label, path, step, prefix
        if isinstance(step.get("for_each"), str) and isinstance(step.get("steps"), list):
            yield from _walk_steps(wf, step["steps"], (*path, "steps"), f"{label}/")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _declared_args(wf) -> dict:
    args = wf.data.get("args")
    return args if isinstance(args, dict) else {}


def _shell_lines(step: dict, at: tuple) -> Iterator[tuple[tuple, str]]:
    """(path, line) of a step's shell line and its parallel branches' run lines."""
    for key in ("run", "command"):
        if isinstance(step.get(key), str) and step.get("pipeline") in (None, ""):
            yield (*at, key), step[key]
            break
    parallel = step.get("parallel")
    if isinstance(parallel, dict):
        for index, branch in enumerate(parallel.get("branches") or []):
            for key in ("run", "command"):
                if isinstance(branch.get(key), str):
                    yield (*at, "parallel", "branches", index, key), branch[key]
                    break


# ---------------------------------------------------------------------------------------------
# rules: errors (the compiler's codes)

def rule_references(ctx: LintContext) -> Iterator[Diagnostic]:
    """E211: a stdin / for_each / condition reference must name an earlier step (or a loop
    variable). A later step gets its own hint."""
    wf = ctx.wf
    yield from _refs_in(wf, wf.data["steps"], ("steps",), [], set())


def _refs_in(wf, steps: list, at: tuple, scope: list[str], outer_later: set[str]
             ) -> Iterator[Diagnostic]:
    ids = [step["id"] for step in steps]
    for index, step in enumerate(steps):
        path = (*at, index)
        later = set(ids[index + 1:]) | outer_later
        for key in ("stdin", "for_each"):
            value = step.get(key)
            m = WHOLE_REF.match(value.strip()) if isinstance(value, str) else None
            if m and m[1] not in scope:
                yield _unknown_ref(m[1], f"{m[1]}{m[2]}", wf.span_of(*path, key), scope, later, wf)
        key = "when" if "when" in step else "condition" if "condition" in step else None
        if key is not None:
            tree = _condition(step[key], wf.span_of(*path, key))
            if tree is not None:
                from lobsterc.expr import condition_refs

                for ref in condition_refs(tree):
                    if ref not in scope:
                        yield _unknown_ref(ref, ref, _ref_span(wf, path, key, ref), scope,
                                           later, wf)
        if isinstance(step.get("for_each"), str) and isinstance(step.get("steps"), list):
            loop_vars = [step.get("item_var", "item"), step.get("index_var", "index")]
            yield from _refs_in(wf, step["steps"], (*path, "steps"), scope + loop_vars,
                                later)
        scope = scope + [step["id"]]


def _ref_span(wf, path: tuple, key: str, ref: str) -> Span:
    span = wf.span_of(*path, key)
    value = _get_path(wf.data, (*path, key))
    if isinstance(value, str):
        m = re.search(rf"\${re.escape(ref)}(?![A-Za-z0-9_-])(?:\.[A-Za-z0-9_]+)*", value)
        if m:
            return _sub_span(span, value, m.start(), m.end())
    return span


def _get_path(data: Any, path: tuple) -> Any:
    for part in path:
        data = data[part]
    return data


def _unknown_ref(ref: str, text: str, span: Span, scope: list[str], later: set[str], wf
                 ) -> Diagnostic:
    message = f"Unknown step reference: {text}"
    if ref in later:
        return Diagnostic("E211", message, span,
                          help=f"'{ref}' is a later step; a step can only read the steps before it")
    return Diagnostic("E211", message, span, help=did_you_mean(ref, scope))



def _condition(value: Any, span: Span) -> Any:
    """The compiled tree, or None when the condition does not compile (rule E212 says so)."""
    from lobsterc.expr import compile_condition

    try:
        return compile_condition(value, span)
    except CompileError:
        return None


def rule_conditions(ctx: LintContext) -> Iterator[Diagnostic]:
    """E212: every `when` / `condition` must compile."""
    from lobsterc.expr import compile_condition

    wf = ctx.wf
    for label, at, step, _ in _walk_steps(wf, wf.data["steps"], ("steps",), ""):
        key = "when" if "when" in step else "condition" if "condition" in step else None
        if key is None:
            continue
        try:
            compile_condition(step[key], wf.span_of(*at, key))
        except CompileError as exc:
            yield from exc.diagnostics


def rule_commands(ctx: LintContext) -> Iterator[Diagnostic]:
    """E1xx / E201-E204 / E214: every pipeline (steps, sub-steps, parallel branches) parses
    and binds to the command signatures; every error of every pipeline, placed in the file."""
    from lobsterc.parse import parse_pipeline

    wf = ctx.wf
    for label, at, step, _ in _walk_steps(wf, wf.data["steps"], ("steps",), ""):
        where = [((*at, "pipeline"), step["id"], step.get("pipeline"))]
        parallel = step.get("parallel")
        if isinstance(parallel, dict):
            where += [((*at, "parallel", "branches", i, "pipeline"), b.get("id"), b.get("pipeline"))
                      for i, b in enumerate(parallel.get("branches") or [])]
        for path, sid, text in where:
            if not isinstance(text, str) or not text:
                continue
            span = wf.span_of(*path)
            try:
                parsed = parse_pipeline(text, wf.path)
            except CompileError as exc:
                for d in exc.diagnostics:
                    yield Diagnostic(d.code, f"Workflow step {sid} pipeline parse failed: "
                                     f"{d.message}", _span_in(span, text, d.span), help=d.help)
                continue
            bound, diags = check_pipeline(parsed)
            for d in diags:
                yield Diagnostic(d.code, d.message, _span_in(span, text, d.span), help=d.help)
            for item in bound:
                if item.command.lowering in ("approve", "ask"):
                    gate = "a separate approval step" if item.command.lowering == "approve" \
                        else "a separate input step"
                    yield Diagnostic(
                        "E214", f"Workflow step {sid} cannot halt inside pipeline stage "
                        f"{item.command.name}", _span_in(span, text, item.stage.span),
                        help=f"use {gate} in the workflow file")


# ---------------------------------------------------------------------------------------------
# rules: warnings

def rule_shell_args(ctx: LintContext) -> Iterator[Diagnostic]:
    """W301: `${arg}` in a shell line splices the arg's text into shell code; the injected
    environment variable LOBSTER_ARG_<NAME> carries it as data."""
    wf = ctx.wf
    args = _declared_args(wf)
    for label, at, step, _ in _walk_steps(wf, wf.data["steps"], ("steps",), ""):
        for path, line in _shell_lines(step, at):
            for m in ARG.finditer(line):
                if m[1] not in args:
                    continue
                var = f"LOBSTER_ARG_{env_name(m[1])}"
                yield Diagnostic(
                    "W301", f"arg '{m[1]}' is spliced into a shell line",
                    _sub_span(wf.span_of(*path), line, m.start(), m.end()),
                    help=f'use "${var}" instead: the shell then reads the value as data, '
                         "never as code", severity="warning")


def _can_hang(step: dict) -> bool:
    """A step that waits on something outside the run: a shell line, or a pipeline with an
    exec stage or a gateway call."""
    if step.get("pipeline") in (None, ""):
        return any(isinstance(step.get(k), str) and step.get(k) for k in ("run", "command"))
    from lobsterc.parse import parse_pipeline

    try:
        bound, _ = check_pipeline(parse_pipeline(step["pipeline"], "<lint>"))
    except CompileError:
        return False
    return any(item.command.effects in ("local_exec", "network") for item in bound)


def rule_timeouts(ctx: LintContext) -> Iterator[Diagnostic]:
    """W302: a shell step, a pipeline step with an exec or gateway stage, or a parallel step
    without timeout_ms (the file format has no workflow-wide timeout, so nothing else bounds
    it but the caller's timeoutMs)."""
    wf = ctx.wf
    for label, at, step, _ in _walk_steps(wf, wf.data["steps"], ("steps",), ""):
        if "timeout_ms" in step:
            continue
        parallel = step.get("parallel")
        if isinstance(parallel, dict):
            if "timeout_ms" in parallel:
                continue
            what = "parallel step"
        elif step.get("for_each") is not None or not _can_hang(step):
            continue
        else:
            what = "shell step" if step.get("pipeline") in (None, "") else "pipeline step"
        yield Diagnostic("W302", f"{what} {step['id']} has no timeout_ms",
                         wf.span_of(*at, "id"),
                         help="add `timeout_ms: <milliseconds>`: a command that hangs holds "
                              "the run until the caller's timeoutMs", severity="warning")


def rule_unused_args(ctx: LintContext) -> Iterator[Diagnostic]:
    """W303: an arg that nothing uses: no `${name}` in any value, no LOBSTER_ARG_<NAME>, and
    no LOBSTER_ARGS_JSON (which hands every arg over)."""
    wf = ctx.wf
    args = _declared_args(wf)
    rest = {k: v for k, v in wf.data.items() if k != "args"}
    texts = list(_strings(rest))
    if any("LOBSTER_ARGS_JSON" in t for t in texts):
        return
    used = {m[1] for t in texts for m in ARG.finditer(t)}
    env = "\n".join(texts)
    for name in args:
        var = f"LOBSTER_ARG_{env_name(name)}"
        if name in used or re.search(rf"\b{re.escape(var)}\b", env):
            continue
        yield Diagnostic("W303", f"arg '{name}' is never used", wf.key_span_of("args", name),
                         help=f"reference it as ${{{name}}} or ${var}, or remove it",
                         severity="warning")


def rule_constant_conditions(ctx: LintContext) -> Iterator[Diagnostic]:
    """W304: a condition that references no step and is always true. (One that is always
    false makes its step unreachable: W305 reports that.)"""
    from lobsterc.effects import constant_condition

    wf = ctx.wf
    for label, at, step, _ in _walk_steps(wf, wf.data["steps"], ("steps",), ""):
        key = "when" if "when" in step else "condition" if "condition" in step else None
        if key is None:
            continue
        tree = _condition(step[key], wf.span_of(*at, key))
        if tree is not None and constant_condition(tree) is True:
            yield Diagnostic("W304", "condition is always true", wf.span_of(*at, key),
                             help=f"remove `{key}`: step {step['id']} always runs",
                             severity="warning")


def rule_effects_values(ctx: LintContext) -> Iterator[Diagnostic]:
    """W307: `effects:` takes write, read or none."""
    from lobsterc.effects import MARKS

    wf = ctx.wf
    for label, at, step, _ in _walk_steps(wf, wf.data["steps"], ("steps",), ""):
        if "effects" in step and step["effects"] not in MARKS:
            value = step["effects"]
            shown = value if isinstance(value, str) else json.dumps(value)
            yield Diagnostic("W307", f"unknown effects value '{shown}'",
                             wf.span_of(*at, "effects"),
                             help=did_you_mean(str(shown), MARKS) or "use write, read or none",
                             severity="warning")


def rule_unreachable(ctx: LintContext) -> Iterator[Diagnostic]:
    """W305: a step whose execution no path of the compiled program reaches, a conditional
    jump on a constant condition taking only its feasible edge. Steps inside an unreachable
    step (loop sub-steps, a sub-workflow's steps) are not reported again."""
    from lobsterc.effects import _CONTROL, Cfg, constant_condition, loop_tails

    program = ctx.program
    reached = Cfg(program).reachable(0)
    tails = loop_tails(program)
    reported: list[str] = []
    for info in program.steps:
        if info.id in tails or info.id not in ctx.steps:
            continue
        body = [pc for pc in range(info.first_pc, info.last_pc + 1)
                if program.code[pc].op not in _CONTROL]
        if not body or any(pc in reached for pc in body):
            continue
        if any(info.id.startswith(f"{done}/") for done in reported):
            continue
        reported.append(info.id)
        ref = ctx.steps[info.id]
        cond = ref.cond
        why = ("its condition is always false" if cond is not None
               and constant_condition(cond) is False else "no path from the start reaches it")
        yield Diagnostic("W305", f"step {ref.data['id']} never runs",
                         ref.wf.span_of(*ref.at, "id"), help=why, severity="warning")


def rule_approvals(ctx: LintContext) -> Iterator[Diagnostic]:
    """W306: the approval proof (lobsterc.effects). Steps marked `effects: write` are always
    checked; with --require-approval, command classes too (--strict adds local_exec)."""
    from lobsterc.effects import verify_approvals

    marks = {label: ref.data.get("effects") for label, ref in ctx.steps.items()
             if isinstance(ref.data.get("effects"), str)}
    program = ctx.program
    for v in verify_approvals(program, marks, classes=ctx.require_approval, strict=ctx.strict):
        ref = ctx.steps.get(v.label)
        if ref is not None:
            span = ref.wf.span_of(*ref.at, "id")
        else:
            info = next(s for s in program.steps if s.id == v.label)
            span = Span(ctx.path, *info.span) if info.span else None
        fix = ("put an `approve` stage before it" if ctx.wf is None else
               "put an approval step before it (a step's own `approval` is asked after the "
               "step has run)")
        yield Diagnostic("W306", v.message, span, help=f"{v.reason}; {fix}", severity="warning")


RULES: tuple[Rule, ...] = (
    Rule("E211", "unknown or later step reference", rule_references),
    Rule("E212", "invalid condition", rule_conditions),
    Rule("E201", "unknown command or flag (and every other pipeline check)", rule_commands),
    Rule("W301", "arg spliced into a shell line", rule_shell_args),
    Rule("W302", "step without a timeout", rule_timeouts),
    Rule("W303", "unused arg", rule_unused_args),
    Rule("W304", "condition that is always true", rule_constant_conditions),
    Rule("W307", "unknown effects value", rule_effects_values),
    Rule("W305", "unreachable step", rule_unreachable, needs_program=True),
    Rule("W306", "side-effecting step without an approval gate", rule_approvals,
         needs_program=True),
)
# Reported outside RULES, before a file's structure is known: E210 (a syntax error, the first
# structural error, a duplicate step id) and E213 (an invalid JSON Schema).


# ---------------------------------------------------------------------------------------------
# files

def lint_file(path: str, *, require_approval: bool = False, strict: bool = False
              ) -> list[Diagnostic]:
    """Every diagnostic of one source file, sorted by position."""
    if path.lower().endswith(WORKFLOW_SUFFIXES):
        diags = _lint_workflow(path, require_approval, strict)
    else:
        diags = _lint_pipeline(path, require_approval, strict)
    return _sorted(_unique(diags))


def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    def key(d: Diagnostic):
        s = d.span
        return (s.source, s.line, s.col, d.code) if s else ("", 0, 0, d.code)

    return sorted(diags, key=key)


def _unique(diags: list[Diagnostic]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for d in diags:
        if d not in out:
            out.append(d)
    return out


def _lint_pipeline(path: str, require_approval: bool, strict: bool) -> list[Diagnostic]:
    from lobsterc.codegen import compile_pipeline
    from lobsterc.parse import parse_pipeline

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    body = text.strip("\n")
    lead = len(text) - len(text.lstrip("\n"))

    def place(d: Diagnostic) -> Diagnostic:
        s = d.span
        if s is None or not lead:
            return d
        return Diagnostic(d.code, d.message, Span(s.source, s.line + lead, s.col,
                                                   s.end_line + lead, s.end_col),
                          d.help, d.severity, d.kind)

    try:
        parsed = parse_pipeline(body, path)
    except CompileError as exc:
        return [place(d) for d in exc.diagnostics]
    _, diags = check_pipeline(parsed)
    if diags:
        return [place(d) for d in diags]
    ctx = LintContext(path, program=compile_pipeline(body, path),
                      require_approval=require_approval, strict=strict)
    return [place(d) for d in rule_approvals(ctx)]


def _lint_workflow(path: str, require_approval: bool, strict: bool) -> list[Diagnostic]:
    from lobsterc.load import parse_text
    from lobsterc.validate import validate_all

    try:
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        return [Diagnostic("E210", "Workflow file parse error: not UTF-8 text "
                           f"({exc.reason} at byte {exc.start})")]
    try:
        doc = parse_text(text, path)
    except CompileError as exc:
        return list(exc.diagnostics)
    diags, wf = validate_all(doc)
    if any(d.code == "E210" and d.help is None for d in diags):
        return diags
    ctx = LintContext(path, wf=wf, require_approval=require_approval, strict=strict)
    for rule in RULES:
        if not rule.needs_program:
            diags += list(rule.check(ctx))
    if any(d.severity == "error" for d in diags):
        return diags
    from lobsterc.workflow import compile_workflow

    try:
        ctx.program = compile_workflow(path)
    except CompileError as exc:
        return diags + list(exc.diagnostics)
    ctx.steps = _index(wf, "")
    for rule in RULES:
        if rule.needs_program:
            diags += list(rule.check(ctx))
    return diags


def _duplicates(raw, patched: dict) -> list[Diagnostic]:
    """E210 for every repeated step id (top level, and within each for_each); the repeats are
    renamed in `patched` so that the rest of the file can still be checked."""
    out = []

    def scan(steps: list, at: tuple, message: str) -> None:
        first: dict[str, tuple] = {}
        for index, step in enumerate(steps):
            sid = step.get("id") if isinstance(step, dict) else None
            if not isinstance(sid, str) or not sid:
                continue
            if sid in first:
                line = raw.span_of(*first[sid], "id").line
                out.append(Diagnostic("E210", message.format(sid=sid),
                                      raw.span_of(*at, index, "id"),
                                      help=f"'{sid}' is first defined on line {line}",
                                      kind="runtime_error"))
                _get_path(patched, (*at, index))["id"] = f"{sid}~{index}"
            else:
                first[sid] = (*at, index)
            subs = step.get("steps")
            if isinstance(step.get("for_each"), str) and isinstance(subs, list):
                scan(subs, (*at, index, "steps"),
                     f"Workflow step {sid} duplicate for_each sub-step id: {{sid}}")

    scan(patched["steps"], ("steps",), "Duplicate workflow step id: {sid}")
    return out


def _schemas(raw, patched: dict) -> list[Diagnostic]:
    """E213 for every input.responseSchema that is not a valid JSON Schema (draft 2020-12),
    at the keyword that is wrong; each is replaced by {} in `patched`."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    out = []
    for label, at, step, _ in _walk_steps(raw, patched["steps"], ("steps",), ""):
        spec = step.get("input") if isinstance(step, dict) else None
        schema = spec.get("responseSchema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            continue
        error = best_match(Draft202012Validator(Draft202012Validator.META_SCHEMA)
                           .iter_errors(schema))
        if error is None:
            continue
        where = (*at, "input", "responseSchema", *error.absolute_path)
        out.append(Diagnostic("E213", f"Workflow step {step.get('id')} input.responseSchema is "
                              f"invalid: {error.message}", raw.span_of(*where),
                              help="see https://json-schema.org/understanding-json-schema/",
                              kind="runtime_error"))
        spec["responseSchema"] = {}
    return out


def _index(wf, prefix: str, chain: tuple[str, ...] = ()) -> dict[str, StepRef]:
    """Compiled step label -> where it came from, following sub-workflow calls as the
    compiler does (a callee's steps are labelled `call/step`)."""
    from lobsterc.workflow_file import load_workflow_file

    out: dict[str, StepRef] = {}
    chain = (*chain, os.path.realpath(wf.path))
    for label, at, step, _ in _walk_steps(wf, wf.data["steps"], ("steps",), prefix):
        key = "when" if "when" in step else "condition" if "condition" in step else None
        cond = _condition(step[key], wf.span_of(*at, key)) if key else None
        out[label] = StepRef(label, wf, at, step, cond)
        target = step.get("workflow")
        if isinstance(target, str) and "$" not in target:
            child = os.path.normpath(os.path.join(os.path.dirname(wf.path), target))
            if os.path.realpath(child) in chain or not os.path.isfile(child):
                continue
            try:
                out.update(_index(load_workflow_file(child), f"{label}/", chain))
            except CompileError:
                continue
    return out


# ---------------------------------------------------------------------------------------------
# output

def as_json(path: str, d: Diagnostic) -> dict:
    s = d.span
    return {"file": s.source if s else path, "line": s.line if s else None,
            "column": s.col if s else None, "endLine": s.end_line if s else None,
            "endColumn": s.end_col if s else None, "severity": d.severity, "code": d.code,
            "message": d.message, "help": d.help}


def run_lint(files: Sequence[str], *, fmt: str = "text", require_approval: bool = False,
             strict: bool = False, out=None, err=None) -> int:
    """The `lobsterc lint` command: 0 clean, 1 findings, 2 usage error (a file that does not
    exist, an unknown format)."""
    import sys

    out = out or sys.stdout
    err = err or sys.stderr
    if fmt not in ("text", "json"):
        err.write("lint --format must be text or json\n")
        return 2
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        for f in missing:
            err.write(f"lobsterc: no such file: {f}\n")
        return 2
    found: list[tuple[str, Diagnostic]] = []
    for f in files:
        found += [(f, d) for d in lint_file(f, require_approval=require_approval, strict=strict)]
    if fmt == "json":
        out.write(json.dumps([as_json(f, d) for f, d in found], indent=2) + "\n")
    else:
        sources: dict[str, Source] = {}
        for f, d in found:
            src = None
            if d.span is not None:
                name = d.span.source
                if name not in sources and os.path.isfile(name):
                    with open(name, encoding="utf-8", newline="") as fh:
                        sources[name] = Source(name, fh.read())
                src = sources.get(name)
            text = render(d, src)
            out.write((text if d.span else f"{f}: {text}") + "\n")
        if found:
            errors = sum(d.severity == "error" for _, d in found)
            warnings = len(found) - errors
            out.write(f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}\n")
    return 1 if found else 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
