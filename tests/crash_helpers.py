"""The crash harness's machinery (tests/host/test_crash.py drives it; tests/CRASH.md explains it).

A *scenario* is a pipeline or workflow whose steps run `effect NAME`, a real script on PATH that
appends NAME to a log file: the log shows every side effect and how often it happened. Its
*life* is the run and then one resume per checkpoint, each a separate `lobster` process (a
*phase*). A *kill point* is (phase, syscall, N): that phase's process runs under
`strace --inject=SYSCALL:signal=KILL:when=N` and dies at its N-th call of SYSCALL. After each
kill, `check_after_kill` verifies the promises of SPEC/issue 12 and finishes the life:

- no torn file: every file of the state dir decodes, and the only temporary files left are
  those `gc` removes;
- every checkpoint is either parked and intact (then resumed to the end by fresh processes), or
  in doubt with its record once its claim's lease has passed (a retry is refused with T432 and
  `pending` lists it with the reason), or finished by its resume (its tombstone says so: T436;
  its effects are in the log, its successor is parked); never gone without a trace;
- no side effect line appears twice, and a life that reaches its end did every effect once.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
LEASE_S = 1  # a claim's lease in the harness (LOBSTER_CLAIM_LEASE): a killed resume's claim
# reads in doubt this long after its last renewal
LOBSTER = str(BIN / "lobster")
STRACE = shutil.which("strace") or "/usr/bin/strace"

EFFECT_SCRIPT = """#!/bin/sh
printf '%s\\n' "$1" >> "$EFFECT_LOG"
printf '"%s"\\n' "$1"
"""

# the syscalls a kill point may stop at, by family (each one injected on its own)
FAMILIES = {
    "fsync": ("fsync", "fdatasync"),
    "rename": ("rename", "renameat", "renameat2"),
    "unlink": ("unlink", "unlinkat"),
    "link": ("link", "linkat"),  # a record's previous version kept as a spare (files.py)
    "symlink": ("symlink", "symlinkat"),
    "create": ("openat",),  # only the calls with O_CREAT (chosen by their number)
    "spawn": ("vfork", "clone", "clone3", "fork"),  # in lobster, before the child exists
}
TRACED = sorted({name for names in FAMILIES.values() for name in names})
# the exec child (the shell) and its child (the effect script) killed as they start: strace's
# -P keeps the injection to the execve of that one file
CHILD_EXECS = {"sh": "/bin/sh", "effect": None}  # None: the world's bin/effect


@dataclass(frozen=True)
class Scenario:
    name: str
    run_argv: tuple[str, ...]  # after `lobster run --mode tool`
    effects: tuple[str, ...]  # every log line of a complete life, once each
    gates: int  # checkpoints in a life (each resumed with approve yes)
    files: dict = field(default_factory=dict, hash=False)


SCENARIOS = (
    Scenario("before-and-after", (
        "exec --shell 'effect before' | approve --prompt 'go?' | exec --shell 'effect after'",),
        ("before", "after"), 1),
    Scenario("two-gates", (
        "exec --shell 'effect one' | approve --prompt 'first?' | exec --shell 'effect two' "
        "| approve --prompt 'second?' | exec --shell 'effect three'",),
        ("one", "two", "three"), 2),
    Scenario("for-each-gates", ("--file", "w.lobster"), (
        "plan-a", "deploy-a", "plan-b", "deploy-b", "done"), 2, files={"w.lobster": """\
steps:
  - id: hosts
    run: echo '["a","b"]'
  - id: rollout
    for_each: $hosts.json
    item_var: host
    steps:
      - id: plan
        run: effect "plan-$host.stdout"
      - id: ok
        approval: Deploy this host?
      - id: deploy
        run: effect "deploy-$host.stdout"
  - id: done
    run: effect done
"""}),
)


# the world of one life ---------------------------------------------------------------------
class World:
    """A private work dir, state dir, home and effect log; copied to try one kill point."""

    def __init__(self, root: Path, scenario: Scenario) -> None:
        self.root = root
        self.scenario = scenario
        for sub in ("bin", "work", "home"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        effect = root / "bin" / "effect"
        if not effect.exists():
            effect.write_text(EFFECT_SCRIPT)
            effect.chmod(0o755)
        for name, text in scenario.files.items():
            (root / "work" / name).write_text(text)
        self.state = root / "state"
        self.log = root / "effects.log"
        self.tokens: list[str] = []  # the token of each checkpoint reached so far
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
        env.update(PATH=f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                   EFFECT_LOG=str(self.log), LOBSTER_STATE_DIR=str(self.state),
                   HOME=str(root / "home"), TZ="UTC", LOBSTER_CLAIM_LEASE=f"{LEASE_S}s")
        self.env = env

    def copy(self, root: Path) -> World:
        shutil.copytree(self.root, root, symlinks=True)
        world = World(root, self.scenario)
        world.tokens = list(self.tokens)
        return world

    def argv(self, phase: int) -> list[str]:
        if phase == 0:
            return [LOBSTER, "run", "--mode", "tool", *self.scenario.run_argv]
        return [LOBSTER, "resume", "--token", self.tokens[phase - 1], "--approve", "yes"]

    def call(self, argv: list[str], prefix: list[str] = ()) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, *argv], cwd=self.root / "work", env=self.env,
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    def effects(self) -> collections.Counter:
        try:
            return collections.Counter(self.log.read_text().splitlines())
        except FileNotFoundError:
            return collections.Counter()


def envelope_of(proc: subprocess.CompletedProcess) -> dict:
    try:
        envelope = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"not an envelope (rc {proc.returncode}): {proc.stdout!r} "
                             f"{proc.stderr!r}") from None
    assert "Traceback" not in proc.stderr, proc.stderr
    return envelope


def advance(world: World, phase: int) -> dict:
    """Run phase `phase` to completion (no kill); remember the token it hands out."""
    envelope = envelope_of(world.call(world.argv(phase)))
    assert envelope.get("ok"), envelope
    halt = envelope.get("requiresApproval") or envelope.get("requiresInput")
    if halt:
        world.tokens.append(halt["resumeToken"])
    return envelope


# strace --------------------------------------------------------------------------------------
def strace_usable() -> str | None:
    """None when strace can trace and inject here, else why not."""
    if not os.path.exists(STRACE):
        return f"strace not found at {STRACE}"
    proc = subprocess.run([STRACE, "-qq", "-f", "-o", os.devnull, "-e", "trace=getpid",
                           "-e", "inject=getpid:signal=KILL:when=1", sys.executable, "-c",
                           "import os; os.getpid(); print('alive')"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode == -signal.SIGKILL or proc.returncode == 128 + signal.SIGKILL:
        return None
    return f"strace cannot inject here (ptrace not permitted?): rc {proc.returncode} " \
           f"{proc.stderr.strip()[:200]}"


_LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. )?([a-z0-9_]+)(\(| resumed>)(.*)$")


def survey(world: World, phase: int) -> dict[str, list[int]]:
    """Trace phase `phase` once, unharmed, in a copy: for each syscall the numbers of lobster's
    own calls (as strace counts them for `when=`, per process), openat only with O_CREAT."""
    trace = world.root.parent / f"{world.root.name}.survey"
    proc = world.call(world.argv(phase), prefix=[STRACE, "-qq", "-f", "-o", str(trace),
                                                 "-e", "trace=" + ",".join(TRACED)])
    assert proc.returncode in (0, 1), proc.stderr
    counts: dict[tuple[int, str], int] = collections.Counter()
    points: dict[str, set[int]] = collections.defaultdict(set)
    main = None
    for line in trace.read_text().splitlines():
        match = _LINE.match(line)
        if not match or match.group(3) == " resumed>":
            continue
        pid, name, rest = int(match.group(1)), match.group(2), match.group(4)
        main = pid if main is None else main
        counts[pid, name] += 1
        number = counts[pid, name]
        if name == "openat":
            if "O_CREAT" in rest and pid == main:
                points["openat"].add(number)
        elif pid == main and name != "execve":
            points[name].add(number)
    return {name: sorted(numbers) for name, numbers in points.items()}


Point = tuple  # (syscall, N, child): child "" for lobster itself, else a CHILD_EXECS name


def kill_points(world: World, phase: int) -> list[Point]:
    """Every kill point of a phase: lobster's own calls found by `survey`, then its children
    killed as they start."""
    found = survey(world, phase)
    points = [(name, number, "") for family in FAMILIES.values() for name in family
              for number in found.get(name, ())]
    return points + [("execve", 1, child) for child in CHILD_EXECS]


def run_killed(world: World, phase: int, point: Point) -> tuple[bool, dict | None]:
    """Run phase `phase` and kill it at `point`. Returns whether a process of the phase died by
    the injected SIGKILL, and the envelope if lobster itself answered (the point was past its
    end, or only a child was killed)."""
    syscall, number, child = point
    trace = world.root / "kill.trace"
    where = []
    if child:
        where = ["-P", CHILD_EXECS[child] or str(world.root / "bin" / "effect")]
    proc = world.call(world.argv(phase), prefix=[
        STRACE, "-qq", "-f", "-o", str(trace), *where, "-e", f"trace={syscall}",
        "-e", f"inject={syscall}:signal=KILL:when={number}"])
    killed = "killed by SIGKILL" in trace.read_text()
    trace.unlink()
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == -signal.SIGKILL:
        return True, None
    return killed, envelope_of(proc)


def run_killed_after_line(world: World, phase: int, line: str) -> tuple[bool, dict | None]:
    """The fallback without ptrace: SIGKILL the phase's process as soon as `line` is in the
    effect log (the side effect happened, the process has not yet reported it)."""
    proc = subprocess.Popen(world.argv(phase), cwd=world.root / "work", env=world.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None:
            if world.effects()[line]:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    if proc.returncode == -signal.SIGKILL:
        return True, None
    return False, envelope_of(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))


# the checks --------------------------------------------------------------------------------
def check_files(state: Path) -> None:
    """Every file of the state dir decodes; temporary files are only those gc removes."""
    from vm.isa import codec
    from vm.host.store.base import STATE_KEY
    from vm.host.store.claims import parse_claim_file_name
    from vm.host.store.directory import Store
    from vm.host.store.directory_checkpoints import split_frame_file
    from vm.host.store.lifecycle import decode_record

    store = Store(str(state))
    leftovers = set(store.leftovers(older_than=float("inf")))
    for path in sorted(p for p in state.rglob("*") if not p.is_dir() or p.is_symlink()):
        rel = str(path.relative_to(state))
        name = path.name
        if (name.startswith(".") and name.endswith(".tmp")) or rel.startswith("runs/.spare/"):
            # a spare (files.retire) holds any old bytes: nothing reads it, gc removes it
            assert rel in leftovers, f"temporary file or spare gc would not remove: {rel}"
            assert not path.is_symlink() and path.stat().st_nlink in (1, 2), rel
            continue
        if path.is_symlink():
            assert rel.startswith("runs/") and name.endswith(".approval"), rel
            target = os.readlink(path)
            assert STATE_KEY.fullmatch(target), f"{rel} -> {target}"
            if not ((state / "runs" / f"{target}.frame").exists()
                    or (state / "runs" / f"{target}.record").exists()
                    or claim_files(state / "runs", target)):
                assert rel in leftovers, f"dangling approval link gc would not remove: {rel}"
            continue
        blob = path.read_bytes()
        if rel == "key":
            assert len(blob) == 32, "torn signing key"
        elif rel.startswith("programs/"):
            assert name.endswith(".lbc") and codec.intact(blob, name[:-4]), f"torn {rel}"
        elif rel.startswith("runs/") and name.endswith(".frame"):
            mac, _, frame = split_frame_file(blob)
            assert mac is not None, f"unsealed frame {rel}"
            codec.load_frame(frame)
        elif rel.startswith("runs/") and name.endswith(".record"):
            record = decode_record(blob, name[:-len(".record")])
            assert record is not None, rel
            assert record["state"] in ("claimed", "finished", "in_doubt", "cancelled",
                                       "expired", "waiting"), record
        elif rel.startswith("runs/") and name.endswith(".claimed"):
            parsed = parse_claim_file_name(name)
            assert parsed is not None, rel
            if parsed[1] is None:  # an earlier version's claim file: its record, or the frame
                try:
                    entry = json.loads(blob)
                    assert isinstance(entry, dict) and "claimedAt" in entry, rel
                    continue
                except ValueError:
                    pass
            codec.load_frame(split_frame_file(blob)[2])  # the claimed frame, whole
        elif rel.startswith(("values/", "cache/")) and name.endswith(".json"):
            json.loads(blob)
        else:
            raise AssertionError(f"unexpected file in the state dir: {rel}")


def pending(world: World) -> list[dict]:
    from vm.service import admin
    from vm.service.protocol import Options

    return admin.pending(Options(state_dir=str(world.state), env=world.env))


def handle(world: World, request: dict) -> dict:
    from vm.service.protocol import Options, handle

    return handle(request, Options(state_dir=str(world.state), env=world.env,
                                   cwd=str(world.root / "work")))


@dataclass
class Outcome:
    """What a kill left, once checked and finished: counted by the test for its report."""

    killed: bool = False
    parked_resumed: int = 0  # checkpoints found parked and resumed to the end
    in_doubt: int = 0  # checkpoints in doubt with their record (T432, listed by pending)
    finished: int = 0  # consumed by a resume that finished (its tombstone: T436)
    completed: bool = False  # the life reached its end
    reported_error: bool = False  # the phase's lobster answered with an error envelope


def wait_for_leases(world: World) -> None:
    """Wait until no claim holds a live lease: a killed resume's claim reads in doubt once its
    lease, no longer renewed, has passed (LEASE_S)."""
    deadline = time.monotonic() + LEASE_S * 5
    while any(e["status"] == "claimed" for e in pending(world)):
        assert time.monotonic() < deadline, f"a lease that never lapses: {pending(world)}"
        time.sleep(0.1)


def check_after_kill(world: World, phase: int, killed: bool, answer: dict | None,
                     allowed_codes: tuple[str, ...] = ("T410",)) -> Outcome:
    """Check what the kill (or injected failure) left, then finish the life: resume whatever
    is parked, refuse and cancel whatever is in doubt. `allowed_codes`: the error codes the
    phase's own answer may carry (a killed child: T410)."""
    from vm.service import admin
    from vm.service.protocol import Options

    outcome = Outcome(killed=killed)
    wait_for_leases(world)
    check_files(world.state)
    _at_most_once(world)
    state = None
    if answer is not None:
        assert answer["ok"] or answer["error"]["code"] in allowed_codes, answer
        outcome.reported_error = not answer["ok"]
        outcome.completed = answer["ok"] and answer["status"] == "ok"
    if phase >= 1:
        state = check_target(world, world.tokens[phase - 1], outcome)
    if not outcome.completed:
        outcome.completed = _finish(world, outcome)
    _at_most_once(world)
    check_files(world.state)
    effects = world.effects()
    everything = sorted(effects) == sorted(world.scenario.effects)
    if outcome.completed:
        assert everything, f"a complete life with effects {dict(effects)}"
    else:
        # nothing is parked: the run died before handing out a checkpoint, a checkpoint is in
        # doubt (and listed), the run ended with a reported error, or the killed process had
        # done all of its work
        assert phase == 0 or state == "in_doubt" or outcome.reported_error or everything, \
            f"checkpoint of phase {phase} lost: effects {dict(effects)}, " \
            f"pending {pending(world)}"
    options = Options(state_dir=str(world.state), env=world.env)
    for entry in pending(world):  # what is left is in doubt, and a cancel clears it
        assert entry["status"] == "in_doubt" and entry["reason"], entry
        cancelled = admin.cancel(options, entry["stateKey"])
        assert cancelled["ok"] and cancelled["status"] == "cancelled", cancelled
    assert pending(world) == [], pending(world)
    return outcome


def claim_files(runs: Path, state_key: str) -> list[Path]:
    """The claim files of one checkpoint: `<key>.<record>.claimed`, or an earlier version's
    `<key>.claimed`."""
    return [*runs.glob(f"{state_key}.*.claimed"), *runs.glob(f"{state_key}.claimed")]


def _at_most_once(world: World) -> None:
    twice = {line: n for line, n in world.effects().items() if n > 1}
    assert not twice, f"side effects ran more than once: {twice}"


def check_target(world: World, token: str, outcome: Outcome) -> str:
    """The checkpoint a killed (or failed) resume was resuming is never gone: parked (resumed
    later), in doubt with its record (listed by pending, a retry refused with T432), or
    finished (its tombstone: a retry gets the original's words and T436). Returns its state."""
    from vm.host.store import lifecycle
    from vm.host.store.directory import Store
    from vm.host.token import decode

    state_key = decode(token).state_key
    status = lifecycle.status(Store(str(world.state)), state_key)
    assert status.state in ("waiting", "in_doubt", "finished"), \
        f"checkpoint {state_key} is {status.state}: {status.record} pending {pending(world)}"
    if status.state == "waiting":
        return status.state
    retry = handle(world, {"action": "resume", "token": token, "approve": True})
    assert not retry["ok"], retry
    error = retry["error"]
    assert error["checkpoint"]["state"] == status.state, error
    if status.state == "in_doubt":
        listed = {e["stateKey"]: e for e in pending(world)}
        assert listed.get(state_key, {}).get("status") == "in_doubt", listed
        assert error["code"] == "T432", error
        assert "claimed at" in error["message"] and "did not finish" in error["message"], error
        outcome.in_doubt += 1
    else:
        assert error["code"] == "T436" and error["message"].endswith("resume state not found")
        assert error["checkpoint"]["outcome"] in ("ok", "needs_approval", "error"), error
        outcome.finished += 1
    return status.state


def _finish(world: World, outcome: Outcome) -> bool:
    """Resume every parked checkpoint to the end, each in a fresh process. True if the life
    reached its end (an `ok` envelope)."""
    for _ in range(10):
        waiting = [e for e in pending(world) if e["status"] == "waiting"]
        if not waiting:
            return False
        assert len(waiting) == 1, waiting
        entry = waiting[0]
        assert entry["approvalId"], entry
        envelope = envelope_of(world.call([LOBSTER, "resume", "--id", entry["approvalId"],
                                           "--approve", "yes"]))
        assert envelope["ok"], envelope
        outcome.parked_resumed += 1
        if envelope["status"] == "ok":
            return True
    raise AssertionError("the life does not end")


# failures injected instead of kills ----------------------------------------------------------
# a full disk, as the kernel reports it on the calls that take space or make names (a write
# into the state dir first opens a temporary file with O_CREAT, then fsyncs and renames it)
DISK_FULL_FAMILIES = ("create", "fsync", "rename", "symlink")


def disk_full_points(world: World, phase: int) -> list[Point]:
    """Every call of a phase at which a full disk can refuse lobster's state-dir writes."""
    found = survey(world, phase)
    return [(name, number, "") for family in DISK_FULL_FAMILIES for name in FAMILIES[family]
            for number in found.get(name, ())]


def run_disk_full(world: World, phase: int, point: Point) -> tuple[bool, dict]:
    """Run phase `phase` with its call `point` failing with ENOSPC (strace's error injection:
    the real syscall is refused by the kernel's tracer, as a full disk would refuse it).
    Returns whether the failure was injected, and lobster's answer (always an envelope)."""
    syscall, number, _ = point
    trace = world.root / "enospc.trace"
    proc = world.call(world.argv(phase), prefix=[
        STRACE, "-qq", "-f", "-o", str(trace), "-e", f"trace={syscall}",
        "-e", f"inject={syscall}:error=ENOSPC:when={number}"])
    injected = "(INJECTED)" in trace.read_text()
    trace.unlink()
    assert "Traceback" not in proc.stderr, proc.stderr
    return injected, envelope_of(proc)
