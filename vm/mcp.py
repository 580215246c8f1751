"""`lobster mcp`: the run and resume requests as MCP tools over stdio (the `mcp` extra).

Each tool call is one `protocol.handle` in a worker thread, under the one `Options` of the
process, so a slow run never holds up another call; its envelope is the tool's result, as
structured content and as text. The server keeps nothing between calls but the store.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from vm import __version__, js, protocol

if TYPE_CHECKING:
    from vm.frontend import Frontend

USAGE = """\
usage: lobster mcp

Serve Lobster as an MCP server over stdin/stdout: the tools lobster_run and lobster_resume
take the fields of `lobster tool`'s run and resume requests and return its envelope;
lobster_pending lists the checkpoints that wait, as `lobster pending --format json` does;
lobster_history shows one checkpoint's record, as `lobster history ID --format json` does.
Runs start in the directory the server was started in; state lives in LOBSTER_STATE_DIR
(or LOBSTER_STORE), as for every lobster command. Needs the extra: pip install 'lobster[mcp]'.
"""

MISSING = "lobster mcp needs the mcp extra: pip install 'lobster[mcp]'"

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
        from vm.admin import PENDING_FIELDS

        return PENDING_FIELDS
    if action == "history":
        from vm.admin import HISTORY_FIELDS

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


def call(name: str, arguments: dict[str, Any] | None, options: protocol.Options,
         scope=None) -> dict:
    """One tool call -> its envelope (blocking: the server runs it in a worker thread)."""
    action = TOOLS[name][0]
    if action == "pending":
        from vm.admin import pending_request

        return pending_request(arguments or {}, options)
    if action == "history":
        from vm.admin import history_request

        return history_request(arguments or {}, options)
    return protocol.handle({**(arguments or {}), "action": action}, options, scope=scope)


# Calls still running in worker threads. A call the client cancelled, or that was running when
# the client closed stdin, goes on until its run sees its scope cancelled and records what
# became of its checkpoint (in doubt, vm/store/lifecycle.py); the server waits for that
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

    from vm.process import Scope

    tools = [types.Tool(name=name, description=text, input_schema=input_schema(action))
             for name, (action, text) in TOOLS.items()]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")
        scope = Scope()
        try:
            envelope = await anyio.to_thread.run_sync(
                partial(_tracked, params.name, params.arguments, options, scope),
                abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            scope.cancel()  # the client gave up: this run's children go with it
            raise
        return types.CallToolResult(
            content=[types.TextContent(text=js.json_pretty(envelope))],
            structured_content=envelope, is_error=not envelope.get("ok"))

    server = Server("lobster", version=__version__, on_list_tools=list_tools,
                    on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: Sequence[str], frontend: Frontend | None = None) -> int:
    """`lobster mcp`: 0 when the client closes the connection, 1 without the extra."""
    if argv and argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if argv:
        sys.stderr.write(f"lobster mcp takes no arguments (got {argv[0]!r})\n")
        return 2
    try:
        import anyio
        import mcp.server  # noqa: F401
    except ImportError:
        sys.stderr.write(MISSING + "\n")
        return 1
    try:
        anyio.run(serve, protocol.Options(mode="tool", frontend=frontend))
    finally:
        _settle()
    return 0
