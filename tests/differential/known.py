"""Known divergences not accepted as deliberate (DIVERGENCES.md D entries): each has an
xfail(strict) case; generated runs tolerate a match, so only a new divergence fails them."""

from __future__ import annotations

import json

from .allowlist import Entry
from .normalise import comparable

SUBCOMMANDS = ("run", "resume", "tool", "mcp", "pending", "cancel", "history", "gc", "key",
               "migrate", "graph", "doctor", "completion", "version", "help")


def _help_of_a_subcommand(case, i, ref, ours) -> bool:
    """`lobster help run`: the original knows only pipeline commands there (`Unknown command:
    run`, exit 2); ours prints the subcommand's help (exit 0)."""
    argv = ours.get("argv") or []
    return (len(argv) >= 2 and argv[0] == "help" and argv[1] in SUBCOMMANDS
            and ref.get("exitCode") == 2 and ours.get("exitCode") == 0
            and (ref.get("stderr") or "").startswith(f"Unknown command: {argv[1]}"))


def _cli_value_refused(case, i, ref, ours) -> bool:
    """`lobster run --mode` / `graph --format` as the last word, or `graph A B`: the original
    leaves a flag without its value unset (the default) and takes the first of two paths; ours
    refuses them as usage errors (exit 2)."""
    argv = ours.get("argv") or []
    said = (ours.get("stderr") or "")
    if ours.get("exitCode") != 2 or argv[:1] not in (["run"], ["graph"]):
        return False
    last_flag = len(argv) > 1 and argv[-1] in ("--mode", "--format", "--args-json", "--file")
    return ((last_flag and ("(got nothing)" in said or "requires a value" in said))
            or (argv[0] == "graph" and said.startswith("graph accepts one workflow file path")))


def json_text(step: dict) -> str:
    return json.dumps(step.get("stdoutJson")) + (step.get("stderr") or "")


CLI_ARGV_HEADS = ("gmail", "agent", "pr")


def _argv_shape(words: list, ours: bool):
    """An external CLI's argv as (positionals, sorted (flag, value) pairs): ours glues a value
    to its flag (`--max=20`) and puts positionals after `--`; the original passes `--max 20`
    and the positional in place."""
    positional, flags, k, rest = [], [], 0, False
    while k < len(words):
        w = words[k]
        if rest or not w.startswith("--"):
            positional.append(w)
        elif ours and w == "--":
            rest = True
        elif ours and "=" in w:
            flags.append(tuple(w.split("=", 1)))
        elif not ours and k + 1 < len(words) and not words[k + 1].startswith("--"):
            flags.append((w, words[k + 1]))
            k += 1
        else:
            flags.append((w, True))
        k += 1
    return {"positional": positional, "flags": sorted(flags, key=str)}


def _with_argv_shapes(value, ours: bool):
    if isinstance(value, list) and value and all(isinstance(w, str) for w in value) \
            and value[0] in CLI_ARGV_HEADS:
        return _argv_shape(value, ours)
    if isinstance(value, list):
        return [_with_argv_shapes(v, ours) for v in value]
    if isinstance(value, dict):
        return {k: _with_argv_shapes(v, ours) for k, v in value.items()}
    return value


def _values_never_flags(case, i, ref, ours) -> bool:
    """A fake external CLI echoed its argv: the same words, ours with each value glued to its
    flag or after `--`."""
    a, b = comparable(ref), comparable(ours)
    if a == b or "stdoutJson" not in a:
        return False
    return _with_argv_shapes(a, False) == _with_argv_shapes(b, True)


def _approve_true_false(case, i, ref, ours) -> bool:
    """`lobster resume --approve true|false`: the original refuses the word (`resume --approve
    must be yes or no`); ours takes it as yes/no and answers as for that decision."""
    argv = ours.get("argv") or []
    words = [argv[k + 1].strip().lower() for k, w in enumerate(argv[:-1]) if w in ("--approve", "--decision")]
    words += [w.split("=", 1)[1].strip().lower() for w in argv if w.startswith(("--approve=", "--decision="))]
    env = ref.get("stdoutJson")
    said = env.get("error", {}).get("message") if isinstance(env, dict) else None
    return (argv[:1] == ["resume"] and any(w in ("true", "false") for w in words)
            and said == "resume --approve must be yes or no")


def _args_after_split(case, i, ref, ours) -> bool:
    """A workflow `pipeline:` step whose `${arg}` value holds a quote (or a `|`): the original
    pastes the value into the text before splitting it and fails to parse it; ours substitutes
    inside each word after the split and runs."""
    text = json_text(ref)
    return ("pipeline parse failed: " in text and "${" in json.dumps(case.get("files", {}))
            and ours.get("exitCode") == 0)


ENTRIES: tuple[Entry, ...] = (
    Entry("D35", "help of a subcommand", "candidate deliberate (not in SPEC section 9)",
          "`lobster help run` prints run's help in ours (as `lobster run --help` does); the "
          "original's `help` knows only pipeline commands and answers `Unknown command: run` "
          "(exit 2). Ours is arguably better; the lead decides.", _help_of_a_subcommand),
    Entry("D37", "a CLI flag without its value, a second graph path", "candidate deliberate (not in SPEC section 9)",
          "`lobster run --mode`, `lobster graph --file w.lobster --format` (the flag the last "
          "word) and `lobster graph a.lobster b.lobster`: the original leaves the flag unset "
          "(human mode, mermaid) and graphs the first file; ours refuses them (exit 2, `run "
          "--mode must be tool or human (got nothing)`, `graph --format requires a value`, "
          "`graph accepts one workflow file path`), in the spirit of SPEC 9.1 and 9.20; the "
          "lead decides.", _cli_value_refused),
    Entry("D39", "external CLIs get values, never flags", "candidate deliberate (docs/differences.md "
          "'Also ours', not in SPEC section 9)",
          "ours passes `gog gmail search --json --max=20 -- QUERY`, `gog gmail send --to=A ...`, "
          "`openclaw agent --json --message=M --agent=A`; the original passes each value as a word "
          "of its own, so a value starting with `-` is read as a flag. The same words otherwise. "
          "docs/differences.md describes it as deliberate (safety); SPEC section 9 does not list "
          "it: the lead decides.", _values_never_flags),
    Entry("D40", "resume --approve true|false", "candidate deliberate (docs/differences.md 'Also ours', "
          "not in SPEC section 9)",
          "`lobster resume --approve true` (or false) is a decision in ours (as yes/no), so the "
          "resume goes on to its next check or answers; the original refuses the word: `resume "
          "--approve must be yes or no` (parse_error, exit 2). docs/differences.md lists it as "
          "ours; SPEC section 9 does not: the lead decides.", _approve_true_false),
    Entry("D41", "${arg} in a pipeline: step is substituted after the split", "candidate deliberate "
          "(docs/differences.md, not in SPEC section 9)",
          "`pipeline: template --text '<${x}>'` with x = `it's`: the original pastes the value "
          "into the text, then splits it (`Workflow step b pipeline parse failed: Unclosed "
          "quote`); ours substitutes inside each word after the split, so a value never adds a "
          "quote, stage or flag, and the step runs (`<it's>`). docs/differences.md states ours; "
          "SPEC section 9 does not list it: the lead decides.", _args_after_split),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
