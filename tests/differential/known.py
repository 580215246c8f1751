"""Known divergences not accepted as deliberate (DIVERGENCES.md D entries): each has an
xfail(strict) case; generated runs tolerate a match, so only a new divergence fails them.
Empty while every divergence found is fixed or allow-listed."""

from __future__ import annotations

from .allowlist import Entry, pipeline_text

SUBCOMMANDS = ("run", "resume", "tool", "mcp", "pending", "cancel", "history", "gc", "key",
               "migrate", "graph", "doctor", "completion", "version", "help")


def _help_of_a_subcommand(case, i, ref, ours) -> bool:
    """`lobster help run`: the original knows only pipeline commands there (`Unknown command:
    run`, exit 2); ours prints the subcommand's help (exit 0)."""
    argv = ours.get("argv") or []
    return (len(argv) >= 2 and argv[0] == "help" and argv[1] in SUBCOMMANDS
            and ref.get("exitCode") == 2 and ours.get("exitCode") == 0
            and (ref.get("stderr") or "").startswith(f"Unknown command: {argv[1]}"))


def _unwrap_of_an_absent_field(case, i, ref, ours) -> bool:
    """`map --unwrap k` of an item without `k`: the original's item is undefined (JSON null,
    and `{}` once a later `map` spreads or wraps it); ours is null. Same exit code."""
    return "map --unwrap" in pipeline_text(case, i) and ref.get("exitCode") == ours.get(
        "exitCode")


ENTRIES: tuple[Entry, ...] = (
    Entry("D36", "map --unwrap of an absent field", "bug (open)",
          "The original's unwrapped item is undefined: JSON shows null, but a later `map "
          "x={{a}}` spreads it to `{x: ''}` and `map --wrap w` gives `{}`; ours is null "
          "(`{value: null, x: ''}`, `{w: null}`). A bare undefined item would have to be "
          "allowed everywhere a pipeline passes items.", _unwrap_of_an_absent_field),
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
