"""`lobsterc lint`: every diagnostic of a pipeline or workflow file at once. The errors are the
checker's (lobsterc.check.checker: the compiler's codes and words, E1xx syntax, E2xx checks); lint adds
warnings, W3xx. RULES is the registry of warnings: one small generator per rule over the AST.

How far lint gets in a workflow file: a YAML/JSON syntax error stops it; duplicate step ids
and invalid JSON Schemas are all reported and then set aside, so the file's structure can
still be validated (its first structural error stops it); after that the checker reports every
error of every step (references, conditions, pipelines, sub-workflows), and the warning rules
run. The rules that need the compiled program (unreachable steps, the approval proof) run when
nothing above was an error.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from attrs import define, field, frozen

from lobsterc.syntax import ast
from lobsterc.check.checker import check_pipeline, did_you_mean, positional_words, sub_span
from lobsterc.diagnostics import CompileError, Diagnostic, render
from lobsterc.syntax.parse import decode_word_offsets
from lobsterc.syntax.interpreters import INTERPRETERS, program_name, program_texts
from lobsterc.syntax.shellwords import command_start, here_documents, split_commands
from lobsterc.syntax.source import Source, Span
from vm.core import js
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.engine.refs import ARG, REF, env_name


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


# ---------------------------------------------------------------------------------------------
# rules

def _shell_lines(step: ast.Step) -> Iterator[tuple[str, Span]]:
    """The shell lines a step runs with /bin/sh -c (its `run:`/`command:` line, its parallel
    branches' lines), each with the span of its scalar."""
    kind = step.kind
    if isinstance(kind, ast.Shell):
        yield kind.line, step.loc.span(kind.key)
    elif isinstance(kind, ast.Parallel):
        for b in kind.branches:
            if b.shell is not None:
                yield b.shell.line, b.loc.span(b.shell.key)


def _pipelines(step: ast.Step) -> Iterator[ast.PipelineText]:
    kind = step.kind
    if isinstance(kind, ast.PipelineStep):
        yield kind.pipeline
    elif isinstance(kind, ast.Parallel):
        yield from (b.pipeline for b in kind.branches if b.pipeline is not None)


@frozen
class CodeText:
    """A part of a pipeline word that a program runs as code: word.text[start:]."""

    word: ast.Word
    start: int
    language: str  # "sh", "python", ... (lobsterc.syntax.shellwords.INTERPRETERS)


def exec_program_texts(item: Any) -> Iterator[CodeText]:
    """What a bound exec stage runs as code: the `--shell` value and a lone positional with
    whitespace (shell lines), and the program text its argv hands an interpreter, directly
    or through a wrapper (`sh -c TEXT`, `env sh -c TEXT`, `python3 -c TEXT`, `node -e TEXT`;
    lobsterc.syntax.shellwords.program_texts). Other argv words are data: not code."""
    if item.command.lowering != "exec":
        return
    words = item.stage.words
    for i, word in enumerate(words):
        name = word.text[2:].partition("=")
        if word.text.startswith("--") and item.command.flag(name[0]) is not None \
                and item.command.flag(name[0]).name == "shell":
            if name[1]:
                yield CodeText(word, len(name[0]) + 3, "sh")
            elif i + 1 < len(words):
                yield CodeText(words[i + 1], 0, "sh")
    if isinstance(item.args.get("shell"), str):
        return
    argv = positional_words(item.stage, item.command)
    if len(argv) == 1 and any(ch.isspace() for ch in argv[0].text):
        yield CodeText(argv[0], 0, "sh")
        return
    for part in program_texts([w.text for w in argv]):
        yield CodeText(argv[part.word], part.start, part.language)


def nested_languages(text: str, language: str = "sh", depth: int = 0) -> list[tuple[int, int, str]]:
    """(start, end, language) of the program texts inside a shell text that another
    interpreter runs (`python3 -c '...'` in a `run:` line), innermost last."""
    if language != "sh" or depth > 3:
        return []
    out: list[tuple[int, int, str]] = []
    for command in split_commands(text):
        command = command[command_start([w.text for w in command]):]
        for part in program_texts([w.text for w in command]):
            word = command[part.word]
            if part.start >= len(word.offsets):
                continue
            start, end = word.offsets[part.start], word.offsets[-1] + 1
            out.append((start, end, part.language))
            inner = word.text[part.start:]
            out += [(word.offsets[part.start + a], word.offsets[part.start + b - 1] + 1, lang)
                    for a, b, lang in nested_languages(inner, part.language, depth + 1) if b > a]
    for command, doc in here_documents(text) if depth == 0 else ():
        words = [w.text for w in command]
        words = words[command_start(words):]
        reads = INTERPRETERS.get(program_name(words[0])) if words else None
        if reads is not None and not doc.quoted and not program_texts(words):
            out.append((doc.start, doc.end, HEREDOC + reads[0]))  # its program comes on stdin
    return out


HEREDOC = "heredoc:"  # a language prefix: program text in an unquoted here-document


def _in_heredoc(language: str) -> str | None:
    """The program's language when `language` marks an unquoted here-document, else None."""
    return language[len(HEREDOC):] if language.startswith(HEREDOC) else None


def _heredoc_fix(var: str, language: str, ref: str | None = None) -> str:
    """The fix for a splice into a program read from an unquoted here-document, where the shell
    expands `$VAR` into the program text too."""
    via = f"pass it through the step's `env:` as {var}, " if ref else ""
    return (f"{via}quote the here-document's delimiter (<<'EOF': the shell then expands nothing "
            f"in it) and read {_read(language, var)}: {_where(language)} then reads the value "
            "as data, never as code")


def language_at(spans: list[tuple[int, int, str]], start: int, end: int) -> str:
    """The innermost language whose program text holds text[start:end] ("sh" outside all)."""
    language = "sh"
    for a, b, lang in spans:
        if a <= start and end <= b:
            language = lang
    return language


@frozen
class Splice:
    """One reference that lands in shell text: its text and where it sits."""

    kind: str  # "arg" | "step"
    name: str  # the arg's name or the step id
    text: str  # as written: ${name} or $step.path
    span: Span
    start: int = 0  # where it sits in the text searched
    end: int = 0


def references(text: str, args: Any, steps: Any) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, name) of every `${arg}` of a declared arg and every `$step.path` of
    a step the file has in `text`, in order."""
    found = [(m.start(), m.end(), "arg", m[1]) for m in ARG.finditer(text) if m[1] in args]
    found += [(m.start(), m.end(), "step", m[1]) for m in REF.finditer(text) if m[1] in steps]
    return sorted(found)


def splices(text: str, span: Span, args: Any, steps: Any, source: Source,
            raw: str | None = None, at: int = 0) -> Iterator[Splice]:
    """Every `${arg}` of a declared arg and every `$step.path` of a step the file has in
    `text`. Positions: of the reference in `raw` (the scalar's text; `text` is the part of it
    from offset `at`), placed in the file by text_span."""
    raw = text if raw is None else raw
    for start, end, kind, name in references(text, args, steps):
        yield Splice(kind, name, text[start:end],
                     text_span(span, raw, at + start, at + end, source), start, end)


def text_span(span: Span, value: str, start: int, end: int, source: Source) -> Span:
    """The span of value[start:end] in the file: sub_span for a scalar on one line; for a block
    scalar (`|`), the file line that holds that line of the value; else the scalar's span."""
    if span.line == span.end_line and "\n" not in value:
        return sub_span(span, value, start, end)
    line_no = value.count("\n", 0, start)
    lines = value.split("\n")
    col0 = start - (value.rfind("\n", 0, start) + 1)
    file_line = span.line
    for i in range(line_no + 1):
        want = lines[i]
        file_line += 1
        while file_line <= span.end_line and (source.line_text(file_line).strip() != want.strip()
                                               if want.strip() else False):
            file_line += 1
        if file_line > span.end_line:
            return span
    text = source.line_text(file_line)
    offset = text.find(lines[line_no])
    if offset < 0 or end - start > len(lines[line_no]) - col0:
        return span
    col = offset + col0 + 1
    return Span(span.source, file_line, col, file_line, col + max(1, end - start))


def _step_names(wf: ast.Workflow) -> set[str]:
    """Every name a `$name.path` reference may read in this file: step ids, parallel branch
    ids, loop variables."""
    names: set[str] = set()
    for _, step in walk(wf.steps):
        names.add(step.id)
        if isinstance(step.kind, ast.Parallel):
            names.update(b.id for b in step.kind.branches)
        elif isinstance(step.kind, ast.ForEach):
            names.update((step.kind.item_var, step.kind.index_var))
    return names


def _env_var(ref: str) -> str:
    return env_name(ref.lstrip("$").replace(".", "_")) or "VALUE"


# how a program reads an environment variable, for the fix in the help text
READ_ENV = {"sh": '"${}"', "python": 'os.environ["{}"]', "node": "process.env.{}",
            "perl": "$ENV{{{}}}", "ruby": 'ENV["{}"]', "php": 'getenv("{}")',
            "lua": 'os.getenv("{}")', "R": 'Sys.getenv("{}")', "awk": 'ENVIRON["{}"]',
            "jq": "env.{}", "pwsh": "$env:{}", "osascript": 'system attribute "{}"'}


def _where(language: str) -> str:
    return "the shell" if language == "sh" else f"the {language} program"


def _read(language: str, var: str) -> str:
    pattern = READ_ENV.get(language)
    if pattern is None:  # sed cannot read the environment
        return f'"${var}" in a shell (or ENVIRON["{var}"] in awk) instead of {language}'
    return f"{pattern.format(var)} in {_where(language)}"


def _env_fix(s: Splice, language: str = "sh") -> str:
    if (inner := _in_heredoc(language)) is not None:
        if s.kind == "arg":
            return _heredoc_fix(f"LOBSTER_ARG_{env_name(s.name)}", inner)
        return _heredoc_fix(_env_var(s.text), inner, s.text)
    then = f"{_where(language)} then reads the value as data, never as code"
    if s.kind == "arg":
        var = f"LOBSTER_ARG_{env_name(s.name)}"
        return (f"read {_read(language, var)} instead (or pass it through the step's `env:`): "
                f"{then}")
    var = _env_var(s.text)
    return (f"pass it through the step's `env:` ({var}: {s.text}) and read "
            f"{_read(language, var)}: {then}")


def rule_shell_args(ctx: LintContext) -> Iterator[Diagnostic]:
    """W301: `${arg}` in a shell line splices the arg's text into shell code; the injected
    environment variable LOBSTER_ARG_<NAME> carries it as data."""
    for _, step in walk(ctx.wf.steps):
        for line, span in _shell_lines(step):
            nested = nested_languages(line)
            for s in splices(line, span, ctx.wf.args, (), ctx.wf.source):
                var = f"LOBSTER_ARG_{env_name(s.name)}"
                language = language_at(nested, s.start, s.end)
                use = f'"${var}"' if language == "sh" else _read(language, var)
                fix = _heredoc_fix(var, inner) if (inner := _in_heredoc(language)) else (
                    f"use {use} instead: {_where(language)} then reads the value as data, "
                    "never as code")
                yield Diagnostic("W301", f"arg '{s.name}' is spliced into a shell line", s.span,
                                 help=fix, severity="warning")


def rule_shell_refs(ctx: LintContext) -> Iterator[Diagnostic]:
    """W309: `$step.path` in a shell line splices a step's output into shell code; the step's
    `env:` carries it as data."""
    names = _step_names(ctx.wf)
    for _, step in walk(ctx.wf.steps):
        for line, span in _shell_lines(step):
            nested = nested_languages(line)
            for s in splices(line, span, (), names, ctx.wf.source):
                yield Diagnostic("W309", f"step reference {s.text} is spliced into a shell line",
                                 s.span, help=_env_fix(s, language_at(nested, s.start, s.end)),
                                 severity="warning")


def rule_exec_shell(ctx: LintContext) -> Iterator[Diagnostic]:
    """W310: `${arg}` or `$step.path` in what a pipeline's exec stage runs as code (its shell
    text, or the program text of `sh -c`, `python3 -c`, `node -e`, ... in its argv, also behind
    `env` and other wrappers): spliced into code, as in a `run:` line. A reference that is an
    argv word of its own (`exec echo $a.json`) is data and is not reported."""
    names = _step_names(ctx.wf)
    source = ctx.wf.source
    for _, step in walk(ctx.wf.steps):
        for pipeline in _pipelines(step):
            if pipeline.parsed is None:
                continue
            for item in pipeline.bound:
                for code in exec_program_texts(item):
                    for s in code_splices(pipeline, code, ctx.wf.args, names, source):
                        what = f"arg '{s.name}'" if s.kind == "arg" else f"step reference {s.text}"
                        yield Diagnostic(
                            "W310", f"{what} is spliced into the {s.where} of "
                            f"{item.command.name} in step {step.id}", s.span,
                            help=_env_fix(s, s.language), severity="warning")


@frozen
class CodeSplice(Splice):
    language: str = "sh"

    @property
    def where(self) -> str:
        return "shell text" if self.language == "sh" else f"{self.language} program text"


def code_splices(pipeline: ast.PipelineText, code: CodeText, args: Any, names: Any,
                 source: Source) -> Iterator[CodeSplice]:
    """The references in one CodeText, each placed exactly in the file (through the word's
    quotes and escapes) and with the language that reads it."""
    text = code.word.text[code.start:]
    nested = nested_languages(text, code.language)
    where = _word_offsets(pipeline.text, code.word)
    for start, end, kind, name in references(text, args, names):
        if where is None:
            span = code.word.span
        else:
            base, offsets = where
            span = text_span(pipeline.span, pipeline.text, base + offsets[code.start + start],
                             base + offsets[code.start + end - 1] + 1, source)
        language = language_at(nested, start, end) if code.language == "sh" else code.language
        yield CodeSplice(kind, name, text[start:end], span, start, end, language)


def _word_offsets(raw: str, word: ast.Word) -> tuple[int, list[int]] | None:
    """Where a word's token starts in the pipeline text, and for each character of the word's
    text its offset from there (through quotes and escapes); None if the token is not there."""
    lines = raw.split("\n")

    def offset(line: int, col: int) -> int:
        return sum(len(text) + 1 for text in lines[:line - 1]) + col - 1

    sp = word.span
    if sp.end_line > len(lines):
        return None
    start = offset(sp.line, sp.col)
    text, _, offsets = decode_word_offsets(raw[start:offset(sp.end_line, sp.end_col)])
    return (start, offsets) if text == word.text else None


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
    from lobsterc.check.effects import constant_condition

    for _, step in walk(ctx.wf.steps):
        when = step.when
        if when is not None and when.tree is not None and constant_condition(when.tree) is True:
            yield Diagnostic("W304", "condition is always true", when.span,
                             help=f"remove `{when.key}`: step {step.id} always runs",
                             severity="warning")


def rule_effects_values(ctx: LintContext) -> Iterator[Diagnostic]:
    """W307: `effects:` takes write, read or none."""
    from lobsterc.check.effects import MARKS

    for _, step in walk(ctx.wf.steps):
        value = step.effects
        if value is not ast.ABSENT and value not in MARKS:
            shown = js.to_text(value)
            yield Diagnostic("W307", f"unknown effects value '{shown}'", step.loc.span("effects"),
                             help=did_you_mean(str(shown), MARKS) or "use write, read or none",
                             severity="warning")


def rule_unreachable(ctx: LintContext) -> Iterator[Diagnostic]:
    """W305: a step whose execution no path of the compiled program reaches, a conditional
    jump on a constant condition taking only its feasible edge. Steps inside an unreachable
    step (loop sub-steps, a sub-workflow's steps) are not reported again."""
    from lobsterc.check.effects import _CONTROL, Cfg, constant_condition, loop_tails

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
        step = ctx.steps[info.id].step
        cond = step.when.tree if step.when is not None else None
        why = ("its condition is always false" if cond is not None
               and constant_condition(cond) is False else "no path from the start reaches it")
        yield Diagnostic("W305", f"step {step.id} never runs", step.span, help=why,
                         severity="warning")


def rule_approvals(ctx: LintContext) -> Iterator[Diagnostic]:
    """W306: the approval proof (lobsterc.check.effects). Steps marked `effects: write` are always
    checked; with --require-approval, command classes too (--strict adds local_exec)."""
    from lobsterc.check.effects import verify_approvals

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
    ctx.steps = _index(loaded.workflow, "", ())
    for rule in RULES:
        if rule.needs_program:
            diags += list(rule.check(ctx))
    return diags


def _index(wf: ast.Workflow, prefix: str, chain: tuple[str, ...]) -> dict[str, StepRef]:
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
                out.update(_index(callee.workflow, f"{label}/", chain))
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
