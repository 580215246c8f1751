"""Known divergences that are bugs of ours (or not yet classified), one per DIVERGENCES.md entry.

Each has an xfail(strict) regression case under cases/; the generated runs tolerate a match so
that only a new divergence fails them. Delete an entry when its bug is fixed.
"""

from __future__ import annotations

from .allowlist import Entry

ENTRIES: tuple[Entry, ...] = ()


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
