"""Lint's injection rules: `${arg}` and `$step.path` spliced into code (W301 shell lines, W309 step
references in shell lines, W310 what a pipeline's exec stage runs as code), each placed exactly in
the file and with the fix for the language that reads it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from attrs import frozen

from lobsterc.check.checker import sub_span
from lobsterc.tools.lint_rules import LintContext, walk
from lobsterc.check.stages import positional_words
from lobsterc.diagnostics import Diagnostic
from lobsterc.syntax import ast
from lobsterc.syntax.parse import decode_word_offsets
from lobsterc.syntax.interpreters import INTERPRETERS, program_name, program_texts
from lobsterc.syntax.shellwords import command_start, here_documents, split_commands
from lobsterc.syntax.source import Source, Span
from vm.engine.refs import ARG, REF, env_name


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
