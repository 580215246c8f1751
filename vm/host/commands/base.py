"""What every running stdlib command shares: its arguments, its context, its errors.

A command is `run(args, items, ctx) -> list`, called by the VM with the item list of the
previous stage; its signature (name, flags, positionals, side-effect class) is data in
vm/host/commands/registry.py, which the compiler checks pipelines against.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import field

from vm.core.records import frozen
from vm.host.children import Scope

STDIN_MODES = ("raw", "json", "jsonl")  # how exec --stdin feeds the items


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

