"""Deliberate differences (SPEC.md section 9): a divergence they match is expected, not a bug.

Only documented improvements belong here; a known bug of ours is an xfail regression case and
a `known.py` entry instead.
"""

from __future__ import annotations

from typing import Callable

import attrs


@attrs.frozen
class Entry:
    """One explained divergence: `matches(case, step_index, original_step, our_step)`."""
    id: str
    title: str
    why: str
    matches: Callable[[dict, int, dict, dict], bool]
    spec: str = ""


ENTRIES: tuple[Entry, ...] = ()


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
