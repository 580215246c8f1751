"""Steps that only changed their id: matched before the comparison, so that a rename reports
nothing, and the labels of the old version rewritten to the new ones."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lobsterc.tools.diff.model import Model, plain


def rename_labels(value: Any, renames: Mapping[str, str]) -> Any:
    """`value` with step labels renamed: equal strings, `label/` and `label.` prefixes, and
    `$label` references inside text."""
    if not renames:
        return value
    if isinstance(value, str):
        if value in renames:
            return renames[value]
        for old, new in renames.items():
            if value.startswith(old + "/"):
                value = new + value[len(old):]
            value = re.sub(rf"\${re.escape(old)}(?![\w-])", lambda m: "$" + new, value)
        return value
    if isinstance(value, list):
        return [rename_labels(v, renames) for v in value]
    if isinstance(value, dict):
        return {k: rename_labels(v, renames) for k, v in value.items()}
    return value


def _short(label: str) -> str:
    return label.rsplit("/", 1)[-1]


def match_renames(old: Model, new: Model) -> dict[str, str]:
    """Old label -> new label for steps that only changed their id (content equal once the
    rename is applied everywhere), in order; a pipeline's `2:head` -> `3:head` is one too."""
    renames: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        gone = [s for s in old.order if s not in new.steps and s not in renames]
        fresh = [s for s in new.order if s not in old.steps and s not in renames.values()]
        for o in gone:
            for n in fresh:
                trial = {**renames, o: n, _short(o): _short(n)}
                if rename_labels(old.steps[o], trial) == rename_labels(new.steps[n], renames) and \
                        _gates_equal(old, o, new, n, trial):
                    renames[o] = n
                    if _short(o) != o:
                        renames[_short(o)] = _short(n)
                    changed = True
                    break
            if changed:
                break
    return {o: n for o, n in renames.items() if o in old.steps}


def _gates_equal(old: Model, o: str, new: Model, n: str, renames: Mapping[str, str]) -> bool:
    for kind in ("approval", "input"):
        a, b = old.gates.get((o, kind)), new.gates.get((n, kind))
        if (a is None) != (b is None):
            return False
        if a is not None and rename_labels(plain(a.site), renames) != plain(b.site):
            return False
    return True
