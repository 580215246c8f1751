"""What the `lobster` subcommands share: reading flags, printing envelopes and one-line
refusals, the human-mode error text, and the `--events jsonl` writers drained before exit."""

from __future__ import annotations

import os
import sys

from vm.cli.flags import NO_VALUE, UsageError, parse
from vm.core import json_write
from vm.service.protocol.envelope import RequestError, exit_code


def print_json(value) -> None:
    sys.stdout.write(json_write.json_pretty(value) + "\n")


def flag(argv: list[str], i: int, name: str) -> tuple[str | None, int]:
    """The value of `--name v` / `--name=v` at argv[i], and the index after it."""
    word = argv[i]
    if word.startswith(f"--{name}="):
        return word.split("=", 1)[1], i + 1
    if i + 1 < len(argv):
        return argv[i + 1], i + 2
    return None, i + 1


def shown(value: str | None) -> str:
    return "nothing" if value is None or value == NO_VALUE else repr(value)


def usage_error(exc: RequestError) -> int:
    """A refused command line, in human mode: one `lobster: error[CODE]: message` line."""
    error = exc.envelope["error"]
    sys.stderr.write(f"lobster: error[{error['code']}]: {error['message']}\n")
    return 2


def timeout(text: str | None, command: str) -> int | None:
    """`--timeout 30000` (ms) or `--timeout 30s` (a duration) -> ms, within
    bounds.TIMEOUT_MS; None when not given."""
    if text is None:
        return None
    from vm.core import bounds

    try:
        return bounds.TIMEOUT_MS.parse(text, f"{command} --timeout")
    except bounds.BoundError as exc:
        message = exc.message if exc.kind == "range" else (
            f"{command} --timeout must be a number of milliseconds or a duration such as 30s "
            f"(got {shown(text if len(text) <= 64 else text[:24] + '...')})")
        raise RequestError(message, "E021") from None


def is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def file_problem(path: str) -> str | None:
    """Why `--file PATH` names no workflow file, in the reference's words: the path is looked
    up first (with the OS's text, as Node words it), then its kind, then its extension."""
    from vm.service.frontend import WORKFLOW_EXTENSIONS

    full = os.path.abspath(path)
    if not os.path.exists(full):
        return f"ENOENT: no such file or directory, stat '{full}'"
    if not os.path.isfile(full):
        return "Workflow path is not a file"
    if not full.lower().endswith(WORKFLOW_EXTENSIONS):
        return "Workflow file must end in .lobster, .yaml, .yml, or .json"
    return None


def fail(mode: str, exc: RequestError) -> int:
    if mode == "tool":
        print_json(exc.envelope)
        return exit_code(exc.envelope)
    return human_error(exc.envelope)


def node_text(text: str) -> str:
    """`text` as Node writes it to a stream: a lone UTF-16 surrogate (the half of an emoji that
    JSON.parse names as its unexpected token, say) becomes U+FFFD; a pair is one character."""
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def human_error(envelope: dict, rendered: str | None = None) -> int:
    """`Error: <msg>` (or `Parse error: <msg>`) as the reference prints it, then where: every
    diagnostic with its source line, caret and hint (`rendered` by the compiler), or the
    runtime location."""
    error = envelope["error"]
    label = "Parse error" if error["type"] == "parse_error" else "Error"
    if error["message"].startswith("run --args-json "):
        lines = [error["message"]]  # the reference prints its own usage errors bare
    else:
        lines = [f"{label}: {node_text(error['message'])}"]
    if rendered is not None:
        lines.append(rendered)
    elif error.get("location"):
        loc = error["location"]
        lines.append(f"  at {loc['file']}:{loc['line']}:{loc['column']}")
    from vm.cli.terminal import detail_lines

    lines += detail_lines(error)
    sys.stderr.write("\n".join(lines) + "\n")
    return exit_code(envelope)


# events -------------------------------------------------------------------------------------
_EVENT_WRITERS: list = []  # this process's `--events jsonl` callbacks, drained before exit
EXIT_DRAIN_S = 60.0  # after the envelope, how long the process waits to write queued events
STALLED_S = 2.0  # ... and how long stderr may take no byte before no one is taken to read it


def _write_fd_2(text: str) -> None:
    """Events go straight to fd 2, not through sys.stderr's buffer: a writer blocked on a full
    pipe holds no lock that the rest of the process (or its exit) needs."""
    data = text.encode("utf-8", "backslashreplace")
    while data:
        data = data[os.write(2, data):]


def listener(events: str | None, command: str, human: bool):
    """The event callback a command's flags ask for: `--events jsonl` (JSON lines on stderr),
    else the progress display in human mode; and the display, to clear it at the end."""
    if events is not None:
        if events.strip().lower() != "jsonl":
            raise RequestError(f"{command} --events must be jsonl (got {shown(events)})", "E022")
        from vm.engine.events import jsonl_writer

        writer = jsonl_writer(_write_fd_2)
        _EVENT_WRITERS.append(writer)
        return writer, None
    if not human:
        return None, None
    if is_terminal(sys.stderr):  # one line rewritten in place, with counts
        from vm.cli.terminal import Progress as Line

        line = Line(sys.stderr)
        return line, line
    from vm.engine.events import Progress

    progress = Progress(sys.stderr)
    return progress, progress


def finish_events() -> None:
    """The envelope is written: close stdout, so a reader that reads all of stdout before
    stderr gets to the events, then write every event still queued (at most EXIT_DRAIN_S)."""
    if not _EVENT_WRITERS:
        return
    from vm.engine.events import drain

    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    import select
    import time

    deadline = time.monotonic() + EXIT_DRAIN_S
    for writer in _EVENT_WRITERS:
        stalled = None  # since when stderr has taken nothing (a pipe no one reads)
        while not drain(writer, 0.1) and time.monotonic() < deadline:
            try:
                _, writable, _ = select.select([], [2], [], 0)
            except (OSError, ValueError):
                return
            if writable:
                stalled = None
            elif stalled is None:
                stalled = time.monotonic()
            elif time.monotonic() - stalled >= STALLED_S:
                return  # the events left are dropped: exit rather than wait for no reader


# the store subcommands (pending, cancel, history, gc, key) ------------------------------------
class Usage(Exception):
    """A store subcommand's refused command line: its message, then the usage text (exit 2)."""


def parse_flags(argv: list[str], spec, takes: int = 0) -> tuple[dict, list[str]]:
    """A store subcommand's flags and its (at most `takes`) positional words, read by its
    table (vm/cli/specs.py): an unknown option or a stray word is a UsageError (one coded
    line), a flag without its value a Usage."""
    values, words = parse(spec, argv)
    if len(words) > takes:
        raise UsageError(f"unexpected argument {words[takes]!r} (`lobster help {spec.name}` "
                         "shows the usage)")
    for name, value in values.items():
        if value == NO_VALUE:
            raise Usage(f"--{name} requires a value")
    fmt = values.get("format", "text")
    if fmt not in ("text", "json"):
        raise Usage("--format must be text or json")
    return values, words


def refuse(exc: UsageError, tool: bool = False) -> int:
    """A refused command line: in human mode one line,
    `lobster: error[CODE]: message`; in tool mode its envelope. Exit 2."""
    if tool:
        print_json(RequestError(exc.message, exc.code).envelope)
        return 2
    sys.stderr.write(f"lobster: error[{exc.code}]: {exc.message}\n")
    return 2


def seconds(text: str, name: str) -> float:
    """A duration flag (`--older-than`, `--grace`) in seconds, within bounds.AGE."""
    from vm.core import bounds

    try:
        return bounds.AGE.parse(text, f"--{name}") / 1000
    except bounds.BoundError as exc:
        raise Usage(exc.message) from None


def refused_usage(exc: Exception, usage: str) -> int:
    sys.stderr.write(f"{exc}\n{usage}")
    return 2


def store_options():
    """The options of a store subcommand: tool mode, diagnostics on stderr."""
    from vm.service.protocol.options import Options

    return Options(mode="tool", log=sys.stderr.write)


def check_store(options) -> None:
    """Raise a StoreError (T450, the store named without its password) when the store cannot
    be asked at all: a PostgreSQL store that does not answer or whose driver is missing, a
    state directory that is a file or lies under one. A subcommand asks this before it could
    say a checkpoint is not there, which it cannot know then. A state directory that does not
    exist yet is an empty store, not a failure."""
    from vm.host.store import StoreError, is_postgres_url
    from vm.host.store.base import default_state_dir

    location = options.state_dir or (options.env.get("LOBSTER_STORE") or "").strip() \
        or default_state_dir(options.env)
    if is_postgres_url(location):
        options.store()  # connects (or raises the StoreError saying why not)
        return
    path = os.path.abspath(location)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        what = "is not a directory" if path == os.path.abspath(location) \
            else f"cannot be made: {path} is not a directory"
        raise StoreError(f"the state directory {location} {what}")


def store_failed(exc: Exception, tool: bool = True) -> int:
    """The store could not be reached, read or written (a StoreError, or an OSError of its
    files): its envelope on stdout (tool mode), else one `lobster: error[T450]: ...` line on
    stderr; exit 1. Never a bug report, never "not found"."""
    from vm.host.store import StoreError
    from vm.service.protocol.envelope import store_error

    if not isinstance(exc, StoreError):
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        exc = StoreError(f"the state store cannot be used: "
                         f"{getattr(exc, 'strerror', None) or exc}{where}")
    envelope = store_error(exc)
    if tool:
        print_json(envelope)
    else:
        error = envelope["error"]
        sys.stderr.write(f"lobster: error[{error['code']}]: {error['message']}\n")
    return 1


_SHOWN_CONTROLS = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}


def listing_text(value: object) -> str:
    """Untrusted text (a prompt a step printed, a reason, a name) as one cell of a listing for
    people: every control character shown as an escape (`\\n`, `\\e`, `\\x07`, `\\u2028`...),
    so it can neither start a line of its own nor move the cursor; the rest as it is."""
    text = str(value)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        elif ch in _SHOWN_CONTROLS:
            out.append(_SHOWN_CONTROLS[ch])
        else:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
    return "".join(out)
