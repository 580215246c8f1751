"""Known divergences not accepted as deliberate (DIVERGENCES.md D entries): each has an
xfail(strict) case; generated runs tolerate a match, so only a new divergence fails them.
Empty while every divergence found is fixed or allow-listed."""

from __future__ import annotations

import re

from .allowlist import Entry, message


def _dry_run_error_text(case, i, ref, ours) -> bool:
    m = re.fullmatch(r"Workflow step \S+ (?:pipeline references unknown command: (\S+)|stdin: (.+))",
                     message(ref) or "")
    if not m or "--dry-run" not in (ours.get("argv") or []):
        return False
    return message(ours) == (f"Unknown command: {m.group(1)}" if m.group(1) else m.group(2))


def _directory_as_file(case, i, ref, ours) -> bool:
    return message(ref) == "Workflow path is not a file" and message(ours) != message(ref)


ENTRIES: tuple[Entry, ...] = (
    Entry("D29", "dry run: the error text of an unknown stdin reference", "bug of ours",
          "`run --dry-run`: the original says `Workflow step s stdin: Unknown step reference: "
          "m.stdout`; ours gives the checker's `Unknown step reference: m.stdout`.",
          _dry_run_error_text),
    Entry("D33", "a workflow path that is a directory", "bug of ours",
          "`graph --file wfdir` (a directory): the original says `Workflow path is not a file`; ours "
          "judges the extension first.", _directory_as_file),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
