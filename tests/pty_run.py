"""A command on a pseudo-terminal (stdin, stdout and stderr all on it), for the tests of what
a person at a terminal sees: colour, prompts, progress, hints."""

from __future__ import annotations

import os
import pty
import select
import signal
import time
from collections.abc import Callable


def on_a_terminal(argv: list[str], env: dict[str, str], cwd: str,
                  react: Callable[[bytes, int, int], bool] | None = None,
                  timeout: float = 60) -> tuple[int, str]:
    """Run `argv` on a new pty; `react(output so far, pty fd, pid)` is called as output
    arrives and returns True once it has done its part (typed an answer, sent a signal).
    Returns the exit code (128+N for a signal, as a shell says) and everything written."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    out, deadline, done = b"", time.monotonic() + timeout, react is None
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                out += data
            if not done:
                done = react(out, fd, pid)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    code = os.waitstatus_to_exitcode(status)
    return (128 - code if code < 0 else code), out.decode("utf-8", "replace")


def typed(answer: bytes, after: bytes) -> Callable[[bytes, int, int], bool]:
    """A reaction: type `answer` once `after` was written."""
    def react(out: bytes, fd: int, _pid: int) -> bool:
        if after in out:
            os.write(fd, answer)
            return True
        return False
    return react
