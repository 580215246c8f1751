"""Tests of vm.host.process and vm.host.children with real child processes (no mocks)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from vm.host.children import Scope, kill_all, live_groups
from vm.host.process import (
    EOF_GRACE_S,
    Cancelled,
    CommandNotFound,
    OutputLimitExceeded,
    ProcessError,
    ProcessResult,
    ProcessTimeout,
    run_process,
    shell_argv,
)

PY = sys.executable
ENV = dict(os.environ)


def run(argv, *, stdin=None, cwd=None, env=None, **kw):
    return run_process(
        argv, stdin=stdin, cwd=str(cwd or os.getcwd()), env=ENV if env is None else env, **kw
    )


def py(code: str) -> list[str]:
    return [PY, "-c", code]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still "exists"; treat it as dead (it is not running)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_dead(pid: int, within: float = 1.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return not pid_alive(pid)


def read_pid(path: Path, within: float = 1.0) -> int:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        if text:
            return int(text)
        time.sleep(0.01)
    raise AssertionError("grandchild pid never written")


# --------------------------------------------------------------------------- basics


def test_exit_codes():
    assert run(["true"]).code == 0
    assert run(["false"]).code == 1
    assert run(py("import sys; sys.exit(7)")).code == 7


def test_signal_death_is_128_plus_signum():
    r = run(py("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    assert r.code == 128 + signal.SIGTERM


def test_stdout_and_stderr_captured_separately():
    r = run(py("import sys; sys.stdout.write('out\\n'); sys.stderr.write('err\\n')"))
    assert r == ProcessResult(code=0, stdout=b"out\n", stderr=b"err\n")


def test_stdin_none_is_dev_null():
    r = run(py("import sys; print(repr(sys.stdin.read()))"))
    assert r.stdout == b"''\n"


def test_empty_stdin_bytes_gives_eof():
    r = run(["cat"], stdin=b"")
    assert r.code == 0 and r.stdout == b""


def test_stdin_json_roundtrip():
    items = [{"a": 1, "b": [True, None, "x\u00e9"]}, 2, "three"]
    code = "import json, sys; d = json.load(sys.stdin); json.dump({'got': d}, sys.stdout)"
    r = run(py(code), stdin=json.dumps(items).encode())
    assert r.code == 0
    assert json.loads(r.stdout) == {"got": items}


def test_big_stdin_and_big_stdout_no_deadlock():
    data = os.urandom(5 * 1024 * 1024)
    # cat echoes while reading: both pipes fill up unless the runner interleaves
    r = run(["cat"], stdin=data, deadline=time.monotonic() + 20)
    assert r.code == 0
    assert r.stdout == data


def test_big_stdin_and_big_stderr_no_deadlock():
    data = b"y" * (5 * 1024 * 1024)
    r = run(["sh", "-c", "cat >&2"], stdin=data, deadline=time.monotonic() + 20)
    assert r.code == 0 and r.stdout == b"" and r.stderr == data


def test_big_stdout_binary_exact():
    code = "import sys; sys.stdout.buffer.write(b'0123456789' * 2_000_000)"
    r = run(py(code))
    assert len(r.stdout) == 20_000_000
    assert r.stdout[:10] == b"0123456789" and r.stdout[-10:] == b"0123456789"


def test_epipe_child_exits_early_reports_its_code(tmp_path):
    script = tmp_path / "head1"
    script.write_text("#!/bin/sh\nhead -c1 >/dev/null\nexit 3\n")
    script.chmod(0o755)
    r = run([str(script)], stdin=b"z" * (10 * 1024 * 1024), deadline=time.monotonic() + 10)
    assert r.code == 3


def test_child_not_reading_stdin_at_all():
    r = run(py("import sys; sys.stdout.write('bye')"), stdin=b"q" * (10 * 1024 * 1024))
    assert r.code == 0 and r.stdout == b"bye"


# --------------------------------------------------------------------------- env, cwd, argv


def test_env_is_passed_exactly():
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LOBSTER_TEST_VAR": "hello world"}
    r = run(py("import os, json; print(json.dumps(dict(os.environ)))"), env=env)
    got = json.loads(r.stdout)
    assert got["LOBSTER_TEST_VAR"] == "hello world"
    # nothing of our own environment leaks in (Python may add LC_CTYPE for C-locale coercion);
    # the marker that lets a kill find what the child starts is a descriptor, not a variable
    assert set(got) - {"LC_CTYPE"} == set(env)



def test_our_own_environment_is_passed_as_os_environ_holds_it(monkeypatch):
    # os.environ as it stands now, and not the C library's environment: a variable set there
    # alone (by os.putenv, or by C code such as readline's COLUMNS) stays out, and one removed
    # there alone stays in
    monkeypatch.setenv("LOBSTER_TEST_LATE", "set after start")
    monkeypatch.setenv("LOBSTER_TEST_UNSET_IN_C", "kept")
    monkeypatch.delenv("HOME", raising=False)
    os.putenv("LOBSTER_TEST_C_ONLY", "not ours")
    os.unsetenv("LOBSTER_TEST_UNSET_IN_C")
    try:
        r = run(py("import os, json; print(json.dumps(dict(os.environ)))"), env=os.environ)
    finally:
        os.unsetenv("LOBSTER_TEST_C_ONLY")
    got = json.loads(r.stdout)
    assert got["LOBSTER_TEST_LATE"] == "set after start"
    assert got["LOBSTER_TEST_UNSET_IN_C"] == "kept"
    assert "LOBSTER_TEST_C_ONLY" not in got and "HOME" not in got
    assert set(got) - {"LC_CTYPE"} == set(os.environ)


def test_cwd_is_passed(tmp_path):
    (tmp_path / "marker.txt").write_text("here")
    r = run(py("import os; print(os.getcwd()); print(open('marker.txt').read())"), cwd=tmp_path)
    lines = r.stdout.decode().splitlines()
    assert os.path.realpath(lines[0]) == os.path.realpath(tmp_path)
    assert lines[1] == "here"


def test_missing_cwd_is_a_process_error_not_not_found(tmp_path):
    with pytest.raises(ProcessError) as ei:
        run(["true"], cwd=tmp_path / "nope")
    assert not isinstance(ei.value, CommandNotFound)
    assert "nope" in ei.value.message


def test_argv_is_not_shell_interpreted(tmp_path):
    target = tmp_path / "pwned"
    r = run(["echo", f"$(touch {target}); `touch {target}` *"])
    assert r.stdout == f"$(touch {target}); `touch {target}` *\n".encode()
    assert not target.exists()


# --------------------------------------------------------------------------- not found


def test_command_not_found():
    with pytest.raises(CommandNotFound) as ei:
        run(["lobster-definitely-no-such-command-xyz"])
    assert ei.value.message == "exec command not found: lobster-definitely-no-such-command-xyz"
    assert isinstance(ei.value, ProcessError)


def test_not_executable_is_not_found(tmp_path):
    script = tmp_path / "plain.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    with pytest.raises(CommandNotFound) as ei:
        run([str(script)])
    assert ei.value.message == f"exec command not found: {script}"


def test_shell_not_found_message():
    argv = shell_argv("echo hi", {"LOBSTER_SHELL": "/no/such/shell"})
    with pytest.raises(CommandNotFound) as ei:
        run(argv, shell=True)
    assert ei.value.message == "exec shell not found; check LOBSTER_SHELL or ComSpec"


def test_no_child_left_registered_after_errors():
    with pytest.raises(CommandNotFound):
        run(["lobster-definitely-no-such-command-xyz"])
    run(["true"])
    assert live_groups() == []


# --------------------------------------------------------------------------- shell_argv


def test_shell_argv_default():
    assert shell_argv("echo hi | wc", {}) == ["/bin/sh", "-c", "echo hi | wc"]
    assert shell_argv("x", {"LOBSTER_SHELL": ""}) == ["/bin/sh", "-c", "x"]


@pytest.mark.parametrize(
    "shell, expected_flags",
    [
        ("powershell", ["-NoProfile", "-Command"]),
        ("pwsh", ["-NoProfile", "-Command"]),
        ("/usr/bin/pwsh", ["-NoProfile", "-Command"]),
        ("C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe", ["-NoProfile", "-Command"]),
        ("PWSH.EXE", ["-NoProfile", "-Command"]),
        ("cmd", ["/d", "/s", "/c"]),
        ("cmd.exe", ["/d", "/s", "/c"]),
        ("C:\\Windows\\system32\\CMD.EXE", ["/d", "/s", "/c"]),
        ("/bin/bash", ["-c"]),
        ("zsh", ["-c"]),
        # matched by suffix on the whole value, as the original matches (SPEC 9.7)
        ("/opt/bin/mypwsh", ["-NoProfile", "-Command"]),
        ("/tools/xcmd", ["/d", "/s", "/c"]),
        ("/opt/pwsh-7/bin/sh", ["-c"]),
        ("powershell.exe.bak", ["-c"]),
    ],
)
def test_shell_argv_lobster_shell(shell, expected_flags):
    assert shell_argv("echo 1", {"LOBSTER_SHELL": shell}) == [shell, *expected_flags, "echo 1"]


def test_shell_line_runs():
    r = run(shell_argv("echo a; echo b >&2; exit 4", ENV), shell=True)
    assert r == ProcessResult(code=4, stdout=b"a\n", stderr=b"b\n")


# --------------------------------------------------------------------------- timeout


def test_timeout_kills_grandchild(tmp_path):
    pidfile = tmp_path / "gc.pid"
    argv = ["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"]
    start = time.monotonic()
    with pytest.raises(ProcessTimeout) as ei:
        run(argv, deadline=start + 0.3)
    assert ei.value.message == "lobster runtime timed out"
    assert time.monotonic() - start < 5
    gc = read_pid(pidfile)
    assert wait_dead(gc), f"grandchild {gc} survived the timeout"
    assert live_groups() == []


def test_timeout_while_writing_stdin():
    # the child never reads its stdin; the writer must not block past the deadline
    with pytest.raises(ProcessTimeout):
        run(["sleep", "30"], stdin=b"x" * (10 * 1024 * 1024), deadline=time.monotonic() + 0.3)


@pytest.fixture(params=["pidfd", "no pidfd"])
def exit_watch(request, monkeypatch):
    """Each exit-wait test twice: with the child's pidfd watched (Linux 5.3 and later), and
    as on a system without os.pidfd_open, where the exit is polled."""
    if request.param == "no pidfd":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    return request.param


def test_a_child_that_closes_its_output_is_still_waited_for(exit_watch):
    # both outputs reach EOF at once; the step's status is the one the process exits with later
    code = "import os, time; os.close(1); os.close(2); time.sleep(0.3); os._exit(7)"
    start = time.monotonic()
    result = run(py(code), deadline=start + 30)
    assert result.code == 7 and time.monotonic() - start >= 0.3
    assert live_groups() == []


def test_timeout_after_the_output_closed_kills_the_child(exit_watch, tmp_path):
    pidfile = tmp_path / "child.pid"
    code = (f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
            "os.close(1); os.close(2); time.sleep(30)")
    with pytest.raises(ProcessTimeout):
        run(py(code), deadline=time.monotonic() + 1.0)
    assert wait_dead(read_pid(pidfile))
    assert live_groups() == []


def test_kill_all_while_waiting_for_the_exit_cancels(exit_watch, tmp_path):
    pidfile = tmp_path / "child.pid"
    code = (f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
            "os.close(1); os.close(2); time.sleep(30)")
    killer = threading.Thread(target=lambda: (read_pid(pidfile, 5.0), kill_all()))
    killer.start()
    try:
        with pytest.raises(Cancelled):
            run(py(code), deadline=time.monotonic() + 30)
    finally:
        killer.join()
    assert live_groups() == []


def test_a_process_left_holding_the_output_gets_the_grace_then_is_killed(exit_watch, tmp_path):
    # the child exits at once; what it left in the background holds stdout open
    pidfile = tmp_path / "bg.pid"
    start = time.monotonic()
    result = run(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; echo done; exit 3"],
                 deadline=start + 30)
    assert result.code == 3 and result.stdout == b"done\n"
    assert EOF_GRACE_S <= time.monotonic() - start < 10
    assert wait_dead(read_pid(pidfile))
    assert live_groups() == []


def test_a_deadline_beyond_one_poll_s_longest_wait_is_kept(exit_watch, monkeypatch):
    # a timeout of days is waited for in several polls (the longest made 0.2 s here): the
    # step ends when its process does, not when the first poll runs out
    import vm.host.process as process

    monkeypatch.setattr(process, "_POLL_MAX_S", 0.2)
    code = "import os, time; os.close(1); os.close(2); time.sleep(0.7); os._exit(5)"
    assert run(py(code), deadline=time.monotonic() + 30).code == 5


def test_no_descriptor_is_left_open_whatever_ends_the_step(exit_watch):
    def open_fds() -> set[str]:
        return set(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd here")
    before = open_fds()
    run(["true"], deadline=time.monotonic() + 30)
    run(["cat"], stdin=b"x" * 200_000, deadline=time.monotonic() + 30)
    with pytest.raises(ProcessTimeout):
        run(["sleep", "30"], deadline=time.monotonic() + 0.3)
    with pytest.raises(OutputLimitExceeded):
        run(py("import sys\nwhile True: sys.stdout.write('x' * 4096)"), max_output_bytes=10_000,
            deadline=time.monotonic() + 30)
    with pytest.raises(CommandNotFound):
        run(["/nonexistent/command"], deadline=time.monotonic() + 30)
    assert open_fds() - before == set()


def test_timeout_custom_message():
    assert ProcessTimeout("step s1 timed out").message == "step s1 timed out"


def test_deadline_already_passed_does_not_spawn(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ProcessTimeout):
        run(["touch", str(marker)], deadline=time.monotonic() - 1)
    assert not marker.exists()


# --------------------------------------------------------------------------- output caps


def test_stdout_cap_raises_while_child_writes(tmp_path):
    # the child would write forever: only a live cap can stop it before the deadline
    code = "import sys\nwhile True: sys.stdout.write('x' * 4096)"
    with pytest.raises(OutputLimitExceeded) as ei:
        run(py(code), max_output_bytes=100_000, deadline=time.monotonic() + 10)
    assert ei.value.stream == "stdout"
    assert ei.value.message == "lobster stdout exceeded maxStdoutBytes"


def test_stderr_cap_raises_with_stream_name():
    code = "import sys\nwhile True: sys.stderr.write('e' * 4096)"
    with pytest.raises(OutputLimitExceeded) as ei:
        run(py(code), max_output_bytes=50_000, deadline=time.monotonic() + 10)
    assert ei.value.stream == "stderr"
    assert ei.value.message == "lobster stderr exceeded maxStdoutBytes"


def test_output_at_cap_is_fine():
    r = run(py("import sys; sys.stdout.write('a' * 1000)"), max_output_bytes=1000)
    assert r.stdout == b"a" * 1000


def test_cap_kills_grandchild(tmp_path):
    pidfile = tmp_path / "gc.pid"
    line = f"sleep 30 & echo $! > {pidfile}; while :; do echo xxxxxxxxxxxxxxxx; done"
    with pytest.raises(OutputLimitExceeded):
        run(["sh", "-c", line], max_output_bytes=10_000, deadline=time.monotonic() + 10)
    assert wait_dead(read_pid(pidfile))


# --------------------------------------------------------------------------- cancellation


def test_kill_all_cancels_running_child(tmp_path):
    pidfile = tmp_path / "gc.pid"
    argv = ["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"]
    errors: list[BaseException] = []

    def target():
        try:
            run(argv, deadline=time.monotonic() + 10)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    t = threading.Thread(target=target)
    t.start()
    gc = read_pid(pidfile)
    kill_all()
    t.join(5)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)
    assert isinstance(errors[0], ProcessError) and errors[0].message
    assert wait_dead(gc)
    assert live_groups() == []


def test_kill_all_without_children_is_harmless():
    kill_all()
    assert run(["true"]).code == 0


def _in_thread(argv, **kw):
    """Run `argv` on a thread; the list receives its result or its exception."""
    outcome: list = []

    def target():
        try:
            outcome.append(run(argv, deadline=time.monotonic() + 30, **kw))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            outcome.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def test_cancelling_a_scope_kills_only_its_own_children(tmp_path):
    mine, theirs = Scope(), Scope()
    go = tmp_path / "go"
    waiting = f"echo $$ > {{pid}}; while [ ! -f {go} ]; do sleep 0.02; done; echo done"
    t1, out1 = _in_thread(["sh", "-c", waiting.format(pid=tmp_path / "a.pid")], scope=mine)
    t2, out2 = _in_thread(["sh", "-c", waiting.format(pid=tmp_path / "b.pid")], scope=theirs)
    a, b = read_pid(tmp_path / "a.pid", 10), read_pid(tmp_path / "b.pid", 10)
    mine.cancel()
    t1.join(10)
    assert len(out1) == 1 and isinstance(out1[0], Cancelled)
    assert wait_dead(a)
    assert pid_alive(b) and t2.is_alive()
    go.write_text("")
    t2.join(10)
    assert out2 == [ProcessResult(code=0, stdout=b"done\n", stderr=b"")]
    assert not theirs.cancelled
    assert live_groups() == []


def test_a_cancelled_scope_starts_nothing(tmp_path):
    scope = Scope()
    scope.cancel()
    marker = tmp_path / "ran"
    with pytest.raises(Cancelled):
        run(["touch", str(marker)], scope=scope)
    assert not marker.exists()
    assert run(["true"], scope=Scope()).code == 0


def test_cancelling_a_parent_reaches_a_child_scope_but_not_the_reverse(tmp_path):
    run_scope = Scope()
    branches = run_scope.child()
    t1, out1 = _in_thread(["sh", "-c", f"echo $$ > {tmp_path / 'a.pid'}; exec sleep 30"],
                          scope=branches)
    a = read_pid(tmp_path / "a.pid", 10)
    branches.cancel()
    t1.join(10)
    assert isinstance(out1[0], Cancelled) and wait_dead(a)
    assert not run_scope.cancelled
    assert run(["true"], scope=run_scope).code == 0  # the run goes on after its branches
    t2, out2 = _in_thread(["sh", "-c", f"echo $$ > {tmp_path / 'b.pid'}; exec sleep 30"],
                          scope=run_scope.child())
    b = read_pid(tmp_path / "b.pid", 10)
    run_scope.cancel()
    t2.join(10)
    assert isinstance(out2[0], Cancelled) and wait_dead(b)
    assert live_groups() == []


def test_kill_all_still_reaches_scoped_children(tmp_path):
    t, out = _in_thread(["sh", "-c", f"echo $$ > {tmp_path / 'a.pid'}; exec sleep 30"],
                        scope=Scope())
    a = read_pid(tmp_path / "a.pid", 10)
    kill_all()
    t.join(10)
    assert isinstance(out[0], Cancelled) and wait_dead(a)


def test_an_env_name_holding_equals_is_passed_as_node_passes_it():
    """`E=1: x` becomes the entry `E=1=x` (the child reads E as `1=x`); a name already set
    keeps its own value."""
    env = {**ENV, "E=1": "x", "F=": "y", "HOME=z": "w"}
    r = run(py("import os; print(os.environ['E'], os.environ['F'], os.environ['HOME'] == "
               f"{ENV.get('HOME')!r})"), env=env)
    assert r.stdout == b"1=x =y True\n"
