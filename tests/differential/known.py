"""Known divergences not accepted as deliberate (DIVERGENCES.md D entries): each has an
xfail(strict) case; generated runs tolerate a match, so only a new divergence fails them.
Empty while every divergence found is fixed or allow-listed."""

from __future__ import annotations

import re

from .allowlist import Entry, message


def _pipeline_ask_schema_text(case, i, ref, ours) -> bool:
    """An `ask` inside a workflow `pipeline:` step, answered against its schema: the original
    names the step (`Workflow input step review response failed ...`), ours says `pipeline
    input response failed ...`."""
    a, b = message(ref) or "", message(ours) or ""
    m = re.fullmatch(r"Workflow input step \S+ (response failed schema validation at .*)", a)
    return bool(m) and b == f"pipeline input {m.group(1)}"


ENTRIES: tuple[Entry, ...] = (
    Entry("D34", "a workflow pipeline step's ask names the step when an answer fails its schema",
          "bug (vm/protocol.py `_check_decision`, resume code owned by the store/protocol "
          "engineer)",
          "The halt of an `ask` stage in a workflow `pipeline:` step has no workflow gate step, so "
          "the refusal reads `pipeline input response failed schema validation at ...`; the "
          "original says `Workflow input step <step> response failed ...` (the step id is the "
          "halt site's id before its `:stage`).", _pipeline_ask_schema_text),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
