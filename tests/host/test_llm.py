"""llm.invoke / llm_task.invoke against a real HTTP adapter on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vm.service.protocol import Options, handle


def answer(data=None, text=None, **extra) -> tuple[int, str]:
    output = {k: v for k, v in (("data", data), ("text", text)) if v is not None}
    return 200, json.dumps({"ok": True, "result": {"output": output, **extra}})


class Adapter(BaseHTTPRequestHandler):
    calls: list = []
    replies: list = []  # one (status, text) per call; the last one repeats
    delay = 0.0  # seconds before answering

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        cls = type(self)
        cls.calls.append({"path": self.path, "body": body,
                          "auth": self.headers.get("authorization")})
        status, text = cls.replies[min(len(cls.calls), len(cls.replies)) - 1]
        time.sleep(cls.delay)
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(text.encode())
        except OSError:
            pass  # the client stopped waiting (deadline tests)

    def log_message(self, *args):
        pass


@pytest.fixture
def adapter():
    Adapter.calls = []
    Adapter.delay = 0.0
    Adapter.replies = [answer(text="hello", model="m-1", runId="r1",
                              usage={"inputTokens": 3, "outputTokens": 1})]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Adapter)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", Adapter
    server.shutdown()
    server.server_close()


AMBIENT = ("_TOKEN", "_URL", "LOBSTER_LLM_PROVIDER", "LOBSTER_RUN_STATE_KEY", "LOBSTER_CACHE_DIR",
           "LOBSTER_LLM_MODEL", "LLM_TASK_MODEL", "_SCHEMA_VERSION", "_VALIDATION_RETRIES",
           "_FORCE_REFRESH")


def run(pipeline: str, tmp_path, **env) -> dict:
    base = {k: v for k, v in os.environ.items() if not any(a in k for a in AMBIENT)}
    options = Options(env={**base, **env}, cwd=str(tmp_path), state_dir=str(tmp_path / "s"))
    return handle({"action": "run", "pipeline": pipeline}, options)


def output(envelope: dict) -> list:
    assert envelope["ok"], envelope
    return envelope["output"]


def error(envelope: dict) -> str:
    assert not envelope["ok"], envelope
    return envelope["error"]["message"]


def sha(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


# provider resolution ------------------------------------------------------------------------
@pytest.mark.parametrize("command, env, provider, source", [
    ("llm.invoke --provider http", {"LOBSTER_LLM_PROVIDER": "pi", "APUS_URL": "U"}, "http", "http"),
    # the gateway provider is `openclaw`, as the original names it (its cache keys and
    # sources); `apus` when chosen by that name or through APUS_URL (SPEC 9.8)
    ("llm.invoke", {"LOBSTER_LLM_PROVIDER": "OpenClaw", "LOBSTER_LLM_ADAPTER_URL": "U"},
     "openclaw", "openclaw"),
    ("llm_task.invoke", {"LOBSTER_PI_LLM_ADAPTER_URL": "U"}, "openclaw", "clawd"),
    ("llm_task.invoke", {"LOBSTER_PI_LLM_ADAPTER_URL": "U"}, "apus", "apus"),
    ("llm.invoke", {"LOBSTER_PI_LLM_ADAPTER_URL": "U", "APUS_URL": "U"}, "pi", "pi"),
    ("llm.invoke", {"OPENCLAW_URL": "U", "LOBSTER_LLM_ADAPTER_URL": "U"}, "openclaw", "openclaw"),
    ("llm.invoke", {"CLAWD_URL": "U"}, "openclaw", "openclaw"),
    ("llm.invoke", {"APUS_URL": "U"}, "apus", "apus"),
    ("llm.invoke", {"LOBSTER_LLM_ADAPTER_URL": "U"}, "http", "http"),
])
def test_provider_resolution_order(adapter, tmp_path, command, env, provider, source):
    url, server = adapter
    env = {k: url if v == "U" else v for k, v in env.items()}
    if provider == "apus":
        env.setdefault("APUS_URL", url)
    if provider == "openclaw" and "CLAWD_URL" not in env:
        env.setdefault("OPENCLAW_URL", url)
    if provider == "pi":
        env.setdefault("LOBSTER_PI_LLM_ADAPTER_URL", url)
    if provider == "http":
        env.setdefault("LOBSTER_LLM_ADAPTER_URL", url)
    item = output(run(f"{command} --disable-cache hi", tmp_path, **env))[0]
    assert item["source"] == source
    assert server.calls[0]["path"] == ("/tools/invoke" if provider in ("apus", "openclaw")
                                       else "/invoke")


@pytest.mark.parametrize("pipeline, env, message", [
    ("llm.invoke hi", {}, "llm.invoke could not resolve a provider. Set --provider or "
                          "LOBSTER_LLM_PROVIDER"),
    ("llm.invoke --provider gpt hi", {}, "Unsupported llm provider: gpt"),
    ("llm_task.invoke hi", {}, "llm_task.invoke requires OPENCLAW_URL (or CLAWD_URL) "
                               "for provider=openclaw"),
    ("llm.invoke --provider apus hi", {}, "llm.invoke requires APUS_URL (or CLAWD_URL, "
                                          "OPENCLAW_URL) for provider=apus"),
    ("llm.invoke --provider pi hi", {}, "llm.invoke requires LOBSTER_PI_LLM_ADAPTER_URL for "
                                        "provider=pi"),
    ("llm.invoke --provider http hi", {}, "llm.invoke requires LOBSTER_LLM_ADAPTER_URL for "
                                          "provider=http"),
    ("llm.invoke", {"LOBSTER_LLM_ADAPTER_URL": "http://127.0.0.1:9"},
     "llm.invoke requires --prompt or positional text"),
    ("llm.invoke hi", {"LOBSTER_LLM_ADAPTER_URL": "ftp://127.0.0.1"},
     "llm.invoke requires an http(s) URL in LOBSTER_LLM_ADAPTER_URL"),
    ("llm.invoke --artifacts-json '{}' hi", {"LOBSTER_LLM_ADAPTER_URL": "http://127.0.0.1:9"},
     "llm.invoke --artifacts-json must be a JSON array"),
    ("llm.invoke --metadata-json '[1]' hi", {"LOBSTER_LLM_ADAPTER_URL": "http://127.0.0.1:9"},
     "llm.invoke --metadata-json must be a JSON object"),
    ("llm.invoke --output-schema '{' hi", {"LOBSTER_LLM_ADAPTER_URL": "http://127.0.0.1:9"},
     "llm.invoke --output-schema must be a JSON object"),
    ("llm.invoke --output-schema '{\"type\":7}' hi",
     {"LOBSTER_LLM_ADAPTER_URL": "http://127.0.0.1:9"},
     "llm.invoke --output-schema is not a valid JSON schema: 7 is not valid under any of the "
     "given schemas"),
    ("llm.invoke --temperature warm hi", {"LOBSTER_LLM_ADAPTER_URL": "http://127.0.0.1:9"},
     "llm.invoke --temperature must be a number"),
    # the credential rule: ambient gateway tokens only go to a local gateway
    ("llm_task.invoke hi", {"APUS_URL": "http://gateway.invalid", "APUS_TOKEN": "s"},
     "llm_task.invoke refuses to send APUS_TOKEN to non-local APUS_URL; pass --token "
     "explicitly for remote endpoints"),
    ("llm.invoke hi", {"OPENCLAW_URL": "http://10.0.0.1:1", "OPENCLAW_TOKEN": "s"},
     "llm.invoke refuses to send OPENCLAW_TOKEN to non-local OPENCLAW_URL; pass --token "
     "explicitly for remote endpoints"),
])
def test_refusals_before_any_request(tmp_path, pipeline, env, message):
    assert error(run(pipeline, tmp_path, **env)) == message


# transports ---------------------------------------------------------------------------------
def test_apus_transport_and_output_item(adapter, tmp_path):
    url, server = adapter
    (tmp_path / "in.json").write_text(json.dumps(["note", 7, {"b": 1, "a": [2]}, None]))
    items = output(run(
        "exec --json cat in.json | "
        "llm_task.invoke --prompt 'Sum up' --model m-0 --metadata-json '{\"k\":1}' "
        "--artifacts-json '[true]' --temperature 0.2 --max-output-tokens 50",
        tmp_path, APUS_URL=url + "/some/base", APUS_TOKEN="local-secret"))
    call = server.calls[0]
    assert call["path"] == "/tools/invoke"
    assert call["auth"] == "Bearer local-secret"
    assert call["body"]["tool"] == "llm-task" and call["body"]["action"] == "invoke"
    payload = call["body"]["args"]
    artifacts = [{"kind": "text", "text": "note"}, {"kind": "text", "text": "7"},
                 {"b": 1, "a": [2]}, {"kind": "json", "data": None},
                 {"kind": "text", "text": "true"}]
    hashes = [sha(a) for a in artifacts]
    assert payload == {"prompt": "Sum up", "model": "m-0", "artifacts": artifacts,
                       "artifactHashes": hashes, "metadata": {"k": 1}, "schemaVersion": "v1",
                       "maxOutputTokens": 50, "temperature": 0.2}
    assert list(payload) == ["prompt", "model", "artifacts", "artifactHashes", "metadata",
                             "schemaVersion", "maxOutputTokens", "temperature"]
    [item] = items
    key = sha({"cacheKeyVersion": 2, "provider": "apus", "prompt": "Sum up", "model": "m-0",
               "schemaVersion": "v1", "artifactHashes": hashes, "outputSchema": None,
               "temperature": 0.2, "maxOutputTokens": 50})
    assert list(item) == ["kind", "runId", "prompt", "model", "schemaVersion", "status",
                          "cacheKey", "artifactHashes", "output", "usage", "metadata",
                          "warnings", "diagnostics", "createdAt", "source", "cached",
                          "attemptCount"]
    created = item.pop("createdAt")
    assert len(created) == 24 and created.endswith("Z") and created[10] == "T"
    assert item == {"kind": "llm_task.invoke", "runId": "r1", "prompt": None,
                    "model": "m-1", "schemaVersion": "v1", "status": "completed",
                    "cacheKey": key, "artifactHashes": hashes,
                    "output": {"format": "text", "text": "hello", "data": None},
                    "usage": {"inputTokens": 3, "outputTokens": 1}, "metadata": None,
                    "warnings": None, "diagnostics": None, "source": "apus", "cached": False,
                    "attemptCount": 1}


def test_apus_result_may_be_a_nested_envelope(adapter, tmp_path):
    url, server = adapter
    server.replies = [(200, json.dumps({"ok": True, "result": {
        "ok": True, "result": {"output": {"data": {"x": 1}}, "status": "done"}}}))]
    [item] = output(run("llm.invoke --provider openclaw hi", tmp_path, CLAWD_URL=url))
    assert item["output"] == {"format": "json", "text": None, "data": {"x": 1}}
    assert item["status"] == "done"
    assert item["model"] is None


def test_explicit_token_goes_to_any_gateway(adapter, tmp_path):
    url, server = adapter
    output(run("llm_task.invoke --token explicit hi", tmp_path, APUS_URL=url,
               APUS_TOKEN="ambient"))
    assert server.calls[0]["auth"] == "Bearer explicit"


@pytest.mark.parametrize("provider, variable, token_var", [
    ("pi", "LOBSTER_PI_LLM_ADAPTER_URL", "LOBSTER_PI_LLM_ADAPTER_TOKEN"),
    ("http", "LOBSTER_LLM_ADAPTER_URL", "LOBSTER_LLM_ADAPTER_TOKEN"),
])
def test_adapter_transports(adapter, tmp_path, provider, variable, token_var):
    url, server = adapter
    server.replies = [(200, json.dumps({"output": {"text": "raw result, no envelope"}}))]
    [item] = output(run(f"llm.invoke --provider {provider} --schema-version s2 'two words'",
                        tmp_path, **{variable: url + "/", token_var: "t0"}))
    call = server.calls[0]
    assert call["path"] == "/invoke" and call["auth"] == "Bearer t0"
    assert call["body"] == {"prompt": "two words", "artifacts": [], "artifactHashes": [],
                            "schemaVersion": "s2"}
    assert item["output"]["text"] == "raw result, no envelope"
    assert item["source"] == provider and item["schemaVersion"] == "s2"
    # a URL with its own path keeps it; without a token there is no authorization header
    output(run(f"llm.invoke --provider {provider} --refresh hi", tmp_path,
               **{variable: url + "/v1/llm?x=1"}))
    assert server.calls[1]["path"] == "/v1/llm?x=1" and server.calls[1]["auth"] is None


def test_env_fallbacks(adapter, tmp_path):
    url, server = adapter
    output(run("llm.invoke hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url, LLM_TASK_MODEL="tm",
               LLM_TASK_SCHEMA_VERSION="sv"))
    assert server.calls[0]["body"]["model"] == "tm"
    assert server.calls[0]["body"]["schemaVersion"] == "sv"


@pytest.mark.parametrize("reply, message", [
    ((500, "boom"), "llm.invoke request failed: 500 Internal Server Error: boom"),
    ((200, "not json"), "llm.invoke request failed: Response was not JSON"),
    ((200, json.dumps({"ok": False, "error": {"message": "quota"}})),
     "llm.invoke remote error: quota"),
    ((200, json.dumps({"ok": False})), "llm.invoke remote error: llm adapter returned an error"),
])
def test_adapter_failures(adapter, tmp_path, reply, message):
    url, server = adapter
    server.replies = [reply]
    assert error(run("llm.invoke hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url)) == message


@pytest.mark.parametrize("body, reason", [
    (json.dumps({"ok": True, "result": {"text": "no output"}}),
     "/result must have required property 'output'"),
    (json.dumps({"ok": "yes"}), "/ok must be boolean"),
    ("", "/result must be object"),
])
def test_an_invalid_envelope_is_named_in_the_detail(adapter, tmp_path, body, reason):
    # the message is the original's, bare; what was wrong with the envelope is our detail
    url, server = adapter
    server.replies = [(200, body)]
    envelope = run("llm.invoke hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url)
    assert error(envelope) == "llm.invoke received invalid response envelope"
    assert envelope["error"]["detail"] == {"reason": reason}


def test_gateway_tool_error(adapter, tmp_path):
    url, server = adapter
    server.replies = [(200, json.dumps({"ok": False, "error": {"message": "no llm-task"}}))]
    assert error(run("llm_task.invoke hi", tmp_path, APUS_URL=url)) == \
        "llm_task.invoke tool error: no llm-task"


def test_unreachable_adapter(tmp_path):
    message = error(run("llm.invoke hi", tmp_path, LOBSTER_LLM_ADAPTER_URL="http://127.0.0.1:9"))
    assert message.startswith("llm.invoke request failed: ")


# output schema and validation retries -------------------------------------------------------
SCHEMA = "--output-schema '{\"type\":\"object\",\"required\":[\"score\"]}'"


@pytest.mark.parametrize("flag, calls", [("", 2), ("--max-validation-retries 0", 1),
                                         ("--max-validation-retries 3", 4)])
def test_validation_retries_count_the_calls(adapter, tmp_path, flag, calls):
    url, server = adapter
    server.replies = [answer(data={"nope": 1})]
    message = error(run(f"llm.invoke {SCHEMA} {flag} hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url))
    assert message == ("llm.invoke output failed schema validation: / must have required "
                       "property 'score'")
    assert len(server.calls) == calls
    assert "retryContext" not in server.calls[0]["body"]
    for n, call in enumerate(server.calls[1:], start=2):
        assert call["body"]["retryContext"] == {
            "attempt": n, "validationErrors": ["/ must have required property 'score'"]}


def test_a_retry_that_validates_is_the_answer(adapter, tmp_path):
    url, server = adapter
    server.replies = [answer(data={"nope": 1}), answer(data={"score": 3})]
    [item] = output(run(f"llm.invoke {SCHEMA} hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url))
    assert item["attemptCount"] == 2 and item["output"]["data"] == {"score": 3}
    assert server.calls[0]["body"]["outputSchema"] == {"type": "object", "required": ["score"]}


def test_retries_need_a_schema(adapter, tmp_path):
    url, server = adapter
    server.replies = [answer(data=[1])]
    output(run("llm.invoke --max-validation-retries 5 hi", tmp_path,
               LOBSTER_LLM_ADAPTER_URL=url))
    assert len(server.calls) == 1


# reuse: the file cache and run state --------------------------------------------------------
def test_cache_hit_miss_refresh_and_disable(adapter, tmp_path):
    url, server = adapter
    env = {"LOBSTER_LLM_ADAPTER_URL": url}
    [live] = output(run("llm.invoke hi", tmp_path, **env))
    path = tmp_path / ".lobster-cache" / "llm.invoke" / f"{live['cacheKey']}.json"
    assert json.loads(path.read_text())["items"] == [live]
    [replay] = output(run("llm.invoke hi", tmp_path, **env))
    assert len(server.calls) == 1
    assert replay == {**live, "source": "cache", "cached": True, "replayed": True}
    # every request parameter is part of the key
    for variant in ("--temperature 1", "--max-output-tokens 9", "--model x",
                    "--schema-version v2", "--provider http --artifacts-json '[1]'"):
        output(run(f"llm.invoke {variant} hi", tmp_path, **env))
    assert len(server.calls) == 6
    output(run("llm.invoke --refresh hi", tmp_path, **env))
    output(run("llm.invoke hi", tmp_path, LOBSTER_LLM_FORCE_REFRESH="1", **env))
    output(run("llm.invoke --disable-cache hi", tmp_path, **env))
    assert len(server.calls) == 9
    # the other command keeps its own namespace
    output(run("llm_task.invoke hi", tmp_path, APUS_URL=url))
    assert (tmp_path / ".lobster-cache" / "llm_task.invoke").is_dir()


def test_disable_cache_writes_nothing_and_cache_dir_env(adapter, tmp_path):
    url, _ = adapter
    output(run("llm.invoke --disable-cache hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url))
    assert not (tmp_path / ".lobster-cache").exists()
    [item] = output(run("llm.invoke hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url,
                        LOBSTER_CACHE_DIR=str(tmp_path / "c")))
    assert (tmp_path / "c" / "llm.invoke" / f"{item['cacheKey']}.json").is_file()


@pytest.mark.parametrize("junk", ["{", "[]", '{"items": "x"}', '{"items": [], "cacheKey": "?"}'])
def test_a_corrupt_cache_entry_is_a_miss(adapter, tmp_path, junk):
    url, server = adapter
    [live] = output(run("llm.invoke hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url))
    path = tmp_path / ".lobster-cache" / "llm.invoke" / f"{live['cacheKey']}.json"
    path.write_text(junk)
    [again] = output(run("llm.invoke hi", tmp_path, LOBSTER_LLM_ADAPTER_URL=url))
    assert again["source"] == "http" and len(server.calls) == 2
    assert json.loads(path.read_text())["cacheKey"] == live["cacheKey"]  # rewritten


def test_run_state_reuse(adapter, tmp_path):
    url, server = adapter
    env = {"LOBSTER_LLM_ADAPTER_URL": url}
    output(run("llm.invoke --disable-cache --state-key job-1 hi", tmp_path, **env))
    [replay] = output(run("llm.invoke --disable-cache hi", tmp_path,
                          LOBSTER_RUN_STATE_KEY="job-1", **env))
    assert replay["source"] == "run_state" and replay["replayed"] is True
    assert len(server.calls) == 1
    stored = output(run("state.get job-1", tmp_path))[0]
    assert stored["type"] == "llm.invoke" and stored["cacheKey"] == replay["cacheKey"]
    # another prompt under the same key is a new call; --refresh bypasses run state too
    output(run("llm.invoke --disable-cache --state-key job-1 other", tmp_path, **env))
    output(run("llm.invoke --disable-cache --state-key job-1 --refresh other", tmp_path, **env))
    assert len(server.calls) == 3


# never retried once dispatched --------------------------------------------------------------
@pytest.mark.parametrize("reply", [(500, "flaky"), answer(data={"nope": 1})])
def test_a_dispatched_call_is_never_retried_by_the_workflow(adapter, tmp_path, reply):
    url, server = adapter
    server.replies = [reply]
    wf = tmp_path / "w.lobster"
    wf.write_text("steps:\n  - id: ask\n"
                  f"    pipeline: llm.invoke --max-validation-retries 0 {SCHEMA} hi\n"
                  "    retry: {max: 3, delay_ms: 1}\n")
    base = {k: v for k, v in os.environ.items() if not any(a in k for a in AMBIENT)}
    envelope = handle({"action": "run", "pipeline": str(wf)},
                      Options(env={**base, "LOBSTER_LLM_ADAPTER_URL": url}, cwd=str(tmp_path),
                              state_dir=str(tmp_path / "s")))
    assert error(envelope).startswith("llm.invoke ")
    assert len(server.calls) == 1


def test_a_refusal_before_dispatch_is_still_retryable(tmp_path):
    wf = tmp_path / "w.lobster"
    wf.write_text("steps:\n  - id: ask\n    pipeline: llm.invoke hi\n"
                  "    retry: {max: 2, delay_ms: 1}\n")
    logs: list[str] = []  # a literal --provider nope is a compile error (E204): the env's is not
    envelope = handle({"action": "run", "pipeline": str(wf)},
                      Options(env={"LOBSTER_LLM_PROVIDER": "nope"}, cwd=str(tmp_path),
                              state_dir=str(tmp_path / "s"),
                              log=logs.append))
    assert error(envelope) == "Unsupported llm provider: nope"
    assert any("[RETRY]" in line for line in logs)


# deadlines ----------------------------------------------------------------------------------
def test_the_run_timeout_bounds_the_request(adapter, tmp_path):
    url, server = adapter
    server.delay = 1.0
    base = {k: v for k, v in os.environ.items() if not any(a in k for a in AMBIENT)}
    started = time.monotonic()
    envelope = handle({"action": "run", "pipeline": "llm.invoke hi", "timeoutMs": 300},
                      Options(env={**base, "LOBSTER_LLM_ADAPTER_URL": url}, cwd=str(tmp_path),
                              state_dir=str(tmp_path / "s")))
    assert error(envelope) == "lobster runtime timed out"
    assert time.monotonic() - started < 0.9
    assert len(server.calls) == 1


def test_a_step_timeout_stops_waiting_and_is_not_retried(adapter, tmp_path):
    url, server = adapter
    server.delay = 0.6
    wf = tmp_path / "w.lobster"
    wf.write_text("steps:\n  - id: ask\n    pipeline: llm.invoke hi\n    timeout_ms: 200\n"
                  "    retry: {max: 3, delay_ms: 1}\n")
    base = {k: v for k, v in os.environ.items() if not any(a in k for a in AMBIENT)}
    envelope = handle({"action": "run", "pipeline": str(wf)},
                      Options(env={**base, "LOBSTER_LLM_ADAPTER_URL": url}, cwd=str(tmp_path),
                              state_dir=str(tmp_path / "s")))
    assert error(envelope) == "Step 'ask' timed out after 200ms"
    assert len(server.calls) == 1
