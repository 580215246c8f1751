"""Regression cases under cases/: one small JSON file per divergence found, replayed against
both CLIs (the format is in README.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .compare import Outcome, reference_command, run_both

CASES = Path(__file__).resolve().parent / "cases"


def load_all() -> list[tuple[Path, dict]]:
    return [(p, json.loads(p.read_text())) for p in sorted(CASES.glob("*.json"))]


def record(name: str, case: dict, notes: str, outcome: Outcome) -> Path:
    """Writes cases/<NNN>-<name>.json from a fresh outcome, labelled by what explains it."""
    doc: dict = {"notes": notes}
    entry = outcome.explained_by
    if entry is not None:
        doc["deliberate" if entry.id.startswith("A") else "known"] = entry.id
    doc["case"] = case
    if not outcome.agrees:
        doc["observed"] = {"step": outcome.step, "original": outcome.ref[outcome.step],
                           "ours": outcome.ours[outcome.step]}
    number = len(list(CASES.glob("*.json"))) + 1
    path = CASES / f"{number:03d}-{name}.json"
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str]) -> int:
    """`python -m tests.differential.cases NAME CASE.json "notes"`: record one case."""
    ref, why = reference_command()
    if ref is None:
        print(why, file=sys.stderr)
        return 2
    name, source, notes = argv
    case = json.loads(Path(source).read_text())
    outcome = run_both(case, ref)
    path = record(name, case, notes, outcome)
    label = outcome.explained_by.id if outcome.explained_by else ("agrees" if outcome.agrees else "NEW")
    print(f"{path.name}: {label}")
    if not outcome.agrees:
        print(outcome.report())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
