"""The original's CLI runs for the differential tests, in long-lived Node drivers.

A fresh `lobster` of the original costs about 0.25 CPU-seconds, nearly all of it Node starting
and compiling the modules of the original's dependencies, and the differential and ported
tests make about 750 such runs. A driver (node_driver.mjs) pays that once and then runs one
CLI invocation per request, each with its own argv, environment, working directory, stdin
(/dev/null), captured stdout and stderr, exit code, and a fresh evaluation of the original's
own modules; it answers only when the run's event loop would have emptied. Whatever it cannot
make the same as a fresh process it reports as `unfaithful`, and the harness then runs the
whole case again in fresh processes, so a case's result is always one a fresh process gives
(tests/oracle/test_node_driver.py compares the two on the regression cases).

`LOBSTER_DIFF_NODE_DRIVER=0` turns it off (every run a fresh `node` process).
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import ClassVar

DRIVER = Path(__file__).with_name("node_driver.mjs")
# Each run adds a generation of the original's modules to the driver's memory (about 2 MB):
# a driver is replaced after this many runs.
RUNS_PER_DRIVER = 120


class Unfaithful(Exception):
    """A run the driver could not make the same as a fresh process (the message says why)."""


def enabled() -> bool:
    return os.environ.get("LOBSTER_DIFF_NODE_DRIVER", "1") != "0"


class NodeDriver:
    """One driver process for the original's bin script `bin_path`, started under `env`."""

    def __init__(self, bin_path: str, env: dict) -> None:
        self.key = (bin_path, tuple(sorted(env.items())))
        ours, theirs = socket.socketpair()
        # fds 1 and 2 of the driver: a run's output that went around its capture lands here
        self.stray = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        node = shutil.which("node", path=env.get("PATH")) or "node"
        with theirs:
            self.process = subprocess.Popen(
                [node, str(DRIVER), bin_path, str(theirs.fileno())], env=env,
                stdin=subprocess.DEVNULL, stdout=self.stray, stderr=self.stray,
                pass_fds=(theirs.fileno(),), cwd=tempfile.gettempdir())
        self.channel = ours
        self.reader = ours.makefile("rb")
        self.runs = 0

    def run(self, argv: list[str], *, cwd: Path | str, env: dict,
            timeout: float) -> tuple[int, bytes, bytes]:
        """(exit code, stdout, stderr) of the original's CLI with `argv`; Unfaithful when the
        driver cannot vouch for it (it is then stopped)."""
        self.runs += 1
        request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}) + "\n"
        try:
            self.channel.settimeout(timeout)
            self.channel.sendall(request.encode())
            line = self.reader.readline()
        except (TimeoutError, OSError) as exc:
            self.stop()
            raise Unfaithful(f"the driver did not answer: {exc!r}") from None
        if not line:
            self.stop()
            raise Unfaithful(f"the driver ended (status {self.process.wait()})")
        answer = json.loads(line)
        if answer["unfaithful"]:
            self.stop()
            raise Unfaithful(answer["unfaithful"])
        return (answer["code"], base64.b64decode(answer["stdout"]),
                base64.b64decode(answer["stderr"]))

    def stop(self) -> None:
        self.channel.close()
        self.reader.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.stray.close()


class Pool:
    """Idle drivers by (bin script, environment); a case takes one for all its steps."""

    _lock = threading.Lock()
    _idle: ClassVar[dict[tuple, list[NodeDriver]]] = {}
    _registered: ClassVar[bool] = False

    @classmethod
    def take(cls, bin_path: str, env: dict) -> NodeDriver:
        key = (bin_path, tuple(sorted(env.items())))
        with cls._lock:
            if not cls._registered:
                atexit.register(cls.stop_all)
                cls._registered = True
            idle = cls._idle.get(key)
            if idle:
                return idle.pop()
        return NodeDriver(bin_path, env)

    @classmethod
    def give_back(cls, driver: NodeDriver) -> None:
        """Keeps `driver` for the next case, unless it has stopped or is due for replacement."""
        if driver.process.poll() is not None or driver.runs >= RUNS_PER_DRIVER:
            driver.stop()
            return
        with cls._lock:
            cls._idle.setdefault(driver.key, []).append(driver)

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            drivers = [d for idle in cls._idle.values() for d in idle]
            cls._idle.clear()
        for driver in drivers:
            driver.stop()


def can_drive(command: list[str]) -> bool:
    """Whether runs of `command` may go through a driver: a single Node script, driver on."""
    if not enabled() or len(command) != 1 or not shutil.which("node"):
        return False
    try:
        with open(command[0], "rb") as script:
            first = script.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and b"node" in first
