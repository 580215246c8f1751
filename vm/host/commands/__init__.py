"""The stdlib commands: what every running command shares (`base`: arguments, context,
errors), the registry of every command's signature and implementation (`registry`), and the
implementations, one module per family.

The registry loads on its first use, through this package's names (`COMMANDS`, `Command`,
`Flag`, `lookup` and the registry's other public names) or directly: a resume whose remaining
program runs no stage never builds the signatures of some eighty commands."""

from __future__ import annotations

from typing import Any

from vm.host.commands.base import STDIN_MODES, Args, CommandError, Context

__all__ = ["Args", "COMMANDS", "Command", "CommandError", "Context", "Flag", "STDIN_MODES",
           "lookup"]


# the implementation modules are this package's submodules, never the registry's stand-ins
_SUBMODULES = frozenset(("data", "template", "state_cmds", "gateway", "llm", "gog", "email",
                         "openclaw", "workflows", "exec_cmd", "external", "base", "registry"))


def __getattr__(name: str) -> Any:
    """A public name of the registry (the registry is imported by the first one read)."""
    if not name.startswith("_") and name not in _SUBMODULES:
        from vm.host.commands import registry

        if hasattr(registry, name):
            value = globals()[name] = getattr(registry, name)
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
