"""What every stdlib command shares: its declared signature, its arguments, its context.

A command is data (name, flags, positionals, side-effect class) plus a run function
`run(args, items, ctx) -> list`. The compiler checks pipelines against the signature;
the VM calls `run` with the item list of the previous stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from attrs import field

from vm.core.records import frozen
from vm.host.children import Scope


class CommandError(Exception):
    """A command refused its input or failed: becomes a `runtime_error` with this message
    (and `detail`, the envelope's additive `error.detail`, when there is more to show)."""

    def __init__(self, message: str, code: str = "T401", retryable: bool = True,
                 detail: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable  # False once a side effect may have been dispatched
        self.detail = detail


def timed_out(retryable: bool = True) -> CommandError:
    """The run's deadline passed (T420, the original's words); `retryable` as above."""
    from vm.core.codes import TIMED_OUT

    return CommandError(TIMED_OUT, code="T420", retryable=retryable)


@frozen
class Flag:
    """One `--name` flag. `kind` is "bool" (never takes the next token), "str" or "num" (both
    take a value; "num" is documented as a number)."""

    name: str
    kind: str = "str"
    help: str = ""
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()  # for documentation; commands keep their own error texts


@frozen
class Args:
    """Arguments of one stage after flag parsing.

    `flags` maps a flag's canonical name to its value: a string, or a bool for bool flags
    (a "str" flag written bare, `--limit` with nothing after it, is True as in the
    reference). `positionals` keeps every other token in order.
    """

    flags: Mapping[str, Any] = field(factory=dict)
    positionals: tuple[str, ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        return self.flags.get(name, default)

    def has(self, name: str) -> bool:
        return name in self.flags


@frozen
class Context:
    """What a running command may see of the world. Data commands need none of it."""

    env: Mapping[str, str]
    cwd: str
    store: Any  # the StateStore of the run: state.* values, run state of llm.invoke
    mode: str = "tool"  # "tool" | "human"
    deadline: float | None = None  # time.monotonic() value after which the run is over
    max_output_bytes: int | None = None  # cap on each child's stdout and stderr
    stdin_is_tty: bool = False
    scope: Scope = field(factory=Scope)  # the run's children: cancelled together, never shared


RunFn = Callable[[Args, list, Context], list]


@frozen
class Command:
    """A stdlib command: its signature (as data) and its implementation."""

    name: str
    summary: str
    run: RunFn | None = field(eq=False, repr=False)
    flags: tuple[Flag, ...] = ()
    positionals: str = ""  # usage text for positionals, e.g. "<expr>" or "<cmd> [args...]"
    effects: str = "none"  # none | reads | reads_state | writes_state | local_exec | network | halts
    lowering: str = "stage"  # the instruction it compiles to: stage | exec | render | approve | ask
    aliases: tuple[str, ...] = ()
    # exec-style commands: after the first positional every token is passed through verbatim
    rest_after_first_positional: bool = False
    # static argument check run by the compiler: a message (the reference's text) or None
    check: Callable[[Args], str | None] | None = field(default=None, eq=False, repr=False)
    examples: tuple[str, ...] = ()

    def flag(self, name: str) -> Flag | None:
        for f in self.flags:
            if f.name == name or name in f.aliases:
                return f
        return None
