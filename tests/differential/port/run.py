"""Runs ported cases through both CLIs, several at a time (each case is mostly waiting on child
processes, so a few threads keep two cores busy), and judges each test.

`python -m tests.differential.port.run [FILTER]`: the ported cases whose name contains FILTER,
with one line per test and the report of each that fails."""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import attrs

from ..compare import Outcome, reference_command, run_both
from .suite import PORTED, Port

# cases at a time: most of a case is waiting (node and python starting, sleeps of the timeout
# tests), so more than the two cores keeps them busy; LOBSTER_PORTED_WORKERS overrides
WORKERS = int(os.environ.get("LOBSTER_PORTED_WORKERS", "6"))


@attrs.frozen
class Verdict:
    """A ported test's result: `agree`, `documented` (the differences its allow-list entry
    explains), `known` (an open divergence of known.py, named by the port), or `fails` (with
    the first unexplained outcome)."""

    port: Port
    status: str
    outcome: Outcome | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status in ("agree", "documented", "known")


def judge(port: Port, outcomes: list[Outcome], seconds: float) -> Verdict:
    status = "agree"
    for outcome in outcomes:
        if outcome.agrees:
            continue
        entry = outcome.explained_by
        if entry is None or entry.id != port.documented:
            return Verdict(port, "fails", outcome, seconds)
        status = "documented" if entry.id.startswith("A") else "known"
    return Verdict(port, status, None, seconds)


def judge_port(port: Port, ref: list[str]) -> Verdict:
    """Every case of `port` through both CLIs, judged."""
    start = time.monotonic()
    outcomes = [run_both(case, ref) for case in port.cases]
    return judge(port, outcomes, time.monotonic() - start)


def run_ports(ports: list[Port], ref: list[str], workers: int = WORKERS) -> list[Verdict]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda port: judge_port(port, ref), ports))


def main(argv: list[str]) -> int:
    ref, why = reference_command()
    if ref is None:
        print(why, file=sys.stderr)
        return 2
    wanted = argv[0] if argv else ""
    ports = [p for p in PORTED if wanted in p.name]
    start = time.monotonic()
    verdicts = run_ports(ports, ref)
    for v in verdicts:
        print(f"{v.status:10} {v.seconds:5.1f}s {v.port.name}")
        if not v.ok:
            print("    " + v.outcome.report().replace("\n", "\n    "))
    bad = sum(not v.ok for v in verdicts)
    print(f"{len(verdicts)} tests, {bad} failing, {time.monotonic() - start:.1f}s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
