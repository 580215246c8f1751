"""Known divergences not accepted as deliberate (DIVERGENCES.md D entries): each has an
xfail(strict) case; generated runs tolerate a match, so only a new divergence fails them.
Empty while every divergence found is fixed or allow-listed."""

from __future__ import annotations

from .allowlist import Entry

ENTRIES: tuple[Entry, ...] = ()


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
