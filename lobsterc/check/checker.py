"""The checker of workflow files: `check_workflow` walks the AST of a loaded file and the files
it calls and yields every diagnostic: step references (E211), conditions (E212), result fields
(E218), pipelines (their stages bound by lobsterc.check.stages, placed in the file), gates in
pipelines (E214) and `workflow:` calls. The compiler refuses on any error, lint adds its
warnings, plan and graph read the same nodes. Each check is a small generator of Diagnostics.
"""

from __future__ import annotations

import os
import re
from collections import ChainMap
from collections.abc import Iterator
from typing import Any

from attrs import evolve

from lobsterc.check.stages import BoundStage, did_you_mean
from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.syntax import ast
from lobsterc.syntax.source import Span
from vm.engine.refs import WHOLE_REF
from vm.host.commands import Command


# Errors reported for one workflow file and its callees; checking stops there (each error may
# cost a pass over the names in scope for its hint, so this keeps a refusal linear).
MAX_ERRORS = 100


def check_file(path: str, *, lenient: bool = False, text: str | None = None
               ) -> tuple[Any, list[Diagnostic]]:
    """Load a workflow file (lobsterc.load.build.load) and check it: the Loaded file and every
    diagnostic of it and of the files it calls, file by file, up to MAX_ERRORS errors and then
    an E230 that says checking stopped there (lobsterc.load.build leaves pipelines past that
    unbound). `text`: the file's unsaved text."""
    from lobsterc.load.build import load

    loaded = load(path, lenient=lenient, text=text)
    diags: list[Diagnostic] = []
    errors = 0
    for diag in check_workflow(loaded):
        diags.append(diag)
        if diag.severity == "error":
            errors += 1
            if errors == MAX_ERRORS:
                diags.append(Diagnostic("E230", f"Workflow file over a limit: {MAX_ERRORS} "
                                        "errors, checking stopped there", diag.span))
                break
    return loaded, diags


def refusal(diags: list[Diagnostic]) -> CompileError | None:
    """The CompileError a compile raises for these diagnostics, None without errors: the errors
    of the first file that has any (a caller's own errors come before its callees')."""
    errors = [d for d in diags if d.severity == "error"]
    if not errors:
        return None
    first = errors[0].span.source if errors[0].span else None
    return CompileError([d for d in errors if (d.span.source if d.span else None) == first])


def check_workflow(loaded: Any) -> Iterator[Diagnostic]:
    """Every diagnostic of a Loaded workflow file, then of each file it calls (once each):
    loading, step references (E211), conditions (E212), pipelines (E210 parse, E201-E204,
    E214 gates), `workflow:` calls (E215 not literal, E210 file not found, E216 cycle)."""
    yield from loaded.diagnostics
    if loaded.workflow is None:
        return
    state: dict[str, str] = {}  # real path -> "open" while its callees are checked, then "done"
    yield from _check_tree(loaded.workflow, loaded.real, state)


def _check_tree(wf: Any, path: str, state: dict[str, str]) -> Iterator[Diagnostic]:
    state[path] = "open"
    calls: list[ast.Step] = []
    yield from _check_steps(wf, wf.steps, ChainMap(), None, calls, _all_names(wf))
    for step in calls:
        call = step.kind
        if call.path is None:
            yield Diagnostic("E215", f"Workflow step {step.id} workflow path must be a literal "
                             "path (it is resolved when the file is compiled)", call.loc.span())
            continue
        loaded = wf.callee(call)
        if loaded is None:
            where = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(call.loc.file)),
                                                 call.target))  # resolved, as the original names it
            yield Diagnostic("E210", f"Workflow step {step.id} workflow file not found: {where}",
                             call.loc.span())
        elif state.get(call.path) == "open":
            yield Diagnostic("E216", f"Workflow step {step.id} creates a cycle: {call.path} is "
                             "already being executed", call.loc.span())
        elif call.path not in state:
            yield from loaded.diagnostics
            if loaded.workflow is not None:
                yield from _check_tree(loaded.workflow, call.path, state)
            else:
                state[call.path] = "done"
    state[path] = "done"


def _check_steps(wf: Any, steps: tuple, outer: ChainMap, outer_later: Any,
                 calls: list, names: frozenset[str]) -> Iterator[Diagnostic]:
    """`outer` holds the names a step may read (earlier steps, loop variables), one map per
    loop level, so entering a loop copies nothing; `later` is only worked out for a hint,
    when a reference is unknown. A stdin or for_each value that is one whole reference must
    name a step in scope. `names` are all the file's names (E218)."""
    scope = outer.new_child()
    for index, step in enumerate(steps):
        later = (steps, index, outer_later)  # made a _Later only for a hint
        kind = step.kind
        # met where the step begins, in this order, wherever they are written: whether it runs
        # (its condition), then its input (stdin, a loop's source), before its sub-steps
        start = step.loc.span()
        begins = (start.line, start.col)
        if step.when is not None:
            for diag in _check_when(step.when, scope, later):
                yield evolve(diag, order=begins)
        if isinstance(step.stdin, str):
            m = WHOLE_REF.match(step.stdin.strip())
            if m and m[1] not in scope:
                yield evolve(unknown_ref(m[1], f"{m[1]}{m[2]}", step.loc.span("stdin"), scope,
                                         later), order=begins)
        if isinstance(kind, ast.ForEach):
            m = WHOLE_REF.match(kind.source.strip())
            if m and m[1] not in scope:
                yield evolve(unknown_ref(m[1], f"{m[1]}{m[2]}", kind.loc.span(), scope, later),
                             order=begins)
        yield from _check_fields(step, names)
        if isinstance(kind, ast.PipelineStep):
            yield from check_pipeline_text(step.id, kind.pipeline)
        elif isinstance(kind, ast.Parallel):
            for branch in kind.branches:
                if branch.pipeline is not None:
                    yield from check_pipeline_text(branch.id, branch.pipeline,
                                                   halt_prefix="Parallel branch failed: ")
        elif isinstance(kind, ast.SubWorkflow):
            calls.append(step)
        elif isinstance(kind, ast.ForEach):
            loop = scope.new_child(dict.fromkeys((kind.item_var, kind.index_var)))
            yield from _check_steps(wf, kind.steps, loop, later, calls, names)
        scope[step.id] = None
        if isinstance(kind, ast.Parallel):  # each branch's result is kept under its id
            scope.update(dict.fromkeys(branch.id for branch in kind.branches))


# The fields a step result has, what sets each and what it holds: the one table of them (E218's
# help, docs/workflows.md's generated table; tests/docs/test_step_results.py holds it to what
# vm.engine.steps, gates, machine and run write). What follows json, response and subject is
# that value's own data.
RESULT_FIELDS: dict[str, tuple[str, str]] = {
    "id": ("every step", "the step's id"),
    "stdout": ("run, command, pipeline and workflow steps; an approval or input step with "
               "stdin", "what the step printed, as text (a pipeline: its output written as "
               "the original writes it)"),
    "json": ("a step whose output is JSON; an approval step with stdin", "that output parsed "
             "(`$a.json.items.0.id` reads into it); absent when the output is not JSON"),
    "approved": ("an approval step", "true once approved; false when it was skipped or is "
                 "not reached (a declined approval ends the run `cancelled`)"),
    "initiatedBy": ("an approval step with `initiated_by`", "who started the run, as the "
                    "step's rule names them"),
    "approvedBy": ("an approval step, when the approver is known", "who approved it "
                   "(`LOBSTER_APPROVAL_APPROVED_BY` of the resume, or the gateway's)"),
    "subject": ("an input step", "what the request showed the person answering (its stdin)"),
    "response": ("an input step", "the answer, as `responseSchema` accepted it "
                 "(`$ask.response.name` reads into it)"),
    "skipped": ("a step whose `when` / `condition` was false", "true; false for every step "
                "that ran"),
    "error": ("a step that failed under `on_error: continue`", "true"),
    "errorMessage": ("a step that failed under `on_error: continue`", "the failure's message"),
}


def _all_names(wf: Any) -> frozenset[str]:
    found: set[str] = set()
    stack = list(wf.steps)
    while stack:
        step = stack.pop()
        found.add(step.id)
        if isinstance(step.kind, ast.Parallel):
            found.update(b.id for b in step.kind.branches)
        elif isinstance(step.kind, ast.ForEach):
            found.update((step.kind.item_var, step.kind.index_var))
            stack.extend(step.kind.steps)
    return frozenset(found)


def _strings(value: Any, at: tuple) -> Iterator[tuple[tuple, str]]:
    if isinstance(value, str):
        yield at, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if at == () and key in ("steps", "id", "input"):
                continue
            yield from _strings(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*at, index))


def _check_fields(step: ast.Step, names: frozenset[str]) -> Iterator[Diagnostic]:
    """E218: `$step.field` whose first field no step result has (`$a.jsno`, `$a.jsn.n`): the
    original renders it as an empty string. Only references to steps the file has."""
    from vm.engine.refs import REF

    raw = step.loc.doc.data
    for part in step.loc.at:
        raw = raw[part]
    for at, text in _strings(raw, ()):
        if "$" not in text:
            continue
        for m in REF.finditer(text):
            field = m[2][1:].split(".")[0]
            if m[1] not in names or field in RESULT_FIELDS:
                continue
            close = did_you_mean(field, RESULT_FIELDS)
            yield Diagnostic(
                "E218", f"Unknown step result field: {m[1]}{m[2]}" + (f" ({close})" if close else ""),
                sub_span(step.loc.span(*at), text, m.start(), m.end()),
                help="a step result has " + ", ".join(RESULT_FIELDS))


class _Later:
    """The names of the steps (and parallel branches) after steps[index], and after the loop
    that holds them."""

    __slots__ = ("steps", "index", "outer")

    def __init__(self, steps: tuple, index: int, outer: tuple | None) -> None:
        self.steps, self.index, self.outer = steps, index, outer

    def __contains__(self, name: object) -> bool:
        for step in self.steps[self.index + 1:]:
            if step.id == name or isinstance(step.kind, ast.Parallel) and any(
                    branch.id == name for branch in step.kind.branches):
                return True
        return self.outer is not None and name in _Later(*self.outer)


def _check_when(when: ast.When, scope: ChainMap, later: Any) -> Iterator[Diagnostic]:
    from lobsterc.syntax.expr import tree_refs

    if when.tree is None:
        yield from when.problems
        return
    for ref, path in tree_refs(when.tree):
        if ref not in scope:
            text = ".".join((ref, *path))
            yield unknown_ref(ref, text, _ref_span(when, ref), scope, later)


def _ref_span(when: ast.When, ref: str) -> Span:
    span = when.span
    if isinstance(when.value, str):
        m = re.search(rf"\${re.escape(ref)}(?![A-Za-z0-9_-])(?:\.[A-Za-z0-9_]+)*", when.value)
        if m:
            return sub_span(span, when.value, m.start(), m.end())
    return span


def unknown_ref(ref: str, text: str, span: Span, scope: ChainMap, later: tuple) -> Diagnostic:
    """E211, with a hint: the step is a later one (`later` is (steps, index, outer) for
    _Later), or a name in scope that is close."""
    message = f"Unknown step reference: {text}"
    if ref in _Later(*later):
        return Diagnostic("E211", message, span,
                          help=f"'{ref}' is a later step; a step can only read the steps before it")
    return Diagnostic("E211", message, span, help=did_you_mean(ref, scope))


def check_pipeline_text(sid: str, pipeline: ast.PipelineText,
                        halt_prefix: str = "") -> Iterator[Diagnostic]:
    """A workflow file's pipeline: it parses (E210, as the reference words it), its stages bind
    to their commands, and no stage halts (E214); each diagnostic placed in the file."""
    text = pipeline.text
    if pipeline.parsed is None:
        for d in pipeline.syntax:
            yield Diagnostic("E210", f"Workflow step {sid} pipeline parse failed: {d.message}",
                             _span_in(pipeline.span, text, d.span), help=d.help)
        return
    for d in pipeline.problems:
        yield Diagnostic(d.code, d.message, _span_in(pipeline.span, text, d.span), help=d.help)
    for item in pipeline.bound:
        if halts_in_step(item):
            yield halting_stage(sid, item.command, _span_in(pipeline.span, text, item.stage.span),
                                halt_prefix)


def halts_in_step(item: BoundStage) -> bool:
    """A stage a workflow file's pipeline step cannot halt at: `approve`, and `ask --emit`.
    (A plain `ask` pauses the run in tool mode, as the original's does; the answer is the
    stage's output.)"""
    lowering = item.command.lowering
    return lowering == "approve" or lowering == "ask" and item.args.get("emit") is True


def halting_stage(sid: str, command: Command, span: Span, prefix: str = "") -> Diagnostic:
    """E214: a workflow file's pipeline cannot halt (approve or ask) inside a step (`prefix`:
    a parallel branch's failure, as the original reports it)."""
    if command.lowering == "approve":
        return Diagnostic("E214", f"{prefix}Workflow step {sid} halted for approval inside pipeline stage "
                          f"{command.name}. Use a separate approval step in the workflow file.",
                          span)
    return Diagnostic("E214", f"{prefix}Workflow step {sid} halted before completion at pipeline stage "
                      f"{command.name}", span, help="use a separate input step in the workflow file")


def sub_span(span: Span, value: str, start: int, end: int) -> Span:
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
    return sub_span(span, value, inner.col - 1, inner.end_col - 1)
