"""Per-run state: a request never changes the caller's Options, each run cancels only its own
children, and a resumed run is bounded like a run. Real child processes, in-process gateway."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import attrs
import pytest

import lobsterc.frontend
from lobsterc.diagnostics import CompileError
from vm.service import frontend as vm_frontend
from vm.host.children import Scope
from vm.service.protocol import DEFAULT_MAX_STDOUT_BYTES, DEFAULT_TIMEOUT_MS, Options, Settings, handle


@pytest.fixture
def options(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    yield Options(env=env, cwd=str(tmp_path), state_dir=str(tmp_path / "state"))
    (tmp_path / "go").write_text("")  # a failed test leaves no waiting child behind


def wait_for(path: Path) -> int:
    """The pid a child wrote to `path` (children start fast; the bound only stops a hang)."""
    end = time.monotonic() + 20
    while time.monotonic() < end:
        text = path.read_text().strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.01)
    raise AssertionError(f"{path} never written")


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def dead_soon(pid: int) -> bool:
    end = time.monotonic() + 5
    while running(pid) and time.monotonic() < end:
        time.sleep(0.02)
    return not running(pid)


def killed(pidfile: Path) -> bool:
    """After a timeout: the child that wrote `pidfile` is gone (one killed before it could
    write it never ran the rest)."""
    text = pidfile.read_text().strip() if pidfile.exists() else ""
    return not text or dead_soon(int(text))


def waiting_child(pidfile: str, go: str = "go") -> str:
    """A pipeline whose child writes its pid, then waits until `go` exists."""
    return (f"exec --shell 'echo $$ > {pidfile}; while [ ! -f {go} ]; do sleep 0.02; done;"
            " echo [1]' --json")


class Background:
    """One `handle` call on its own thread, as a gateway serves concurrent requests."""

    def __init__(self, request: dict, options: Options, scope: Scope | None = None) -> None:
        self.envelope: dict | None = None
        self.thread = threading.Thread(target=self._run, args=(request, options, scope))
        self.thread.start()

    def _run(self, request: dict, options: Options, scope: Scope | None) -> None:
        self.envelope = handle(request, options, scope=scope)

    def result(self) -> dict:
        self.thread.join(30)
        assert self.envelope is not None, "the request never returned"
        return self.envelope


# options are never written --------------------------------------------------------------------
def test_a_request_cwd_is_relative_to_the_options_cwd_every_time(options, tmp_path):
    (tmp_path / "a").mkdir()
    before = attrs.evolve(options)
    request = {"action": "run", "pipeline": "exec pwd", "cwd": "a"}
    first, second = handle(request, options), handle(request, options)
    assert first["output"] == second["output"] == [str((tmp_path / "a").resolve())]
    assert options == before


def test_request_bounds_leave_the_options_alone(options):
    options = attrs.evolve(options, timeout_ms=500, max_stdout_bytes=4096)
    handle({"action": "run", "pipeline": "exec echo hi", "timeoutMs": 30000,
            "maxStdoutBytes": 100000}, options)
    assert (options.timeout_ms, options.max_stdout_bytes) == (500, 4096)


def test_the_options_bounds_are_the_defaults_under_a_request(options, tmp_path):
    options = attrs.evolve(options, timeout_ms=300)
    envelope = handle({"action": "run", "pipeline": waiting_child("c.pid")}, options)
    assert envelope["error"]["code"] == "T420"
    assert killed(tmp_path / "c.pid")


@pytest.mark.parametrize("request_, options_, expected", [
    ({}, {}, (DEFAULT_TIMEOUT_MS, DEFAULT_MAX_STDOUT_BYTES)),
    ({"timeoutMs": 1, "maxStdoutBytes": 10}, {}, (200, 1024)),  # the floors
    ({"timeoutMs": 1500.7}, {}, (1500, DEFAULT_MAX_STDOUT_BYTES)),
    ({}, {"timeout_ms": 700, "max_stdout_bytes": 3000}, (700, 3000)),
    ({"timeoutMs": 900}, {"timeout_ms": 700}, (900, DEFAULT_MAX_STDOUT_BYTES)),
])
def test_settings_of_a_request(request_, options_, expected):
    for action in ("run", "resume"):
        settings = Settings.of_request({"action": action, **request_}, Options(**options_))
        assert (settings.timeout_ms, settings.max_stdout_bytes) == expected


# one scope per run ----------------------------------------------------------------------------
def test_cancelling_one_runs_scope_kills_only_its_children(options, tmp_path):
    mine, theirs = Scope(), Scope()
    a = Background({"action": "run", "pipeline": waiting_child("a.pid")}, options, mine)
    b = Background({"action": "run", "pipeline": waiting_child("b.pid")}, options, theirs)
    a_pid, b_pid = wait_for(tmp_path / "a.pid"), wait_for(tmp_path / "b.pid")
    mine.cancel()
    cancelled = a.result()
    assert cancelled["error"] == {"type": "runtime_error", "message": "lobster run cancelled",
                                  "code": "T422", "location": cancelled["error"]["location"]}
    assert dead_soon(a_pid)
    assert running(b_pid)
    (tmp_path / "go").write_text("")
    assert b.result()["output"] == [1]


def test_a_runs_timeout_kills_only_its_own_children(options, tmp_path):
    b = Background({"action": "run", "pipeline": waiting_child("b.pid")}, options)
    b_pid = wait_for(tmp_path / "b.pid")
    timed_out = handle({"action": "run", "pipeline": waiting_child("a.pid", "never"),
                        "timeoutMs": 300}, options)
    assert timed_out["error"]["message"] == "lobster runtime timed out"
    assert killed(tmp_path / "a.pid")
    assert running(b_pid)
    (tmp_path / "go").write_text("")
    assert b.result()["output"] == [1]


def test_parallel_wait_any_stops_only_its_own_runs_losers(options, tmp_path):
    (tmp_path / "race.lobster").write_text(
        "steps:\n  - id: race\n    parallel:\n      wait: any\n      branches:\n"
        "        - id: slow\n          run: echo $$ > slow.pid; while :; do sleep 0.02; done\n"
        "        - id: fast\n          run: while [ ! -s slow.pid ]; do sleep 0.02; done;"
        " echo [1]\n")
    other = Background({"action": "run", "pipeline": waiting_child("b.pid")}, options)
    b_pid = wait_for(tmp_path / "b.pid")
    assert handle({"action": "run", "pipeline": "race.lobster"}, options)["output"] == [{"fast": [1]}]
    assert dead_soon(wait_for(tmp_path / "slow.pid"))
    assert running(b_pid)
    (tmp_path / "go").write_text("")
    assert other.result()["output"] == [1]


# a resume is bounded like a run ---------------------------------------------------------------
def park(options: Options, pipeline: str) -> str:
    envelope = handle({"action": "run", "pipeline": "approve | " + pipeline}, options)
    return envelope["requiresApproval"]["resumeToken"]


def resume(options: Options, token: str, **bounds) -> dict:
    return handle({"action": "resume", "token": token, "approve": True, **bounds}, options)


def test_a_resumed_run_that_outlives_its_timeout_is_killed_and_reported(options, tmp_path):
    token = park(options, "exec --shell 'echo $$ > r.pid; for i in $(seq 250); do sleep 0.02;"
                          " done'")
    envelope = resume(options, token, timeoutMs=300)
    assert envelope["ok"] is False
    assert (envelope["error"]["message"], envelope["error"]["code"]) == (
        "lobster runtime timed out", "T420")
    assert killed(tmp_path / "r.pid")


def test_a_resumed_run_has_the_default_output_cap(options):
    big = f"exec {sys.executable} -c 'import sys; sys.stdout.write(\"a\" * 600000)'"
    envelope = resume(options, park(options, big))
    assert envelope["error"]["message"] == "lobster stdout exceeded maxStdoutBytes"


def test_a_resumed_runs_envelope_is_capped(options):
    envelope = resume(options, park(options, "exec seq 1 400"), maxStdoutBytes=2048)
    assert (envelope["error"]["message"], envelope["error"]["code"]) == (
        "lobster runtime result exceeded maxStdoutBytes", "T423")
    assert resume(options, park(options, "exec seq 1 400"))["output"][-1] == "400"


def test_lobster_tool_resume_requests_are_bounded(cli):
    envelope, _ = cli.pipeline("approve | exec --shell 'for i in $(seq 250); do sleep 0.02; done'")
    token = envelope["requiresApproval"]["resumeToken"]
    request = {"action": "resume", "token": token, "approve": True, "timeoutMs": 300}
    envelope, code = cli.tool("tool", json.dumps(request))
    assert (code, envelope["error"]["message"]) == (1, "lobster runtime timed out")


def test_lobster_resume_is_bounded_as_lobster_run_is(cli):
    # neither takes a timeout or an output cap of its own; LOBSTER_MAX_OUTPUT_BYTES caps both
    big = f"exec {sys.executable} -c 'import sys; sys.stdout.write(\"a\" * 600000)'"
    direct, _ = cli.pipeline(big)
    envelope, _ = cli.pipeline(f"approve | {big}")
    resumed, _ = cli.tool("resume", "--token", envelope["requiresApproval"]["resumeToken"],
                          "--approve", "yes")
    assert resumed["output"] == direct["output"] == ["a" * 600000]
    capped = {"LOBSTER_MAX_OUTPUT_BYTES": "4096"}
    direct, _ = cli.pipeline(big, env=capped)
    envelope, _ = cli.pipeline(f"approve | {big}")
    resumed, _ = cli.tool("resume", "--token", envelope["requiresApproval"]["resumeToken"],
                          "--approve", "yes", env=capped)
    assert (resumed["error"]["message"], resumed["error"]["code"]) == (
        direct["error"]["message"], direct["error"]["code"])
    assert direct["error"]["message"] == "Process output exceeded 4096 bytes"


# the compiler is a frontend -------------------------------------------------------------------
class CountingFrontend:
    """An embedder's frontend: lobsterc's, counting the compiles it is asked for."""

    CompileError = CompileError

    def __init__(self) -> None:
        self.compiled: list[str] = []

    def __getattr__(self, name: str):
        return getattr(lobsterc.frontend, name)

    def compile_pipeline(self, text, store=None):
        self.compiled.append(text)
        return lobsterc.frontend.compile_pipeline(text, store)


def test_an_embedder_passes_its_own_frontend(options):
    counting = CountingFrontend()
    options = attrs.evolve(options, frontend=counting)
    assert handle({"action": "run", "pipeline": "exec echo hi"}, options)["output"] == ["hi"]
    envelope = handle({"action": "run", "pipeline": "exec 'unclosed"}, options)
    assert envelope["error"]["type"] == "parse_error"
    assert counting.compiled == ["exec echo hi", "exec 'unclosed"]


def test_lobsterc_raises_compile_errors_and_flattens_them_for_envelopes():
    with pytest.raises(CompileError) as caught:
        lobsterc.frontend.compile_pipeline("exec 'unclosed")
    fields = lobsterc.frontend.error_fields(caught.value)
    assert (fields["code"], fields["kind"]) == ("E102", "parse_error")
    assert fields["location"] == {"file": "<pipeline>", "line": 1, "column": 6}
    assert "error[E102]" in lobsterc.frontend.render_error(caught.value)


def test_without_a_compiler_a_run_is_refused_and_a_resume_still_works(options, monkeypatch):
    import importlib.metadata

    token = park(attrs.evolve(options, frontend=lobsterc.frontend), "map --wrap v")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    vm_frontend.find_frontend.cache_clear()  # failures are not cached: later tests look again
    envelope = handle({"action": "run", "pipeline": "exec echo hi"}, options)
    assert envelope["error"]["type"] == "runtime_error"
    assert envelope["error"]["code"] == "E003"
    assert "no Lobster compiler is installed" in envelope["error"]["message"]
    assert resume(options, token)["status"] == "ok"
