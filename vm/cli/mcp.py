"""`lobster mcp`: the run and resume requests as MCP tools over stdio (the `mcp` extra).

Each tool call is one `protocol.handle` in a worker thread, under the one `Options` of the
process, so a slow run never holds up another call; its envelope is the tool's result, as
structured content and as text. The server keeps nothing between calls but the store.

Under abuse: a line (one JSON-RPC frame) is read in chunks and refused past MAX_FRAME_BYTES
without being held; at most MAX_RUNS runs and resumes work at once, the next is answered busy
(T470) at once, and cheap calls (pending, cancel) have threads of their own, as reading and
writing the wire have; a tool refuses a field it does not take (E008), as `lobster tool` does.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from vm import __version__, install_hint
from vm.cli.flags import UsageError, parse, render
from vm.cli.specs import MCP
from vm.core import json_read, json_write
from vm.service import protocol
from vm.service.protocol.envelope import error_envelope, unknown_field as refused_field

if TYPE_CHECKING:
    from vm.service.frontend import Frontend

USAGE = render(MCP)

MISSING = "lobster mcp needs the mcp extra: " + install_hint("mcp")

# One JSON-RPC line: a largest tool request, escaped twice over, and the envelope around it.
MAX_FRAME_BYTES = 2 * protocol.MAX_REQUEST_BYTES + 64 * 1024
MAX_RUNS = 32        # run and resume calls at work at once; one more is answered busy (T470)
CHEAP_THREADS = 8    # pending and cancel calls: their own threads, never behind the runs
READ_CHUNK = 64 * 1024
ID_PREFIX = 4096     # of an oversized line, the bytes searched for its request id
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")')

# tool name -> (request action, description)
TOOLS: dict[str, tuple[str, str]] = {
    "lobster_run": (
        "run",
        "Run a Lobster pipeline (inline text such as \"exec --json --shell 'cmd' | approve "
        "--prompt 'Apply?'\", or a workflow file path) as one deterministic call. Returns the "
        "envelope: status ok with output, needs_approval / needs_input with a resumeToken "
        "(and an approvalId for approvals), or ok=false with an error."),
    "lobster_resume": (
        "resume",
        "Continue a halted run: give token (or approvalId) and exactly one of approve, "
        "responseJson (JSON text matching the input request's responseSchema) or cancel=true. "
        "A rejected answer leaves the checkpoint intact. Returns the run's next envelope."),
    "lobster_pending": (
        "pending",
        "List the checkpoints that wait for a decision (status waiting, or expired past their "
        "expiry), those being resumed (claimed, with leaseUntil) and those whose resume did "
        "not finish (in_doubt, with reason and step): approvalId, stateKey, kind, prompt, "
        "step, source, createdAt, ageSeconds, expiresAt. Resume one with lobster_resume "
        "(approvalId), or end it with cancel=true."),
    "lobster_history": (
        "history",
        "One checkpoint's record, by id (its approvalId, resumeToken or stateKey): its state "
        "now (waiting, expired, claimed, finished, in_doubt with reason and step, cancelled) "
        "and its events: halted (program and items hashes, when), claimed (when, by which "
        "process, decision, approvedBy), and how it ended. The audit trail of who approved "
        "what."),
}


def request_fields(action: str) -> dict[str, tuple[dict, str]]:
    """An action's request fields: `protocol.REQUEST_FIELDS`, or `admin.PENDING_FIELDS`."""
    if action == "pending":
        from vm.service.admin import PENDING_FIELDS

        return PENDING_FIELDS
    if action == "history":
        from vm.service.admin import HISTORY_FIELDS

        return HISTORY_FIELDS
    return protocol.REQUEST_FIELDS[action]


def input_schema(action: str) -> dict[str, Any]:
    """The JSON Schema of one action's request, from the fields the request is read by (the
    action itself is the tool's, not an argument)."""
    fields = request_fields(action)
    return {"type": "object",
            "properties": {name: {**schema, "description": text}
                           for name, (schema, text) in fields.items()},
            "required": ["id"] if action == "history"
            else list(protocol.REQUIRED_FIELDS.get(action, ())),
            "additionalProperties": False}


def unknown_field(action: str, arguments: dict[str, Any]) -> dict | None:
    """The E008 envelope for the first argument the action does not take, else None (the
    action is the tool's: an `action` argument is refused too)."""
    known = request_fields(action)
    for name in arguments:
        if name not in known:
            return refused_field(name, action, list(known)).envelope
    return None


def is_cheap(name: str, arguments: dict[str, Any] | None) -> bool:
    """A call that runs no pipeline: `lobster_pending`, and a resume with `cancel: true`."""
    return name == "lobster_pending" or (
        name == "lobster_resume" and (arguments or {}).get("cancel") is True)


def busy_envelope() -> dict:
    return error_envelope(
        "T470", f"lobster mcp is busy: {MAX_RUNS} runs and resumes are in progress, the most it "
        "takes at once; try again when one has finished")


def call(name: str, arguments: dict[str, Any] | None, options: protocol.Options,
         scope=None) -> dict:
    """One tool call -> its envelope (blocking: the server runs it in a worker thread)."""
    action = TOOLS[name][0]
    refused = unknown_field(action, arguments or {})
    if refused is not None:
        return refused
    if action in ("pending", "history", "resume"):
        from vm.cli.common import check_store
        from vm.host.store import StoreError
        from vm.service.protocol.envelope import store_error

        try:  # "not found" only from a store that was asked
            check_store(options)
            if action == "pending":
                from vm.service.admin import pending_request

                return pending_request(arguments or {}, options)
            if action == "history":
                from vm.service.admin import history_request

                return history_request(arguments or {}, options)
        except StoreError as exc:
            return store_error(exc)
    return protocol.handle({**(arguments or {}), "action": action}, options, scope=scope)


def oversize_id(prefix: bytes) -> int | str | None:
    """The request id of an oversized frame, when its first bytes name one before `params`
    (JSON-RPC answers an id it cannot tell with null)."""
    head = prefix.split(b'"params"', 1)[0]
    found = _ID.search(head)
    if found is None:
        return None
    try:
        value = json_read.json_loads(found.group(1).decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


class FrameReader:
    """The client's lines from a file descriptor, read in chunks, at most `limit` bytes each.
    A longer line is read through and dropped, never held whole, and `refuse` answers it; so
    does a line that is not UTF-8. Blank lines are skipped."""

    def __init__(self, fd: int, limit: int,
                 refuse: Callable[[int | str | None, str, str], Awaitable[None]]) -> None:
        self.fd, self.limit, self.refuse = fd, limit, refuse

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        import anyio

        reader = anyio.CapacityLimiter(1)  # never queued behind the runs' threads
        line = bytearray()
        dropped: bytearray | None = None  # the first bytes of a line over the limit
        while True:
            chunk = await anyio.to_thread.run_sync(os.read, self.fd, READ_CHUNK,
                                                   limiter=reader)
            start = 0
            while True:
                end = chunk.find(b"\n", start) if chunk else -1
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if dropped is not None:
                    dropped += piece[:max(0, ID_PREFIX - len(dropped))]
                else:
                    line += piece
                    if len(line) > self.limit:
                        dropped, line = line[:ID_PREFIX], bytearray()
                if end < 0 and chunk:
                    break
                if dropped is not None:
                    await self.refuse(oversize_id(bytes(dropped)),
                                      f"frame over the limit of {self.limit} bytes", "E006")
                elif line.strip():
                    try:
                        yield line.decode("utf-8")
                    except UnicodeDecodeError:
                        await self.refuse(oversize_id(bytes(line[:ID_PREFIX])),
                                          "frame is not UTF-8 text", "E009")
                line, dropped = bytearray(), None
                if not chunk:
                    return
                start = end + 1


# Calls still running in worker threads. A call the client cancelled, or that was running when
# the client closed stdin, goes on until its run sees its scope cancelled and records what
# became of its checkpoint (in doubt, vm/host/store/lifecycle.py); the server waits for that
# (at most SETTLE_S) before it exits, so the record is written by the resume, not left to its
# lease running out.
_RUNNING: set = set()
SETTLE_S = 10.0


def _tracked(name: str, arguments: dict[str, Any] | None, options: protocol.Options,
             scope) -> dict:
    import threading

    done = threading.Event()
    _RUNNING.add(done)
    try:
        return call(name, arguments, options, scope)
    finally:
        done.set()
        _RUNNING.discard(done)


def _settle(timeout: float = SETTLE_S) -> None:
    import time

    deadline = time.monotonic() + timeout
    for done in list(_RUNNING):
        done.wait(max(0.0, deadline - time.monotonic()))


async def serve(options: protocol.Options) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes stdin."""
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage

    from vm.host.children import Scope

    tools = [types.Tool(name=name, description=text, input_schema=input_schema(action))
             for name, (action, text) in TOOLS.items()]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    runs = anyio.CapacityLimiter(MAX_RUNS)
    cheap = anyio.CapacityLimiter(CHEAP_THREADS)
    working = [0]  # runs and resumes admitted: counted before any await, so never over

    async def call_tool(ctx, params) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")
        limiter = cheap if is_cheap(params.name, params.arguments) else runs
        if limiter is runs and working[0] >= MAX_RUNS:
            envelope = busy_envelope()
        else:
            working[0] += limiter is runs
            scope = Scope()
            try:
                envelope = await anyio.to_thread.run_sync(
                    partial(_tracked, params.name, params.arguments, options, scope),
                    abandon_on_cancel=True, limiter=limiter)
            except anyio.get_cancelled_exc_class():
                scope.cancel()  # the client gave up: this run's children go with it
                raise
            finally:
                working[0] -= limiter is runs
        return types.CallToolResult(
            content=[types.TextContent(text=json_write.json_pretty(envelope))],
            structured_content=envelope, is_error=not envelope.get("ok"))

    server = Server("lobster", version=__version__, on_list_tools=list_tools,
                    on_call_tool=call_tool)
    # The wire's stdin is read by FrameReader from a private descriptor; fd 0 becomes the null
    # device, so a child never reads the client's frames (stdio_server diverts fd 1 itself).
    import fcntl

    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    replies: list = []

    async def refuse(request_id: int | str | None, message: str, code: str) -> None:
        kind = types.PARSE_ERROR if code == "E009" else types.INVALID_REQUEST  # JSON-RPC's
        error = types.ErrorData(code=kind, message=message, data={"code": code})
        try:
            await replies[0].send(SessionMessage(
                types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    frames = FrameReader(wire, MAX_FRAME_BYTES, refuse)
    try:
        async with stdio_server(stdin=frames) as (read_stream, write_stream):  # type: ignore[arg-type]
            replies.append(write_stream)
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        os.dup2(wire, 0)
        os.close(wire)


def main(argv: Sequence[str], frontend: Frontend | None = None) -> int:
    """`lobster mcp`: 0 when the client closes the connection, 1 without the extra."""
    if argv and argv[0] in ("-h", "--help", "help"):
        from vm.cli.help import subcommand_help

        sys.stdout.write(subcommand_help("mcp"))
        return 0
    try:
        _, words = parse(MCP, argv)
        if words:
            raise UsageError(f"lobster mcp takes no arguments (got {words[0]!r})")
    except UsageError as exc:
        from vm.cli.common import refuse

        return refuse(exc)
    try:
        import anyio
        import mcp.server  # noqa: F401
    except ImportError:
        sys.stderr.write(MISSING + "\n")
        return 1
    from vm.cli.common import is_terminal

    if is_terminal(sys.stdin):  # a person, not a client, started it
        sys.stderr.write("lobster mcp: waiting for an MCP client on stdin (JSON-RPC lines); an "
                         "MCP client starts this itself, `lobster help mcp` shows how to "
                         "register it; Ctrl-D or Ctrl-C ends it\n")
    try:
        anyio.run(serve, protocol.Options(mode="tool", frontend=frontend))
    finally:
        _settle()
    return 0
