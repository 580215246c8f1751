"""The Node driver (tests/differential/node_driver.py) against fresh processes: a run it answers
is the run a fresh `node` process gives, and a run it cannot make the same is refused
(Unfaithful), never answered differently. First with small scripts that each try one way a
shared process could differ, then with real cases of the original, run both ways."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from differential import node_driver
from differential.cases import load_all
from differential.compare import reference_command
from differential.harness import _driver_env, _run_steps
from differential.normalise import differences
from differential.port import PORTED

pytestmark = pytest.mark.slow  # docs/testing.md

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")
REF, WHY = reference_command()

# name -> a bin script's body; each run of it must look like a fresh process's run
FAITHFUL = {
    "streams and exit code": 'process.stdout.write("out\\n"); console.error("err");'
                             " process.exitCode = 3;",
    "output after the script settled": 'setTimeout(() => console.log("late"), 30);',
    "module state starts afresh": 'import { bump } from "../lib/count.js"; console.log(bump());',
    "stdin is empty": 'let n = 0; process.stdin.on("data", (d) => { n += d.length; });'
                      ' process.stdin.on("end", () => console.log("eof", n));',
    "argv, environment and directory": "console.log(JSON.stringify([process.argv.slice(2),"
                                       " process.env.ONLY_HERE ?? null, process.cwd()]));",
    "an unreferenced timer never fires": 'setTimeout(() => console.log("never"), 60).unref();'
                                         ' setTimeout(() => console.log("soon"), 5);',
    "a child process": 'import { execFileSync } from "node:child_process";'
                       ' process.stdout.write(execFileSync("sh", ["-c", "echo $ONLY_HERE"]));',
}
# name -> (a bin script's body, why the driver must refuse its run)
UNFAITHFUL = {
    "a listener left behind": ('process.on("SIGINT", () => {}); console.log("x");',
                               "listener left behind"),
    "an uncaught exception": ('setTimeout(() => { throw new Error("late"); }, 5);',
                              "uncaught exception"),
    "a rejected script": ('throw new Error("at once");', "the script threw"),
    "process.exit": ("process.exit(4);", "process.exit(4)"),
    "a process warning": ('process.emitWarning("careful");', "process warning"),
    "an unreferenced child": ('import { spawn } from "node:child_process";'
                              ' spawn("sleep", ["0.2"], { stdio: "ignore" }).unref();',
                              "unreferenced child"),
    "an unreferenced socket": ('import net from "node:net"; const server = net.createServer('
                               "(c) => c.unref()); server.listen(0, () => { const s = net.connect("
                               'server.address().port); s.on("connect", () => { s.unref();'
                               " server.close(); }); });", "unreferenced socket"),
    "output around process.stdout": ('import fs from "node:fs"; fs.writeSync(1, "raw\\n");',
                                     "around process.stdout"),
}


def _package(root: Path, body: str) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "package.json").write_text('{"type": "module"}')
    (root / "lib" / "count.js").write_text("let n = 0;\nexport const bump = () => ++n;\n")
    script = root / "bin" / "tool.js"
    script.write_text("#!/usr/bin/env node\n" + body + "\n")
    script.chmod(0o755)
    return script


def _env(tmp_path: Path) -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")} | {
        "HOME": str(tmp_path)}


@needs_node
@pytest.mark.parametrize("name", sorted(FAITHFUL))
def test_a_driven_run_is_a_fresh_run(tmp_path, name):
    script = _package(tmp_path / "pkg", FAITHFUL[name])
    env = _env(tmp_path)
    driver = node_driver.NodeDriver(str(script), env)
    try:
        for k in range(2):  # the second run sees nothing of the first
            step_env = env | {"ONLY_HERE": f"run {k}"}
            argv = ["a b", f"{k}"]
            fresh = subprocess.run([str(script), *argv], check=False, cwd=tmp_path, env=step_env,
                                   stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=30)
            driven = driver.run(argv, cwd=tmp_path, env=step_env, timeout=30)
            assert driven == (fresh.returncode, fresh.stdout, fresh.stderr), name
    finally:
        driver.stop()


@needs_node
@pytest.mark.parametrize("name", sorted(UNFAITHFUL))
def test_a_run_the_driver_cannot_vouch_for_is_refused(tmp_path, name):
    body, reason = UNFAITHFUL[name]
    script = _package(tmp_path / "pkg", body)
    driver = node_driver.NodeDriver(str(script), _env(tmp_path))
    try:
        with pytest.raises(node_driver.Unfaithful, match=re.escape(reason)):
            driver.run([], cwd=tmp_path, env=_env(tmp_path), timeout=30)
    finally:
        driver.stop()


@needs_node
def test_an_environment_node_reads_at_start_is_refused(tmp_path):
    script = _package(tmp_path / "pkg", 'console.log("x");')
    driver = node_driver.NodeDriver(str(script), _env(tmp_path))
    try:
        with pytest.raises(node_driver.Unfaithful, match="as it starts"):
            driver.run([], cwd=tmp_path, env=_env(tmp_path) | {"NODE_OPTIONS": "--no-warnings"},
                       timeout=30)
    finally:
        driver.stop()


def _sample() -> list[tuple[str, dict]]:
    """Real cases, the first of each kind: an HTTP server, state files, a resume, a workflow
    file, a failing run, another of the package's executables, a long pipeline."""
    cases = [(p.stem, doc["case"]) for p, doc in load_all()]
    cases += [(f"{port.name} #{k}", case) for port in PORTED for k, case in enumerate(port.cases)]
    kinds = {
        "server": lambda c: "server" in c,
        "state files": lambda c: "stateFiles" in c,
        "resume": lambda c: any(s.get("action") == "resume" for s in c["steps"]),
        "workflow": lambda c: c["kind"] != "pipeline",
        "bin": lambda c: any(s.get("bin") for s in c["steps"]),
        "env": lambda c: bool(c.get("env")),
        "many steps": lambda c: len(c["steps"]) >= 4,
    }
    chosen = {}
    for kind, test in kinds.items():
        chosen[kind] = next((name, case) for name, case in cases if test(case))
    return list(chosen.items())


@pytest.mark.skipif(REF is None, reason=f"needs the original: {WHY}")
def test_real_cases_agree_driven_and_fresh():
    """One driver runs every sampled case in turn (so each also follows other cases' runs)."""
    driver = node_driver.NodeDriver(REF[0], _driver_env())
    try:
        for kind, (name, case) in _sample():
            driven = _run_steps(case, REF, lambda argv, work, env: driver.run(
                argv, cwd=work, env=env, timeout=60))
            fresh = _run_steps(case, REF, None)
            assert len(driven) == len(fresh) == len(case["steps"])
            for k, (a, b) in enumerate(zip(fresh, driven)):
                assert differences(a, b) == [], f"{kind} ({name}) step {k}\n{a}\n{b}"
    finally:
        driver.stop()
