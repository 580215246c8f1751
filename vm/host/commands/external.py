"""Running an external CLI on behalf of a command (`gog`, `openclaw`, `gh`): its own
not-found text, an optional output cap of its own, and its stdout and stderr as text.

No value from a pipeline, a workflow arg or an input item reaches a CLI as a word of its own
before a `--`: it is glued to its flag (`glued("to", v)` is `--to=v`) or it follows `--`
(`after_terminator`). Either way no flag parser (Go's kong and pflag, commander, argparse) can
read it as a flag, whatever it starts with."""

from __future__ import annotations

from collections.abc import Sequence


from vm.core.records import frozen
from vm.host.commands.base import CommandError, Context
from vm.host.commands.exec_cmd import process_code
from vm.host.process import CommandNotFound, OutputLimitExceeded, ProcessError, run_process

SCRIPT_SUFFIXES = (".mjs", ".cjs", ".js", ".ts")


@frozen
class CliResult:
    code: int
    stdout: str
    stderr: str


def glued(flag: str, value: str) -> str:
    """`--flag=value`: one word that every GNU-style parser reads as that flag's value."""
    return f"--{flag}={value}"


def after_terminator(*positionals: str) -> list[str]:
    """`--` and then the positionals: after it a parser reads no flags."""
    return ["--", *positionals]


def program_argv(program: str, argv: Sequence[str]) -> list[str]:
    """`GOG_BIN` may name a JavaScript file (as in the original's tests): run it with node."""
    if program.lower().endswith(SCRIPT_SUFFIXES):
        return ["node", program, *argv]
    return [program, *argv]


def run_cli(argv: list[str], ctx: Context, *, not_found: str, retryable: bool = True,
            max_output_bytes: int | None = None, limit_message: str | None = None) -> CliResult:
    """Run `argv` with the run's env, cwd, deadline and scope; failures to start or finish
    become a CommandError (the original's texts for a missing program and for its own cap)."""
    cap = ctx.max_output_bytes
    own_cap = max_output_bytes is not None and (cap is None or max_output_bytes < cap)
    if own_cap:
        cap = max_output_bytes
    try:
        result = run_process(argv, stdin=None, cwd=ctx.cwd, env=ctx.env, deadline=ctx.deadline,
                             max_output_bytes=cap, scope=ctx.scope)
    except CommandNotFound:
        raise CommandError(not_found, code="T411", retryable=retryable) from None
    except OutputLimitExceeded as exc:
        message = limit_message if own_cap and limit_message else exc.message
        raise CommandError(message, code="T421", retryable=retryable) from None
    except ProcessError as exc:
        raise CommandError(exc.message, code=process_code(exc), retryable=retryable) from None
    return CliResult(result.code, result.stdout.decode("utf-8", "replace"),
                     result.stderr.decode("utf-8", "replace"))
