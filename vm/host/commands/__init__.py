"""The stdlib commands: what every running command shares (`base`: arguments, context,
errors), the registry of every command's signature and implementation (`registry`), and the
implementations, one module per family.

The registry loads on its first use, through this package's names (`COMMANDS`, `Command`,
`Flag`, `lookup`) or directly: a resume whose remaining program runs no stage never builds
the signatures of some eighty commands."""

from __future__ import annotations

from typing import Any

from vm.host.commands.base import STDIN_MODES, Args, CommandError, Context

__all__ = ["Args", "COMMANDS", "Command", "CommandError", "Context", "Flag", "STDIN_MODES",
           "lookup"]


def __getattr__(name: str) -> Any:
    if name in ("COMMANDS", "Command", "Flag", "lookup"):
        from vm.host.commands import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
