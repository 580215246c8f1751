"""`lobster mcp` end to end: the SDK's own client over stdio against the real executable."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import asynccontextmanager

import pytest

from tests.conftest import LOBSTER
from vm.service import protocol
from vm.cli.mcp import MISSING, TOOLS, input_schema, request_fields

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
anyio = pytest.importorskip("anyio")

APPROVE = "exec --json --shell 'echo [1,2]' | approve --prompt 'Send?'"
ASK = "ask --prompt 'How many?' --schema '{\"type\":\"integer\",\"minimum\":1}' | map --wrap n"


@asynccontextmanager
async def server(cli, mode: str = "auto"):
    """A `lobster mcp` process in the fixture's work dir and state dir, with a client."""
    params = mcp.StdioServerParameters(command=LOBSTER, args=["mcp"], env=dict(cli.env),
                                       cwd=str(cli.work))
    async with mcp.Client(params, mode=mode, read_timeout_seconds=60) as client:
        yield client


async def call(client, tool: str, **arguments) -> dict:
    """The envelope of one tool call, checked to arrive the same as structure and as text."""
    result = await client.call_tool(tool, arguments)
    envelope = result.structured_content
    assert [block.type for block in result.content] == ["text"]
    assert json.loads(result.content[0].text) == envelope
    assert result.is_error is (not envelope["ok"])
    return envelope


def assert_ok(envelope: dict, output: list) -> None:
    assert envelope == {"protocolVersion": 1, "ok": True, "status": "ok", "output": output,
                        "requiresApproval": None, "requiresInput": None}


def assert_error(envelope: dict, kind: str, message: str, code: str) -> None:
    assert envelope["ok"] is False, envelope
    assert (envelope["error"]["type"], envelope["error"]["message"],
            envelope["error"]["code"]) == (kind, message, code)


def test_lists_the_tools_with_schemas_from_the_request_fields(cli):
    async def body():
        for mode in ("auto", "legacy"):  # the 2026 per-request era, and the initialize handshake
            async with server(cli, mode) as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert sorted(tools) == ["lobster_history", "lobster_pending", "lobster_resume",
                                         "lobster_run"]
                for name, tool in tools.items():
                    action = TOOLS[name][0]
                    assert tool.input_schema == input_schema(action)
                    assert set(tool.input_schema["properties"]) == set(request_fields(action))
                    assert all(p["description"] for p in tool.input_schema["properties"].values())
                assert tools["lobster_run"].input_schema["required"] == ["pipeline"]
                assert tools["lobster_resume"].input_schema["required"] == []
                assert tools["lobster_pending"].input_schema["required"] == []
                assert tools["lobster_history"].input_schema["required"] == ["id"]
                assert set(request_fields("run")) == set(protocol.REQUEST_FIELDS["run"])

    anyio.run(body)


class Recording(dict):
    """A request that notes every field `handle` reads."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


READS = [
    {"action": "run", "pipeline": "exec --json --shell 'echo [1]'", "argsJson": "{}", "cwd": ".",
     "timeoutMs": 5000, "maxStdoutBytes": 100000, "checkpointTtl": "1h"},
    {"action": "resume", "token": "x", "approve": True, "timeoutMs": 5000,
     "maxStdoutBytes": 100000, "checkpointTtl": 60000},
    {"action": "resume", "approvalId": "x", "responseJson": "1"},
    {"action": "resume", "token": "x", "cancel": True},
]


def test_the_read_cases_cover_every_request_field():
    for action, fields in protocol.REQUEST_FIELDS.items():
        given = {key for case in READS if case["action"] == action for key in case}
        assert given - {"action"} == set(fields), action


@pytest.mark.parametrize("request_", READS,
                         ids=["run", "resume-approve", "resume-response", "resume-cancel"])
def test_the_request_fields_are_exactly_what_handle_reads(request_, tmp_path):
    request = Recording(request_)
    options = protocol.Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path))
    protocol.handle(request, options)
    fields = protocol.REQUEST_FIELDS[request_["action"]]
    assert request.read - {"action"} <= set(fields)
    assert set(request_) - {"action"} <= request.read


def test_run_to_a_halt_then_resume_by_token_and_by_approval_id(cli):
    async def body():
        async with server(cli) as client:
            first = await call(client, "lobster_run", pipeline=APPROVE)
            assert first["status"] == "needs_approval"
            halted = first["requiresApproval"]
            assert (halted["prompt"], halted["items"]) == ("Send?", [1, 2])
            assert_ok(await call(client, "lobster_resume", token=halted["resumeToken"],
                                 approve=True), [1, 2])
            second = (await call(client, "lobster_run", pipeline=APPROVE))["requiresApproval"]
            assert_ok(await call(client, "lobster_resume", approvalId=second["approvalId"],
                                 approve=True), [1, 2])
            third = (await call(client, "lobster_run", pipeline=APPROVE))["requiresApproval"]
            assert (await call(client, "lobster_resume", token=third["resumeToken"],
                               cancel=True))["status"] == "cancelled"
            # each checkpoint is consumed once; a retry is told how and when it ended
            again = await call(client, "lobster_resume", token=halted["resumeToken"],
                               approve=True)
            assert_error(again, "runtime_error", "Pipeline resume state not found", "T436")
            assert again["error"]["checkpoint"]["outcome"] == "ok"
            record = await call(client, "lobster_history", id=halted["approvalId"])
            events = [e["event"] for e in record["checkpoint"]["events"]]
            assert record["checkpoint"]["state"] == "finished"
            assert events == ["halted", "claimed", "finished"]
            assert (await call(client, "lobster_history", id="x", extra=1))["error"]["code"] \
                == "E008"

    anyio.run(body)


def test_the_structured_content_leaves_undefined_out_as_the_text_does(cli):
    """A field `pick` sets that an item lacks, and `map --unwrap` of an absent field, are
    undefined: the structured content is the envelope as JSON data (left out, null in an
    array), the same as its text (`call` checks that), on a run, a halt and a resume."""
    picked = "exec --json echo '[{\"a\":1},{}]' | pick b,a"

    async def body():
        async with server(cli) as client:
            assert_ok(await call(client, "lobster_run", pipeline=picked), [{"a": 1}, {}])
            halted = (await call(client, "lobster_run", pipeline=f"{picked} | approve --prompt Go"
                                 " | map --unwrap b"))["requiresApproval"]
            assert halted["items"] == [{"a": 1}, {}]
            assert_ok(await call(client, "lobster_resume", token=halted["resumeToken"],
                                 approve=True), [None, None])

    anyio.run(body)


def test_an_invalid_answer_is_a_parse_error_and_keeps_the_checkpoint(cli):
    async def body():
        async with server(cli) as client:
            halted = await call(client, "lobster_run", pipeline=ASK)
            assert halted["status"] == "needs_input"
            token = halted["requiresInput"]["resumeToken"]
            assert_error(await call(client, "lobster_resume", token=token, responseJson="0"),
                         "parse_error",
                         "pipeline input response failed schema validation at /: must be >= 1",
                         "E512")
            assert_error(await call(client, "lobster_resume", token=token, responseJson="{no"),
                         "parse_error", "responseJson must be valid JSON", "E001")
            assert_error(await call(client, "lobster_resume", token=token, responseJson="3",
                                    approve=True), "parse_error",
                         "resume requires exactly one of approve, responseJson, or cancel: true",
                         "E001")
            assert_error(await call(client, "lobster_run", pipeline=" "), "parse_error",
                         "pipeline required", "E001")
            assert_ok(await call(client, "lobster_resume", token=token, responseJson="3"),
                      [{"n": 3}])

    anyio.run(body)


def test_a_call_is_bounded_by_its_own_timeout_and_output_cap(cli):
    async def body():
        async with server(cli) as client:
            assert_error(await call(client, "lobster_run", pipeline="exec --shell 'sleep 30'",
                                    timeoutMs=300),
                         "runtime_error", "lobster runtime timed out", "T420")
            big = "exec --json --shell 'printf \"[\\\"%02000d\\\"]\" 0'"
            assert (await call(client, "lobster_run", pipeline=big))["ok"] is True
            assert_error(await call(client, "lobster_run", pipeline=big, maxStdoutBytes=1024),
                         "runtime_error", "lobster stdout exceeded maxStdoutBytes", "T421")
            # the server itself is unharmed and keeps its defaults
            assert_ok(await call(client, "lobster_run", pipeline="exec --json --shell 'echo [7]'"),
                      [7])

    anyio.run(body)


def test_two_calls_run_at_the_same_time(cli):
    # The first call waits for a file that only the second call creates: served one after the
    # other, the first would time out instead.
    waits = "exec --json --shell 'while [ ! -f go ]; do sleep 0.05; done; echo [1]'"
    opens = "exec --json --shell 'touch go; echo [2]'"

    async def body():
        results: dict[str, dict] = {}
        async with server(cli) as client:
            async def one(name: str, pipeline: str) -> None:
                results[name] = await call(client, "lobster_run", pipeline=pipeline,
                                           timeoutMs=30000)

            async with anyio.create_task_group() as group:
                group.start_soon(one, "waits", waits)
                await anyio.sleep(0.2)  # an order, not an assertion: the waiter asks first
                group.start_soon(one, "opens", opens)
        assert_ok(results["waits"], [1])
        assert_ok(results["opens"], [2])

    anyio.run(body)


def test_pending_lists_what_waits_until_it_is_resumed(cli):
    async def body():
        async with server(cli) as client:
            assert await call(client, "lobster_pending") == {
                "protocolVersion": 1, "ok": True, "status": "ok", "checkpoints": []}
            halted = (await call(client, "lobster_run", pipeline=APPROVE,
                                 checkpointTtl="1h"))["requiresApproval"]
            asked = (await call(client, "lobster_run", pipeline=ASK))["requiresInput"]
            listed = (await call(client, "lobster_pending"))["checkpoints"]
            assert [(e["status"], e["kind"], e["prompt"], e["approvalId"], e["source"])
                    for e in listed] == [
                ("waiting", "approval", "Send?", halted["approvalId"], "<pipeline>"),
                ("waiting", "input", "How many?", None, "<pipeline>")]
            assert listed[0]["expiresAt"] > listed[0]["createdAt"]
            assert listed[1]["expiresAt"] is None
            assert (await call(client, "lobster_pending", olderThan="1d"))["checkpoints"] == []
            assert_error(await call(client, "lobster_pending", olderThan="soon"), "parse_error",
                         "olderThan must be a duration such as 30m, 12h or 7d, got 'soon'",
                         "E001")
            assert_ok(await call(client, "lobster_resume", approvalId=halted["approvalId"],
                                 approve=True), [1, 2])
            await call(client, "lobster_resume", token=asked["resumeToken"], cancel=True)
            assert (await call(client, "lobster_pending"))["checkpoints"] == []

    anyio.run(body)


def test_an_unknown_tool_is_a_protocol_error(cli):
    async def body():
        async with server(cli) as client:
            with pytest.raises(mcp.MCPError, match="unknown tool: lobster_nope"):
                await client.call_tool("lobster_nope", {})

    anyio.run(body)


def test_without_the_extra_it_says_which_extra_in_one_line(cli):
    script = ("import sys; sys.modules['mcp'] = None; from lobsterc.frontend import lobster; "
              "sys.exit(lobster(['mcp']))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=cli.work, env=cli.env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", MISSING + "\n")
