"""Shared fixtures: the real `lobster` / `lobsterc` executables in a temporary state dir."""

from __future__ import annotations

import importlib
import json
import locale
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from differential import forkserver

# No Hypothesis check that depends on how loaded the machine is: a test's examples may take
# any time on a shared 2-core machine (its own timeout bounds a hung one), and a slow strategy
# is not a failing test. The checks of what a strategy generates (filter_too_much,
# data_too_large...) stay on.
settings.register_profile("lobster", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lobster")

BIN = Path(sys.executable).parent
LOBSTER = str(BIN / "lobster")
LOBSTERC = str(BIN / "lobsterc")
ROOT = Path(__file__).resolve().parent.parent

# Child `lobster` processes keep compiled bytecode in one shared cache even where the
# environment disables writing it (a fresh interpreter compiling every module costs more
# than the test it runs).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX",
                      os.path.join(tempfile.gettempdir(), "lobster-test-pycache"))


def text_mode(data: bytes) -> str:
    """Output as subprocess's text mode gives it: decoded as the locale says, newlines
    universal."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Cli:
    """Runs the real executables with a private state dir and home; `in_process`: their main
    functions in this process instead (run_in_process), for tests whose subject is not the
    process itself."""

    def __init__(self, tmp_path: Path, in_process: bool = False) -> None:
        self.in_process = in_process
        self.state = tmp_path / "state"
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
        self.env.update(LOBSTER_STATE_DIR=str(self.state), HOME=str(tmp_path), TZ="UTC")

    def run(self, *argv: str, exe: str = LOBSTER, stdin: str | None = None,
            env: dict | None = None, check_json: bool = False):
        if self.in_process:
            name = {LOBSTER: "lobster", LOBSTERC: "lobsterc"}[exe]
            return run_in_process([name, *argv], cwd=self.work, env={**self.env, **(env or {})},
                                  stdin=stdin)
        environment = {**self.env, **(env or {})}
        if forkserver.can_fork(exe):  # a real process, forked from a warm interpreter
            code, out, err = forkserver.ForkServer.get(environment).run(
                [exe, *argv], cwd=self.work, env=environment, timeout=60,
                stdin=None if stdin is None else stdin.encode())
            if code == "timeout":
                raise subprocess.TimeoutExpired([exe, *argv], 60)
            return subprocess.CompletedProcess([exe, *argv], code, text_mode(out), text_mode(err))
        return subprocess.run([exe, *argv], cwd=self.work, env=environment, input=stdin,
                              capture_output=True, text=True, timeout=60,
                              stdin=None if stdin is not None else subprocess.DEVNULL)

    def tool(self, *argv: str, **kw) -> tuple[dict, int]:
        proc = self.run(*argv, **kw)
        try:
            return json.loads(proc.stdout), proc.returncode
        except ValueError:
            raise AssertionError(f"not JSON: {proc.stdout!r} stderr={proc.stderr!r}") from None

    def pipeline(self, text: str, **kw) -> tuple[dict, int]:
        return self.tool("run", "--mode", "tool", text, **kw)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def in_process_cli(tmp_path: Path) -> Cli:
    """`cli` without processes: a test module whose subject is not the process imports it as
    `cli` (`from conftest import in_process_cli as cli`)."""
    return Cli(tmp_path, in_process=True)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden/*.lbs from the current compiler (tests/compiler/test_golden.py)")


def imported_by_lobster(cli, *argv: str) -> tuple[str, set[str]]:
    """The real `lobster` script's stdout, and every module it imported (-X importtime)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", LOBSTER, *argv], cwd=cli.work,
                          env=cli.env, capture_output=True, text=True, timeout=60)
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
               if line.startswith("import time:")}
    return proc.stdout, modules


# The console scripts' main functions (pyproject's [project.scripts]), for run_in_process.
MAINS = {"lobster": "lobsterc.frontend:lobster", "lobsterc": "lobsterc.tools.cli:main"}
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_in_process(argv: Sequence[str], *, cwd: str | Path, env: dict[str, str],
                   stdin: str | None = None) -> subprocess.CompletedProcess:
    """`argv` (argv[0] a console script of MAINS) run by its main function in this process,
    as the real executable would run: file descriptors 0-2 on temporary files (stdin empty
    unless given), os.environ replaced by `env`, `cwd` the working directory, the exit code
    from the return value or SystemExit. Everything is put back afterwards, the signal
    handlers main installs included. An exception main lets out becomes a traceback on stderr
    and exit code 1, which a test that forbids tracebacks reports. Main thread only, one at a
    time (it swaps process-wide state); for a test whose subject is not the process itself."""
    module, name = MAINS[argv[0]].split(":")
    main = getattr(importlib.import_module(module), name)
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr:
        fin.write((stdin or "").encode("utf-8"))
        fin.seek(0)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved_fds = [os.dup(fd) for fd in (0, 1, 2)]
        saved_streams = sys.stdin, sys.stdout, sys.stderr
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        saved_handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
        try:
            for fd, file in zip((0, 1, 2), (fin, fout, ferr)):
                os.dup2(file.fileno(), fd)
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                              closefd=False)
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            try:
                code = main(list(argv[1:]))
            except SystemExit as exc:
                code = exc.code
                if isinstance(code, str):
                    sys.stderr.write(code + "\n")
                    code = 1
            except BaseException:  # noqa: BLE001 - shown as the real process would show it
                traceback.print_exc()
                code = 1
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            for fd, saved in zip((0, 1, 2), saved_fds):
                os.dup2(saved, fd)
                os.close(saved)
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            for sig, handler in saved_handlers.items():
                signal.signal(sig, handler)
        fout.seek(0)
        ferr.seek(0)
        # as subprocess's text mode reads them: undecodable bytes replaced, newlines universal
        out, err = (f.read().decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
                    for f in (fout, ferr))
    return subprocess.CompletedProcess(list(argv), 0 if code is None else code, out, err)


class SharedBatch:
    """Slow independent jobs (each mostly waiting on processes) done once per test session
    across the xdist workers, a few at a time in threads: the first result a worker asks for
    starts its threads, each claiming the next unclaimed job (a file made with O_EXCL in the
    session's shared temp dir) and writing its pickled result beside it; `result` waits for its
    job's, whichever worker did it. Without xdist the same happens in one process."""

    WAIT_S = 1800  # for a result another worker claimed

    def __init__(self, root: Path, jobs: Sequence[tuple[str, Callable[[], Any]]],
                 threads: int) -> None:
        self.root, self.jobs, self.threads = root, list(jobs), threads
        self.index = {key: k for k, (key, _) in enumerate(self.jobs)}
        root.mkdir(parents=True, exist_ok=True)
        self.pool: ThreadPoolExecutor | None = None

    def _claim(self, k: int) -> bool:
        try:
            os.close(os.open(self.root / f"{k}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    def _work(self) -> None:
        for k, (_, job) in enumerate(self.jobs):
            if self._claim(k):
                try:
                    result = ("ok", job())
                except BaseException:  # noqa: BLE001 - the test that waits for it fails with it
                    result = ("failed", traceback.format_exc())
                part = self.root / f"{k}.part{os.getpid()}"
                part.write_bytes(pickle.dumps(result))
                part.rename(self.root / f"{k}.result")  # whole or absent

    def result(self, key: str) -> Any:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=self.threads)
            for _ in range(self.threads):
                self.pool.submit(self._work)
        path = self.root / f"{self.index[key]}.result"
        deadline = time.monotonic() + self.WAIT_S
        while not path.exists():
            assert time.monotonic() < deadline, f"no result for {key} after {self.WAIT_S}s"
            time.sleep(0.02)
        status, value = pickle.loads(path.read_bytes())
        assert status == "ok", f"{key}: the job failed\n{value}"
        return value

    def finish(self) -> None:
        if self.pool is not None:  # a worker leaves no job it claimed undone
            self.pool.shutdown(wait=True)


def session_dir(tmp_path_factory, config, name: str) -> Path:
    """A directory of this test session that every xdist worker shares (the base temp dir of
    the session, which each worker's own is inside)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if hasattr(config, "workerinput") else base) / name
