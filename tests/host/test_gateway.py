"""apus.invoke against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vm.service.protocol import Options, handle


class Gateway(BaseHTTPRequestHandler):
    calls: list = []
    reply: tuple[int, str] = (200, "{}")

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).calls.append({"path": self.path, "body": body,
                                 "auth": self.headers.get("authorization")})
        status, text = type(self).reply
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(text.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway():
    Gateway.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/base/path", Gateway
    server.shutdown()


def run(pipeline: str, tmp_path, **env) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_TOKEN", "_URL"))}
    options = Options(env={**base, **env}, cwd=str(tmp_path), state_dir=str(tmp_path / "s"))
    return handle({"action": "run", "pipeline": pipeline}, options)


def test_result_items_and_request_shape(gateway, tmp_path):
    url, server = gateway
    server.reply = (200, json.dumps({"ok": True, "result": [{"sent": 1}, {"sent": 2}]}))
    env = run(f"apus.invoke --url {url} --tool message --action send --args-json '{{\"to\":\"x\"}}' "
              "--session-key s1", tmp_path, APUS_TOKEN="local-secret")
    assert env["output"] == [{"sent": 1}, {"sent": 2}]
    call = server.calls[0]
    assert call["path"] == "/tools/invoke"  # an absolute path: the URL's own path is dropped
    assert call["body"] == {"tool": "message", "action": "send", "args": {"to": "x"},
                            "sessionKey": "s1"}
    assert call["auth"] == "Bearer local-secret"


def test_each_makes_one_call_per_item(gateway, tmp_path):
    url, server = gateway
    server.reply = (200, json.dumps({"ok": True, "result": "done"}))
    env = run(f"exec --json --shell 'echo [1,2]' | clawd.invoke --url {url} --tool t --action a "
              "--each --item-key message --args-json '{\"p\":1}'", tmp_path)
    assert env["output"] == ["done", "done"]
    assert [c["body"]["args"] for c in server.calls] == [{"p": 1, "message": 1},
                                                         {"p": 1, "message": 2}]


@pytest.mark.parametrize("reply, message", [
    ((500, "boom"), "apus.invoke failed (500): boom"),
    ((200, "not json"), "apus.invoke expected JSON response"),
    ((200, json.dumps({"ok": False, "error": {"message": "nope"}})), "apus.invoke tool error: nope"),
])
def test_gateway_failures(gateway, tmp_path, reply, message):
    url, server = gateway
    server.reply = reply
    env = run(f"apus.invoke --url {url} --tool t --action a", tmp_path)
    assert env["error"]["message"] == message


@pytest.mark.parametrize("pipeline, env, message", [
    ("apus.invoke --tool t --action a", {}, "apus.invoke requires --url or APUS_URL"),
    ("openclaw.invoke --tool t --action a", {}, "openclaw.invoke requires --url or OPENCLAW_URL"),
    ("clawd.invoke --tool t --action a", {}, "clawd.invoke requires --url or OPENCLAW_URL"),
    ("apus.invoke --url http://127.0.0.1:9 --tool t", {}, "apus.invoke requires --tool and --action"),
    ("apus.invoke --url ftp://127.0.0.1 --tool t --action a", {}, "apus.invoke requires an http(s) --url"),
    # a URL the original's parser refuses (no scheme, no host, a bad port, no base path)
    ("apus.invoke --url notaurl --tool t --action a", {}, "Invalid URL"),
    ("apus.invoke --url http:// --tool t --action a", {}, "Invalid URL"),
    ("apus.invoke --url http://h:99999 --tool t --action a", {}, "Invalid URL"),
    ("apus.invoke --url foo:bar --tool t --action a", {}, "Invalid URL"),
    ("openclaw.invoke --url http://gateway.invalid --tool t --action a", {"CLAWD_TOKEN": "s"},
     "openclaw.invoke refuses to send OPENCLAW_TOKEN/CLAWD_TOKEN to non-local --url; pass --token explicitly "
     "for remote endpoints"),
    ("apus.invoke --url http://127.0.0.1:9 --tool t --action a --args-json '{'", {},
     "apus.invoke --args-json must be valid JSON"),
    ("apus.invoke --url http://127.0.0.1:9 --tool t --action a --each --args-json '[1]'", {},
     "apus.invoke --each requires --args-json to be an object"),
])
def test_refusals_before_any_request(tmp_path, pipeline, env, message):
    assert run(pipeline, tmp_path, **env)["error"]["message"] == message


def test_a_dispatched_call_is_never_retried(gateway, tmp_path):
    url, server = gateway
    server.reply = (500, "flaky")
    wf = tmp_path / "w.lobster"
    wf.write_text(f"steps:\n  - id: send\n    pipeline: apus.invoke --url {url} --tool t --action a\n"
                  "    retry: {max: 3, delay_ms: 1}\n")
    env = handle({"action": "run", "pipeline": str(wf)},
                 Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s")))
    assert env["error"]["message"] == "apus.invoke failed (500): flaky"
    assert len(server.calls) == 1
