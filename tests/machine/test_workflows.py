"""Workflow-file scenarios in tests/workflows/, run through the real `lobster` executable.

Each scenario is a folder with its workflow file(s) and a `script.json`: a list of steps, run
in order in a private copy of the folder (one fresh `lobster` process per run or resume):

  {"run": {"file": "workflow.lobster", "args": {...}, "env": {...}}, "expect": ENV, "exit": 0}
  {"resume": {"approve": true|false}, ...}     {"resume": {"responseJson": VALUE}, ...}
  {"resume": {"cancel": true}, ...}            {"resume": {..., "id": true}}  (by approvalId)
  {"resume": {..., "tamper": "unsigned"|"forged"|"rekeyed"|"truncated"}}  (a doctored token)
  {"edit": {"file": "workflow.lobster", "text": "..."}}
  {"wait_ms": 500}        (let a killed child's would-be late write come due, then check files)

`run` defaults to `workflow.lobster`; `args` become `--args-json`. A resume uses the newest
resume token (or approval id) seen so far, or the one issued by script step `"from": N`.
Every run/resume step has the EXACT expected envelope and exit code; in it `"<token>"` and
`"<approval_id>"` stand for the random parts, and `<dir>` for the scenario's working copy.
Optional checks on any step: `"files": {path: text}` (file contents after the step, `null` =
absent) and `"stderr_contains": [text, ...]`.

The scenarios are independent, so they all start at once on a small thread pool the first
time any of them is needed; each test then checks its own scenario's results.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import LOBSTER, ROOT

SCENARIOS = ROOT / "tests" / "workflows"
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if (p / "script.json").is_file())


def tamper(token: str, how: str) -> str:
    """The token with its signature dropped or changed, its state key changed, or cut short."""
    if how == "truncated":
        return token[:-6]
    body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    if how == "unsigned":
        body = {k: v for k, v in body.items() if k != "sig"}
    elif how == "forged":
        sig = body["sig"]
        body["sig"] = ("A" if sig[0] != "A" else "B") + sig[1:]
    elif how == "rekeyed":
        key = body["stateKey"]
        body["stateKey"] = key[:-1] + ("0" if key[-1] != "0" else "1")
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class Scenario:
    """One scenario's script, played in `work` with a private state dir."""

    def __init__(self, name: str, base: Path, pycache: Path) -> None:
        self.name = name
        self.work = base / "work"
        shutil.copytree(SCENARIOS / name, self.work)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env.update(LOBSTER_STATE_DIR=str(base / "state"), HOME=str(base), TZ="UTC",
                        PYTHONPYCACHEPREFIX=str(pycache))
        self.script = json.loads((self.work / "script.json").read_text())
        self.tokens: list[str] = []
        self.approval_ids: list[str] = []
        self.issued: dict[int, tuple[str | None, str | None]] = {}

    # normalising ---------------------------------------------------------------------------
    def learn(self, index: int, envelope) -> None:
        if not isinstance(envelope, dict):
            return
        token = approval_id = None
        for key in ("requiresApproval", "requiresInput"):
            request = envelope.get(key)
            if isinstance(request, dict):
                token = request.get("resumeToken", token)
                approval_id = request.get("approvalId", approval_id)
        if token:
            self.tokens.append(token)
            self.issued[index] = (token, approval_id)
        if approval_id:
            self.approval_ids.append(approval_id)

    VARYING = {"stateKey": "<state_key>", "claimedAt": "<time>", "endedAt": "<time>",
               "leaseUntil": "<time>", "claimedBy": "<pid@host>"}  # a refusal's `checkpoint`

    def normalise(self, value):
        if isinstance(value, dict):
            return {k: self.VARYING.get(k) if k in self.VARYING and isinstance(v, str)
                    else self.normalise(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.normalise(v) for v in value]
        if isinstance(value, str):
            for token in sorted(self.tokens, key=len, reverse=True):
                value = value.replace(token, "<token>")
            for approval_id in self.approval_ids:
                value = value.replace(approval_id, "<approval_id>")
            return value.replace(str(self.work.resolve()), "<dir>").replace(str(self.work), "<dir>")
        return value

    # playing -------------------------------------------------------------------------------
    def argv(self, index: int, step: dict) -> tuple[list[str], dict]:
        if "run" in step:
            spec = step["run"]
            argv = ["run", "--mode", "tool", "--file", spec.get("file", "workflow.lobster")]
            if "args" in spec:
                argv += ["--args-json", json.dumps(spec["args"])]
            return argv, spec.get("env", {})
        spec = step["resume"]
        issued = self.issued.get(spec["from"]) if "from" in spec else (
            self.issued[max(self.issued)] if self.issued else None)
        token, approval_id = issued or ("<no token issued>", "<no approval id issued>")
        if "tamper" in spec:
            token = tamper(token, spec["tamper"])
        argv = ["resume"]
        argv += ["--id", approval_id] if spec.get("id") else ["--token", token]
        if "approve" in spec:
            argv += ["--approve", "yes" if spec["approve"] else "no"]
        elif "responseJson" in spec:
            argv += ["--response-json", json.dumps(spec["responseJson"])]
        elif spec.get("cancel"):
            argv += ["--cancel"]
        return argv, spec.get("env", {})

    def play(self) -> list[dict]:
        """Every step's outcome: what was expected next to what happened."""
        outcomes = []
        for index, step in enumerate(self.script):
            if "wait_ms" in step:
                time.sleep(step["wait_ms"] / 1000)
                outcome = {}
            elif "edit" in step:
                target = self.work / step["edit"]["file"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(step["edit"]["text"])
                outcome = {}
            else:
                argv, env = self.argv(index, step)
                proc = subprocess.run([LOBSTER, *argv], cwd=self.work, env={**self.env, **env},
                                      stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                      timeout=60)
                try:
                    envelope = json.loads(proc.stdout)
                except ValueError:
                    envelope = {"<not JSON>": proc.stdout, "<stderr>": proc.stderr}
                self.learn(index, envelope)
                outcome = {"argv": argv, "exit": proc.returncode, "expect": envelope,
                           "stderr": proc.stderr}
            if "files" in step:
                outcome["files"] = {
                    name: (self.work / name).read_text() if (self.work / name).exists() else None
                    for name in step["files"]}
            outcomes.append(outcome)
        for outcome in outcomes:
            if "expect" in outcome:
                outcome["expect"] = self.normalise(outcome["expect"])
        return outcomes


@pytest.fixture(scope="session")
def played(request, tmp_path_factory) -> dict[str, Future]:
    """Every selected scenario, started at once; `-k one-name` plays only that one."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if getattr(item, "callspec", None) and "name" in item.callspec.params
                and item.path == Path(__file__)}
    base = tmp_path_factory.mktemp("workflows")
    pycache = tmp_path_factory.getbasetemp().parent / "lobster-pycache"  # kept across runs
    pool = ThreadPoolExecutor(max_workers=max(4, 2 * (os.cpu_count() or 1)))
    futures = {name: pool.submit(Scenario(name, base / name, pycache).play)
               for name in NAMES if name in selected}
    yield futures
    pool.shutdown(wait=True)


def test_there_are_scenarios() -> None:
    assert len(NAMES) >= 20, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_scenario(name: str, played) -> None:
    script = json.loads((SCENARIOS / name / "script.json").read_text())
    outcomes = played[name].result()
    for index, (step, outcome) in enumerate(zip(script, outcomes)):
        where = f"{name} step {index} {outcome.get('argv', step)}"
        if "run" in step or "resume" in step:
            assert "expect" in step, f"{where}: no expected envelope"
            assert outcome["expect"] == step["expect"], (
                f"{where}: envelope differs\nexpected {json.dumps(step['expect'])}\n"
                f"got      {json.dumps(outcome['expect'])}\nstderr {outcome['stderr']!r}")
            assert outcome["exit"] == step.get("exit", 0), f"{where}: exit code"
        for text in step.get("stderr_contains", []):
            assert text in outcome["stderr"], f"{where}: {text!r} not in {outcome['stderr']!r}"
        if "files" in step:
            assert outcome["files"] == step["files"], f"{where}: files differ"
