"""`lobster help [COMMAND]` (and `lobster`, `-h`, `--help`): the usage of every subcommand,
`run` and `resume` in full, or a pipeline command's help made from its signature. Loads
nothing of the machine for the usage text."""

from __future__ import annotations

import sys

USAGE = """\
lobster - run tool pipelines as one call, with durable approval and input checkpoints

usage:
  lobster run [--mode tool|human] [--args-json J] [--dry-run] [--timeout T] [--quiet]
              [--events jsonl] [--checkpoint-ttl 7d] (PIPELINE | FILE | --file FILE)
  lobster PIPELINE                       the same as `lobster run PIPELINE`, in human mode
  lobster resume (--token T | --id ID) (--approve yes|no | --response-json J | --cancel)
              [--timeout T] [--events jsonl]
  lobster tool [REQUEST | -]             one tool call: request JSON in, envelope out
  lobster pending [--format json] [--older-than 7d [--cancel]]   checkpoints waiting, in doubt
  lobster cancel --id ID                 end one checkpoint (approval id or state key)
  lobster history ID [--format json]     one checkpoint's record: halted, claimed, outcome
  lobster gc [--dry-run]                 remove what no checkpoint needs
  lobster key list|rotate                the signing key set: list it, or add a new key
  lobster migrate --to NEW.lobster (--id ID | --program HASH) [--dry-run] [--accept ID]
                                         move paused runs onto a reviewed new version
  lobster mcp                            serve run and resume as MCP tools over stdio
  lobster graph [--file] FILE [--format mermaid|dot|ascii] [--args-json J]
  lobster help [COMMAND]                 this text, `run`/`resume` in full, or a pipeline
                                         command's help
  lobster doctor                         check that this installation runs pipelines
  lobster completion bash|zsh            a shell completion script (source it)
  lobster version

examples:
  lobster run --mode tool "exec --json --shell 'echo [1,2,3]' | head --n 2"
  lobster "exec --json --shell 'inbox list --json' | approve --prompt 'Apply?'"
  lobster resume --token <resumeToken> --approve yes

environment: LOBSTER_STATE_DIR (default ~/.lobster/state), LOBSTER_SHELL (default /bin/sh),
LOBSTER_MAX_OUTPUT_BYTES (cap on each child's output).
pipeline commands: run `lobster help COMMAND`, or the pipeline `commands.list`.
"""

FULL_HELP = ("run", "resume")  # subcommands with a help text of their own (HELP, beside them)


def cmd_help(argv: list[str]) -> int:
    """`lobster help [COMMAND]`: our usage text, or a command's help made from its signature
    (the texts are ours; the original's differ in wording, see README)."""
    if not argv:
        sys.stdout.write(USAGE)
        return 0
    if argv[0] == "run":
        from vm.cli.run import HELP

        sys.stdout.write(HELP)
        return 0
    if argv[0] == "resume":
        from vm.cli.resume import HELP

        sys.stdout.write(HELP)
        return 0
    from vm.host.commands import lookup

    cmd = lookup(argv[0])
    if cmd is None:
        sys.stderr.write(f"Unknown command: {argv[0]}\n")
        return 2
    lines = [f"{cmd.name} — {cmd.summary}", "",
             f"usage: {cmd.name}" + "".join(f" [--{f.name}{'' if f.kind == 'bool' else ' V'}]"
                                            for f in cmd.flags)
             + (f" {cmd.positionals}" if cmd.positionals else "")]
    for f in cmd.flags:
        alias = f" (also --{', --'.join(f.aliases)})" if f.aliases else ""
        lines.append(f"  --{f.name:<20} {f.help}{alias}")
    if cmd.aliases:
        lines.append(f"aliases: {', '.join(cmd.aliases)}")
    lines.append(f"side effects: {cmd.effects}")
    for example in cmd.examples:
        lines.append(f"example: {example}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
