"""A checkpoint's life on record (issue 24 item 1): an approved resume never vanishes. The four
ways it did (an MCP client closing stdin mid-resume, an MCP `notifications/cancelled`, a disk
full when the next gate's frame is written, PostgreSQL refusing that frame), each through the
real executable or the embedding API, and what a checkpoint's record then says."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time

import pytest
from conftest import LOBSTER
from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)

from vm.service import admin
from vm.service.protocol import Options, handle
from vm.host.token import decode

SLOW = ("exec --json --shell 'echo [1]' | approve --prompt 'Go?' "
        "| exec --shell 'touch started; sleep 30; echo late > late.txt'")


def _record_of(options: Options, token: str) -> dict:
    """The checkpoint's entry in `pending`, else a failure saying what a retry answers."""
    state_key = decode(token).state_key
    listed = {e["stateKey"]: e for e in admin.pending(options)}
    retry = handle({"action": "resume", "token": token, "approve": True}, options)
    assert state_key in listed, f"the checkpoint is gone: pending {listed}, retry {retry}"
    return listed[state_key] | {"retry": retry}


# MCP: raw JSON-RPC over the real server's stdio ----------------------------------------------
class McpServer:
    def __init__(self, cli, env: dict | None = None) -> None:
        self.proc = subprocess.Popen([LOBSTER, "mcp"], cwd=cli.work, env={**cli.env, **(env or {})},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self.next_id = 0
        self.send({"jsonrpc": "2.0", "id": self.ids(), "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})
        self.answer()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def ids(self) -> int:
        self.next_id += 1
        return self.next_id

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            assert line, self.proc.stderr.read()
            message = json.loads(line)
            if "id" in message:
                return message

    def call(self, tool: str, **arguments) -> int:
        ident = self.ids()
        self.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})
        return ident

    def envelope(self) -> dict:
        return self.answer()["result"]["structuredContent"]


def _wait_for(path, proc) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.05)


def _halted(cli) -> str:
    envelope, _ = cli.pipeline(SLOW)
    assert envelope["status"] == "needs_approval", envelope
    return envelope["requiresApproval"]["resumeToken"]


def _cli_options(cli) -> Options:
    return Options(cwd=str(cli.work), state_dir=str(cli.state), env={})


@pytest.mark.parametrize("how", ["stdin-closed", "cancelled"])
def test_an_mcp_resume_cut_off_mid_step_leaves_its_checkpoint_in_doubt_with_a_record(cli, how):
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    token = _halted(cli)
    server = McpServer(cli)
    ident = server.call("lobster_resume", token=token, approve=True)
    _wait_for(cli.work / "started", server.proc)
    if how == "cancelled":  # what a client sends when its own timeout fires
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": ident, "reason": "timeout"}})
        time.sleep(1)
        server.proc.stdin.close()
    else:
        server.proc.stdin.close()
    assert server.proc.wait(timeout=30) == 0
    assert not (cli.work / "late.txt").exists()
    entry = _record_of(_cli_options(cli), token)
    assert entry["status"] == "in_doubt", entry
    assert "cancel" in entry["reason"] and entry["step"], entry
    assert entry["retry"]["error"]["code"] == "T432", entry["retry"]


def test_a_disk_full_at_the_next_gate_leaves_the_checkpoint_in_doubt(cli):
    """The resumed step runs its side effect, then the next gate's frame cannot be written
    (RLIMIT_FSIZE: the kernel refuses the write past the limit with EFBIG, through the same
    write path a full disk's ENOSPC takes)."""
    big = json.dumps(["x" * 100] * 200)  # the second gate's items: a frame of about 25 KB
    (cli.work / "big.json").write_text(big)
    envelope, _ = cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt 'One?' "
                               "| exec --json --shell 'touch effect.txt; cat big.json' "
                               "| approve --prompt 'Two?'")
    token = envelope["requiresApproval"]["resumeToken"]

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    proc = subprocess.run([LOBSTER, "resume", "--token", token, "--approve", "yes"],
                          cwd=cli.work, env=cli.env, capture_output=True, text=True, timeout=60,
                          preexec_fn=limit, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    answer = json.loads(proc.stdout)
    assert (cli.work / "effect.txt").exists()  # the side effect had run
    assert not answer["ok"] and answer["error"]["code"] == "T450", answer
    entry = _record_of(_cli_options(cli), token)
    assert entry["status"] == "in_doubt", entry
    assert entry["step"] and "could not be saved" in entry["reason"], entry
    assert entry["retry"]["error"]["code"] == "T432", entry["retry"]


def test_postgres_refusing_the_next_frame_leaves_the_checkpoint_resumable_or_in_doubt(
        location, tmp_path):
    """An expiry PostgreSQL cannot hold (a TTL of 10**17 ms) for the checkpoint the resumed
    run reaches next: refused up front (the checkpoint still waits) or by the server (in
    doubt), never consumed without a trace."""
    if "://" not in location:
        pytest.skip("PostgreSQL only")
    options = Options(cwd=str(tmp_path), state_dir=location, env={})
    first = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]' "
                    "| approve --prompt 'One?' | approve --prompt 'Two?'"}, options)
    token = first["requiresApproval"]["resumeToken"]
    answer = handle({"action": "resume", "token": token, "approve": True,
                     "checkpointTtl": 10**17}, options)
    assert not answer["ok"], answer
    state_key = decode(token).state_key
    listed = {e["stateKey"]: e for e in admin.pending(options)}
    assert state_key in listed, f"gone: {answer}"
    entry = listed[state_key]
    assert entry["status"] in ("waiting", "in_doubt"), entry
    if entry["status"] == "in_doubt":
        assert entry["reason"] and entry["step"], entry


# liveness is a lease, not a pid ---------------------------------------------------------------
def test_a_resume_longer_than_its_lease_stays_claimed_while_it_renews_it(cli):
    """A 1 s lease, a step of about 3 s: the running resume renews its lease, so the checkpoint
    reads `claimed` throughout (a retry: T435, a cancel refused), then `finished`."""
    parked, _ = cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt Go "
                             "| exec --shell 'touch started; sleep 3'")
    token = parked["requiresApproval"]["resumeToken"]
    proc = subprocess.Popen([LOBSTER, "resume", "--token", token, "--approve", "yes"],
                            cwd=cli.work, env={**cli.env, "LOBSTER_CLAIM_LEASE": "1s"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    options = _cli_options(cli)
    try:
        _wait_for(cli.work / "started", proc)
        time.sleep(2)  # two lease periods
        (entry,) = admin.pending(options)
        assert entry["status"] == "claimed" and entry["leaseUntil"], entry
        retry = handle({"action": "resume", "token": token, "approve": True}, options)
        assert retry["error"]["code"] == "T435", retry
        assert retry["error"]["message"] == "Pipeline resume state not found"
        assert admin.cancel(options, entry["stateKey"])["error"]["code"] == "T435"
    finally:
        out, err = proc.communicate(timeout=60)
    assert json.loads(out)["status"] == "ok", err
    assert admin.pending(options) == []
    assert admin.history(options, token)["checkpoint"]["state"] == "finished"


def test_a_resume_that_failed_in_a_long_lived_process_is_in_doubt_at_once(tmp_path):
    """An embedder whose `write` callback raises (a bug of the host) while a resumed run prints:
    the process lives on, but the checkpoint is in doubt at once with the exception as its
    reason (it used to read "running" for as long as the process lived), and cancel clears it."""
    def broken(text):
        raise RuntimeError("the host's writer broke")

    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={},
                      mode="human")
    parked = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]' "
                     "| approve --prompt Go | json"}, options)
    token = parked["requiresApproval"]["resumeToken"]
    failed = handle({"action": "resume", "token": token, "approve": True},
                    Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={},
                            mode="human", write=broken))
    assert failed["error"]["code"] == "T498", failed
    (entry,) = admin.pending(options)
    assert entry["status"] == "in_doubt" and "RuntimeError" in entry["reason"], entry
    assert entry["step"] == "3:json", entry
    assert admin.cancel(options, entry["stateKey"])["status"] == "cancelled"
    assert admin.pending(options) == []


def test_a_claim_held_under_a_live_pid_of_this_host_is_not_running_forever(tmp_path):
    """A claim recorded for pid 1 on this host (a container's pid 1 is always alive; a reused
    pid is the same) and no lease: it is in doubt, and cancel clears it."""
    import socket

    from vm.host.store import open_store
    from vm.host.store.claims import Claimant

    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={})
    parked = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]' "
                     "| approve --prompt Go"}, options)
    state_key = decode(parked["requiresApproval"]["resumeToken"]).state_key
    store = open_store(options.state_dir, {})
    assert store.claim_frame(state_key, Claimant("approval", "", pid=1,
                                                 host=socket.gethostname()))
    (entry,) = admin.pending(options)
    assert entry["status"] == "in_doubt", entry
    assert admin.cancel(options, state_key)["status"] == "cancelled"
    assert admin.pending(options) == []


def test_a_resume_running_on_another_host_is_listed_as_claimed_not_in_doubt(location, cli):
    """A resume running in another UTS namespace (its own host name, as another gateway of the
    fleet): while its lease is live, `pending` lists it as claimed."""
    import shutil

    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare to run a process under another host name")
    env = {**cli.env, "LOBSTER_STORE": location}
    parked, _ = cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt Go "
                             "| exec --shell 'touch started; sleep 2'", env=env)
    token = parked["requiresApproval"]["resumeToken"]
    proc = subprocess.Popen(["unshare", "--uts", "sh", "-c", 'hostname elsewhere-gw && exec "$@"',
                             "sh", LOBSTER, "resume", "--token", token, "--approve", "yes"],
                            cwd=cli.work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    options = Options(cwd=str(cli.work), state_dir=location, env={})
    try:
        _wait_for(cli.work / "started", proc)
        (entry,) = admin.pending(options)
        assert entry["status"] == "claimed", entry
        assert entry["claimedBy"].endswith("@elsewhere-gw"), entry
    finally:
        out, err = proc.communicate(timeout=60)
    assert json.loads(out)["status"] == "ok", err


# the record: history, tombstones ---------------------------------------------------------------
def test_history_is_the_audit_trail_of_who_approved_what(cli):
    (cli.work / "ship.lobster").write_text(
        "steps:\n  - id: ship\n    approval: Ship?\n  - id: again\n    approval: Again?\n")
    envelope, _ = cli.tool("run", "--mode", "tool", "--file", "ship.lobster",
                           env={"LOBSTER_APPROVAL_INITIATED_BY": "bob"})
    halt = envelope["requiresApproval"]
    waiting, code = cli.tool("history", halt["approvalId"], "--format", "json")
    assert code == 0 and waiting["checkpoint"]["state"] == "waiting", waiting
    (halted,) = waiting["checkpoint"]["events"]
    assert halted["event"] == "halted" and halted["programHash"] and halted["prompt"] == "Ship?"
    assert halted["step"] == "ship" and halted["kind"] == "approval"
    assert halted["itemsHash"].startswith("sha256:") and halted["at"].endswith("Z")
    nxt, _ = cli.tool("resume", "--id", halt["approvalId"], "--approve", "yes",
                      env={"LOBSTER_APPROVAL_APPROVED_BY": "alice"})
    for ident in (halt["approvalId"], halt["resumeToken"], decode(halt["resumeToken"]).state_key):
        record, code = cli.tool("history", ident, "--format", "json")
        assert code == 0, record
        checkpoint = record["checkpoint"]
        assert checkpoint["state"] == "finished", checkpoint
        assert [e["event"] for e in checkpoint["events"]] == ["halted", "claimed", "finished"]
        halted, claimed, finished = checkpoint["events"]
        assert halted["initiatedBy"] == "bob"
        assert claimed["approvedBy"] == "alice" and claimed["decision"] == "approve"
        assert claimed["by"].startswith(tuple("0123456789"))
        assert finished["outcome"] == "needs_approval"
        assert finished["next"]["approvalId"] == nxt["requiresApproval"]["approvalId"]
    text = cli.run("history", halt["approvalId"]).stdout
    assert "finished" in text and "approvedBy=alice" in text, text
    from vm import history  # the embedding API

    assert history(_cli_options(cli), halt["approvalId"])["checkpoint"]["state"] == "finished"


def test_history_refuses_what_names_no_checkpoint_in_one_line(cli):
    for ident, code in (("0badcafe", "E503"), ("pipeline_resume_nothing", "E504"),
                        ("not a token", "E501")):
        proc = cli.run("history", ident)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc
        assert json.loads(proc.stdout)["error"]["code"] == code
    proc = cli.run("history")
    assert proc.returncode == 2 and proc.stderr.splitlines()[0].startswith("history requires")


def test_a_tombstone_is_kept_for_its_ttl_then_collected(cli):
    envelope, _ = cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt Go | json")
    halt = envelope["requiresApproval"]
    cli.tool("resume", "--id", halt["approvalId"], "--approve", "yes")
    kept, _ = cli.tool("gc", "--format", "json")
    assert kept["tombstones"] == []
    retry, _ = cli.tool("resume", "--token", halt["resumeToken"], "--approve", "yes")
    assert retry["error"]["message"] == "Pipeline resume state not found"  # the original's
    assert retry["error"]["code"] == "T436" and retry["error"]["checkpoint"]["outcome"] == "ok"
    retry, code = cli.tool("resume", "--id", halt["approvalId"], "--approve", "yes")
    assert code == 2 and retry["error"]["code"] == "E505", retry  # an id spent, as the original
    assert retry["error"]["message"] == f'Approval ID "{halt["approvalId"]}" not found or expired'
    assert retry["error"]["checkpoint"]["state"] == "finished"
    bad, code = cli.tool("gc", env={"LOBSTER_TOMBSTONE_TTL": "soon"})
    assert code == 1 and bad["error"]["code"] == "E004", bad
    gone, _ = cli.tool("gc", "--format", "json", env={"LOBSTER_TOMBSTONE_TTL": "0s"})
    assert gone["tombstones"] == [decode(halt["resumeToken"]).state_key]
    retry, _ = cli.tool("resume", "--token", halt["resumeToken"], "--approve", "yes")
    assert retry["error"]["code"] == "T430"


def test_the_id_of_an_approved_last_stage_approve_still_names_its_ended_checkpoint(cli):
    """As the original: a pipeline whose approve is its last stage, approved, keeps its id (its
    state is gone: `Pipeline resume state not found`); rejected, or with stages after the
    approve, its id is spent (E505)."""
    for pipeline, decision, code in (("approve --prompt Go", "yes", "T436"),
                                     ("approve --prompt Go", "no", "E505"),
                                     ("approve --prompt Go | json", "yes", "E505")):
        envelope, _ = cli.pipeline(f"exec --json --shell 'echo [1]' | {pipeline}")
        halt = envelope["requiresApproval"]
        cli.tool("resume", "--id", halt["approvalId"], "--approve", decision)
        retry, status = cli.tool("resume", "--id", halt["approvalId"], "--approve", "yes")
        assert (retry["error"]["code"], status) == (code, 1 if code == "T436" else 2), retry
        assert retry["error"]["checkpoint"]["state"] == "finished"
        # the record says so itself (a gc that took the program changes nothing)
        finished = admin.history(_cli_options(cli), halt["approvalId"])["checkpoint"]["events"][-1]
        assert finished.get("lastStage") is (True if code == "T436" else None)


def test_a_bad_claim_lease_is_refused_before_anything_is_claimed(cli):
    envelope, _ = cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt Go")
    token = envelope["requiresApproval"]["resumeToken"]
    for bad in ("forever", "0s", "500ms"):
        refused, code = cli.tool("resume", "--token", token, "--approve", "yes",
                                 env={"LOBSTER_CLAIM_LEASE": bad})
        assert code == 1 and refused["error"]["code"] == "E004", refused
    assert [e["status"] for e in admin.pending(_cli_options(cli))] == ["waiting"]


def test_doctor_counts_the_checkpoints_by_state_on_stderr(cli):
    assert cli.run("doctor").stderr == ""
    cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt Go")
    store_dir = str(cli.state)
    from vm.host.store import open_store
    from vm.host.store.claims import Claimant

    parked, _ = cli.pipeline("exec --json --shell 'echo [2]' | approve --prompt Go")
    key = decode(parked["requiresApproval"]["resumeToken"]).state_key
    assert open_store(store_dir, {}).claim_frame(key, Claimant("approval", ""))
    proc = cli.run("doctor")
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"]
    assert proc.stderr.startswith("lobster doctor: checkpoints: 1 waiting, 1 in doubt"), \
        proc.stderr


def test_a_claim_released_with_a_rewritten_frame_waits_again_with_its_history(location,
                                                                             tmp_path):
    """What `lobster migrate` will do: claim a checkpoint, park a rewritten frame under the same
    key, and it waits again; its record says claimed, then released."""
    from vm.isa import codec
    from vm.host.store import lifecycle

    options = Options(cwd=str(tmp_path), state_dir=location, env={})
    parked = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]' "
                     "| approve --prompt Go"}, options)
    token = parked["requiresApproval"]["resumeToken"]
    store = options.store()
    state_key = decode(token).state_key
    waiting = store.read_parked(state_key)
    frame = codec.load_frame(waiting.blob)
    taken = lifecycle.claim(store, waiting, frame, decision="migrate")
    assert lifecycle.status(store, state_key).state == "claimed"
    taken.release(waiting.blob, waiting.expires_at, {"event": "released",
                                                     "why": "rewritten for format 3"})
    record = admin.history(options, token)["checkpoint"]
    assert record["state"] == "waiting"
    assert [e["event"] for e in record["events"]][:3] == ["halted", "claimed", "released"]
    done = handle({"action": "resume", "token": token, "approve": True}, options)
    assert done["output"] == [1], done
    events = [e["event"] for e in admin.history(options, token)["checkpoint"]["events"]]
    assert events == ["halted", "claimed", "released", "halted", "claimed", "finished"]


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_resume_stopped_by_a_signal_records_why_before_it_exits(cli, signame):
    """The CLI's signal handler kills the children and leaves the claim in doubt with the signal
    and the step reached at once (not only when its 30 s lease runs out)."""
    import signal

    token = _halted(cli)
    proc = subprocess.Popen([LOBSTER, "resume", "--token", token, "--approve", "yes"],
                            cwd=cli.work, env=cli.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for(cli.work / "started", proc)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + getattr(signal, signame) and "Traceback" not in err
    entry = _record_of(_cli_options(cli), token)
    assert entry["status"] == "in_doubt", entry
    assert entry["reason"] == f"the resume was stopped by {signame}" and entry["step"] == "3:exec"
