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

from vm import admin
from vm.protocol import Options, handle
from vm.token import decode

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
