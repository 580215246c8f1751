"""A long local run that writes every unexplained divergence to a directory instead of
stopping at the first (the command is in README.md).

`python -m tests.differential.survey N OUTDIR [all|areas|edges|edges:NAME]`: `areas` draws only
the cases aimed at the areas of issue 11 item 2 (`generators.area_cases`), `edges` the edge
generators of issue 20 (`edges.EDGES`), `edges:NAME` one of them. The tally counts the
examples of each edge area (`area:NAME`) and the agreements, allow-listed and new divergences."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from .compare import reference_command, run_both
from . import edges, gen_more, generators


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 100
    out = Path(argv[1] if len(argv) > 1 else "/tmp/lobster-diff-survey")
    which = argv[2] if len(argv) > 2 else "all"
    named = {"all": generators.any_case, "areas": generators.area_cases, "edges": edges.edge_cases,
             "more": gen_more.more_cases}
    group, _, one_area = which.partition(":")
    strategy = named[which] if which in named else (gen_more.MORE if group == "more" else edges.EDGES)[one_area]
    out.mkdir(parents=True, exist_ok=True)
    ref, why = reference_command()
    if ref is None:
        print(why, file=sys.stderr)
        return 2
    tally = {"compared": 0, "agree": 0, "new": 0}

    @settings(max_examples=count, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def one(case):
        outcome = run_both(case, ref)
        tally["compared"] += 1
        if case.get("area"):
            tally[f"area:{case['area']}"] = tally.get(f"area:{case['area']}", 0) + 1
        if outcome.agrees:
            tally["agree"] += 1
            return
        if outcome.explained_by:
            tally[outcome.explained_by.id] = tally.get(outcome.explained_by.id, 0) + 1
            return
        tally["new"] += 1
        name = f"new-{tally['compared']:05d}.json"
        (out / name).write_text(json.dumps({
            "report": outcome.report(),
            "case": case, "step": outcome.step, "original": outcome.ref[outcome.step],
            "ours": outcome.ours[outcome.step]}, indent=1, ensure_ascii=False))

    try:
        one()
    finally:
        print(json.dumps(tally), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
