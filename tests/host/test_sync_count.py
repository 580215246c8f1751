"""How many syncs a durable cycle (run, halt, resume to the end) makes through `handle` and
`resume` with the state directory store, and when: the halted checkpoint is synced before its
envelope is returned, the claim before any step after the gate starts a child. Counted by
`files.SYNCS` (no tracer); the order is read from Python's audit events (renames, symlinks,
child processes), each stamped with the sync count at that moment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from vm.host.store import files
from vm.service.protocol import Decision, Options, handle, resume

_WATCHED = ("os.rename", "os.symlink", "subprocess.Popen")
EVENTS: list[tuple[str, str, int]] = []  # (audit event, its path or program, syncs so far)
_RECORDING = [False]


def _audit(event: str, args: tuple) -> None:
    if _RECORDING[0] and event in _WATCHED:
        target = args[1]  # a rename's or symlink's new name; a child's argv
        EVENTS.append((event, os.fspath(target) if not isinstance(target, list)
                       else " ".join(map(str, target)), files.SYNCS.count))


sys.addaudithook(_audit)  # permanent once added: it records only while a test asks it to


class Recorded:
    """What one call did: its audit events, and the syncs it made (count, the last path)."""

    def __init__(self, call):
        EVENTS.clear()
        before = files.SYNCS.count
        _RECORDING[0] = True
        try:
            self.result = call()
        finally:
            _RECORDING[0] = False
        self.syncs = files.SYNCS.count - before
        self.before = before
        self.last_synced = files.SYNCS.last
        self.events = list(EVENTS)

    def first(self, event: str, suffix: str = "") -> tuple[str, str, int]:
        found = [e for e in self.events if e[0] == event and e[1].endswith(suffix)]
        assert found, (event, suffix, self.events)
        return found[0]


def _options(tmp_path: Path) -> Options:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    return Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env=env)


def _one_sync(tmp_path: Path) -> bool:
    (tmp_path / "state" / "runs").mkdir(parents=True, exist_ok=True)
    return files.one_sync_publish(str(tmp_path / "state" / "runs"), new_name=True)


def _cycle(tmp_path: Path, request: dict, decision: Decision) -> tuple[Recorded, Recorded]:
    """A warm cycle: one run first (its program stored, the key made), then the measured one."""
    options = _options(tmp_path)
    for _ in range(2):
        halt = Recorded(lambda: handle(request, options))
        envelope = halt.result
        wait = envelope.get("requiresApproval") or envelope.get("requiresInput")
        assert wait, envelope
        token = wait["resumeToken"]
        done = Recorded(lambda token=token: resume(options, decision, token=token))
        assert done.result["status"] == "ok", done.result
    return halt, done


def _check_halt(halt: Recorded, one_sync: bool) -> None:
    """The halt synced once (twice where the filesystem needs the POSIX steps), after its
    frame took its name: the checkpoint is durable when the envelope comes back."""
    assert halt.syncs == (1 if one_sync else 2)
    _, frame, stamp = halt.first("os.rename", ".frame")
    assert stamp < halt.before + halt.syncs  # the rename came before the last sync
    assert halt.last_synced in (frame, os.path.dirname(frame))


def _check_claim(done: Recorded, step_marker: str) -> None:
    """The resume synced once, after the claim's rename and before the step after the gate."""
    assert done.syncs == 1
    _, _, claimed = done.first("os.rename", ".claimed")
    assert claimed == done.before  # nothing synced before the claim in this resume
    after = [e for e in done.events if e[0] == "subprocess.Popen" and step_marker in e[1]]
    assert after, done.events
    assert all(stamp == done.before + 1 for _, _, stamp in after)


def test_a_pipeline_cycle_syncs_twice_halt_then_claim(tmp_path):
    request = {"action": "run", "pipeline": "exec --json --shell 'echo [1]' | approve --prompt ok"
               " | exec --shell 'echo after-gate'"}
    halt, done = _cycle(tmp_path, request, Decision(approve=True))
    one_sync = _one_sync(tmp_path)
    _check_halt(halt, one_sync)
    _check_claim(done, "after-gate")
    assert halt.syncs + done.syncs <= (2 if one_sync else 3)


def test_a_workflow_approval_cycle_syncs_twice(tmp_path):
    workflow = tmp_path / "ship.lobster"
    workflow.write_text("name: ship\nsteps:\n  - id: build\n    run: echo built\n"
                        "  - id: gate\n    approval: Ship it?\n"
                        "  - id: deploy\n    run: echo deploy-after-gate\n")
    halt, done = _cycle(tmp_path, {"action": "run", "pipeline": str(workflow)},
                        Decision(approve=True))
    one_sync = _one_sync(tmp_path)
    _check_halt(halt, one_sync)
    _check_claim(done, "deploy-after-gate")
    assert halt.syncs + done.syncs <= (2 if one_sync else 3)


def test_an_input_gate_cycle_syncs_twice(tmp_path):
    schema = json.dumps({"type": "string"})
    request = {"action": "run", "pipeline": f"ask --prompt 'Why?' --schema '{schema}'"
               " | exec --shell 'echo input-after-gate'"}
    halt, done = _cycle(tmp_path, request, Decision(response="because", has_response=True))
    one_sync = _one_sync(tmp_path)
    _check_halt(halt, one_sync)
    _check_claim(done, "input-after-gate")
    assert halt.syncs + done.syncs <= (2 if one_sync else 3)


def test_the_filesystem_of_a_path_is_read_from_the_mount_table():
    if not os.path.exists("/proc/self/mountinfo"):
        pytest.skip("no /proc/self/mountinfo here")
    assert files.filesystem_type("/proc") == "proc"
    assert files.filesystem_type("/proc/self") == "proc"  # the longest mount point wins


def test_ext4_counts_as_one_sync_only_with_its_journal(tmp_path):
    for device, task in (("vda", "<none>\n"), ("sdb1", "jbd2/sdb1-8\n"), ("dm-0", "")):
        (tmp_path / device).mkdir()
        (tmp_path / device / "journal_task").write_text(task)
    assert files._ext4_journaled("/dev/sdb1", str(tmp_path))
    assert not files._ext4_journaled("/dev/vda", str(tmp_path))  # made without a journal
    assert not files._ext4_journaled("/dev/dm-0", str(tmp_path))
    assert not files._ext4_journaled("/dev/nosuch", str(tmp_path))  # cannot be told


def test_a_new_name_takes_one_sync_on_ext4_with_or_without_its_journal(tmp_path, monkeypatch):
    runs = str(tmp_path)
    monkeypatch.setitem(files._FS_TYPES, runs, ("ext4", "/dev/nosuch"))  # no journal told
    assert not files.one_sync_publish(runs)  # a replace: the POSIX steps
    assert files.one_sync_publish(runs, new_name=True)
    for kind, new_name in (("btrfs", True), ("nfs4", True), ("", False)):
        monkeypatch.setitem(files._FS_TYPES, runs, (kind, "server:/x"))
        assert not files.one_sync_publish(runs, new_name)
    before = files.SYNCS.count
    monkeypatch.setitem(files._FS_TYPES, runs, ("ext4", "/dev/nosuch"))
    files.publish(os.path.join(runs, "frame"), b"data", new_name=True)
    assert files.SYNCS.count - before == 1 and files.SYNCS.last == os.path.join(runs, "frame")
    files.publish(os.path.join(runs, "frame"), b"again")  # over a name that is there
    assert files.SYNCS.count - before == 3 and files.SYNCS.last == runs
    assert (tmp_path / "frame").read_bytes() == b"again"


def test_an_empty_frame_left_by_a_power_cut_reads_as_none_and_is_a_leftover(tmp_path):
    from vm.host.store import Store

    store = Store(str(tmp_path / "state"))
    os.makedirs(store.runs)
    frame = Path(store.frame_path("pipeline_resume_cut"))
    frame.write_bytes(b"")
    assert store.read_parked("pipeline_resume_cut") is None
    assert store.list_parked() == []
    assert store.leftovers(older_than=float("inf")) == ["runs/pipeline_resume_cut.frame"]
    assert store.remove_leftover("runs/pipeline_resume_cut.frame")
    assert not frame.exists()
