"""`lobsterc lint`: every diagnostic of a pipeline or workflow file at once. The errors are the
checker's (lobsterc.check.checker: the compiler's codes and words, E1xx syntax, E2xx checks); lint
adds warnings, W3xx. RULES is the registry of warnings: one small generator per rule over the AST
(lobsterc.tools.lint_rules; the injection rules in lobsterc.tools.lint_injection).

How far lint gets in a workflow file: a YAML/JSON syntax error stops it; every unknown key,
repeated step id, invalid JSON Schema and other structural problem is reported
(lobsterc.check.problems.lint_problems), and a structural problem stops it; else the file is
built as it is written (nothing is copied or renamed), the checker reports every error of every
step (references, conditions, pipelines, sub-workflows), and the warning rules run. The rules that need the compiled program
(unreachable steps, the approval proof) run when nothing above was an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from lobsterc.tools.lint_injection import rule_exec_shell, rule_shell_args, rule_shell_refs
from lobsterc.tools.lint_rules import (LintContext, Rule, StepRef, rule_approvals,
                                       rule_constant_conditions, rule_effects_values,
                                       rule_ignored_schema_keywords, rule_timeouts,
                                       rule_unreachable, rule_unused_args, walk)
from lobsterc.check.stages import check_pipeline
from lobsterc.diagnostics import CompileError, Diagnostic, render
from lobsterc.syntax import ast
from lobsterc.syntax.source import Source, Span
from vm.service.frontend import WORKFLOW_EXTENSIONS


RULES: tuple[Rule, ...] = (
    Rule("W301", "arg spliced into a shell line", rule_shell_args),
    Rule("W309", "step reference spliced into a shell line", rule_shell_refs),
    Rule("W310", "reference spliced into an exec stage's shell text", rule_exec_shell),
    Rule("W302", "step without a timeout", rule_timeouts),
    Rule("W303", "unused arg", rule_unused_args),
    Rule("W304", "condition that is always true", rule_constant_conditions),
    Rule("W307", "unknown effects value", rule_effects_values),
    Rule("W308", "JSON Schema keyword the validator ignores", rule_ignored_schema_keywords),
    Rule("W305", "unreachable step", rule_unreachable, needs_program=True),
    Rule("W306", "side-effecting step without an approval gate", rule_approvals,
         needs_program=True),
)


# ---------------------------------------------------------------------------------------------
# files

def lint_file(path: str, *, require_approval: bool = False, strict: bool = False,
              text: str | None = None) -> list[Diagnostic]:
    """Every diagnostic of one source file, sorted by position. `text` stands for the file's
    text (an editor's unsaved buffer: the file need not exist); spans name `path`."""
    if path.lower().endswith(WORKFLOW_EXTENSIONS):
        diags = _lint_workflow(path, require_approval, strict, text)
    else:
        diags = _lint_pipeline(path, require_approval, strict, text)
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


def _lint_pipeline(path: str, require_approval: bool, strict: bool,
                   text: str | None = None) -> list[Diagnostic]:
    from lobsterc.generate.codegen import compile_pipeline
    from lobsterc.syntax.parse import parse_pipeline
    from vm.core.source import file_name

    if text is None:
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
                          d.help, d.severity)

    name = file_name(path)  # as every location names a file
    try:
        parsed = parse_pipeline(body, name)
    except CompileError as exc:
        return [place(d) for d in exc.diagnostics]
    _, diags = check_pipeline(parsed)
    if diags:
        return [place(d) for d in diags]
    ctx = LintContext(name, program=compile_pipeline(body, name),
                      require_approval=require_approval, strict=strict)
    return [place(d) for d in rule_approvals(ctx)]


def _lint_workflow(path: str, require_approval: bool, strict: bool,
                   text: str | None = None) -> list[Diagnostic]:
    from lobsterc.check.checker import check_file

    loaded, diags = check_file(path, lenient=True, text=text)
    if loaded.workflow is None:
        return diags
    ctx = LintContext(path, wf=loaded.workflow, require_approval=require_approval, strict=strict)
    for rule in RULES:
        if not rule.needs_program:
            diags += list(rule.check(ctx))
    if any(d.severity == "error" for d in diags):
        return diags
    from lobsterc.generate.workflow import compile_workflow

    try:
        ctx.program = compile_workflow(path, text=text)
    except CompileError as exc:
        return diags + list(exc.diagnostics)
    ctx.steps = step_index(loaded.workflow, "", ())
    for rule in RULES:
        if rule.needs_program:
            diags += list(rule.check(ctx))
    return diags


def step_index(wf: ast.Workflow, prefix: str, chain: tuple[str, ...]) -> dict[str, StepRef]:
    """Compiled step label -> its step, following sub-workflow calls as the compiler does (a
    callee's steps are labelled `call/step`)."""
    out: dict[str, StepRef] = {}
    chain = (*chain, os.path.realpath(wf.path))
    for label, step in walk(wf.steps, prefix):
        out[label] = StepRef(label, step)
        call = step.kind
        if isinstance(call, ast.SubWorkflow) and call.path not in chain:
            callee = wf.callee(call)
            if callee is not None and callee.workflow is not None:
                out.update(step_index(callee.workflow, f"{label}/", chain))
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
             strict: bool = False, out=None, err=None, text: str | None = None) -> int:
    """The `lobsterc lint` command: 0 clean, 1 findings, 2 usage error (a file that does not
    exist, an unknown format). `text`: the text of the one file named, which need not exist
    (stdin)."""
    import sys

    out = out or sys.stdout
    err = err or sys.stderr
    if fmt not in ("text", "json", "sarif", "github"):
        err.write("lint --format must be text, json, sarif or github\n")
        return 2
    missing = [f for f in files if text is None and not os.path.isfile(f)]
    if missing:
        for f in missing:
            err.write(f"lobsterc: no such file: {f}\n")
        return 2
    found: list[tuple[str, Diagnostic]] = []
    for f in files:
        found += [(f, d) for d in lint_file(f, require_approval=require_approval, strict=strict,
                                            text=text)]
    if fmt == "json":
        out.write(json.dumps([as_json(f, d) for f, d in found], indent=2) + "\n")
    elif fmt in ("sarif", "github"):
        from lobsterc.tools.sarif import lint_github, lint_sarif

        out.write((lint_sarif if fmt == "sarif" else lint_github)(found))
    else:
        sources: dict[str, Source] = {files[0]: Source(files[0], text)} if text is not None \
            else {}
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
