"""gog.gmail.search, gog.gmail.send, email.triage and openclaw.agent, run by the real
`lobster` against the fake CLIs in tests/fakebin (real executables on PATH that record their
argv in $FAKE_CLI_LOG and answer like gog and openclaw), and an LLM adapter on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import LOBSTER, ROOT

FAKEBIN = ROOT / "tests" / "fakebin"

ALICE = {"id": "m1", "threadId": "t1", "from": "Alice <alice@example.com>",
         "subject": "Quick question", "date": "2026-01-22T07:00:00Z",
         "snippet": "Hey, can you take a look?", "labels": ["INBOX", "UNREAD"]}
RECEIPT = {"id": "m2", "threadId": "t2", "from": "no-reply@service.com",
           "subject": "Your receipt", "date": "2026-01-22T06:00:00Z", "snippet": "Thanks",
           "labels": ["INBOX", "UNREAD"]}
NDA = {"id": "m3", "threadId": "t3", "from": "Bob <bob@example.com>",
       "subject": "Action required: NDA", "date": "2026-01-21T23:00:00Z",
       "snippet": "Please sign", "labels": ["INBOX"]}


@pytest.fixture
def fake(cli, tmp_path):
    """The cli fixture with tests/fakebin first on PATH and a call log."""
    log = tmp_path / "calls.jsonl"
    cli.env.update(PATH=f"{FAKEBIN}{os.pathsep}{cli.env.get('PATH', '')}", FAKE_CLI_LOG=str(log))
    for name in ("GOG_BIN", "LOBSTER_OPENCLAW_BIN", "LOBSTER_LLM_PROVIDER", "APUS_URL",
                 "CLAWD_URL", "OPENCLAW_URL", "LOBSTER_LLM_ADAPTER_URL",
                 "LOBSTER_PI_LLM_ADAPTER_URL"):
        cli.env.pop(name, None)
    cli.calls = lambda: [json.loads(line) for line in log.read_text().splitlines()] \
        if log.exists() else []
    return cli


def ok(result) -> list:
    envelope, code = result
    assert code == 0 and envelope["ok"] is True and envelope["status"] == "ok", envelope
    return envelope["output"]


def failed(result) -> tuple[str, str]:
    envelope, code = result
    assert envelope["ok"] is False, envelope
    assert code != 0
    return envelope["error"]["code"], envelope["error"]["message"]


def messages_file(tmp_path: Path, messages: list) -> str:
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))
    return str(path)


# the brief's example through `lobster tool` -------------------------------------------------
def tool(fake, request: dict) -> dict:
    proc = fake.run("tool", stdin=json.dumps(request))
    assert "Traceback" not in proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_brief_email_triage_example_through_lobster_tool(fake):
    # the brief's request as written: no input items, so an empty report (as the original)
    alone = tool(fake, {"action": "run", "pipeline": "email.triage --limit 20"})
    assert alone["ok"] is True and alone["output"] == [{
        "summary": "0 need replies, 0 need action, 0 FYI",
        "buckets": {"needsReply": [], "needsAction": [], "fyi": []},
        "emails": [], "mode": "deterministic"}]
    # and fed by gog, as the README's example
    envelope = tool(fake, {"action": "run", "pipeline":
                           "gog.gmail.search --query newer_than:1d | email.triage --limit 20"})
    assert envelope["ok"] is True, envelope
    [report] = envelope["output"]
    assert report["summary"] == "1 need replies, 1 need action, 1 FYI"
    assert report["buckets"] == {"needsReply": ["m1"], "needsAction": ["m3"], "fyi": ["m2"]}
    assert report["emails"] == [ALICE, RECEIPT, NDA]
    assert report["mode"] == "deterministic"
    assert [c["argv"] for c in fake.calls()] == [
        ["gmail", "search", "--json", "--max=20", "--", "newer_than:1d"]]


# gog.gmail.search ---------------------------------------------------------------------------
def test_search_passes_query_and_max_and_flattens_threads(fake):
    assert ok(fake.pipeline("gog.gmail.search --query 'is:unread from:bob' --max 2")) \
        == [ALICE, RECEIPT]
    assert ok(fake.pipeline("gog.gmail.search --limit 1")) == [ALICE]
    assert [c["argv"] for c in fake.calls()] == [
        ["gmail", "search", "--json", "--max=2", "--", "is:unread from:bob"],
        ["gmail", "search", "--json", "--max=1", "--", "newer_than:1d"]]


@pytest.mark.parametrize("stdout, items", [
    ('[{"nextPageToken": "p", "threads": [1, 2]}, {"x": 3}]', [1, 2, {"x": 3}]),
    ('{"id": "solo"}', [{"id": "solo"}]),
    ("[]", []),
])
def test_search_output_shapes(fake, stdout, items):
    assert ok(fake.pipeline("gog.gmail.search", env={"FAKE_GOG_STDOUT": stdout})) == items


@pytest.mark.parametrize("env, code, message", [
    ({"FAKE_GOG_EXIT": "3", "FAKE_GOG_STDERR": "token expired"}, "T410",
     "gog.gmail.search failed (3): token expired\n"),
    ({"FAKE_GOG_STDOUT": "not json"}, "T401", "gog.gmail.search expected JSON output"),
    ({"GOG_BIN": "no-such-gog"}, "T411",
     "gog not found on PATH (install: https://github.com/steipete/gogcli)"),
])
def test_search_failures(fake, env, code, message):
    assert failed(fake.pipeline("gog.gmail.search", env=env)) == (code, message)


def test_gog_bin_names_the_program(fake, tmp_path):
    other = tmp_path / "my-gog"
    other.write_text(f"#!/bin/sh\nexec {FAKEBIN / 'gog'} \"$@\"\n")
    other.chmod(0o755)
    assert ok(fake.pipeline("gog.gmail.search --max 1", env={"GOG_BIN": str(other)})) == [ALICE]


# gog.gmail.send -----------------------------------------------------------------------------
def drafts(fake, *pairs) -> str:
    """A stage that emits one draft per (to, subject), from a file in the work dir."""
    items = [{"to": to, "subject": subject, "body": f"Hello {to}"} for to, subject in pairs]
    fake.work.joinpath("drafts.json").write_text(json.dumps(items))
    return "exec --json cat drafts.json"


def test_send_one_message_per_draft(fake):
    out = ok(fake.pipeline(drafts(fake, ("a@x.io", "Hi"), ("b@x.io", "")) + " | gog.gmail.send"))
    assert out == [{"messageId": "sent-1", "threadId": "thread-1", "to": "a@x.io"},
                   {"messageId": "sent-2", "threadId": "thread-2", "to": "b@x.io"}]
    assert [c["argv"] for c in fake.calls()] == [
        ["gmail", "send", "--to=a@x.io", "--subject=Hi", "--body=Hello a@x.io", "--json"],
        ["gmail", "send", "--to=b@x.io", "--body=Hello b@x.io", "--json"]]


@pytest.mark.parametrize("flag", ["--dry-run", "--dryRun"])
def test_send_dry_run_sends_nothing(fake, flag):
    out = ok(fake.pipeline(drafts(fake, ("a@x.io", " Hi ")) + f" | gog.gmail.send {flag}"))
    assert out == [{"ok": True, "dryRun": True, "to": "a@x.io", "subject": "Hi",
                    "body": "Hello a@x.io"}]
    assert fake.calls() == []


def test_send_reads_a_field_pick_set_undefined_as_absent(fake):
    # `pick` sets a field the draft lacks as undefined: `item.subject ?? ""` is ""
    fake.work.joinpath("drafts.json").write_text(json.dumps([{"to": "a@x.io"}]))
    out = ok(fake.pipeline("exec --json cat drafts.json | pick to,subject,body | gog.gmail.send"
                           " --dry-run"))
    assert out == [{"ok": True, "dryRun": True, "to": "a@x.io", "subject": "", "body": ""}]


@pytest.mark.parametrize("stdout, item", [("", {"ok": True}),
                                          ("sent!", {"ok": True, "raw": "sent!"})])
def test_send_answers_that_are_not_json(fake, stdout, item):
    out = ok(fake.pipeline(drafts(fake, ("a@x.io", "Hi")) + " | gog.gmail.send",
                           env={"FAKE_GOG_STDOUT": stdout}))
    assert out == [item]


@pytest.mark.parametrize("items, message", [
    ("[\"text\"]", "gog.gmail.send expects draft objects"),
    ("[{\"subject\": \"no recipient\"}]", "gog.gmail.send draft missing to"),
])
def test_send_refuses_what_is_not_a_draft(fake, items, message):
    fake.work.joinpath("items.json").write_text(items)
    assert failed(fake.pipeline("exec --json cat items.json | gog.gmail.send"))[1] == message
    assert fake.calls() == []


def test_send_failure_and_a_workflow_never_retries_a_send(fake):
    fake.work.joinpath("send.lobster").write_text(
        "steps:\n"
        "  - id: send\n"
        f"    pipeline: {json.dumps(drafts(fake, ('a@x.io', 'Hi')) + ' | gog.gmail.send')}\n"
        "    retry: {max: 3, delay_ms: 1}\n")
    code, message = failed(fake.tool("run", "--mode", "tool", "send.lobster",
                                     env={"FAKE_GOG_EXIT": "1", "FAKE_GOG_STDERR": "quota"}))
    assert message.endswith("gog.gmail.send failed (1): quota\n")
    assert len(fake.calls()) == 1


def test_triage_drafts_approve_then_send(fake):
    # the README's chain: nothing is sent until the approval is given
    pipeline = ("gog.gmail.search | pick from,subject | map 'to={{from}}' 'body=Thanks'"
                " | head --n 1 | approve --prompt 'Send replies?' | gog.gmail.send")
    envelope, code = fake.pipeline(pipeline)
    assert envelope["status"] == "needs_approval"
    assert [c["argv"][:2] for c in fake.calls()] == [["gmail", "search"]]
    token = envelope["requiresApproval"]["resumeToken"]
    out = ok(fake.tool("resume", "--token", token, "--approve", "yes"))
    assert out == [{"messageId": "sent-2", "threadId": "thread-2",
                    "to": "Alice <alice@example.com>"}]


# email.triage (rules) -----------------------------------------------------------------------
def test_triage_rules_and_normalisation(fake, tmp_path):
    messages = [
        {"messageId": "x1", "sender": "Carol <carol@example.com>", "subject": "  URGENT: call me ",
         "internalDate": 1700000000000, "bodyPreview": "asap", "labels": ["unread", 5]},
        {"id": "x2", "thread_id": "tx", "from": "donotreply@bank.com", "labels": ["UNREAD"]},
        {"id": "x3", "from": "dave@example.com", "labels": ["UNREAD"]},
        "not an object",
    ]
    env = {"FAKE_GOG_MESSAGES": messages_file(tmp_path, messages)}
    [report] = ok(fake.pipeline("gog.gmail.search | email.triage", env=env))
    assert report["buckets"] == {"needsReply": ["x3"], "needsAction": ["x1"], "fyi": ["x2", ""]}
    assert report["summary"] == "1 need replies, 1 need action, 2 FYI"
    assert report["emails"][0] == {"id": "x1", "threadId": "x1",
                                   "from": "Carol <carol@example.com>", "subject": "URGENT: call me", "date": "1700000000000",
                                   "snippet": "asap", "labels": ["unread", "5"]}
    assert report["emails"][1]["threadId"] == "tx"
    assert report["emails"][3] == {"id": "", "threadId": "", "from": "", "subject": "", "date": "",
                                   "snippet": "", "labels": []}


def test_triage_reads_fields_pick_set_undefined_as_absent(fake, tmp_path):
    # `pick` sets every listed field: one a message lacks is undefined, and `raw.from ??
    # raw.sender` goes on to the next spelling, as it does for an absent field
    messages = [{"id": "x1", "sender": "Carol <carol@example.com>", "labels": ["UNREAD"]}]
    env = {"FAKE_GOG_MESSAGES": messages_file(tmp_path, messages)}
    picked = "pick id,messageId,threadId,thread_id,from,sender,subject,date,snippet,labels"
    [report] = ok(fake.pipeline(f"gog.gmail.search | {picked} | email.triage", env=env))
    assert report["emails"] == [{"id": "x1", "threadId": "x1", "from": "Carol <carol@example.com>",
                                 "subject": "", "date": "", "snippet": "", "labels": ["UNREAD"]}]


@pytest.mark.parametrize("limit, count", [("2", 2), ("0", 1), ("abc", 3)])
def test_triage_limit(fake, limit, count):
    [report] = ok(fake.pipeline(f"gog.gmail.search | email.triage --limit {limit}"))
    assert len(report["emails"]) == count


def test_triage_without_a_provider_ignores_llm_and_emits_no_drafts(fake):
    [report] = ok(fake.pipeline("gog.gmail.search | email.triage --llm --model m"))
    assert report["mode"] == "deterministic"
    assert ok(fake.pipeline("gog.gmail.search | email.triage --llm --emit drafts")) == []


# email.triage (LLM) -------------------------------------------------------------------------
class Adapter(BaseHTTPRequestHandler):
    calls: list = []
    reply: dict = {}

    def do_POST(self):  # noqa: N802 - http.server's naming
        type(self).calls.append({"path": self.path, "body": json.loads(
            self.rfile.read(int(self.headers["content-length"])))})
        text = json.dumps(type(self).reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args):
        pass


DECISIONS = [
    {"id": "m1", "category": "needs_reply", "rationale": "a question",
     "reply": {"body": "Sure, what is the deadline?"}},
    {"id": "m2", "category": "needs_reply", "reply": {"body": "Thanks"}},  # no-reply: no draft
    {"id": "m3", "category": "needs_action", "rationale": "NDA"},
    {"id": "", "category": "fyi"},
]


@pytest.fixture
def gateway():
    Adapter.calls = []
    Adapter.reply = {"ok": True, "result": {"ok": True, "result": {
        "runId": "triage-1", "output": {"data": {"decisions": DECISIONS}}}}}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Adapter)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_triage_with_llm_reports_decisions_and_drafts(fake, gateway, tmp_path):
    env = {"CLAWD_URL": gateway, "LOBSTER_CACHE_DIR": str(tmp_path / "cache")}
    [report] = ok(fake.pipeline("gog.gmail.search | email.triage --llm --model claude-test",
                                env=env))
    assert report["mode"] == "llm"
    assert report["summary"] == "2 need replies, 1 need action, 0 FYI"
    assert report["buckets"] == {"needsReply": ["m1", "m2"], "needsAction": ["m3"], "fyi": []}
    assert report["decisions"] == [
        {"id": "m1", "category": "needs_reply", "rationale": "a question",
         "reply": {"body": "Sure, what is the deadline?"}},
        {"id": "m2", "category": "needs_reply", "reply": {"body": "Thanks"}},
        {"id": "m3", "category": "needs_action", "rationale": "NDA"}]
    assert report["drafts"] == [{"emailId": "m1", "to": "alice@example.com",
                                 "subject": "Re: Quick question",
                                 "body": "Sure, what is the deadline?"}]
    [call] = Adapter.calls
    assert call["path"] == "/tools/invoke"
    body = call["body"]
    assert (body["tool"], body["action"]) == ("llm-task", "invoke")
    args = body["args"]
    assert args["model"] == "claude-test"
    assert args["schemaVersion"] == "email_triage.v1"
    assert args["outputSchema"]["required"] == ["decisions"]
    assert [a["id"] for a in args["artifacts"]] == ["m1", "m2", "m3"]
    assert '"Quick question"' in args["prompt"]
    # the same triage again comes from llm.invoke's cache: no second call
    [again] = ok(fake.pipeline("gog.gmail.search | email.triage --llm --model claude-test",
                               env=env))
    assert again["drafts"] == report["drafts"] and len(Adapter.calls) == 1


def test_triage_drafts_feed_gog_send(fake, gateway, tmp_path):
    env = {"CLAWD_URL": gateway, "LOBSTER_CACHE_DIR": str(tmp_path / "cache")}
    out = ok(fake.pipeline("gog.gmail.search | email.triage --llm --emit drafts | gog.gmail.send",
                           env=env))
    assert out == [{"messageId": "sent-2", "threadId": "thread-2", "to": "alice@example.com"}]
    assert fake.calls()[-1]["argv"] == ["gmail", "send", "--to=alice@example.com",
                                        "--subject=Re: Quick question",
                                        "--body=Sure, what is the deadline?", "--json"]


def test_triage_llm_errors_are_llm_invokes(fake, gateway, tmp_path):
    Adapter.reply = {"ok": True, "result": {"ok": True, "result": {
        "output": {"data": {"decisions": [{"id": "m1", "category": "maybe"}]}}}}}
    env = {"CLAWD_URL": gateway, "LOBSTER_CACHE_DIR": str(tmp_path / "cache")}
    code, message = failed(fake.pipeline("gog.gmail.search | email.triage --llm", env=env))
    assert message.startswith("llm.invoke output failed schema validation: ")


# openclaw.agent -----------------------------------------------------------------------------
def test_agent_argv_and_answer(fake):
    out = ok(fake.pipeline("gog.gmail.search --max 1 | pick id | openclaw.agent --agent ops "
                           "--prompt 'Review this' --model openai/gpt-5.4 --session-key inc-42 "
                           "--thinking high --timeout 45 --local"))
    assert out == [{"runId": "run-1", "status": "ok",
                    "result": {"payloads": [{"text": "done: Review this"}]},
                    "agent": "ops", "sessionKey": "inc-42"}]
    assert fake.calls()[-1]["argv"] == [
        "agent", "--json", '--message=Review this\n\nPipeline input (JSONL):\n{"id":"m1"}',
        "--agent=ops", "--model=openai/gpt-5.4", "--session-key=inc-42",
        "--thinking=high", "--timeout=45", "--local"]


def test_agent_positional_message_and_session_id(fake):
    ok(fake.pipeline("openclaw.agent --sessionId s-1 summarize the day"))
    assert fake.calls()[-1]["argv"] == ["agent", "--json", "--message=summarize the day",
                                        "--session-id=s-1"]


@pytest.mark.parametrize("pipeline, code, message", [
    ("openclaw.agent --agent ops", "E203",
     "openclaw.agent requires --prompt, --message, or positional text"),
    ("openclaw.agent --prompt hi", "E203",
     "openclaw.agent requires --agent, --session-key, or --session-id"),
    ("openclaw.agent --agent a --prompt hi --timeout 1.5", "T401",
     "openclaw.agent --timeout must be a non-negative integer in seconds"),
    ("openclaw.agent --agent a --prompt hi --timeout -1", "T401",
     "openclaw.agent --timeout must be a non-negative integer in seconds"),
])
def test_agent_refusals(fake, pipeline, code, message):
    assert failed(fake.pipeline(pipeline)) == (code, message)
    assert fake.calls() == []


@pytest.mark.parametrize("env, code, message", [
    ({"FAKE_OPENCLAW_EXIT": "4", "FAKE_OPENCLAW_STDERR": "no such agent\n"}, "T410",
     "openclaw.agent failed: no such agent"),
    ({"FAKE_OPENCLAW_EXIT": "4"}, "T410", "openclaw.agent failed: exited with code 4"),
    ({"FAKE_OPENCLAW_STDOUT": "[1]"}, "T401",
     "openclaw.agent expected JSON output from `openclaw agent --json`"),
    ({"LOBSTER_OPENCLAW_BIN": "no-such-openclaw"}, "T411",
     "openclaw.agent could not find the OpenClaw CLI"),
])
def test_agent_failures(fake, env, code, message):
    assert failed(fake.pipeline("openclaw.agent --agent a --prompt hi", env=env)) == (code, message)


def test_commands_list_describes_the_new_commands(fake):
    listed = {c["name"]: c for c in ok(fake.pipeline("commands.list"))}
    for name in ("email.triage", "gog.gmail.search", "gog.gmail.send", "openclaw.agent",
                 "workflows.list", "workflows.run"):
        assert listed[name]["argsSchema"]["type"] == "object", name
    assert set(listed["email.triage"]["argsSchema"]["properties"]) == {
        "limit", "llm", "model", "url", "token", "temperature", "max-output-tokens", "emit",
        "state-key"}
    assert listed["email.triage"]["argsSchema"]["properties"]["limit"]["type"] == "number"
    assert set(listed["openclaw.agent"]["argsSchema"]["properties"]) == {
        "agent", "prompt", "message", "model", "sessionKey", "session-key", "sessionId",
        "session-id", "thinking", "timeout", "local", "_"}
    assert listed["workflows.run"]["argsSchema"]["required"] == ["name"]
    assert listed["gog.gmail.send"]["argsSchema"]["properties"]["dryRun"]["type"] == "boolean"


def test_no_traceback_when_the_fake_is_missing(fake):
    proc = fake.run("run", "gog.gmail.search", env={"PATH": "/nonexistent"})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "gog not found on PATH" in proc.stderr
