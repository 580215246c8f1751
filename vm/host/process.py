"""Running one child process (POSIX): spawn it in a fresh session, feed its stdin, capture
its output with caps and an absolute deadline, and report how it ended. Which children are live,
and how a run, a timeout or a signal kills them, is vm/host/children.py.

A child's step ends when the child itself has exited and its output reached EOF; a process
it left in the background that still holds the output pipes gets EOF_GRACE_S, then is
killed (the original waits for it, up to the timeout).
"""

from __future__ import annotations

import errno
import os
import select
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from vm.core.codes import TIMED_OUT
from vm.core.records import frozen
from vm.host.children import Child, Scope, kill_child, release_child, spawn_child

if TYPE_CHECKING:
    import subprocess

__all__ = [
    "Cancelled",
    "CommandNotFound",
    "OutputLimitExceeded",
    "ProcessError",
    "ProcessResult",
    "ProcessTimeout",
    "run_process",
    "shell_argv",
]

DEFAULT_SHELL = "/bin/sh"
_READ_CHUNK = 1 << 18  # 256 KiB per os.read
_WRITE_CHUNK = 1 << 20  # at most 1 MiB handed to os.write at once
_PIPE_SIZE = 1 << 20  # try to enlarge pipes to 1 MiB (Linux F_SETPIPE_SZ)...
_PIPE_DEFAULT = 1 << 16  # ...once more than a pipe's default capacity goes through one
_F_SETPIPE_SZ = 1031
EOF_GRACE_S = 0.5  # after the child exits, how long its background processes may hold output
_POLL_S = 0.05  # how often the child's exit is polled where pidfd_open is missing
_POLL_MAX_S = 86400.0  # the longest one poll() waits (a later deadline takes several)


# --------------------------------------------------------------------------- shell lines


def shell_argv(line: str, env: Mapping[str, str]) -> list[str]:
    """The argv that runs a shell `line`: `/bin/sh -c LINE`, or `LOBSTER_SHELL` from `env`.

    A shell whose name ends in `powershell` or `pwsh` (`.exe` too) gets `-NoProfile -Command`,
    one ending in `cmd` (`cmd.exe`) gets `/d /s /c`, matched on the whole value without case
    as the original matches it (`/opt/mypwsh` too); any other gets `-c` (SPEC 9.7).
    """
    shell = (env.get("LOBSTER_SHELL") or "").strip() or DEFAULT_SHELL
    lowered = shell.lower()
    if lowered.endswith(("powershell", "powershell.exe", "pwsh", "pwsh.exe")):
        return [shell, "-NoProfile", "-Command", line]
    if lowered.endswith(("cmd", "cmd.exe")):
        return [shell, "/d", "/s", "/c", line]
    return [shell, "-c", line]


# --------------------------------------------------------------------------- results, errors


@frozen
class ProcessResult:
    """A finished child: exit status (128+signum after a signal death) and its output."""

    code: int
    stdout: bytes
    stderr: bytes


class ProcessError(Exception):
    """Base of every failure of `run_process`; `.message` is the user-facing text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CommandNotFound(ProcessError):
    """The program could not be spawned (missing or not executable)."""

    def __init__(self, argv0: str, shell: bool = False) -> None:
        if shell:
            message = "exec shell not found; check LOBSTER_SHELL or ComSpec"
        else:
            message = f"exec command not found: {argv0}"
        super().__init__(message)
        self.argv0 = argv0
        self.shell = shell


class ProcessTimeout(ProcessError):
    """The deadline passed; the child's process group was killed."""

    def __init__(self, message: str = TIMED_OUT) -> None:
        super().__init__(message)


class OutputLimitExceeded(ProcessError):
    """A stream ("stdout" or "stderr") exceeded its cap; the process group was killed."""

    def __init__(self, stream: str, message: str | None = None) -> None:
        super().__init__(message or f"lobster {stream} exceeded maxStdoutBytes")
        self.stream = stream


class Cancelled(ProcessError):
    """The child's scope was cancelled, or `kill_all` was called, while it ran."""

    def __init__(self, message: str = "lobster run cancelled") -> None:
        super().__init__(message)


# --------------------------------------------------------------------------- running


def _enlarge_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
    except (OSError, ImportError, ValueError):
        pass


def _spawn(
    argv: list[str], *, stdin_pipe: bool, cwd: str, env: Mapping[str, str], shell: bool,
    marker: int | None = None,
) -> subprocess.Popen[bytes]:
    import subprocess  # here: a run that starts no child (a resume, say) never loads it

    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=_entries(env),
            start_new_session=True,
            close_fds=True,
            pass_fds=() if marker is None else (marker,),
            shell=False,
        )
    except OSError as exc:
        # CPython reports a failed chdir with the cwd as filename; anything else concerns
        # the program itself.
        if exc.filename is not None and exc.filename == cwd and exc.filename != argv[0]:
            raise ProcessError(f"exec cwd not usable: {cwd}: {exc.strerror}") from exc
        if exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.EISDIR):
            raise CommandNotFound(argv[0], shell=shell) from exc
        raise ProcessError(f"exec could not start {argv[0]}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # a NUL byte in argv, cwd or env
        raise ProcessError(f"exec could not start {argv[0][:200]!r}: {exc}") from exc


def _entries(env: Mapping[str, str]) -> Mapping[str, str] | Mapping[bytes, bytes]:
    """The environment as the child's `environ` will hold it. `os.environ` itself is copied
    as the bytes it keeps (a copy in one step, and nothing decoded here to be encoded again by
    subprocess: a tenth of a step's CPU); never `env=None`, which would hand the child the C
    library's environment, where a variable set by C code (readline sets COLUMNS and LINES)
    or by os.putenv shows that os.environ does not hold. A name holding `=` (a workflow
    `env: {"E=1": "x"}`) becomes the entry `E=1=x`, which the child reads as `E` = `1=x`, as
    the original's spawn passes it; an entry whose name is already set yields to it (the
    child's getenv finds the earlier one)."""
    if env is os.environ:
        data = getattr(env, "_data", None)  # CPython's bytes -> bytes table behind os.environ
        if type(data) is dict:
            return dict(data)  # its names never hold "=": putenv refuses them
    if not any("=" in name for name in env):
        return dict(env)
    out = {name: value for name, value in env.items() if "=" not in name}
    for name, value in env.items():
        if "=" in name:
            head, rest = name.split("=", 1)
            out.setdefault(head, f"{rest}={value}")
    return out


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def env_output_cap(env: Mapping[str, str]) -> int | None:
    """LOBSTER_MAX_OUTPUT_BYTES, checked when a child is about to start (as the reference):
    unset or empty is no cap; anything but a positive safe integer is an error."""
    raw = (env.get("LOBSTER_MAX_OUTPUT_BYTES") or "").strip()
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 16 or not 0 < int(raw) <= 2**53 - 1:
        raise ProcessError("LOBSTER_MAX_OUTPUT_BYTES must be a positive safe integer (bytes)")
    return int(raw)


def run_process(
    argv: list[str],
    *,
    stdin: bytes | None,
    cwd: str,
    env: Mapping[str, str],
    deadline: float | None = None,
    max_output_bytes: int | None = None,
    shell: bool = False,
    scope: Scope | None = None,
) -> ProcessResult:
    """Run `argv` (never through a shell) and capture its output.

    `stdin` None gives the child /dev/null; bytes are written fully (an early-exiting
    reader is fine). `deadline` is an absolute `time.monotonic()` value; `max_output_bytes`
    caps stdout and stderr each while they are written. On timeout, cap, `scope.cancel()` or
    `kill_all`, the child's whole process group gets SIGKILL. `shell` only picks the
    not-found message.
    """
    if not argv:
        raise ProcessError("exec requires a command")
    env_cap = env_output_cap(env)
    if deadline is not None and time.monotonic() >= deadline:
        raise ProcessTimeout()

    listener = scope.heard_by() if scope is not None else None
    started = spawn_child(scope, lambda marker: _spawn(
        argv, stdin_pipe=stdin is not None, cwd=cwd, env=env, shell=shell, marker=marker))
    if started is None:
        raise Cancelled()
    proc, child = started
    finished = False
    exit_fd: int | None = None
    try:
        exit_fd = _pidfd(proc.pid)  # readable once the child has exited (Linux); else polled
        if child.cancelled:
            kill_child(child)
            raise Cancelled()
        try:
            stdout, stderr = _communicate(proc, child, exit_fd, stdin, deadline,
                                          max_output_bytes,
                                          None if listener is None else _LineSplitter(listener))
        except OutputLimitExceeded as exc:
            if env_cap is not None and max_output_bytes == env_cap:  # the variable's cap hit
                message = f"Process output exceeded {env_cap} bytes"
                raise OutputLimitExceeded(exc.stream, message) from None
            raise
        returncode = _wait(proc, child, exit_fd, deadline)
        finished = True
        if child.cancelled:
            raise Cancelled()
        result = ProcessResult(code=_exit_code(returncode), stdout=stdout, stderr=stderr)
        if listener is not None:
            _tell(listener.exited, result.code, len(stdout), len(stderr))
        return result
    finally:
        if not finished:
            kill_child(child)
            _close_pipes(proc)
            try:
                proc.wait()
            except BaseException:  # never mask the error already in flight
                pass
        else:
            _close_pipes(proc)
        release_child(child, scope)
        if exit_fd is not None:  # last: the child is ended whatever this does
            os.close(exit_fd)


def _tell(call: Callable[..., Any], *args: Any) -> None:
    """A report to a listener, which never breaks the run."""
    try:
        call(*args)
    except Exception:
        pass


class _LineSplitter:
    """Stderr chunks -> whole lines for a listener (the last one flushed at EOF)."""

    __slots__ = ("listener", "rest")

    def __init__(self, listener: Any) -> None:
        self.listener = listener
        self.rest = b""

    def feed(self, data: bytes) -> None:
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            _tell(self.listener.stderr_line, line.rstrip(b"\r").decode("utf-8", "replace"))

    def flush(self) -> None:
        if self.rest:
            line, self.rest = self.rest, b""
            _tell(self.listener.stderr_line, line.decode("utf-8", "replace"))


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def _wait(
    proc: subprocess.Popen[bytes], child: Child, exit_fd: int | None, deadline: float | None,
) -> int:
    """The child's exit status, once it has exited (its output may reach EOF just before);
    Cancelled or ProcessTimeout when the deadline comes first."""
    if deadline is None:
        return proc.wait()
    if exit_fd is None:
        import subprocess

        try:
            return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    else:
        # the pidfd turns readable at the exit: a blocking wait then returns at once, where
        # Popen.wait(timeout) would poll waitpid with sleeps from 0.5 ms up (a millisecond
        # added to every step whose output closed a moment before its process ended)
        poller = select.poll()
        poller.register(exit_fd, select.POLLIN)
        while True:
            if poller.poll(max(0.0, min(deadline - time.monotonic(), _POLL_MAX_S)) * 1000.0):
                return proc.wait()
            if time.monotonic() >= deadline:
                break
    raise Cancelled() if child.cancelled else ProcessTimeout()


def _communicate(
    proc: subprocess.Popen[bytes],
    child: Child,
    exit_fd: int | None,
    stdin: bytes | None,
    deadline: float | None,
    limit: int | None,
    lines: _LineSplitter | None = None,
) -> tuple[bytes, bytes]:
    assert proc.stdout is not None and proc.stderr is not None
    out_fd = proc.stdout.fileno()
    err_fd = proc.stderr.fileno()
    names = {out_fd: "stdout", err_fd: "stderr"}
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = {out_fd: 0, err_fd: 0}
    reading = {out_fd, err_fd}  # outputs not yet at EOF
    enlarged: set[int] = set()

    in_fd = -1
    view = memoryview(stdin) if stdin is not None else memoryview(b"")
    offset = 0

    exited_at: float | None = None  # when the child itself was seen to have exited

    # one poll object, no epoll instance: a step's child has at most four descriptors
    poller = select.poll()
    for fd in (out_fd, err_fd):
        poller.register(fd, select.POLLIN)
    if exit_fd is not None:
        poller.register(exit_fd, select.POLLIN)
    if proc.stdin is not None:
        in_fd = proc.stdin.fileno()
        if len(view) == 0:
            proc.stdin.close()
            in_fd = -1
        else:
            if len(view) > _PIPE_DEFAULT:
                _enlarge_pipe(in_fd)
            os.set_blocking(in_fd, False)
            poller.register(in_fd, select.POLLOUT)

    def close_stdin() -> None:
        nonlocal in_fd
        poller.unregister(in_fd)
        assert proc.stdin is not None
        try:
            proc.stdin.close()
        except OSError:  # EPIPE on flush of nothing buffered; harmless
            pass
        in_fd = -1

    while reading or in_fd >= 0:
        if child.cancelled:
            raise Cancelled()
        now = time.monotonic()
        if exited_at is None and exit_fd is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at >= EOF_GRACE_S:
            kill_child(child)  # what it left behind holds the pipes: the step is over
            break
        timeout = None
        if deadline is not None:
            timeout = deadline - now
            if timeout <= 0:
                raise ProcessTimeout()
        if exited_at is not None:
            grace = exited_at + EOF_GRACE_S - now
            timeout = grace if timeout is None else min(timeout, grace)
        elif exit_fd is None:
            timeout = _POLL_S if timeout is None else min(timeout, _POLL_S)
        events = poller.poll(None if timeout is None else min(timeout, _POLL_MAX_S) * 1000.0)
        for fd, _ in events:
            if fd == exit_fd:
                poller.unregister(fd)
                exited_at = time.monotonic()
                continue
            if fd == in_fd:
                try:
                    written = os.write(fd, view[offset : offset + _WRITE_CHUNK])
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    close_stdin()  # the child stopped reading: not an error
                    continue
                offset += written
                if offset >= len(view):
                    close_stdin()
                continue
            if fd not in reading:
                continue
            data = os.read(fd, _READ_CHUNK)
            if not data:
                poller.unregister(fd)
                reading.discard(fd)
                if lines is not None and fd == err_fd:
                    lines.flush()
                continue
            if len(data) >= _PIPE_DEFAULT and fd not in enlarged:
                enlarged.add(fd)  # a full pipe: a large output, read in larger bites
                _enlarge_pipe(fd)
            sizes[fd] += len(data)
            if limit is not None and sizes[fd] > limit:
                kill_child(child)
                raise OutputLimitExceeded(names[fd])
            chunks[fd].append(data)
            if lines is not None and fd == err_fd:
                lines.feed(data)
    if child.cancelled:
        raise Cancelled()
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd])


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
