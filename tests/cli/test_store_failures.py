"""A store that cannot be asked: PostgreSQL that does not answer, its driver missing, a state
directory that cannot exist (under a regular file). Every subcommand answers one store error
(T450, the store named without its password, the install hint when the driver is missing),
exit 1: never T498 (a bug report), never "not found" for a checkpoint it could not look up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LOBSTER, ROOT, Cli

GATED = "exec --json --shell 'echo [1]' | approve --prompt 'Go?'"
WORKFLOW = "steps:\n  - id: a\n    run: echo a\n  - id: gate\n    approval: Go?\n"
SECRET = "hunter2secret"

# every subcommand that touches the store, with the words that make it do so
COMMANDS = {
    "run tool": ["run", "--mode", "tool", GATED],
    "run human": ["run", GATED],
    "run file": ["run", "--mode", "tool", "flow.lobster"],
    "resume --id": ["resume", "--id", "1a2b3c4d", "--approve", "yes"],
    "resume --id state key": ["resume", "--id", "wf_resume_00000000-0000-4000-8000-000000000000",
                              "--cancel"],
    "resume --token": ["resume", "--token", "abc", "--approve", "yes"],
    "pending": ["pending"],
    "pending json": ["pending", "--format", "json"],
    "pending --cancel": ["pending", "--older-than", "1d", "--cancel"],
    "cancel --id": ["cancel", "--id", "1a2b3c4d"],
    "cancel --id unknown form": ["cancel", "--id", "X"],
    "history": ["history", "1a2b3c4d"],
    "gc": ["gc"],
    "gc --dry-run": ["gc", "--dry-run"],
    "key list": ["key", "list"],
    "key rotate": ["key", "rotate"],
    "migrate": ["migrate", "--id", "1a2b3c4d", "--to", "flow.lobster"],
    "migrate json": ["migrate", "--id", "1a2b3c4d", "--to", "flow.lobster", "--format", "json"],
    "doctor": ["doctor"],
}


def assert_one_store_error(proc: subprocess.CompletedProcess, *, names: str,
                           hint: bool = False) -> None:
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    assert "T498" not in said and "this is a bug" not in said and "Traceback" not in said, said
    assert "not found" not in said, said
    assert SECRET not in said, said
    assert names in said, said
    code = "T499" if proc.args[1:2] == ["doctor"] else "T450"  # doctor's own failure code
    if proc.stdout.strip():
        envelope = json.loads(proc.stdout)
        assert envelope["ok"] is False and envelope["error"]["code"] == code, envelope
    else:
        assert f"[{code}]" in proc.stderr or "Error:" in proc.stderr, proc.stderr
    if hint:
        assert "lobster-pipelines[postgres]" in said, said


@pytest.fixture
def in_process(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path, in_process=True)
    (cli.work / "flow.lobster").write_text(WORKFLOW)
    return cli


@pytest.mark.parametrize("name", COMMANDS)
def test_an_unreachable_postgres_store_is_one_store_error(in_process, name):
    url = f"postgresql://bob:{SECRET}@127.0.0.1:1/lobster"
    proc = in_process.run(*COMMANDS[name], env={"LOBSTER_STORE": url})
    assert_one_store_error(proc, names="postgresql://bob@127.0.0.1:1/lobster")


@pytest.mark.parametrize("name", COMMANDS)
def test_a_state_dir_that_cannot_exist_is_one_store_error(in_process, name, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    proc = in_process.run(*COMMANDS[name], env={"LOBSTER_STATE_DIR": str(blocker / "state")})
    assert_one_store_error(proc, names=str(blocker))


def test_a_state_dir_that_is_a_file_is_one_store_error(in_process, tmp_path):
    blocker = tmp_path / "state-file"
    blocker.write_text("x\n")
    for name in ("pending", "cancel --id", "history", "gc", "resume --id"):
        proc = in_process.run(*COMMANDS[name], env={"LOBSTER_STATE_DIR": str(blocker)})
        assert_one_store_error(proc, names=str(blocker))


@pytest.mark.parametrize("name", ["run tool", "resume --id", "pending", "cancel --id",
                                  "history", "gc", "key list", "migrate", "doctor"])
def test_a_missing_postgres_driver_is_one_store_error_with_the_install_hint(tmp_path, name):
    """psycopg is shadowed by a package that cannot be imported, as on an install without the
    extra; a real process, since this one has the driver loaded."""
    shadow = tmp_path / "shadow"
    for module in ("psycopg", "psycopg_pool"):
        (shadow / module).mkdir(parents=True)
        (shadow / module / "__init__.py").write_text(
            f"raise ImportError(\"No module named {module!r}\")\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "flow.lobster").write_text(WORKFLOW)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    env.update(HOME=str(tmp_path), LOBSTER_STORE=f"postgresql://bob:{SECRET}@127.0.0.1:1/x",
               PYTHONPATH=os.pathsep.join([str(shadow), str(ROOT)]))
    proc = subprocess.run([sys.executable, LOBSTER, *COMMANDS[name]], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    proc.args = [LOBSTER, *COMMANDS[name]]
    assert_one_store_error(proc, names="psycopg", hint=True)


def test_mcp_tools_answer_a_store_error(tmp_path):
    mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
    anyio = pytest.importorskip("anyio")
    cli = Cli(tmp_path)
    env = {**cli.env, "LOBSTER_STORE": f"postgresql://bob:{SECRET}@127.0.0.1:1/x"}
    calls = {"lobster_run": {"pipeline": GATED},
             "lobster_resume": {"approvalId": "1a2b3c4d", "approve": True},
             "lobster_pending": {}, "lobster_history": {"id": "1a2b3c4d"}}

    async def body():
        params = mcp.StdioServerParameters(command=LOBSTER, args=["mcp"], env=env,
                                           cwd=str(cli.work))
        async with mcp.Client(params, read_timeout_seconds=60) as client:
            for tool, arguments in calls.items():
                envelope = (await client.call_tool(tool, arguments)).structured_content
                assert envelope["ok"] is False, (tool, envelope)
                error = envelope["error"]
                assert error["code"] == "T450", (tool, error)
                assert "postgresql://bob@127.0.0.1:1/x" in error["message"], (tool, error)
                assert SECRET not in json.dumps(envelope)

    anyio.run(body)
