"""Run events: what a run does as it does it, for an embedder's callback, the human progress
display and `--events jsonl`. Events are reports only: they never change a run or its envelope.

Every event is a plain JSON-ready dict with these keys first:
  type   "started" | "finished" | "retried" | "skipped" | "halted" | "failed" | "stderr"
  step   the step id (a workflow step, or `N:command` for stage N of an inline pipeline)
  index  the step's position in the program's step table (stable for one program)
  ms     milliseconds since the run (or the resumed run) started, from a monotonic clock
and then the fields of its type:
  started   position, steps: the 1-based position of the step's outermost step among the
            program's top-level steps, and how many there are; item, items (inside a
            for_each only): the 1-based iteration of the innermost loop, and its item count
  finished  durationMs; exitCode, stdoutBytes, stderrBytes when the step ran child processes
            (the last child's exit code, the bytes of all of them)
  retried   attempt (the attempt that failed), max, delayMs, code, message
  skipped   reason ("condition false")
  halted    kind ("approval" | "input"), approvalId (approvals; null otherwise), prompt
  failed    code, message, handled (null: the run fails; "continue" | "skip_rest": the step's
            on_error policy took it), location ({file, line, column} of the instruction that
            failed, named as an envelope's error.location names it; null when it has none)
  stderr    line (one line a child wrote to stderr, without its newline)
The callback runs on a thread of its own, in the order events happened: a slow callback
delays no step, and one that raises is reported once and then no longer called for that run.
Every run that uses one callback shares its one delivery thread, so a callback that hangs
holds one thread, not one per run. The end of a run waits at most DRAIN_S for its events to
be delivered; the rest are still delivered, in order, after the run has returned. At most
MAX_QUEUED events wait for a callback: past that an event is dropped, never silently: the run
counts what it dropped, says so through its log, and its envelope carries `eventsDropped`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from vm.engine.outcome import location

__all__ = ["Emitter", "Event", "EventCallback", "Progress", "drain", "jsonl_writer"]

EventType = Literal["started", "finished", "retried", "skipped", "halted", "failed", "stderr"]
EVENT_TYPES: tuple[str, ...] = ("started", "finished", "retried", "skipped", "halted", "failed",
                                "stderr")
DRAIN_S = 0.5  # how long the end of a run waits for its events to reach the callback
MAX_QUEUED = 10_000  # events waiting for one callback; one more is dropped and counted
IDLE_S = 2.0  # a delivery thread with nothing to deliver for this long ends


class Event(TypedDict, total=False):
    """One run event (the module docstring lists every type's fields)."""

    type: EventType
    step: str | None
    index: int | None
    ms: int
    position: int
    steps: int
    item: int
    items: int
    durationMs: int
    exitCode: int | None
    stdoutBytes: int
    stderrBytes: int
    attempt: int
    max: int
    delayMs: int
    code: str
    message: str
    handled: str | None
    reason: str
    kind: str
    approvalId: str | None
    prompt: str
    line: str
    location: dict[str, Any] | None


EventCallback = Callable[[Event], None]


class _Open:
    """A step that started and has not finished yet, with its children's totals."""

    __slots__ = ("id", "short", "index", "started", "code", "out", "err", "procs")

    def __init__(self, step: str, index: int) -> None:
        self.id, self.index, self.started = step, index, time.monotonic()
        self.short = step.rpartition("/")[2]  # the name its result is stored under
        self.code: int | None = None
        self.out = self.err = self.procs = 0


class _OpenSteps(threading.local):
    """The steps open on this thread, innermost last (parallel branches have their own)."""

    def __init__(self) -> None:
        self.stack: list[_Open] = []


class _Ticket:
    """One run's share of a dispatcher: what it queued, what was delivered, what it dropped."""

    __slots__ = ("queued", "delivered", "dropped", "broken", "done")

    def __init__(self) -> None:
        self.queued = self.delivered = self.dropped = 0
        self.broken = False
        self.done = threading.Condition(threading.Lock())


class _Dispatcher:
    """Delivers the events of every run that uses one callback, in order, on one thread that
    ends when it has been idle for IDLE_S (a new event starts another)."""

    def __init__(self, callback: EventCallback) -> None:
        self.callback = callback
        self.queue: queue.Queue = queue.Queue(MAX_QUEUED)
        self.thread: threading.Thread | None = None
        self.pending = 0  # queued and not yet delivered, of every run

    def put(self, ticket: _Ticket, event: dict, log: Callable[[str], None] | None) -> None:
        with _DISPATCHERS_LOCK:
            try:
                self.queue.put_nowait((ticket, event, log))
            except queue.Full:
                with ticket.done:
                    ticket.dropped += 1
                return
            with ticket.done:
                ticket.queued += 1
            self.pending += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._deliver, daemon=True,
                                               name="lobster-events")
                self.thread.start()

    def _deliver(self) -> None:
        while True:
            try:
                ticket, event, log = self.queue.get(timeout=IDLE_S)
            except queue.Empty:
                with _DISPATCHERS_LOCK:
                    if self.queue.empty():
                        self.thread = None
                        if _DISPATCHERS.get(id(self.callback)) is self:
                            del _DISPATCHERS[id(self.callback)]
                        return
                continue
            if not ticket.broken:
                try:
                    self.callback(event)
                except Exception as exc:  # the listener's fault: the run goes on without it
                    ticket.broken = True
                    if log is not None:
                        try:
                            log(f"lobster: the event callback failed and is no longer "
                                f"called: {type(exc).__name__}: {exc}\n")
                        except Exception:
                            pass
            with _DISPATCHERS_LOCK:
                self.pending -= 1
            with ticket.done:
                ticket.delivered += 1
                ticket.done.notify_all()


_DISPATCHERS: dict[int, _Dispatcher] = {}  # id(callback) -> its dispatcher (which holds it)
_DISPATCHERS_LOCK = threading.Lock()


def _dispatcher(callback: EventCallback) -> _Dispatcher:
    with _DISPATCHERS_LOCK:
        found = _DISPATCHERS.get(id(callback))
        if found is None or found.callback is not callback:
            found = _DISPATCHERS[id(callback)] = _Dispatcher(callback)
        return found


def drain(callback: EventCallback, timeout: float) -> bool:
    """Wait at most `timeout` seconds until every event queued for `callback` was delivered
    (a process about to exit calls this); whether all were."""
    with _DISPATCHERS_LOCK:
        found = _DISPATCHERS.get(id(callback))
    if found is None or found.callback is not callback:
        return True
    deadline = time.monotonic() + timeout
    while found.pending:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


class Emitter:
    """The events of one run, delivered to `callback` on its dispatcher's thread. The
    interpreter reports step boundaries (by pc and step name), vm/service/protocol/ halts, and
    vm/host/process.py children's exits and stderr lines (through the run's Scope)."""

    def __init__(self, callback: EventCallback, log: Callable[[str], None] | None = None
                 ) -> None:
        self.callback = callback
        self.log = log
        self.t0 = time.monotonic()
        self.open = _OpenSteps()
        self.program: Any = None
        self.source_dir = ""  # the main file's directory: locations name files from it
        self.starts: dict[int, int] = {}  # pc -> index of the step whose work begins there
        self.ends: dict[int, int] = {}  # pc -> index of the pipeline stage it completes
        self._at: list[int | None] = []  # pc -> index of the step holding it
        self._position: list[int] = []  # step index -> position of its top-level step
        self._steps = 0  # how many top-level steps the program has
        self._ticket = _Ticket()
        self._dispatcher = _dispatcher(callback)

    def bind(self, program: Any, source_dir: str = "") -> None:
        """Learn the program's step table and the directory its file names are relative to
        (vm.isa.frame.Frame.source_dir), once per run; a parallel branch binds again."""
        if self.program is program:
            return
        from vm.isa.opcodes import Op

        self.program, self.source_dir = program, source_dir
        code, at = program.code, [None] * len(program.code)
        quiet = (Op.EVAL_COND, Op.JUMP_IF_NOT)  # a skipped step never starts
        stage_ops = (Op.STAGE, Op.EXEC, Op.RENDER)
        for index, info in enumerate(program.steps):
            for pc in range(info.first_pc, info.last_pc + 1):
                at[pc] = index
            if "(" in info.id:  # bookkeeping blocks: a loop's (next), a call's (return)
                continue
            pc = info.first_pc
            while pc < info.last_pc and code[pc].op in quiet:
                pc += 1
            self.starts[pc] = index
            block = code[info.first_pc:info.last_pc + 1]
            if block and all(ins.op in stage_ops for ins in block):
                self.ends[info.last_pc] = index
        self._at = at
        tops = [info.id for info in program.steps if "/" not in info.id and "(" not in info.id]
        where = {name: n for n, name in enumerate(tops, 1)}
        self._position = [where.get(info.id.split("/")[0], 0) for info in program.steps]
        self._steps = len(tops)

    # delivery -------------------------------------------------------------------------------
    def emit(self, kind: str, step: str | None, index: int | None, /, **fields: Any) -> None:
        event: dict[str, Any] = {"type": kind, "step": step, "index": index,
                                 "ms": int((time.monotonic() - self.t0) * 1000)}
        event.update(fields)
        self._dispatcher.put(self._ticket, event, self.log)

    def close(self, wait_s: float = DRAIN_S) -> int:
        """The run ended: wait at most `wait_s` for its events to be delivered (the rest still
        are, later). Returns how many events the run dropped (MAX_QUEUED), and logs it."""
        ticket = self._ticket
        deadline = time.monotonic() + wait_s
        with ticket.done:
            while ticket.delivered < ticket.queued:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                ticket.done.wait(left)
            dropped = ticket.dropped
        if dropped and self.log is not None:
            try:
                self.log(f"lobster: {dropped} run events were dropped: the event callback "
                         f"fell {MAX_QUEUED} events behind\n")
            except Exception:
                pass
        return dropped

    # steps ----------------------------------------------------------------------------------
    def _info(self, index: int | None) -> str | None:
        return None if index is None else self.program.steps[index].id

    def index_at(self, pc: int) -> int | None:
        return self._at[pc] if 0 <= pc < len(self._at) else None

    def started(self, index: int, loops: list | tuple = ()) -> None:
        """The step at `index` begins; `loops` is the frame's loop stack (the counts a
        progress display shows)."""
        entry = _Open(self._info(index), index)
        stack = self.open.stack
        while stack and stack[-1].index == index:  # a loop's body again, or a retried step
            stack.pop()
        stack.append(entry)
        counts: dict[str, int] = {"position": self._position[index], "steps": self._steps}
        if loops:
            counts.update(item=loops[-1].index + 1, items=len(loops[-1].items))
        self.emit("started", entry.id, index, **counts)

    def _close(self, short: str) -> _Open | None:
        stack = self.open.stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i].short == short:
                entry = stack[i]
                del stack[i:]
                return entry
        return None

    def finished(self, short: str) -> None:
        """The step whose result is stored under `short` has its result."""
        entry = self._close(short)
        if entry is None:
            return  # no start on this thread: a synthetic result (a loop's item, say)
        fields: dict[str, Any] = {"durationMs": int((time.monotonic() - entry.started) * 1000)}
        if entry.procs:
            fields.update(exitCode=entry.code, stdoutBytes=entry.out, stderrBytes=entry.err)
        self.emit("finished", entry.id, entry.index, **fields)

    def stage_finished(self, index: int) -> None:
        self.finished(self.program.steps[index].id.rpartition("/")[2])

    def skipped(self, pc: int, reason: str) -> None:
        index = self.index_at(pc)
        self.emit("skipped", self._info(index), index, reason=reason)

    def retried(self, short: str, **fields: Any) -> None:
        entry = next((e for e in reversed(self.open.stack) if e.short == short), None)
        self.emit("retried", entry.id if entry else short, entry.index if entry else None,
                  **fields)

    def failed(self, short: str | None, pc: int, code: str, message: str,
               handled: str | None = None) -> None:
        """A step failed: `short` names it when a policy took the failure, else the step of
        the instruction at `pc` (or the innermost open one)."""
        entry = self._close(short) if short is not None else None
        if entry is None and short is None and self.open.stack:
            entry = self.open.stack[-1]
            self.open.stack.clear()
        if entry is not None:
            step, index = entry.id, entry.index
        else:
            index = self.index_at(pc)
            step = self._info(index) if index is not None else short
        file, span = location(self.program, pc, self.source_dir)
        where = None if span is None else {"file": file, "line": span[0], "column": span[1]}
        self.emit("failed", step, index, code=code, message=message, handled=handled,
                  location=where)

    def halted(self, pc: int, kind: str, approval_id: str | None, prompt: str) -> None:
        index = self.index_at(pc)
        step = self._info(index)
        if step is not None:
            self._close(step.rpartition("/")[2])
        self.emit("halted", step, index, kind=kind, approvalId=approval_id, prompt=prompt)

    # processes (vm/host/process.py calls these on the thread that ran the child) -------------------
    def exited(self, code: int, stdout_bytes: int, stderr_bytes: int) -> None:
        stack = self.open.stack
        if stack:
            entry = stack[-1]
            entry.code, entry.procs = code, entry.procs + 1
            entry.out += stdout_bytes
            entry.err += stderr_bytes

    def stderr_line(self, line: str) -> None:
        stack = self.open.stack
        entry = stack[-1] if stack else None
        self.emit("stderr", entry.id if entry else None, entry.index if entry else None,
                  line=line)


def jsonl_writer(write: Callable[[str], None], flush: Callable[[], None] | None = None
                 ) -> EventCallback:
    """A callback that writes each event as one line of compact JSON."""

    def on_event(event: Event) -> None:
        write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        if flush is not None:
            flush()

    return on_event


class Progress:
    """The human display of events on a stream that is not a terminal: one plain line per
    step event (a terminal gets vm.cli.terminal.Progress, one line rewritten in place)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        text = describe(event)
        if text is None:
            return
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Nothing to clear: a plain stream keeps its lines."""

    def pause(self) -> None:
        """Nothing to hide: the lines already written stay above a question."""

    def resume(self) -> None:
        """See `pause`."""


def describe(event: Event) -> str | None:
    """One line for a progress display (`lobster: step build finished in 12 ms (exit 0)`),
    or None for events it does not show (`retried`: the run prints its own [RETRY] line)."""
    kind, step = event.get("type"), event.get("step")
    where = f"lobster: step {step}"
    if kind == "started":
        return f"{where} started"
    if kind == "finished":
        text = f"{where} finished in {event.get('durationMs', 0)} ms"
        if event.get("exitCode") is not None:
            text += (f" (exit {event['exitCode']}, {event.get('stdoutBytes', 0)} bytes out, "
                     f"{event.get('stderrBytes', 0)} bytes err)")
        return text
    if kind == "skipped":
        return f"{where} skipped ({event.get('reason')})"
    if kind == "halted":
        what = "approval" if event.get("kind") == "approval" else "input"
        return f"{where} halted for {what}"
    if kind == "failed":
        handled = event.get("handled")
        suffix = f" (on_error: {handled})" if handled else ""
        return f"{where} failed: {event.get('message')}{suffix}"
    if kind == "stderr":
        return None
    return None
