"""Our CLI's runs for the differential tests, forked from a warm interpreter.

A case step runs `lobster ...` as a user would, in a fresh process with its own argv,
environment, working directory and standard streams. Starting Python and importing the VM
and the compiler is most of such a run's cost (about 0.25 s), and the ported batch makes about
900 of them. So one server per test process imports everything once, and each run is a fork
of it: a child process whose argv, environment, cwd and fds 0-2 are the step's, which then
calls the console script's function and exits as the script would. The run is still a real,
separate process (its own pid, signals, exit status and children); only the start-up work
is shared. The reference (Node) is always started with subprocess.

Protocol, over a Unix socket: the client sends one JSON line {argv, env, cwd} with two file
descriptors (stdout and stderr files) attached; the server answers "pid N" when the run has
started and "status S" (an exit code, negative for a signal) when it has ended.

`LOBSTER_DIFF_FORK=0` turns it off (every run a fresh `lobster` process).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCRIPTS = {"lobster": ("lobsterc.frontend", "lobster"),  # console script -> its function
           "openclaw.invoke": ("lobsterc.frontend", "openclaw_invoke"),
           "clawd.invoke": ("lobsterc.frontend", "clawd_invoke"),
           "lobsterc": ("lobsterc.tools.cli", "main")}
# What Python reads as it starts (stream encodings, hash seed, flags): a run whose environment
# sets any of these differently from the server's is started fresh, never forked.
STARTUP = ("PYTHON", "LC_", "LANG")


def enabled() -> bool:
    return os.environ.get("LOBSTER_DIFF_FORK", "1") != "0"


# server ------------------------------------------------------------------------------------
def _preload() -> None:
    """Import what a run may need, so a forked run imports (nearly) nothing."""
    import importlib
    import pkgutil

    import lobsterc
    import vm

    for package in (vm, lobsterc):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".lsp" in info.name or info.name.endswith(".mcp"):
                continue  # extras a differential case never starts
            try:
                importlib.import_module(info.name)
            except ImportError:
                pass
    from lobsterc.syntax import parse

    parse._parser()  # the Lark parser, built once
    import jsonschema  # noqa: F401  (input schemas)


def _run_script(request: dict, out_fd: int, err_fd: int, in_fd: int | None = None) -> None:
    """In the forked run: become the step's process, then exit as the console script does."""
    if in_fd is None:
        in_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(in_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in (in_fd, out_fd, err_fd):
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = list(request["argv"])
    import importlib

    module, name = SCRIPTS[Path(sys.argv[0]).name]
    function = getattr(importlib.import_module(module), name)
    try:
        code = function()
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # An interpreter's exit, but without tearing down every module the server imported:
    # the exit handlers, the threads that must finish, the streams, then the status.
    atexit._run_exitfuncs()
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def _serve_one(conn: socket.socket) -> None:
    """In a per-request child: start the run, report its pid, wait, report its status."""
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(message.decode("utf-8"))
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_script(request, *fds)
    try:
        for fd in fds:
            os.close(fd)
        conn.sendall(f"pid {pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        conn.sendall(f"status {os.waitstatus_to_exitcode(status)}\n".encode())
    finally:  # a client gone after a timeout: nothing to report to
        os._exit(0)


def serve(path: str) -> None:
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(0.5)
    print("ready", flush=True)
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # reap finished request children
        except ChildProcessError:
            pass
        if os.getppid() == 1:
            return  # the test process is gone
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            listener.close()
            _serve_one(conn)
        conn.close()


# client ------------------------------------------------------------------------------------
def _startup(env: dict) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(STARTUP)))


class ForkServer:
    """One server per test process and start-up environment, started on first use: a run
    forks from a server that Python started under the same PYTHON*, LC_* and LANG values."""

    _lock = threading.Lock()
    _servers: dict[tuple, ForkServer] = {}

    def __init__(self, startup: tuple[tuple[str, str], ...]) -> None:
        self.folder = tempfile.mkdtemp(prefix="lobster-fork-")
        self.path = os.path.join(self.folder, "socket")
        env = {k: v for k, v in os.environ.items() if not k.startswith(STARTUP)}
        env.update(startup)
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.path], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, env=env, cwd=self.folder)
        if self.process.stdout.readline().strip() != b"ready":
            raise RuntimeError("the differential fork server did not start")

    @classmethod
    def get(cls, env: dict) -> ForkServer:
        """The server for runs under `env`."""
        key = _startup(env)
        with cls._lock:
            server = cls._servers.get(key)
            if server is None or server.process.poll() is not None:
                if not cls._servers:
                    atexit.register(cls.stop_all)
                server = cls._servers[key] = ForkServer(key)
            return server

    @classmethod
    def stop_all(cls) -> None:
        """Ends every server of this test process and removes its socket folder."""
        for server in cls._servers.values():
            server.process.kill()
            server.process.wait()
            shutil.rmtree(server.folder, ignore_errors=True)
        cls._servers.clear()

    def run(self, argv: list[str], *, cwd: Path | str, env: dict, timeout: float,
            stdin: bytes | None = None) -> tuple[int | str, bytes, bytes]:
        """(exit code or "timeout", stdout, stderr) of `argv`, run as a fork of the server."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
                tempfile.TemporaryFile() as given, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self.path)
            request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode()
            fds = [out.fileno(), err.fileno()]
            if stdin is not None:
                given.write(stdin)
                given.seek(0)
                fds.append(given.fileno())
            socket.send_fds(conn, [request], fds)
            conn.settimeout(timeout)
            reader = conn.makefile("rb")
            pid = int(reader.readline().split()[1])
            try:
                line = reader.readline()
                code: int | str = int(line.split()[1])
            except TimeoutError:
                os.kill(pid, 9)
                code = "timeout"
            out.seek(0)
            err.seek(0)
            return code, out.read(), err.read()


def our_script(path: str) -> bool:
    """Whether `path` is one of this checkout's console scripts (those a fork can run)."""
    return Path(path).name in SCRIPTS and Path(path).parent == Path(sys.executable).parent


def can_fork(path: str) -> bool:
    """Whether a run of `path` may be a fork: one of our scripts, and forking not off."""
    return enabled() and our_script(path)


if __name__ == "__main__":
    serve(sys.argv[1])
