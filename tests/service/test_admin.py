"""What waits, what is in doubt, what expired and what is left over: claim records of resumes
that died, `pending` / `cancel` / `gc` (CLI and vm.service.admin), checkpoint expiry, on both stores."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import LOBSTER
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process
from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)

from vm.service import admin
from vm.service.protocol import Decision, Options, handle, resume
from vm.host.store import open_store

GATED = "exec --json --shell 'echo [1]' | approve --prompt 'Go?'"
ASK = "exec --json --shell 'echo [1]' | ask --prompt 'Name?'"


@pytest.fixture
def options(location, tmp_path) -> Options:
    return Options(cwd=str(tmp_path), state_dir=location, env={})


def _wait_for(path, proc) -> None:
    """Wait until the resumed step has started (it writes `path`); fail if the process ends."""
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


# claims that leave a record -----------------------------------------------------------------
def test_a_resume_killed_mid_step_is_reported_in_doubt_and_its_step_never_runs_again(cli):
    side = cli.work / "side.txt"
    parked, code = cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt Go"
                                f" | exec --shell 'echo ran >> {side}; sleep 60'")
    assert code == 0
    approval_id = parked["requiresApproval"]["approvalId"]
    token = parked["requiresApproval"]["resumeToken"]
    proc = subprocess.Popen([LOBSTER, "resume", "--id", approval_id, "--approve", "yes"],
                            cwd=cli.work, env={**cli.env, "LOBSTER_CLAIM_LEASE": "1s"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        _wait_for(side, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    time.sleep(1.2)  # its lease, no longer renewed, runs out
    for how in (["--id", approval_id], ["--token", token]):
        envelope, code = cli.tool("resume", *how, "--approve", "yes")
        assert code == 1 and envelope["error"]["code"] == "T432", envelope
        message = envelope["error"]["message"]
        assert message.startswith("This checkpoint was claimed at 20")
        assert f"by {proc.pid}@{socket.gethostname()} and did not finish" in message
    assert side.read_text() == "ran\n"  # never re-run
    listed, code = cli.tool("pending", "--format", "json")
    assert code == 0 and len(listed) == 1
    (entry,) = listed
    assert entry["status"] == "in_doubt" and entry["approvalId"] == approval_id
    assert entry["claimedBy"] == f"{proc.pid}@{socket.gethostname()}"
    assert entry["kind"] == "approval"
    text = cli.run("pending").stdout
    assert approval_id in text and "in_doubt" in text
    cancelled, code = cli.tool("cancel", "--id", approval_id)
    assert code == 0 and cancelled["status"] == "cancelled"
    again, code = cli.tool("resume", "--token", token, "--approve", "yes")
    assert again["error"]["message"] == "Pipeline resume state not found"
    assert again["error"]["checkpoint"]["state"] == "cancelled"
    again, code = cli.tool("resume", "--id", approval_id, "--approve", "yes")
    assert again["error"]["message"] == f'Approval ID "{approval_id}" not found or expired'
    assert cli.tool("pending", "--format", "json")[0] == []
    assert side.read_text() == "ran\n"


def test_a_claim_record_lasts_exactly_as_long_as_the_resumed_run(options, tmp_path):
    """The claim stays while the step runs and goes at the end, whatever the end is; the
    checkpoint's record stays, finished with that end (a tombstone), and so does its id."""
    marker = tmp_path / "seen.json"
    script = tmp_path / "in_doubt.py"
    script.write_text("import json, sys, vm.host.store\n"
                      f"store = vm.host.store.open_store({options.state_dir!r}, {{}})\n"
                      "print(json.dumps([r.state_key for r in store.in_doubt()]))\n")
    check = f"exec --shell '{sys.executable} {script} > {marker}'"
    store = options.store()
    for tail, status, outcome in (("exec --json --shell 'echo [2]'", "ok", "ok"),
                                  ("exec --shell 'exit 3'", None, "error"),
                                  ("approve --prompt again", "needs_approval", "needs_approval")):
        parked = handle({"action": "run", "pipeline": f"{GATED} | {check} | {tail}"}, options)
        approval_id = parked["requiresApproval"]["approvalId"]
        done = resume(options, Decision(approve=True), approval_id=approval_id)
        assert done.get("status") == status, done
        during = json.loads(marker.read_text())
        assert len(during) == 1 and during[0].startswith("pipeline_resume_")
        assert store.in_doubt() == []
        assert store.lookup_approval_id(approval_id) == during[0]
        record = admin.history(options, approval_id)["checkpoint"]
        assert record["state"] == "finished" and record["events"][-1]["outcome"] == outcome


def test_a_consumed_checkpoint_still_reads_as_not_found(options):
    parked = handle({"action": "run", "pipeline": GATED}, options)
    token = parked["requiresApproval"]["resumeToken"]
    assert handle({"action": "resume", "token": token, "approve": True}, options)["ok"]
    again = handle({"action": "resume", "token": token, "approve": True}, options)
    checkpoint = again["error"].pop("checkpoint")
    assert again["error"] == {"type": "runtime_error", "message": "Pipeline resume state not found",
                              "code": "T436"}  # the original's words; the code says resumed
    assert checkpoint["state"] == "finished" and checkpoint["outcome"] == "ok"
    assert checkpoint["endedAt"].endswith("Z") and checkpoint["claimedBy"]
    cancel = handle({"action": "resume", "token": token, "cancel": True}, options)
    assert cancel["error"]["message"] == "Resume state not found"
    assert cancel["error"]["code"] == "T436"


# pending and cancel -------------------------------------------------------------------------
def test_pending_lists_what_waits_and_cancel_ends_it(options):
    first = handle({"action": "run", "pipeline": GATED}, options)
    second = handle({"action": "run", "pipeline": ASK}, options)
    approval_id = first["requiresApproval"]["approvalId"]
    entries = admin.pending(options)
    assert [e["status"] for e in entries] == ["waiting", "waiting"]
    by_kind = {e["kind"]: e for e in entries}
    assert by_kind["approval"]["approvalId"] == approval_id
    assert by_kind["approval"]["prompt"] == "Go?" and by_kind["input"]["prompt"] == "Name?"
    assert by_kind["input"]["approvalId"] is None
    assert {e["source"] for e in entries} == {"<pipeline>"}
    assert all(e["expiresAt"] is None and e["ageSeconds"] >= 0 and e["createdAt"].endswith("Z")
               for e in entries)
    assert admin.cancel(options, approval_id)["status"] == "cancelled"
    key = by_kind["input"]["stateKey"]
    assert admin.cancel(options, key)["status"] == "cancelled"
    assert admin.pending(options) == []
    again = admin.cancel(options, key)["error"]
    assert again["message"] == "Resume state not found" and again["code"] == "T436"
    assert again["checkpoint"]["state"] == "cancelled"
    assert admin.cancel(options, "nonsense")["error"]["code"] == "E503"
    token = second["requiresInput"]["resumeToken"]
    gone = handle({"action": "resume", "token": token, "responseJson": "1"}, options)
    assert gone["error"]["code"] == "T436", gone  # its tombstone: cancelled, and when


def test_pending_older_than_cancel_takes_only_the_old_ones(options):
    handle({"action": "run", "pipeline": GATED}, options)
    handle({"action": "run", "pipeline": ASK}, options)
    assert admin.cancel_older_than(options, 3600) == []
    assert len(admin.pending(options)) == 2
    done = admin.cancel_older_than(options, 3600, now=time.time() + 7200)
    assert [e["cancelled"] for e in done] == [True, True]
    assert admin.pending(options) == []


def test_pending_and_cancel_on_the_command_line(cli):
    parked, _ = cli.pipeline(GATED)
    approval_id = parked["requiresApproval"]["approvalId"]
    listed, code = cli.tool("pending", "--format", "json", "--older-than", "7d")
    assert code == 0 and listed == []
    proc = cli.run("pending", "--older-than", "7d", "--cancel")
    assert proc.returncode == 0 and "no checkpoints wait" in proc.stdout
    listed, _ = cli.tool("pending", "--format=json")
    assert [e["approvalId"] for e in listed] == [approval_id]
    proc = cli.run("pending", "--older-than", "0s", "--cancel")
    assert proc.returncode == 0 and "(cancelled)" in proc.stdout, proc.stdout
    assert cli.tool("pending", "--format", "json")[0] == []
    for argv in (["pending", "--older-than", "soon"], ["pending", "--cancel"],
                 ["cancel"], ["gc", "--grace", "x"], ["pending", "--format", "xml"]):
        proc = cli.run(*argv)
        assert proc.returncode == 2 and proc.stderr.splitlines()[0], argv
        assert "Traceback" not in proc.stderr


# expiry -------------------------------------------------------------------------------------
def test_a_checkpoint_expires_after_the_ttl_and_is_refused_but_kept(options):
    timed = Options(cwd=options.cwd, state_dir=options.state_dir, env={},
                    checkpoint_ttl_ms=3_600_000)
    parked = handle({"action": "run", "pipeline": GATED}, timed)
    approval_id = parked["requiresApproval"]["approvalId"]
    store = options.store()
    (entry,) = admin.pending(options)
    blob = store.read_parked(entry["stateKey"])
    assert 3500 < blob.expires_at - time.time() <= 3600
    store.save_frame(entry["stateKey"], blob.blob, expires_at=time.time() - 1)  # time passed
    refused = resume(options, Decision(approve=True), approval_id=approval_id)
    assert refused["error"]["code"] == "T433"
    assert refused["error"]["message"].startswith("This checkpoint expired at 20")
    assert resume(options, Decision(approve=True), approval_id=approval_id)["error"]["code"] \
        == "T433"  # left in place
    assert [e["status"] for e in admin.pending(options)] == ["expired"]
    assert admin.gc(options)["checkpoints"] == []  # within the grace
    assert admin.gc(options, grace_s=0)["checkpoints"] == [entry["stateKey"]]
    assert admin.pending(options) == [] and store.lookup_approval_id(approval_id) is None


def test_an_expired_checkpoint_can_be_cancelled(options):
    parked = handle({"action": "run", "pipeline": ASK},
                    Options(cwd=options.cwd, state_dir=options.state_dir,
                            env={"LOBSTER_CHECKPOINT_TTL": "1h30m"}))
    token = parked["requiresInput"]["resumeToken"]
    store = options.store()
    (entry,) = admin.pending(options)
    assert entry["expiresAt"] is not None
    store.save_frame(entry["stateKey"], store.read_frame(entry["stateKey"]), expires_at=1.0)
    assert handle({"action": "resume", "token": token, "responseJson": "1"},
                  options)["error"]["code"] == "T433"
    assert handle({"action": "resume", "token": token, "cancel": True},
                  options)["status"] == "cancelled"


@pytest.mark.parametrize("env, ttl", [({"LOBSTER_CHECKPOINT_TTL": "7 days"}, None),
                                      ({"LOBSTER_CHECKPOINT_TTL": "0m"}, None),
                                      ({}, -5), ({}, "7d")])
def test_an_invalid_ttl_is_refused_before_anything_runs(tmp_path, env, ttl):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env=env,
                      checkpoint_ttl_ms=ttl)
    envelope = handle({"action": "run",
                       "pipeline": "exec --shell 'touch ran' | approve --prompt x"}, options)
    assert envelope["ok"] is False and envelope["error"]["code"] == "E004"
    assert not (tmp_path / "ran").exists()


TWO_GATES = """\
checkpoint_ttl: 2h
steps:
  - id: first
    approval: First?
  - id: second
    approval: Second?
"""


def _expires_in(options: Options) -> list[float]:
    """Seconds from now to the expiry of each waiting checkpoint, oldest first."""
    store = options.store()
    return [store.read_parked(e["stateKey"]).expires_at - time.time()
            for e in admin.pending(options)]


def test_the_ttl_of_the_request_comes_before_the_workflow_and_the_default(options, tmp_path):
    (tmp_path / "two.lobster").write_text(TWO_GATES)
    defaulted = Options(cwd=options.cwd, state_dir=options.state_dir,
                        env={"LOBSTER_CHECKPOINT_TTL": "1h"})
    by_file = handle({"action": "run", "pipeline": "two.lobster"}, defaulted)
    (left,) = _expires_in(options)
    assert 7100 < left <= 7200  # the workflow's 2h over the default's 1h
    handle({"action": "resume", "approvalId": by_file["requiresApproval"]["approvalId"],
            "cancel": True}, options)
    by_request = handle({"action": "run", "pipeline": "two.lobster", "checkpointTtl": "30m"},
                        defaulted)
    (left,) = _expires_in(options)
    assert 1700 < left <= 1800
    # the resumed run's next checkpoint: the resume request's TTL (ms), else the workflow's
    second = handle({"action": "resume", "approvalId": by_request["requiresApproval"]["approvalId"],
                     "approve": True, "checkpointTtl": 90_000}, defaulted)
    assert second["requiresApproval"]["prompt"] == "Second?"
    (left,) = _expires_in(options)
    assert 80 < left <= 90
    handle({"action": "resume", "approvalId": second["requiresApproval"]["approvalId"],
            "cancel": True}, options)
    first = handle({"action": "run", "pipeline": "two.lobster"}, options)
    handle({"action": "resume", "approvalId": first["requiresApproval"]["approvalId"],
            "approve": True}, options)
    (left,) = _expires_in(options)
    assert 7100 < left <= 7200
    assert admin.pending(options)[0]["expiresAt"] is not None
    # a pipeline has no file: the default, then nothing
    handle({"action": "resume", "approvalId": admin.pending(options)[0]["approvalId"],
            "cancel": True}, options)
    handle({"action": "run", "pipeline": GATED}, defaulted)
    (left,) = _expires_in(options)
    assert 3500 < left <= 3600


@pytest.mark.parametrize("ttl", ["7 days", "0s", 0, -1, True, 1.5, [1]])
def test_an_invalid_request_ttl_is_a_parse_error_before_anything_runs(tmp_path, ttl):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={})
    envelope = handle({"action": "run", "checkpointTtl": ttl,
                       "pipeline": "exec --shell 'touch ran' | approve --prompt x"}, options)
    assert envelope["error"] == {
        "type": "parse_error", "code": "E001",
        "message": "checkpointTtl must be a duration such as 30m, 12h or 7d, or a positive "
                   f"number of milliseconds, got {ttl!r}"}
    assert not (tmp_path / "ran").exists()
    resumed = handle({"action": "resume", "token": "x", "cancel": True, "checkpointTtl": ttl},
                     options)
    assert resumed["error"]["code"] == "E001"


@pytest.mark.parametrize("ttl", ["soon", "0m", 0, True, [], "7 days"])
def test_an_invalid_workflow_ttl_is_a_compile_error(tmp_path, ttl):
    (tmp_path / "w.lobster").write_text(json.dumps({"checkpoint_ttl": ttl,
                                                     "steps": [{"id": "a", "run": "touch ran"}]}))
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={})
    envelope = handle({"action": "run", "pipeline": "w.lobster"}, options)
    assert (envelope["error"]["code"], envelope["error"]["message"]) == (
        "E210", "Workflow checkpoint_ttl must be a duration such as 30m, 12h or 7d, or a "
                "positive number of milliseconds")
    assert not (tmp_path / "ran").exists()


def test_checkpoint_ttl_on_the_command_line_with_both_stores(cli, location):
    store_env = {"LOBSTER_STORE": location}
    (cli.work / "two.lobster").write_text(TWO_GATES.replace("2h", "1ms"))
    for argv in (["run", "--mode", "tool", "two.lobster"],
                 ["run", "--mode", "tool", "--checkpoint-ttl", "1ms", GATED],
                 ["run", "--mode", "tool", "--checkpoint-ttl=1ms", "--file", "two.lobster"]):
        parked, code = cli.tool(*argv, env=store_env)
        assert code == 0, parked
        approval_id = parked["requiresApproval"]["approvalId"]
        refused, code = cli.tool("resume", "--id", approval_id, "--approve", "yes",
                                 env=store_env)
        assert (code, refused["error"]["code"]) == (1, "T433"), refused
        listed, _ = cli.tool("pending", "--format", "json", env=store_env)
        assert [(e["approvalId"], e["status"]) for e in listed] == [(approval_id, "expired")]
        assert listed[0]["expiresAt"] <= time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        text = cli.run("pending", env=store_env).stdout
        assert "EXPIRES" in text.splitlines()[0] and listed[0]["expiresAt"] in text
        cancelled, _ = cli.tool("cancel", "--id", approval_id, env=store_env)
        assert cancelled["status"] == "cancelled"
    parked, _ = cli.tool("run", "--mode", "tool", "--checkpoint-ttl", "7d", "two.lobster",
                         env=store_env)
    resumed, _ = cli.tool("resume", "--id", parked["requiresApproval"]["approvalId"],
                          "--approve", "yes", "--checkpoint-ttl", "1w", env=store_env)
    assert resumed["requiresApproval"]["prompt"] == "Second?"
    (listed,), _ = cli.tool("pending", "--format", "json", env=store_env)
    assert listed["status"] == "waiting"
    assert listed["expiresAt"] > time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                               time.gmtime(time.time() + 6.9 * 86400))
    refused, code = cli.tool("run", "--mode", "tool", "--checkpoint-ttl", "later", GATED,
                             env=store_env)
    assert (code, refused["error"]["code"]) == (2, "E001")


# gc -----------------------------------------------------------------------------------------
def test_gc_never_takes_a_program_a_save_may_not_have_touched_however_short_its_window(options):
    from vm.host.store import directory

    store = options.store()
    if not hasattr(store, "program_path"):
        pytest.skip("the state dir's own save rule; a PostgreSQL park's: test_store_backends.py")
    store.save_program("p", lambda: b"program")
    path = store.program_path("p")
    # saved again a moment ago, by a halt about to park its frame on it: a save within a minute
    # of the last touch leaves the mtime where it was
    seen = time.time() - directory.PROGRAM_TOUCH_S + 1
    os.utime(path, (seen, seen))
    store.save_program("p", lambda: b"never")
    assert os.stat(path).st_mtime == seen
    assert admin.gc(options, recent_s=0.005)["programs"] == []  # kept
    seen = time.time() - 2 * directory.PROGRAM_TOUCH_S - 5  # no save can have been missed
    os.utime(path, (seen, seen))
    assert admin.gc(options, recent_s=0.005)["programs"] == ["p"]


def test_gc_removes_unreferenced_programs_and_their_cache_entries_only_when_old(options):
    handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]'"}, options)  # no halt
    kept = handle({"action": "run", "pipeline": GATED}, options)
    store = options.store()
    assert len(store.list_programs()) == 2 and len(store.list_cache()) == 2
    assert admin.gc(options) == {"dryRun": False, "checkpoints": [], "tombstones": [], "keys": [],
                                 "programs": [], "cache": [], "leftovers": []}  # all too recent
    later = time.time() + admin.GC_RECENT_S + 1
    dry = admin.gc(options, dry_run=True, now=later)
    assert len(dry["programs"]) == 1 and len(dry["cache"]) == 1
    assert len(store.list_programs()) == 2  # nothing removed
    done = admin.gc(options, now=later)
    assert done["programs"] == dry["programs"] and done["cache"] == dry["cache"]
    assert [h for h, _ in store.list_programs()] != dry["programs"]
    assert len(store.list_programs()) == 1 and len(store.list_cache()) == 1
    token = kept["requiresApproval"]["resumeToken"]
    assert handle({"action": "resume", "token": token, "approve": True},
                  options)["output"] == [1]
    from lobsterc.generate import cache

    cache._MEMO.clear()  # as a new process: it knows no compiled program yet
    again = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]'"}, options)
    assert again["output"] == [1]  # compiled again
    old = admin.gc(options, now=time.time() + admin.GC_CACHE_AGE_S + 1)
    assert len(old["cache"]) == 2 and store.list_cache() == []


def test_gc_on_the_command_line(cli):
    tmp = cli.state / "runs" / ".x.frame.0123456789ab.tmp"
    cli.pipeline(GATED)
    tmp.write_bytes(b"torn")
    os.utime(tmp, (time.time() - 120, time.time() - 120))
    proc = cli.run("gc", "--dry-run")
    assert proc.returncode == 0 and "would remove leftover runs/" in proc.stdout, proc.stdout
    assert tmp.exists()
    report, code = cli.tool("gc", "--format", "json")
    assert code == 0 and report["leftovers"] == [os.path.join("runs", tmp.name)]
    assert not tmp.exists()
    assert len(cli.tool("pending", "--format", "json")[0]) == 1


def test_gc_keeps_the_temp_file_of_a_save_still_in_progress(cli):
    """A save that takes longer than gc's age for leftovers (a slow disk's fsync) holds a lock
    on its temp file while it writes and syncs: gc leaves that file alone, and removes it once
    its writer is gone."""
    cli.pipeline(GATED)
    tmp = cli.state / "runs" / ".x.frame.0123456789ab.tmp"
    tmp.write_bytes(b"half")
    writer = subprocess.Popen(  # a writer mid-save: the temp file open and locked, as
        [sys.executable, "-c",  # vm.host.store.files.atomic_write holds it
         "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "time.sleep(60)\n", str(tmp)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "locked\n"
        os.utime(tmp, (time.time() - 120, time.time() - 120))
        report, code = cli.tool("gc", "--format", "json")
        assert code == 0 and report["leftovers"] == [] and tmp.exists(), report
    finally:
        writer.kill()
        writer.wait()
    report, code = cli.tool("gc", "--format", "json")
    assert code == 0 and report["leftovers"] == [os.path.join("runs", tmp.name)]
    assert not tmp.exists()


WORKER = """
import sys, time
from vm.service.protocol import Decision, Options, handle, resume
options = Options(cwd=sys.argv[2], state_dir=sys.argv[1], env={})
for n in range(int(sys.argv[4])):
    text = f"exec --json --shell 'echo [{n}]' | approve --prompt 'w{sys.argv[3]} n{n}'"
    parked = handle({"action": "run", "pipeline": text}, options)
    assert parked.get("status") == "needs_approval", parked
    time.sleep(0.1)
    done = resume(options, Decision(approve=True),
                  approval_id=parked["requiresApproval"]["approvalId"])
    assert done.get("output") == [n], done
print("ok")
"""


def test_gc_in_a_loop_while_other_processes_halt_and_resume_loses_nothing(options, tmp_path):
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, options.state_dir, str(tmp_path),
                                 str(w), "12"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for w in range(3)]
    removed = 0
    while any(w.poll() is None for w in workers):
        report = admin.gc(options, recent_s=0.5, temp_age_s=1)  # far bolder than the defaults
        removed += len(report["programs"])
    outcomes = [w.communicate() for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0], (outcomes, removed)
    assert all(out.strip() == "ok" for out, _ in outcomes)
    assert admin.pending(options) == []
