"""The service under abuse (issue 24 item 5). Each finding's test here failed on main 25e1501
when it was written (run against that code); the claim-statement guard and the unbound
pipelines test check structure this branch added. No test here times anything: the figures
are in bench/abuse_bench.py."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import LOBSTER
from tests.pg_server import pg_server  # noqa: F401  (the fixture)


def test_tool_refuses_a_request_that_is_not_utf8(cli):
    marker = cli.work / "ran"
    request = json.dumps({"action": "run", "pipeline": f"exec --shell 'touch {marker}' X"})
    data = request.encode().replace(b"X", b"\xff\xfe")
    proc = subprocess.run([LOBSTER, "tool", "-"], cwd=cli.work, env=cli.env, input=data,
                          capture_output=True, timeout=60)
    refused = json.loads(proc.stdout)
    assert (proc.returncode, refused["error"]["code"]) == (2, "E009")
    assert "UTF-8" in refused["error"]["message"]
    assert not marker.exists()


# MCP: the wire as a client that does not play by the rules ----------------------------------
class RawMcp:
    """`lobster mcp` driven with hand-written JSON-RPC lines (the SDK client would refuse to
    send most of what these tests send)."""

    def __init__(self, cli) -> None:
        self.pending = b""  # bytes read from the server, not yet a whole line
        self.proc = subprocess.Popen([LOBSTER, "mcp"], cwd=cli.work, env=cli.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "abuse", "version": "0"}}})
        assert "result" in self.receive()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def call(self, ident: int, tool: str, **arguments) -> None:
        self.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})

    def receive(self, wait: float = 60) -> dict:
        """The next answer line. Read from the descriptor into a buffer of our own: select()
        does not see lines a buffered reader already holds (answers that came together)."""
        import select
        import time

        deadline = time.monotonic() + wait
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.proc.stdout], [], [],
                                        max(0.0, deadline - time.monotonic()))
            assert ready, "no answer from lobster mcp"
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            assert chunk, "lobster mcp closed its output"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)

    def peak_rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

    def close(self) -> int:
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        return code


def envelope_of(answer: dict) -> dict:
    return answer["result"]["structuredContent"]


def test_mcp_every_tool_refuses_an_unknown_field(cli):
    server = RawMcp(cli)
    try:
        for ident, (tool, arguments) in enumerate([
                ("lobster_pending", {"olderThan": "1d", "bogus": 1}),
                ("lobster_run", {"pipeline": "exec --json --shell 'echo [1]'", "dryRun": True}),
                ("lobster_run", {"pipeline": "exec --json --shell 'echo [1]'",
                                 "action": "resume"}),
                ("lobster_resume", {"token": "x", "cancel": True, "force": True})], start=1):
            server.call(ident, tool, **arguments)
            answer = server.receive()
            assert answer["id"] == ident
            refused = envelope_of(answer)
            assert (refused["ok"], refused["error"]["code"]) == (False, "E008"), refused
    finally:
        assert server.close() == 0


def test_mcp_refuses_an_oversized_frame_without_holding_it(cli):
    from vm.cli.mcp import MAX_FRAME_BYTES

    server = RawMcp(cli)
    try:
        server.call(1, "lobster_pending")
        assert envelope_of(server.receive())["ok"] is True
        before = server.peak_rss_kib()
        size = 8 * MAX_FRAME_BYTES  # 64 MiB and more
        head = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lobster_run",' \
               b'"arguments":{"pipeline":"'
        server.send(head + b"x" * size + b'"}}}')
        answer = server.receive()
        assert answer["id"] == 7
        assert answer["error"]["data"] == {"code": "E006"}
        assert f"limit of {MAX_FRAME_BYTES} bytes" in answer["error"]["message"]
        grown = server.peak_rss_kib() - before
        assert grown * 1024 < size // 4, f"peak RSS grew {grown} KiB for a {size}-byte line"
        server.send(b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":\xff}')
        refused = server.receive()
        assert (refused["id"], refused["error"]["data"]) == (8, {"code": "E009"})
        server.call(9, "lobster_run", pipeline="exec --json --shell 'echo [3]'")
        assert envelope_of(server.receive())["output"] == [3]  # still serving
    finally:
        assert server.close() == 0


def test_mcp_busy_answer_instead_of_starvation_and_cheap_calls_get_through(cli):
    from vm.cli.mcp import MAX_RUNS

    server = RawMcp(cli)
    extra = 13  # 45 long calls in all: more than the SDK's 40 default worker threads
    try:
        for ident in range(1, MAX_RUNS + extra + 1):
            server.call(ident, "lobster_run", pipeline="exec --shell 'sleep 600'",
                        timeoutMs=900000)
        server.call(1001, "lobster_pending")
        server.call(1002, "lobster_resume", token="nope", cancel=True)
        answers = {}
        while len(answers) < extra + 2:  # none of the sleepers can answer: they sleep on
            answer = server.receive()
            answers[answer["id"]] = envelope_of(answer)
        busy = [i for i, e in answers.items() if e.get("error", {}).get("code") == "T470"]
        assert len(busy) == extra
        assert answers[1001]["ok"] is True
        assert answers[1002]["error"]["code"] in ("T430", "E501", "E001"), answers[1002]
    finally:
        assert server.close() == 0  # the client left: the sleepers are cancelled with it


# Speed: linear in the size of the input, checked by counting, not by a clock ----------------
class CountingSteps(tuple):
    """A program's step table that counts the passes made over it."""

    passes = 0

    def __iter__(self):
        CountingSteps.passes += 1
        return super().__iter__()


def _steps_workflow(path, n: int) -> str:
    lines = ["steps:", "  - id: s0", "    run: echo 0"]
    for i in range(1, n):
        lines += [f"  - id: s{i}", f"    run: echo {i}", '    when: $s0.stdout == "x"']
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_dis_passes_over_the_steps_a_fixed_number_of_times(tmp_path):
    import attrs

    from lobsterc.generate.workflow import compile_workflow
    from vm.isa.dis import disassemble

    passes = []
    for n in (20, 80):
        program = compile_workflow(_steps_workflow(tmp_path / f"w{n}.lobster", n))
        counted = attrs.evolve(program)
        object.__setattr__(counted, "steps", CountingSteps(program.steps))
        CountingSteps.passes = 0
        assert disassemble(counted) == disassemble(program)
        passes.append(CountingSteps.passes)
    assert passes[0] == passes[1] <= 8, passes  # not once per instruction or jump


def test_a_workflow_with_many_errors_stops_checking_after_max_errors(tmp_path):
    from lobsterc.check.checker import MAX_ERRORS, check_file

    path = tmp_path / "w.lobster"
    path.write_text("steps:\n" + "".join(f"  - id: s{i}\n    run: echo\n    stdin: $nope{i}.stdout\n"
                                         for i in range(3 * MAX_ERRORS)))
    _, diags = check_file(str(path))
    assert [d.code for d in diags] == ["E211"] * MAX_ERRORS + ["E230"]
    assert diags[-1].message == (f"Workflow file over a limit: {MAX_ERRORS} errors, checking "
                                 "stopped there")


def test_a_workflow_over_the_node_limit_is_refused(tmp_path):
    import sys

    from lobsterc.load.document import MAX_DOCUMENT_NODES

    path = tmp_path / "w.lobster"
    path.write_text("steps:\n" + "".join(f"  - id: x\n    run: echo {i}\n"
                                         for i in range(MAX_DOCUMENT_NODES // 3)))
    script = ("import sys, json; from lobsterc.load.build import load\n"
              "loaded = load(sys.argv[1])\n"
              "print(json.dumps([d.code for d in loaded.diagnostics]))")
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert json.loads(proc.stdout) == ["E230"], proc.stderr


# Events: never block a run for long, never dropped silently ---------------------------------
def _event_options(tmp_path, **kw):
    from vm.service.protocol import Options

    return Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), **kw)


def test_a_hung_callback_holds_one_thread_not_one_per_run(tmp_path):
    import threading

    from vm.engine.events import drain
    from vm.service.protocol import handle

    release = threading.Event()

    def hung(event):
        release.wait(120)

    options = _event_options(tmp_path, on_event=hung)
    before = {t.ident for t in threading.enumerate()}
    try:
        for n in range(4):
            envelope = handle({"action": "run",
                               "pipeline": f"exec --json --shell 'echo [{n}]'"}, options)
            assert envelope["output"] == [n]
        started = [t for t in threading.enumerate() if t.ident not in before]
        assert len(started) == 1, started
    finally:
        release.set()
    assert drain(hung, 60)


def test_events_past_the_queue_bound_are_counted_in_the_envelope(tmp_path, monkeypatch):
    import threading

    from vm.engine import events
    from vm.service.protocol import handle

    monkeypatch.setattr(events, "MAX_QUEUED", 3)
    release = threading.Event()
    logged: list[str] = []

    def hung(event):
        release.wait(120)

    options = _event_options(tmp_path, on_event=hung, log=logged.append)
    pipeline = " | ".join(["exec --json --shell 'echo [1]'"] + ["head --n 1"] * 5)
    try:
        envelope = handle({"action": "run", "pipeline": pipeline}, options)
    finally:
        release.set()
    assert envelope["output"] == [1]
    # 12 events: one is in the callback (unless it had not started yet), 3 wait, the rest
    # are dropped and counted
    dropped = envelope["eventsDropped"]
    assert dropped in (8, 9), envelope
    assert logged == [f"lobster: {dropped} run events were dropped: the event callback fell 3 "
                      "events behind\n"]


def test_events_jsonl_past_the_pipe_buffer_all_arrive_with_the_halt(cli):
    # A reader that reads all of stdout before stderr: the events overflow the pipe buffer
    # long before the envelope is written.
    loud = ("exec --json --shell 'i=0; while [ $i -lt 3000 ]; do echo line-$i-" + "x" * 60
            + " >&2; i=$((i+1)); done; echo [1]' | approve --prompt ok")
    proc = subprocess.Popen([LOBSTER, "run", "--mode", "tool", "--events", "jsonl", loud],
                            cwd=cli.work, env=cli.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert json.loads(out)["status"] == "needs_approval"
    events = [json.loads(line) for line in err.splitlines()]
    assert sum(e["type"] == "stderr" for e in events) == 3000
    assert events[-1]["type"] == "halted"


def test_a_closed_stderr_or_stdout_is_not_a_traceback(cli):
    pipeline = "exec --json --shell 'echo [1]'"
    no_stderr = subprocess.run(["sh", "-c", f'"$0" run --mode tool "$1" 2>&-', LOBSTER,
                                pipeline], cwd=cli.work, env=cli.env, capture_output=True,
                               text=True, timeout=60)
    assert no_stderr.returncode == 0
    assert json.loads(no_stderr.stdout)["output"] == [1]
    for argv in (["run", "--mode", "tool", pipeline], ["run", pipeline],
                 ["run", "--events", "jsonl", pipeline]):
        no_stdout = subprocess.run(["sh", "-c", '"$0" "$@" >&-', LOBSTER, *argv], cwd=cli.work,
                                   env=cli.env, capture_output=True, text=True, timeout=60)
        assert (no_stdout.returncode, "Traceback" in no_stdout.stderr) == (0, False), argv


def test_a_full_stdout_is_one_line_not_a_traceback(cli):
    """`>/dev/full`: help and version (answered before the shared CLI helpers load), a listing
    and a run each say T497 on one line and exit 1."""
    env = {k: v for k, v in cli.env.items() if k != "PYTHONUNBUFFERED"}  # block-buffered
    for argv in (["--help"], ["version"], ["help", "run"], ["pending"], ["completion", "bash"],
                 ["run", "exec --json --shell 'echo [1]'"],
                 ["run", "--mode", "tool", "exec --json --shell 'echo [1]'"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([LOBSTER, *argv], cwd=cli.work, env=env, stdout=full,
                                  stderr=subprocess.PIPE, text=True, timeout=60)
        assert proc.returncode == 1, argv
        assert proc.stderr == ("lobster: error[T497]: cannot write to standard output "
                               "(No space left on device)\n"), argv


# Runs: a step is over when its child is; what the child left behind goes with it -------------
def _running(argv_text: str) -> list[int]:
    """The pids whose command line is `argv_text` (words joined by spaces)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if cmdline.read().rstrip(b"\0").replace(b"\0", b" ") == argv_text.encode():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_a_background_child_holding_the_output_does_not_hold_the_step(cli):
    done, code = cli.pipeline("exec --shell 'sleep 303.125 & echo hi'", env={})
    assert code == 0 and done["output"] == ["hi"], done  # not the timeout (T420)
    assert _running("sleep 303.125") == []


def test_a_setsid_grandchild_is_killed_with_its_step(cli):
    request = {"action": "run", "timeoutMs": 1500,
               "pipeline": "exec --shell 'setsid sleep 304.125 >/dev/null 2>&1 < /dev/null & "
                           "sleep 30'"}
    timed_out, code = cli.tool("tool", json.dumps(request))
    assert timed_out["error"]["code"] == "T420"
    assert _running("sleep 304.125") == []
    # and one that holds the output after its parent exits
    done, code = cli.pipeline("exec --shell 'setsid sleep 305.125 & echo hi'")
    assert done["output"] == ["hi"], done
    assert _running("sleep 305.125") == []


# Paths: a request's workflow files and templated step cwds stay in the working directory ----
def test_a_request_workflow_path_outside_the_working_directory_is_refused(cli, tmp_path):
    outside = tmp_path / "outside.lobster"
    marker = tmp_path / "ran"
    outside.write_text(f"steps:\n  - id: a\n    run: touch {marker}\n")
    (cli.work / "calls.lobster").write_text("steps:\n  - id: a\n    workflow: ../outside.lobster\n")
    (cli.work / "sub").mkdir()
    (cli.work / "sub" / "inner.lobster").write_text("steps:\n  - id: a\n    run: echo in\n")
    (cli.work / "calls_inner.lobster").write_text(
        "steps:\n  - id: a\n    workflow: sub/inner.lobster\n")
    for pipeline in (str(outside), "../outside.lobster", "calls.lobster"):
        refused, code = cli.tool("tool", json.dumps({"action": "run", "pipeline": pipeline}))
        assert code == 2 and "stay within the gateway working directory" in \
            refused["error"]["message"], (pipeline, refused)
    assert not marker.exists()
    done, code = cli.tool("tool", json.dumps({"action": "run", "pipeline": "calls_inner.lobster"}))
    assert done["ok"] is True, done
    # the CLI is the user's own shell: a file anywhere runs there, as before
    done, code = cli.tool("run", "--mode", "tool", str(outside))
    assert done["ok"] is True and marker.exists()


def test_a_templated_step_cwd_stays_in_the_run_directory(cli, tmp_path):
    (cli.work / "data").mkdir()
    (cli.work / "w.lobster").write_text(
        "args:\n  dir:\n    default: data\nsteps:\n  - id: a\n    cwd: ${dir}\n    run: pwd\n")
    for escape in (str(tmp_path), "..", "data/../.."):
        request = {"action": "run", "pipeline": "w.lobster", "argsJson": json.dumps({"dir": escape})}
        refused, code = cli.tool("tool", json.dumps(request))
        assert refused["ok"] is False and refused["error"]["code"] == "T412", (escape, refused)
        assert "stay within" in refused["error"]["message"] or "relative" in \
            refused["error"]["message"]
    done, code = cli.tool("tool", json.dumps({"action": "run", "pipeline": "w.lobster"}))
    assert done["output"][0].strip().endswith("/work/data"), done


# PostgreSQL: the pool after a server restart -------------------------------------------------
def test_pooled_connections_after_a_postgresql_restart():
    """A throwaway cluster of its own (never the shared server): every call after a restart
    works, on fast and on immediate shutdown, though the pool held connections from before."""
    import threading

    import pytest

    pytest.importorskip("psycopg")
    from tests import pg_server
    from vm.host.store.postgres import PostgresStore
    from vm.host.store.postgres_pool import POOL_MAX, close_pools

    import tempfile

    directory = tempfile.mkdtemp(prefix="lobster-pg-restart-")  # the server's user can reach it
    try:
        url = pg_server.start(directory)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no PostgreSQL to start: {exc}")
    try:
        store = PostgresStore(url)
        pool = store._backend.pool
        held = [pool.getconn() for _ in range(POOL_MAX)]  # the pool holds POOL_MAX connections
        for conn in held:
            pool.putconn(conn)
        store.set_value("n", 0)
        for mode in ("fast", "immediate"):
            subprocess.run(pg_server._as_owner(
                [pg_server._bin("pg_ctl"), "-D", f"{directory}/data", "-l", f"{directory}/log",
                 "-m", mode, "-w", "-t", "60", "restart"], pg_server._owner()), check=True,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=directory, timeout=120)
            failures = []
            for n in range(2 * POOL_MAX):
                try:
                    store.set_value("n", n)
                    assert store.get_value("n") == n
                except Exception as exc:  # noqa: BLE001 - counted, then reported
                    failures.append(f"{type(exc).__name__}: {exc}")
            assert failures == [], (mode, failures)
            # and calls made at once, each on a connection of its own
            errors: list[str] = []

            def one(i: int) -> None:
                try:
                    store.set_value(f"k{i}", i)
                except Exception as exc:  # noqa: BLE001
                    errors.append(str(exc))

            threads = [threading.Thread(target=one, args=(i,)) for i in range(POOL_MAX)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == [], (mode, errors)
    finally:
        close_pools()
        pg_server.stop(directory)


def test_the_claim_statements_are_the_ones_never_retried():
    """The store retries a statement whose connection broke, except the claim (its first
    attempt may have committed): every statement of claim_frame runs through `_once`."""
    import ast
    import inspect
    import textwrap

    from vm.host.store import postgres

    tree = ast.parse(textwrap.dedent(inspect.getsource(postgres.PostgresStore.claim_frame)))
    calls = [getattr(node.func, "attr", "") for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in
             ("_one", "_once", "_run", "_lazy", "execute")]
    assert calls and set(calls) == {"_once"}, calls


def test_pipelines_past_max_errors_are_not_bound(tmp_path):
    from lobsterc.check.checker import MAX_ERRORS, check_file

    path = tmp_path / "w.lobster"
    path.write_text("steps:\n" + "".join(f"  - id: s{i}\n    pipeline: nosuch{i} --x\n"
                                         for i in range(3 * MAX_ERRORS)))
    loaded, diags = check_file(str(path))
    assert [d.code for d in diags] == ["E201"] * MAX_ERRORS + ["E230"]
    parsed = [step.kind.pipeline.parsed is not None for step in loaded.workflow.steps]
    assert parsed == [True] * MAX_ERRORS + [False] * (2 * MAX_ERRORS)


class DroppingProxy:
    """A TCP proxy on 127.0.0.1 to PostgreSQL's unix socket that can cut the connections it
    already carries: after `cut()`, the next bytes a client sends on one of them close it
    unforwarded (a connection that died without a word: nothing to read while it is idle)."""

    def __init__(self, socket_path: str) -> None:
        import socket
        import threading

        self.path = socket_path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.live: list[dict] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.path)
            entry = {"cut": False, "sockets": (client, upstream)}
            self.live.append(entry)
            threading.Thread(target=self._pump, args=(client, upstream, entry, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, entry, False),
                             daemon=True).start()

    def _pump(self, source, target, entry, outbound: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data or (outbound and entry["cut"]):
                    break
                target.sendall(data)
        except OSError:
            pass
        for sock in entry["sockets"]:
            try:
                sock.close()
            except OSError:
                pass

    def cut(self) -> None:
        for entry in self.live:
            entry["cut"] = True

    def close(self) -> None:
        self.listener.close()
        self.cut()


def _settled(store) -> None:
    """Wait until each of the store pool's connections is idle (in the pool, or the one the
    backend keeps between statements), none being opened: a cut then reaches every one of
    them, and a connection the pool opens later is not cut (a connection half-opened at the
    cut, pooled after the failure's check, would fail the claim that follows, depending on
    timing alone)."""
    import time

    backend = store._backend
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stats = backend.pool.get_stats()
        if stats["pool_size"] == stats["pool_available"] + backend.holding:
            return
        time.sleep(0.01)
    raise AssertionError(f"the pool did not settle: {backend.pool.get_stats()}")


def test_a_statement_on_a_dead_connection_is_retried_once_but_never_the_claim(pg_server):
    import os
    import uuid

    import psycopg
    import pytest

    from tests.pg_server import with_search_path
    from vm.host.store.base import StoreError
    from vm.host.store.postgres import PostgresStore
    from vm.host.store.postgres_pool import close_pools

    host = dict(part.split("=", 1) for part in pg_server.split("?", 1)[1].split("&")).get("host")
    if not host or not os.path.exists(f"{host}/.s.PGSQL.5432"):
        pytest.skip("needs a PostgreSQL server on a unix socket")
    schema = f"lobster_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    proxy = DroppingProxy(f"{host}/.s.PGSQL.5432")
    try:
        url = with_search_path(f"postgresql://lobster@127.0.0.1:{proxy.port}/postgres", schema)
        store = PostgresStore(url)
        store.set_value("n", 1)
        _settled(store)
        proxy.cut()
        store.set_value("n", 2)  # the pooled connection dies under it: retried on a new one
        assert store.get_value("n") == 2
        store.save_frame("pipeline_resume_x", b"frame")
        _settled(store)
        proxy.cut()
        with pytest.raises(StoreError):  # a claim whose answer was lost is not made twice
            store.claim_frame("pipeline_resume_x")
        assert store.claim_frame("pipeline_resume_x") is True  # the cut claim never arrived
    finally:
        close_pools()
        proxy.close()
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
