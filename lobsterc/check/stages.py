"""Pipeline stages against the command signatures (vm.host.commands): names, flags, arguments and
the values that can be checked before anything runs. `check_pipeline` binds each stage to its
command and parsed Args; a workflow file's pipelines are bound once, as the file is built
(lobsterc.load.build), and placed in the file by lobsterc.check.checker."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from attrs import frozen

from lobsterc.diagnostics import Diagnostic
from lobsterc.syntax import ast
from lobsterc.syntax.source import Span
from vm.host.commands import COMMANDS, Args, Command


@frozen
class BoundStage:
    stage: ast.Stage
    command: Command
    args: Args


def did_you_mean(word: str, choices) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _read_words(stage: ast.Stage, cmd: Command) -> Iterator[tuple[ast.Word, Any, str, Any]]:
    """A stage's words as the command's signature reads them, one (word, flag, name, value)
    each: a positional is (word, None, "", None); an unknown flag (word, None, its name, None),
    its value word (if any) skipped; a flag (word, the Flag, the name it was written with, its
    value as written: the text after `=`, else a value flag's next word, else True)."""
    words = stage.words
    positional = False
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if (cmd.rest_after_first_positional and positional) or not word.text.startswith("--"):
            positional = True
            yield word, None, "", None
            continue
        name, eq, value = word.text[2:].partition("=")
        flag = cmd.flag(name)
        takes_next = not eq and i < len(words) and not words[i].text.startswith("--")
        if flag is None:
            if takes_next:
                i += 1  # an unknown flag's value is not a positional
            yield word, None, name, None
        elif eq:
            yield word, flag, name, value
        elif flag.kind != "bool" and takes_next:
            i += 1
            yield word, flag, name, words[i - 1].text
        else:
            yield word, flag, name, True


def bind(stage: ast.Stage, cmd: Command) -> tuple[Args, list[Diagnostic]]:
    """Parse a stage's words into flags and positionals by the command's signature."""
    flags: dict = {}
    positionals: list[str] = []
    diags: list[Diagnostic] = []
    for word, flag, name, value in _read_words(stage, cmd):
        if flag is None and not name:
            positionals.append(word.text)
        elif flag is None:
            names = [f"--{f.name}" for f in cmd.flags] + [f"--{a}" for f in cmd.flags for a in f.aliases]
            diags.append(Diagnostic(
                "E202", f"Unknown flag --{name} for {stage.name.text}", word.span,
                help=did_you_mean(f"--{name}", names) or _flag_list(cmd)))
        elif flag.kind == "bool":
            # `--flag=VALUE` is on unless VALUE is empty, as in the original (its parser keeps
            # the text and its commands test it for truth: `--json=false` is on)
            flags[flag.name] = value is True or value != ""
        else:
            flags[flag.name] = value
    return Args(flags=flags, positionals=tuple(positionals)), diags


def written_flags(stage: ast.Stage, cmd: Command) -> dict[str, Any]:
    """A stage's flags as the original's parser keeps them: each under the name it was written
    with (`--dryRun`, an alias of `dry-run`, as dryRun), in the order first written, with the
    value last written under that name and as written (`--json=false` as false): what a dry
    run shows. bind() reads the same words the same way."""
    shown: dict[str, Any] = {}
    for _, flag, name, value in _read_words(stage, cmd):
        if flag is not None:
            shown[name] = value
    return shown


def _flag_list(cmd: Command) -> str:
    if not cmd.flags:
        return f"{cmd.name} takes no flags"
    return f"{cmd.name} takes " + ", ".join(f"--{f.name}" for f in cmd.flags)


def check_stage(stage: ast.Stage) -> Iterator[Diagnostic | BoundStage]:
    name = stage.name.text
    cmd = COMMANDS.get(name)
    if cmd is None:
        yield Diagnostic("E201", f"Unknown command: {name}", stage.name.span,
                         help=did_you_mean(name, COMMANDS))
        return
    args, diags = bind(stage, cmd)
    yield from diags
    if diags:
        return
    problem = cmd.check(args) if cmd.check else None
    if problem:
        yield Diagnostic("E203", problem, stage.span)
        return
    extra = list(stray_words(stage, cmd, args))
    yield from extra
    values = list(check_values(stage, cmd, args))
    yield from values
    if extra or values:
        return
    yield BoundStage(stage, cmd, args)


# Commands that read one positional (the rest would be ignored): where, pick, state.*,
# diff.last. A command whose signature has no positionals reads none.
_ONE_POSITIONAL = frozenset({"where", "pick", "state.get", "state.set", "diff.last"})


def positional_words(stage: ast.Stage, cmd: Command) -> list[ast.Word]:
    """The stage's words that bind() made positionals (not flags nor their values)."""
    out: list[ast.Word] = []
    words = stage.words
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.text.startswith("--"):
            out.append(word)
            continue
        name, eq, _ = word.text[2:].partition("=")
        flag = cmd.flag(name)
        if flag is not None and flag.kind != "bool" and not eq and i < len(words) \
                and not words[i].text.startswith("--"):
            i += 1
    return out


def stray_words(stage: ast.Stage, cmd: Command, args: Args) -> Iterator[Diagnostic]:
    """E205: positional words a command never reads (the original ignores them, so `head 2`
    and `sort -r` silently do something else than meant: a deliberate difference)."""
    if cmd.rest_after_first_positional or not args.positionals:
        return
    words = positional_words(stage, cmd)
    name = stage.name.text
    if cmd.lowering == "exec":
        if isinstance(args.get("shell"), str) and args.get("shell") != "" and words:
            yield Diagnostic("E205", f"exec --shell takes no other words (got {words[0].text})",
                             words[0].span,
                             help="quote the whole shell line as the --shell value")
        elif args.get("shell") is True and len(words) > 1:  # the first word is the line
            yield Diagnostic("E205", f"exec --shell takes no other words (got {words[1].text})",
                             words[1].span,
                             help="quote the whole shell line as one word")
        return
    if not cmd.positionals:
        yield Diagnostic("E205", f"{name} takes no positional arguments (got {words[0].text})",
                         words[0].span, help=_flag_list(cmd))
    elif cmd.name in _ONE_POSITIONAL and len(words) > 1:
        yield Diagnostic("E205", f"{name} takes one positional argument (got {words[1].text} "
                         "after it)", words[1].span,
                         help=f"quote it as one word: {name} '{' '.join(w.text for w in words)}'")


def _templated(value: Any) -> bool:
    """A value a workflow file fills in at run time (`${arg}`, `$step.path`): not checkable."""
    return isinstance(value, str) and "$" in value


def _flag_word(stage: ast.Stage, cmd: Command, flag: str) -> Span:
    for word in stage.words:
        name = word.text[2:].partition("=")[0]
        if word.text.startswith("--") and cmd.flag(name) is not None \
                and cmd.flag(name).name == flag:
            return word.span
    return stage.span


def check_values(stage: ast.Stage, cmd: Command, args: Args) -> Iterator[Diagnostic]:
    """E204: flag and positional values that can be checked before anything runs, with the
    message the command would fail with at run time."""
    from vm.core import js, json_read

    name = cmd.name
    if name == "head":
        n = args.get("n")
        if isinstance(n, str) and not _templated(n):
            value = js.to_number(n)
            if value != value or value in (float("inf"),) or value < 0:
                yield Diagnostic("E204", "head --n must be a non-negative number",
                                 _flag_word(stage, cmd, "n"), help="e.g. head --n 5")
    elif name == "where" and args.positionals and not _templated(args.positionals[0]):
        from vm.host.commands.data import where_parts

        expr = args.positionals[0]
        if where_parts(expr) is None:
            words = positional_words(stage, cmd)
            yield Diagnostic("E204", f"Invalid where expression: {expr}",
                             words[0].span if words else stage.span,
                             help="write field OP value as one word, e.g. where 'a=1' "
                                  "(OP: = == != < <= > >=)")
    elif cmd.lowering == "stage" and name in ("llm.invoke", "llm_task.invoke"):
        provider = args.get("provider")
        flag = cmd.flag("provider")
        if isinstance(provider, str) and provider and not _templated(provider) \
                and provider.lower() not in flag.choices:
            yield Diagnostic("E204", f"Unsupported llm provider: {provider.lower()}",
                             _flag_word(stage, cmd, "provider"),
                             help=did_you_mean(provider.lower(), flag.choices)
                             or f"--provider takes {', '.join(flag.choices)}")
        for key in ("temperature", "max-output-tokens"):
            raw = args.get(key)
            if isinstance(raw, str) and not _templated(raw):
                value = js.to_number(raw) if raw.strip() else float("nan")
                if value != value or value in (float("inf"), float("-inf")):
                    yield Diagnostic("E204", f"{name} --{key} must be a number",
                                     _flag_word(stage, cmd, key))
        for key, want, what in (("artifacts-json", list, "array"),
                                ("metadata-json", dict, "object"),
                                ("output-schema", dict, "object")):
            raw = args.get(key)
            if isinstance(raw, str) and raw and not _templated(raw):
                try:
                    value = json_read.json_loads(raw)
                except ValueError:
                    value = None
                if not isinstance(value, want):
                    yield Diagnostic("E204", f"{name} --{key} must be a JSON {what}",
                                     _flag_word(stage, cmd, key))
    elif cmd.flag("args-json") is not None:
        raw = args.get("args-json")
        if isinstance(raw, str) and not _templated(raw):
            import json

            try:
                json.loads(raw)
            except ValueError:
                yield Diagnostic("E204", f"{name} --args-json must be valid JSON",
                                 _flag_word(stage, cmd, "args-json"))


def check_pipeline(pipeline: ast.Pipeline) -> tuple[list[BoundStage], list[Diagnostic]]:
    """Every stage bound to its command, and the diagnostics of the stages that do not bind."""
    bound: list[BoundStage] = []
    diags: list[Diagnostic] = []
    for stage in pipeline.stages:
        for result in check_stage(stage):
            (bound if isinstance(result, BoundStage) else diags).append(result)
    return bound, diags
