"""The live children of this process and who may kill them: a `Scope` per run (or part of a
run), `kill_all` for the signal handler, and the marker pipe that finds a child's heirs.

Every child inherits a marker: the write end of a pipe of its own that nothing reads (one more
open file descriptor, nothing in its environment), passed on to what it starts. A kill reaches
the process group and, on Linux, every process that still holds the marker (found in
/proc/*/fd), even one that left the session with `setsid`. A process that closes its inherited
descriptors and leaves the session is not found; nor are the children of a lobster run inside a
step (it closes the marker for its own children, and kills those itself).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

__all__ = [
    "Child",
    "Scope",
    "defer_while_spawning",
    "kill_all",
    "kill_child",
    "live_groups",
    "release_child",
    "spawn_child",
    "wait_for_spawns",
]


class Child:
    """One live child process group, as known to `kill_all` and to the scopes it runs in;
    `marker` is the inode of the pipe it and its heirs hold (0: none), kept alive by
    `marker_fd`, its read end, until the child is done."""

    __slots__ = ("pgid", "marker", "marker_fd", "cancelled")

    def __init__(self, pgid: int, marker: int = 0, marker_fd: int = -1) -> None:
        self.pgid = pgid
        self.marker = marker
        self.marker_fd = marker_fd
        self.cancelled = False


def _marked(marker: int) -> list[int]:
    """The pids holding the pipe whose inode is `marker` (Linux /proc; [] elsewhere)."""
    wanted = f"pipe:[{marker}]"
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") == wanted:
                    found.append(int(entry))
                    break
            except OSError:
                continue
    return found


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_child(child: Child, sig: int = signal.SIGKILL) -> None:
    """Kill the child's process group, then every process still holding its marker (those
    that left the group with setsid), a few passes in case one forks meanwhile."""
    _killpg(child.pgid, sig)
    if not child.marker:
        return
    me = os.getpid()
    for _ in range(3):
        pids = [pid for pid in _marked(child.marker) if pid != me]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


# RLock: kill_all may run from a signal handler on the thread that is spawning.
_lock = threading.RLock()
_live: dict[int, Child] = {}
_kill_generation = 0
# Threads between forking a child and registering it in _live (a kill there would miss it),
# and what a signal handler deferred until the interrupted thread's child is registered.
_spawning: dict[int, int] = {}
_deferred: list[Callable[[], Any]] = []


def defer_while_spawning(action: Callable[[], Any]) -> bool:
    """For a signal handler: when it interrupted this thread between forking a child and
    registering it, `action` is kept and runs as soon as the child is registered (so a
    kill_all in it reaches that child), and True is returned; otherwise False."""
    if _spawning.get(threading.get_ident()):
        _deferred.append(action)
        return True
    return False


def wait_for_spawns(timeout: float = 1.0) -> None:
    """For a signal handler about to exit: wait (briefly) until no other thread is between
    forking a child and registering it, so that a kill_all after this reaches every child."""
    me, deadline = threading.get_ident(), time.monotonic() + timeout
    while any(n for ident, n in list(_spawning.items()) if ident != me) \
            and time.monotonic() < deadline:
        time.sleep(0.005)


class Scope:
    """The children of one run (or of one part of it, such as a parallel step's branches).

    `cancel()` kills the process group of every child live in this scope or in a scope made
    from it by `child()`, and makes every later `run_process` in them raise Cancelled at once.
    Other scopes are untouched: concurrent runs in one process never cancel each other.
    `listener` (else the nearest enclosing scope's) hears each child's stderr lines and exit:
    an object with `stderr_line(text)` and `exited(code, stdout_bytes, stderr_bytes)`.
    """

    __slots__ = ("parent", "cancelled", "_live", "listener")

    def __init__(self, parent: Scope | None = None, listener: Any = None) -> None:
        self.parent = parent
        self.cancelled = False
        self._live: dict[int, Child] = {}
        self.listener = listener

    def child(self) -> Scope:
        """A nested scope: cancelled with this one, or on its own."""
        return Scope(self)

    def cancel(self, sig: int = signal.SIGKILL) -> None:
        """Kill (with `sig`) every child running in this scope and its nested ones; later
        children in them are refused."""
        with _lock:
            self.cancelled = True
            children = list(self._live.values())
            for child in children:
                child.cancelled = True
        for child in children:
            _killpg(child.pgid, sig)

    def heard_by(self) -> Any:
        """The listener of this scope's children (their stderr lines and exits): its own, or
        the nearest enclosing scope's; None when no one listens."""
        scope: Scope | None = self
        while scope is not None:
            if scope.listener is not None:
                return scope.listener
            scope = scope.parent
        return None

    def _chain(self) -> list[Scope]:
        scopes, scope = [], self
        while scope is not None:
            scopes.append(scope)
            scope = scope.parent
        return scopes


def live_groups() -> list[int]:
    """Process-group ids of the children currently running (for diagnostics and tests)."""
    with _lock:
        return list(_live)


def kill_all(sig: int = signal.SIGKILL) -> None:
    """Send `sig` to every live child's process group; their `run_process` raise Cancelled."""
    global _kill_generation
    with _lock:
        _kill_generation += 1
        children = list(_live.values())
        for child in children:
            child.cancelled = True
    for child in children:
        kill_child(child, sig)


def spawn_child(
    scope: Scope | None, spawn: Callable[[int], subprocess.Popen[bytes]],
) -> tuple[subprocess.Popen[bytes], Child] | None:
    """Start a child with `spawn(marker_fd)` (its own session, the marker passed on) and
    register it as live in `scope` and every scope enclosing it; None, with nothing started,
    when one of them is already cancelled. The child comes back `cancelled` when `kill_all`
    ran while it was being spawned. Whatever happens, `release_child` must follow."""
    scopes = scope._chain() if scope is not None else []
    with _lock:
        if any(s.cancelled for s in scopes):
            return None
        generation = _kill_generation
        mark_read, mark_write = os.pipe()  # the marker: the child and its heirs hold mark_write
        me = threading.get_ident()
        _spawning[me] = _spawning.get(me, 0) + 1
        try:
            try:
                proc = spawn(mark_write)
            except BaseException:
                os.close(mark_read)
                raise
            finally:
                os.close(mark_write)
            child = Child(proc.pid, os.fstat(mark_read).st_ino, mark_read)  # pgid == pid
            _live[child.pgid] = child
            for s in scopes:
                s._live[child.pgid] = child
            if _kill_generation != generation:  # kill_all ran while we were spawning
                child.cancelled = True
        finally:
            _spawning[me] -= 1
            if not _spawning[me]:
                del _spawning[me]
                if _deferred:  # a signal came while the child was unregistered: act on it now
                    actions = list(_deferred)
                    _deferred.clear()
                    for action in actions:
                        action()
    return proc, child


def release_child(child: Child, scope: Scope | None) -> None:
    """Forget a child that is done (no longer live in its scopes) and close its marker."""
    scopes = scope._chain() if scope is not None else []
    with _lock:
        _live.pop(child.pgid, None)
        for s in scopes:
            s._live.pop(child.pgid, None)
    os.close(child.marker_fd)
