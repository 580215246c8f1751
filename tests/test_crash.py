"""Crash harness: `lobster` killed at many points of a run and of each resume, and what it leaves
checked (tests/crash_helpers.py has the machinery and the promises; tests/CRASH.md explains).

CI runs a fixed sample of kill points (`SAMPLE`). Every kill point of every phase, each found by
tracing the phase once (123 here, several minutes on 2 cores):

    LOBSTER_CRASH_FULL=1 .venv/bin/python -m pytest -q -s tests/test_crash.py

`-s` prints, per phase, the kill points tried and what each left. Without ptrace (strace cannot
inject) the strace tests skip, and `test_killed_right_after_a_side_effect` still kills lobster
with SIGKILL as soon as a side effect's line appears in the log.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import crash_helpers as ch

FULL = os.environ.get("LOBSTER_CRASH_FULL") == "1"
WORKERS = max(2, os.cpu_count() or 2)

# CI: the windows that matter most, by scenario and phase (0 is the run, n the n-th resume).
# A resume renames its frame to a claim file whose name is the claim record and whose mtime is
# its lease (rename 1), writes the checkpoint's record (the create, fsync 1, rename 2), syncs the
# directory (fsync 2), starts its lease renewer (clone3 1), runs the steps (vfork n; the shell
# and effect children), parks the next checkpoint (symlink 1, the frame's fsync 3 and rename 3,
# fsync 4 of the directory), then writes the record `finished` (rename 3, or 4 after a park)
# and removes the claim (unlink 1). The numbers follow the store's syscalls: after a change
# there, re-survey with LOBSTER_CRASH_FULL=1.
SAMPLE = {
    ("before-and-after", 0): [("symlink", 1, ""), ("rename", 3, ""), ("fsync", 5, ""),
                              ("execve", 1, "effect")],
    ("before-and-after", 1): [("rename", 1, ""), ("fsync", 1, ""), ("fsync", 2, ""),
                              ("clone3", 1, ""), ("vfork", 1, ""), ("rename", 3, ""),
                              ("unlink", 1, "")],
    ("two-gates", 1): [("execve", 1, "sh"), ("rename", 3, ""), ("rename", 4, ""),
                       ("unlink", 1, "")],
    ("for-each-gates", 1): [("vfork", 2, ""), ("symlink", 1, "")],
    ("for-each-gates", 2): [("fsync", 1, "")],
}

PHASES = [(scenario, phase) for scenario in ch.SCENARIOS for phase in range(scenario.gates + 1)
          if FULL or (scenario.name, phase) in SAMPLE]

_WHY_NOT = ch.strace_usable()
needs_strace = pytest.mark.skipif(_WHY_NOT is not None, reason=f"{_WHY_NOT}; the fallback "
                                  "test_killed_right_after_a_side_effect still runs")


@pytest.fixture(scope="module")
def lives(tmp_path_factory):
    """Each scenario's world just before each phase (built once, copied for every kill)."""
    root = tmp_path_factory.mktemp("lives")
    built: dict[tuple[str, int], ch.World] = {}

    def before(scenario: ch.Scenario, phase: int) -> ch.World:
        if (scenario.name, phase) not in built:
            world = ch.World(root / scenario.name / "p0", scenario) if phase == 0 else \
                before(scenario, phase - 1).copy(root / scenario.name / f"p{phase}")
            if phase:
                ch.advance(world, phase - 1)
            built[scenario.name, phase] = world
        return built[scenario.name, phase]

    return before


def _try(base: ch.World, phase: int, point: ch.Point, where: Path) -> tuple[ch.Point, ch.Outcome]:
    world = base.copy(where)
    try:
        killed, answer = ch.run_killed(world, phase, point)
        return point, ch.check_after_kill(world, phase, killed, answer)
    except AssertionError as exc:
        raise AssertionError(f"kill point {point} of phase {phase}: {exc}") from None
    finally:
        shutil.rmtree(where, ignore_errors=True)


@needs_strace
@pytest.mark.parametrize("scenario,phase", PHASES,
                         ids=[f"{s.name}-{'run' if p == 0 else f'resume{p}'}" for s, p in PHASES])
def test_kill_points(lives, scenario, phase, tmp_path):
    base = lives(scenario, phase)
    if FULL:
        points = ch.kill_points(base.copy(tmp_path / "survey"), phase)
    else:
        points = SAMPLE[scenario.name, phase]
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(lambda item: _try(base, phase, item[1], tmp_path / f"k{item[0]}"),
                                enumerate(points)))
    tally = collections.Counter()
    for point, outcome in results:
        assert outcome.killed, f"kill point {point} was never reached"
        tally["parked, resumed to the end" if outcome.parked_resumed else
              "in doubt (T432)" if outcome.in_doubt else
              "finished (T436)" if outcome.finished else
              "error reported" if outcome.reported_error else
              "finished before dying" if outcome.completed else "died before a checkpoint"] += 1
    print(f"\n{scenario.name} phase {phase}: {len(points)} kill points: {dict(tally)}")


@needs_strace
def test_a_resume_killed_right_after_its_claim_is_in_doubt_once_its_lease_passes(lives,
                                                                               tmp_path):
    """Killed right after the claim, at its directory sync: the claim (its lease) and its record
    are one step, so once the lease, no longer renewed, has passed, the retry is told T432."""
    world = lives(ch.SCENARIOS[0], 1).copy(tmp_path / "w")
    killed, _answer = ch.run_killed(world, 1, ("fsync", 1, ""))
    assert killed
    ch.wait_for_leases(world)
    retry = ch.handle(world, {"action": "resume", "token": world.tokens[0], "approve": True})
    assert retry["error"]["code"] == "T432", retry
    assert retry["error"]["checkpoint"]["reason"].startswith("its lease expired")


def test_killed_right_after_a_side_effect(tmp_path):
    """No ptrace needed: SIGKILL as soon as the effect's line is in the log, in the run (after
    `before`, before the checkpoint is parked or reported) and in the resume (after `after`,
    before the claim is cleared). Whether the kill lands before lobster finishes is a race;
    both outcomes must keep every promise."""
    scenario = ch.SCENARIOS[0]
    base = ch.World(tmp_path / "base", scenario)
    for phase, line in ((0, "before"), (1, "after")):
        world = base.copy(tmp_path / f"k{phase}")
        killed, answer = ch.run_killed_after_line(world, phase, line)
        ch.check_after_kill(world, phase, killed, answer)
        if phase == 0:
            ch.advance(base, 0)
