"""vm.cli.main.leave: the console script's quick exit skips the interpreter's teardown only
when nothing is left to run at exit, and never loses buffered output."""

from __future__ import annotations

import gc
import subprocess
import sys

SCRIPT = """\
import atexit, sys, threading
from vm.cli.main import leave, main
if "at-exit" in sys.argv:
    atexit.register(lambda: print("at exit ran"))
if "thread" in sys.argv or "daemon" in sys.argv:
    import time
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread ran")),
                     daemon="daemon" in sys.argv).start()
sys.stdout.write("buffered, not yet flushed\\n")
code = leave(main(["version"]))
print("after leave", code)
"""


def _run(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, *flags], capture_output=True,
                          text=True, timeout=60)


def test_nothing_left_to_run_exits_at_once_with_the_output_flushed():
    proc = _run()
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0] == "buffered, not yet flushed"
    assert "after leave" not in proc.stdout  # the process ended in leave()


def test_an_atexit_callback_gets_the_ordinary_exit():
    proc = _run("at-exit")
    assert proc.stdout.splitlines()[-2:] == ["after leave 0", "at exit ran"]


def test_a_thread_the_interpreter_waits_for_gets_the_ordinary_exit():
    proc = _run("thread")
    assert "after leave 0" in proc.stdout and "thread ran" in proc.stdout


def test_a_daemon_thread_is_abandoned_as_the_ordinary_exit_would():
    proc = _run("daemon")
    assert proc.returncode == 0 and "after leave" not in proc.stdout


def test_the_console_script_raises_the_collector_threshold_and_embedders_keep_theirs():
    probe = ("import gc, sys\n"
             "from lobsterc.frontend import lobster\n"
             "sys.argv = ['lobster', 'version']\n"
             "before = gc.get_threshold()\n"
             "lobster(['version'])\n"  # in-process, as an embedder calls it: settings kept
             "assert gc.get_threshold() == before, gc.get_threshold()\n"
             "import atexit; atexit.register(lambda: print('threshold', gc.get_threshold()[0]))\n"
             "lobster()\n")  # the console script's call
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "threshold 100000"


def test_the_mcp_server_keeps_the_collector_s_settings():
    from vm.cli.main import one_process

    before = gc.get_threshold()
    one_process(["mcp"])
    assert gc.get_threshold() == before
