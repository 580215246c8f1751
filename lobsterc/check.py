"""Checks of a parsed pipeline against the command signatures: names, flags, arguments.

Each check yields Diagnostics; `check_pipeline` gathers them and binds every stage to its
command and parsed Args.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from attrs import frozen

from lobsterc import ast
from lobsterc.diagnostics import Diagnostic
from vm.commands import COMMANDS, Args, Command

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


@frozen
class BoundStage:
    stage: ast.Stage
    command: Command
    args: Args


def did_you_mean(word: str, choices) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def bind(stage: ast.Stage, cmd: Command) -> tuple[Args, list[Diagnostic]]:
    """Parse a stage's words into flags and positionals by the command's signature."""
    flags: dict = {}
    positionals: list[str] = []
    diags: list[Diagnostic] = []
    words = stage.words
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if cmd.rest_after_first_positional and positionals:
            positionals.append(word.text)
            continue
        if not word.text.startswith("--"):
            positionals.append(word.text)
            continue
        name, eq, value = word.text[2:].partition("=")
        flag = cmd.flag(name)
        if flag is None:
            names = [f"--{f.name}" for f in cmd.flags] + [f"--{a}" for f in cmd.flags for a in f.aliases]
            diags.append(Diagnostic(
                "E202", f"Unknown flag --{name} for {stage.name.text}", word.span,
                help=did_you_mean(f"--{name}", names) or _flag_list(cmd)))
            if not eq and i < len(words) and not words[i].text.startswith("--"):
                i += 1  # an unknown flag's value is not a positional
            continue
        if flag.kind == "bool":
            if not eq:
                flags[flag.name] = True
            elif value.lower() in _TRUE:
                flags[flag.name] = True
            elif value.lower() in _FALSE:
                flags[flag.name] = False
            else:
                diags.append(Diagnostic(
                    "E204", f"{stage.name.text} --{name} must be true or false (got {value})",
                    word.span))
        elif eq:
            flags[flag.name] = value
        elif i < len(words) and not words[i].text.startswith("--"):
            flags[flag.name] = words[i].text
            i += 1
        else:
            flags[flag.name] = True
    return Args(flags=flags, positionals=tuple(positionals)), diags


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
    yield BoundStage(stage, cmd, args)


def check_pipeline(pipeline: ast.Pipeline) -> tuple[list[BoundStage], list[Diagnostic]]:
    bound: list[BoundStage] = []
    diags: list[Diagnostic] = []
    for stage in pipeline.stages:
        for result in check_stage(stage):
            (bound if isinstance(result, BoundStage) else diags).append(result)
    return bound, diags
