"""A request that carries a credential goes to its URL's host and nowhere else: it follows no
redirect (to 127.0.0.2 here) and uses no proxy (HTTP_PROXY names a recording server). Real
HTTP servers on 127.0.0.1 and 127.0.0.2, real `lobster` processes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def _server(host: str, answer):
    """A real server on `host` that records every request and answers with `answer(path)`:
    (status, headers, body)."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _any(self):
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append({"method": self.command, "path": self.path,
                         "auth": self.headers.get("authorization"), "body": body})
            status, headers, text = answer(self.path)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        do_GET = do_POST = do_PUT = _any  # noqa: N815 - http.server's naming

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


OK = (200, {"content-type": "application/json"},
      json.dumps({"ok": True, "result": [{"done": True}]}).encode())


@pytest.fixture
def servers():
    started = []

    def start(host, answer):
        server, seen = _server(host, answer)
        started.append(server)
        return f"http://{host}:{server.server_address[1]}", seen

    yield start
    for server in started:
        server.shutdown()


def _env(cli, **extra):
    env = {k: v for k, v in cli.env.items()
           if not k.upper().endswith(("_TOKEN", "_URL", "_PROXY")) and k.upper() != "NO_PROXY"}
    env.update(extra)
    cli.env = env


COMMANDS = [
    ("apus.invoke --url {url} --tool t --action a", {}),
    ("llm.invoke --provider apus --prompt hi", {"APUS_URL": "{url}"}),
]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("command, env", COMMANDS)
def test_a_redirect_to_another_host_gets_no_credential(cli, servers, command, env, status):
    elsewhere, seen_elsewhere = servers("127.0.0.2", lambda path: OK)
    url, seen = servers("127.0.0.1", lambda path: (
        status, {"location": f"{elsewhere}/tools/invoke"}, b""))
    _env(cli, APUS_TOKEN="ambient-secret", **{k: v.format(url=url) for k, v in env.items()})
    envelope, code = cli.pipeline(command.format(url=url))
    assert code == 1 and envelope["ok"] is False, envelope
    name = command.split()[0]
    assert envelope["error"]["message"] == (
        f"{name} refused to follow a redirect ({status}) to 127.0.0.2: a request that carries "
        "a credential follows no redirect")
    assert seen_elsewhere == []  # nothing sent on, with or without the header
    assert [s["auth"] for s in seen] == ["Bearer ambient-secret"]


def test_an_explicit_token_is_not_sent_on_either(cli, servers):
    elsewhere, seen_elsewhere = servers("127.0.0.2", lambda path: OK)
    url, _ = servers("127.0.0.1", lambda path: (302, {"location": f"{elsewhere}/x"}, b""))
    _env(cli)
    envelope, _ = cli.pipeline(f"apus.invoke --url {url} --tool t --action a --token given")
    assert "refused to follow a redirect (302) to 127.0.0.2" in envelope["error"]["message"]
    assert seen_elsewhere == []


@pytest.mark.parametrize("command, env", COMMANDS)
def test_a_request_with_a_credential_uses_no_proxy(cli, servers, command, env):
    proxy, seen_by_proxy = servers("127.0.0.2", lambda path: OK)
    url, seen = servers("127.0.0.1", lambda path: OK)
    _env(cli, APUS_TOKEN="ambient-secret", HTTP_PROXY=proxy, http_proxy=proxy,
         **{k: v.format(url=url) for k, v in env.items()})
    cli.pipeline(command.format(url=url))
    assert seen_by_proxy == []
    assert [s["auth"] for s in seen] == ["Bearer ambient-secret"]


def test_without_a_credential_a_redirect_is_still_followed(cli, servers):
    """Nothing to leak: the behaviour of the original (urllib follows a 302 as a GET)."""
    elsewhere, seen_elsewhere = servers("127.0.0.2", lambda path: OK)
    url, _ = servers("127.0.0.1", lambda path: (302, {"location": f"{elsewhere}/x"}, b""))
    _env(cli)
    envelope, code = cli.pipeline(f"apus.invoke --url {url} --tool t --action a")
    assert code == 0 and envelope["output"] == [{"done": True}], envelope
    assert [s["auth"] for s in seen_elsewhere] == [None]
