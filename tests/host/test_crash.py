"""Crash harness: `lobster` killed at many points of a run and of each resume, and what it leaves
checked (tests/crash_helpers.py has the machinery and the promises; tests/CRASH.md explains).

CI runs a fixed sample of kill points (`SAMPLE`). Every kill point of every phase, each found by
tracing the phase once (123 here, several minutes on 2 cores):

    LOBSTER_CRASH_FULL=1 .venv/bin/python -m pytest -q -s tests/host/test_crash.py

`-s` prints, per phase, the kill points tried and what each left. Without ptrace (strace cannot
inject) the strace tests skip, and `test_killed_right_after_a_side_effect` still kills lobster
with SIGKILL as soon as a side effect's line appears in the log.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest
from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)

import crash_helpers as ch
from vm.host.token import decode

pytestmark = pytest.mark.slow  # docs/testing.md

FULL = os.environ.get("LOBSTER_CRASH_FULL") == "1"
WORKERS = max(2, os.cpu_count() or 2)

# CI: the windows that matter most, by scenario and phase (0 is the run, n the n-th resume).
# A resume renames its frame to a claim file whose name is the claim record and whose mtime is
# its lease (rename 1), writes the checkpoint's record beside it (the create, rename 2; not
# synced), syncs the directory (fsync 1: claim and record durable), starts its lease renewer
# (clone3 1), runs the steps (vfork n; the shell and effect children), parks the next
# checkpoint (symlink 1, the frame's rename 3, then its one fsync 2; on filesystems other than
# ext4, xfs and tmpfs also an fsync 3 of the directory: vm/host/store/files.py), then
# writes the record `finished` (its first version kept as a spare by linkat 2, the first
# finding no spares directory yet, then rename 3, or 4 after a park; not synced) and moves the claim file to the spares (rename 4, or 5). The
# numbers follow the store's syscalls: after a change there, re-survey with
# LOBSTER_CRASH_FULL=1.
SAMPLE = {
    ("before-and-after", 0): [("symlink", 1, ""), ("rename", 3, ""), ("fsync", 4, ""),
                              ("execve", 1, "effect")],
    ("before-and-after", 1): [("rename", 1, ""), ("rename", 2, ""), ("fsync", 1, ""),
                              ("clone3", 1, ""), ("vfork", 1, ""), ("linkat", 2, ""),
                              ("rename", 3, ""), ("rename", 4, "")],
    ("two-gates", 1): [("execve", 1, "sh"), ("fsync", 2, ""), ("linkat", 2, ""),
                       ("rename", 4, ""), ("rename", 5, "")],
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


# a full disk at every write of a resume --------------------------------------------------------
DISK_FULL_PHASES = [(scenario, phase) for scenario in ch.SCENARIOS
                    for phase in range(1, scenario.gates + 1)
                    if FULL or (scenario.name, phase) in (("before-and-after", 1), ("two-gates", 1))]


@needs_strace
@pytest.mark.parametrize("scenario,phase", DISK_FULL_PHASES,
                         ids=[f"{s.name}-resume{p}" for s, p in DISK_FULL_PHASES])
def test_a_full_disk_at_any_write_of_a_resume_loses_no_checkpoint(lives, scenario, phase,
                                                                   tmp_path):
    """Each state-dir write of a resume (create, fsync, rename, symlink) refused with ENOSPC in
    turn: lobster answers with an envelope (T450 when the store failed it), and the checkpoint
    it resumed is waiting (the claim was undone), in doubt with its record, or finished."""
    base = lives(scenario, phase)
    points = ch.disk_full_points(base.copy(tmp_path / "survey"), phase)
    assert points

    def one(item):
        index, point = item
        world = base.copy(tmp_path / f"d{index}")
        try:
            injected, answer = ch.run_disk_full(world, phase, point)
            assert injected, f"{point} was never reached"
            outcome = ch.check_after_kill(world, phase, False, answer, allowed_codes=("T450",))
            return point, outcome, answer
        except AssertionError as exc:
            raise AssertionError(f"ENOSPC at {point} of phase {phase}: {exc}") from None
        finally:
            shutil.rmtree(tmp_path / f"d{index}", ignore_errors=True)

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(one, enumerate(points)))
    tally = collections.Counter()
    for point, outcome, answer in results:
        said = answer["status"] if answer["ok"] else answer["error"]["code"]
        left = ("in doubt" if outcome.in_doubt else "finished" if outcome.finished
                else "waiting, resumed to the end")
        tally[f"{said}, {left}"] += 1
    print(f"\n{scenario.name} phase {phase}: ENOSPC at {len(points)} calls: {dict(tally)}")


# cancelled or cut off at every step of a resume ------------------------------------------------
STEPPED = ("exec --shell 'effect one' | approve --prompt first | exec --shell 'effect two' "
           "| exec --shell 'effect three' | approve --prompt second | exec --shell 'effect four'")
# the resume of the first gate runs stages 2 (two), 3 (three) and 4 (the second gate): cancel
# as each starts, and once the second gate has been parked
CANCEL_AT = [("started", 2), ("started", 3), ("started", 4), ("halted", 4)]


@pytest.mark.parametrize("event,index", CANCEL_AT, ids=[f"{e}-{i}" for e, i in CANCEL_AT])
def test_a_resume_cancelled_at_any_step_loses_no_checkpoint(location, tmp_path, event, index):
    """The embedding API's cancellation (what MCP's notifications/cancelled and a closed stdin
    come to), at each step of a resume, in the directory store and PostgreSQL: the checkpoint
    is in doubt with the reason and the step, or finished with its successor parked; no step
    runs twice, and the life ends when the rest is resumed."""
    from vm.service import admin
    from vm.host.children import Scope
    from vm.service.protocol import Decision, Options, handle, resume
    from vm.host.store import lifecycle

    world = ch.World(tmp_path / "w", ch.SCENARIOS[0])
    options = Options(cwd=str(world.root / "work"), state_dir=location,
                      env={**world.env, "LOBSTER_CLAIM_LEASE": "30s"})
    first = handle({"action": "run", "pipeline": STEPPED}, options)
    token = first["requiresApproval"]["resumeToken"]
    scope = Scope()

    def hear(seen):
        if (seen["type"], seen["index"]) == (event, index):
            scope.cancel()

    answer = resume(attrs.evolve(options, on_event=hear), Decision(approve=True), token=token,
                    scope=scope)
    status = lifecycle.status(options.store(), decode(token).state_key)
    where = "postgres" if "://" in location else "dir"
    print(f"\ncancelled at {event} {index} ({where}): {status.state} {status.step or ''}")
    effects = world.effects()
    assert max(effects.values()) == 1, effects
    if answer["ok"]:
        assert status.state == "finished" and answer["status"] == "needs_approval", status
        second = answer["requiresApproval"]["approvalId"]
    else:
        assert status.state == "in_doubt", (answer, status)
        assert "cancelled by its caller" in status.reason and status.step, status
        assert answer["error"]["checkpoint"]["state"] == "in_doubt", answer
        (entry,) = [e for e in admin.pending(options) if e["status"] == "in_doubt"]
        assert entry["reason"] == status.reason and entry["step"] == status.step
        retry = handle({"action": "resume", "token": token, "approve": True}, options)
        assert retry["error"]["code"] == "T432", retry
        assert admin.cancel(options, entry["stateKey"])["status"] == "cancelled"
        second = None
    if second:
        assert resume(options, Decision(approve=True), approval_id=second)["status"] == "ok"
        assert sorted(world.effects()) == ["four", "one", "three", "two"]
    assert admin.pending(options) == []


@pytest.mark.parametrize("how", ["stdin-closed", "cancelled"])
@pytest.mark.parametrize("line", ["two", "three"])
def test_an_mcp_resume_cut_off_at_any_step_loses_no_checkpoint(tmp_path, how, line):
    """`lobster mcp` resuming the first gate of STEPPED; as soon as a step's side effect is in
    the log, the client sends notifications/cancelled or closes stdin. The checkpoint is in doubt
    with its record (or finished, if the run got there first), never gone."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from test_lifecycle import McpServer

    from vm.service.protocol import Options, handle
    from vm.host.store import lifecycle

    world = ch.World(tmp_path / "w", ch.SCENARIOS[0])
    first = ch.envelope_of(world.call([ch.LOBSTER, "run", "--mode", "tool", STEPPED]))
    token = first["requiresApproval"]["resumeToken"]

    class Where:  # what McpServer needs of the `cli` fixture
        work = world.root / "work"
        env = world.env

    server = McpServer(Where)
    ident = server.call("lobster_resume", token=token, approve=True)
    deadline = time.monotonic() + 30
    while not world.effects()[line] and time.monotonic() < deadline:
        time.sleep(0.002)
    if how == "cancelled":
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": ident, "reason": "timeout"}})
    server.proc.stdin.close()
    assert server.proc.wait(timeout=30) == 0
    ch.wait_for_leases(world)
    status = lifecycle.status(open_store_of(world), decode(token).state_key)
    print(f"\nMCP {how} after effect {line}: {status.state} {status.step or ''}")
    assert status.state in ("in_doubt", "finished"), status
    assert max(world.effects().values()) == 1, world.effects()
    if status.state == "in_doubt":
        assert status.reason and status.step, status
        options = Options(state_dir=str(world.state), env=world.env, cwd=str(world.root))
        retry = handle({"action": "resume", "token": token, "approve": True}, options)
        assert retry["error"]["code"] == "T432", retry


def open_store_of(world: ch.World):
    from vm.host.store.directory import Store

    return Store(str(world.state))


# PostgreSQL cut off at every statement of a resume ---------------------------------------------
def _pg_world(root, url: str) -> ch.World:
    world = ch.World(root, ch.SCENARIOS[1])  # two-gates: a resume parks a next checkpoint
    world.env = {**world.env, "LOBSTER_STORE": url}
    ch.advance(world, 0)
    return world


def _recvfrom_calls(world: ch.World) -> list[int]:
    """The numbers of the resume's main-thread recvfrom calls (the replies to its statements)."""
    trace = world.root / "recvfrom.trace"
    world.call(world.argv(1), prefix=[ch.STRACE, "-qq", "-f", "-o", str(trace),
                                      "-e", "trace=recvfrom"])
    lines = [line.split()[0] for line in trace.read_text().splitlines() if "recvfrom(" in line]
    main = lines[0] if lines else None
    return list(range(1, sum(1 for pid in lines if pid == main) + 1))


@needs_strace
def test_postgres_cut_off_at_any_statement_of_a_resume_loses_no_checkpoint(pg_url, tmp_path):
    """Each statement a resume sends to PostgreSQL fails in turn (strace: its reply read refused with
    ECONNRESET: the reply lost, as when the network or the server goes away after the statement was sent; the statement may have run): lobster answers with an envelope,
    and the checkpoint it resumed waits (nothing was taken), is in doubt with its record, or is
    finished with its successor parked; no side effect twice."""
    from vm.service import admin
    from vm.service.protocol import Options
    from vm.host.store import lifecycle
    from vm.host.store.postgres import PostgresStore

    calls = _recvfrom_calls(_pg_world(tmp_path / "survey", pg_url))
    assert calls
    options = Options(state_dir=pg_url, env={})
    tally = collections.Counter()
    for number in calls:
        world = _pg_world(tmp_path / f"c{number}", pg_url)
        proc = world.call(world.argv(1), prefix=[
            ch.STRACE, "-qq", "-f", "-o", os.devnull, "-e", "trace=recvfrom",
            "-e", f"inject=recvfrom:error=ECONNRESET:when={number}"])
        assert "Traceback" not in proc.stderr, proc.stderr
        answer = ch.envelope_of(proc)
        assert answer["ok"] or answer["error"]["code"] == "T450", answer
        _wait_pg_leases(options)
        state_key = decode(world.tokens[0]).state_key
        status = lifecycle.status(PostgresStore(pg_url), state_key)
        assert status.state in ("waiting", "in_doubt", "finished"), (number, answer, status)
        assert max(world.effects().values()) == 1, world.effects()
        said = answer["status"] if answer["ok"] else answer["error"]["code"]
        tally[f"{said}, {status.state}"] += 1
        if status.state == "in_doubt":
            assert admin.cancel(options, state_key)["status"] == "cancelled"
        elif status.state == "waiting":
            assert ch.advance(world, 1)["status"] == "needs_approval"
        for entry in admin.pending(options):  # the next gate, if one was parked: end it
            admin.cancel(options, entry["stateKey"])
    print(f"\nPostgreSQL cut off at {len(calls)} statements of a resume: {dict(tally)}")


def _wait_pg_leases(options) -> None:
    from vm.service import admin

    deadline = time.monotonic() + ch.LEASE_S * 5
    while any(e["status"] == "claimed" for e in admin.pending(options)):
        assert time.monotonic() < deadline, admin.pending(options)
        time.sleep(0.1)
