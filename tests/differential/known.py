"""Known divergences not accepted as deliberate (DIVERGENCES.md D entries): each has an
xfail(strict) case; generated runs tolerate a match, so only a new divergence fails them.
Empty while every divergence found is fixed or allow-listed."""

from __future__ import annotations

from .allowlist import Entry

SUBCOMMANDS = ("run", "resume", "tool", "mcp", "pending", "cancel", "history", "gc", "key",
               "migrate", "graph", "doctor", "completion", "version", "help")


def _help_of_a_subcommand(case, i, ref, ours) -> bool:
    """`lobster help run`: the original knows only pipeline commands there (`Unknown command:
    run`, exit 2); ours prints the subcommand's help (exit 0)."""
    argv = ours.get("argv") or []
    return (len(argv) >= 2 and argv[0] == "help" and argv[1] in SUBCOMMANDS
            and ref.get("exitCode") == 2 and ours.get("exitCode") == 0
            and (ref.get("stderr") or "").startswith(f"Unknown command: {argv[1]}"))


ENTRIES: tuple[Entry, ...] = (
    Entry("D35", "help of a subcommand", "candidate deliberate (not in SPEC section 9)",
          "`lobster help run` prints run's help in ours (as `lobster run --help` does); the "
          "original's `help` knows only pipeline commands and answers `Unknown command: run` "
          "(exit 2). Ours is arguably better; the lead decides.", _help_of_a_subcommand),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
