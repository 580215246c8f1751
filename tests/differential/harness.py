"""Runs one differential case through a `lobster` CLI in a fresh root and records each step.

A case is data (the conformance case format of ../shared/conformance, plus `files`: the
workflow files and fake external commands, written into the working directory).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from . import forkserver, node_driver
from .normalise import Normaliser

STEP_TIMEOUT_S = 60
# The environment as the session started: cases run in threads while a test in the same
# process may swap os.environ for an in-process run (conftest.run_in_process).
_ENVIRON = dict(os.environ)


def build_argv(case: dict, step: dict, seen: list) -> list[str]:
    """The CLI arguments for one step; `seen` holds the raw envelopes of the earlier steps."""
    action = step.get("action", "run")
    mode = step.get("mode", case.get("mode", "tool"))
    if action == "cli":
        return list(step["argv"])
    if action == "run":
        if case["kind"] == "pipeline":
            pipeline = step.get("pipeline", case.get("pipeline"))
            return [pipeline] if mode == "human" else ["run", "--mode", "tool", pipeline]
        argv = ["run"] + (["--mode", "tool"] if mode == "tool" else [])
        argv += ["--file", step.get("file", case.get("file", "workflow.lobster"))]
        raw = step.get("argsJsonRaw", case.get("argsJsonRaw"))
        args = step.get("args", case.get("args"))
        if raw is not None:
            argv += ["--args-json", raw]
        elif args is not None:
            argv += ["--args-json", json.dumps(args)]
        return argv
    if action == "resume":
        argv = ["resume"]
        if step.get("approvalId"):
            argv += ["--id", _approval_id(seen, step)]
        else:
            argv += ["--token", _token(seen, step)]
        if "approve" in step:
            argv += ["--approve", "yes" if step["approve"] else "no"]
        elif "approveRaw" in step:
            argv += ["--approve", step["approveRaw"]]
        elif "responseJson" in step:
            argv += ["--response-json", json.dumps(step["responseJson"])]
        elif "responseJsonRaw" in step:
            argv += ["--response-json", step["responseJsonRaw"]]
        elif step.get("cancel"):
            argv += ["--cancel"]
        return argv + list(step.get("extraArgv", []))
    raise ValueError(f"unknown action {action!r}")


def _requests(seen: list, step: dict):
    src = step.get("tokenFromStep")
    envs = [seen[src]] if src is not None and src < len(seen) else list(reversed(seen))
    for env in envs:
        if isinstance(env, dict):
            for key in ("requiresApproval", "requiresInput"):
                if isinstance(env.get(key), dict):
                    yield env[key]


def _token(seen: list, step: dict) -> str:
    if "token" in step:
        return step["token"]
    for req in _requests(seen, step):
        if isinstance(req.get("resumeToken"), str):
            return req["resumeToken"]
    return "no-token-was-issued"


def _approval_id(seen: list, step: dict) -> str:
    if isinstance(step.get("approvalId"), str):
        return step["approvalId"]
    for req in _requests(seen, step):
        if isinstance(req.get("approvalId"), str):
            return req["approvalId"]
    return "00000000"


def _write_files(work: Path, files: dict) -> None:
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name.startswith("bin/"):
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class _Answer(BaseHTTPRequestHandler):
    """Answers every request with the case's `server` reply: status, body, chunked or not; with
    `replies`, the n-th request gets the n-th of them (the last one again after that)."""
    reply: dict = {}
    served: list = []  # one entry per request answered (a list per server class)
    lock = threading.Lock()

    def _answer(self):
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        with self.lock:
            n = len(self.served)
            self.served.append(n)
        replies = self.reply.get("replies")
        reply = {**self.reply, **replies[min(n, len(replies) - 1)]} if replies else self.reply
        if reply.get("hangMs"):  # an adapter that takes its time (or never answers)
            time.sleep(reply["hangMs"] / 1000)
        body = reply.get("body", "").encode()
        self.send_response(reply.get("status", 200))
        self.send_header("content-type", "application/json")
        if reply.get("chunked"):
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for k in range(0, len(body), 64):
                part = body[k:k + 64]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def _answer_quietly(self):
        try:
            self._answer()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
            pass

    do_POST = do_GET = _answer_quietly

    def log_message(self, *args):
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a client that gave up (a timeout)
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def _serve(reply: dict) -> ThreadingHTTPServer:
    """A real server on 127.0.0.1 giving `reply` to every request (`<server>` in env values)."""
    handler = type("Answer", (_Answer,), {"reply": reply, "protocol_version": "HTTP/1.1",
                                          "served": [], "lock": threading.Lock()})
    server = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_case(case: dict, command: list[str]) -> list[dict]:
    """Every step of `case` through `command` (a CLI argv prefix), normalised.

    One record per step: action, argv, exitCode, stdoutJson or stdout, stderr.
    A step whose resume token never came is still run (with a placeholder token), so a
    missing halt shows up as a difference in that step rather than an exception.

    The original's runs go through a Node driver (node_driver.py) when they can; a case that
    one of its runs could not vouch for is run again from the start in fresh processes."""
    if not node_driver.can_drive(command):
        return _run_steps(case, command, None)
    driver = None

    def drive(argv: list[str], work: Path, env: dict) -> tuple:
        nonlocal driver
        if driver is None:
            driver = node_driver.Pool.take(command[0], _driver_env())
        return driver.run(argv, cwd=work, env=env, timeout=STEP_TIMEOUT_S)

    try:
        return _run_steps(case, command, drive)
    except node_driver.Unfaithful:
        return _run_steps(case, command, None)
    finally:
        if driver is not None:
            node_driver.Pool.give_back(driver)


def _driver_env() -> dict:
    """What a driver starts under: a step's environment without what is the step's own."""
    own = ("HOME", "LOBSTER_STATE_DIR")
    return {k: v for k, v in _base_env().items() if k not in own}


def _base_env() -> dict:
    return {k: v for k, v in _ENVIRON.items()
            if not k.startswith(("LOBSTER_", "APUS_", "CLAWD_", "OPENCLAW_"))} | {
        "TZ": "UTC", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}


def _run_steps(case: dict, command: list[str], drive) -> list[dict]:
    """The case's steps in a fresh root; `drive(argv, work, env)` runs the plain `command`
    steps when given (a step with its own `bin` is always a fresh process)."""
    root = Path(tempfile.mkdtemp(prefix="lobster-diff-"))
    work, state, home = root / "work", root / "state", root / "home"
    work.mkdir()
    home.mkdir()
    _write_files(work, case.get("files", {}))
    if case.get("stateFiles"):  # each engine's state.set values: <state>/ and <state>/values/
        _write_files(state, case["stateFiles"])
        _write_files(state / "values", case["stateFiles"])
    server = _serve(case["server"]) if case.get("server") else None
    url = f"http://127.0.0.1:{server.server_address[1]}" if server else "<server>"
    norm = Normaliser(root)
    base = _base_env()
    base.update(HOME=str(home), LOBSTER_STATE_DIR=str(state))
    seen: list = []
    records: list[dict] = []
    try:
        for step in case["steps"]:
            env = dict(base)
            for key, value in {**case.get("env", {}), **step.get("env", {})}.items():
                if value is None:
                    env.pop(key, None)
                else:
                    env[key] = str(value).replace("<workdir>", str(work)).replace("<server>", url)
            argv = build_argv(case, step, seen)
            prefix = command
            if step.get("bin"):  # another executable the package installs beside `lobster`
                prefix = [str(Path(command[0]).parent / step["bin"])]
            if drive is not None and not step.get("bin"):
                code, out, err = drive(argv, work, env)
            elif len(prefix) == 1 and forkserver.can_fork(prefix[0]):
                code, out, err = forkserver.ForkServer.get(env).run(
                    prefix + argv, cwd=work, env=env, timeout=STEP_TIMEOUT_S)
            else:
                try:
                    proc = subprocess.run(prefix + argv, cwd=work, env=env,
                                          stdin=subprocess.DEVNULL, capture_output=True,
                                          timeout=STEP_TIMEOUT_S)
                    code, out, err = proc.returncode, proc.stdout, proc.stderr
                except subprocess.TimeoutExpired as exc:
                    code, out, err = "timeout", exc.stdout or b"", exc.stderr or b""
            out_text = out.decode("utf-8", "replace")
            try:
                parsed, is_json = json.loads(out_text), True
            except ValueError:
                parsed, is_json = None, False
            if is_json:
                norm.learn(parsed)
            seen.append(parsed)
            records.append({"action": step.get("action", "run"), "argv": argv, "exitCode": code,
                            "_json": is_json, "_stdout": parsed if is_json else out_text,
                            "_stderr": err.decode("utf-8", "replace")})
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        shutil.rmtree(root, ignore_errors=True)
    return [_finish(rec, norm) for rec in records]


def _finish(rec: dict, norm: Normaliser) -> dict:
    out = {"action": rec["action"], "argv": [norm.text(a) for a in rec["argv"]],
           "exitCode": rec["exitCode"]}
    if rec["_json"]:
        out["stdoutJson"] = norm.value(rec["_stdout"])
    else:
        out["stdout"] = norm.text(rec["_stdout"])
    out["stderr"] = norm.text(rec["_stderr"])
    return out
