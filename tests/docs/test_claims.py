"""Claims the README and docs/ make in prose, each held to what the code does (the shell
examples are run by test_examples.py): the draft responseSchema is read as, gates inside loops,
the one rule for `cancelled`'s exit code, the Node version, how an embedder runs a workflow
file, and what `lobster doctor` prints on a terminal and on a pipe."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import time
from pathlib import Path

import pytest

from conftest import LOBSTER, ROOT, Cli
from vm import Options, handle

DOCS = ROOT / "docs"
ASK_TUPLE = ("steps:\n  - id: ask\n    input:\n      prompt: Numbers?\n      responseSchema:\n"
             "        type: array\n        items: [{type: integer}]\n")
GATED = "exec --json --shell 'echo [1]' | approve --prompt 'Go?'"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path, in_process=True)


def text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def halted_id(envelope: dict) -> str:
    request = envelope["requiresApproval"] or envelope["requiresInput"]
    return request.get("approvalId") or request["resumeToken"]


def test_response_schema_is_read_as_draft_07_as_the_docs_say(cli):
    fields = text("docs/workflow-fields.md")
    assert "draft-07" in fields and "(draft 2020-12)" not in fields
    (cli.work / "ask.lobster").write_text(ASK_TUPLE)
    answers = {'["x"]': False, '[1, "x"]': True}  # tuple `items`: draft-07 checks the first
    for answer, accepted in answers.items():
        envelope, code = cli.tool("run", "--mode", "tool", "ask.lobster")
        assert (code, envelope["status"]) == (0, "needs_input"), envelope
        token = envelope["requiresInput"]["resumeToken"]
        answered, code = cli.tool("resume", "--token", token, "--response-json", answer)
        assert answered["ok"] is accepted, (answer, answered)


def test_a_loop_sub_step_may_be_an_approval_gate_as_the_docs_say(cli):
    fields = text("docs/workflow-fields.md")
    loop = fields[fields.index("Loop sub-step"):]
    assert "approval" in loop.split("\n## ")[0] and "pipeline only" not in fields
    shutil.copy(ROOT / "examples" / "deploy-hosts.lobster", cli.work)
    args = json.dumps({"hosts": ["web1", "web2"], "log": str(cli.work / "deploy.log")})
    envelope, _ = cli.tool("run", "--mode", "tool", "deploy-hosts.lobster", "--args-json", args)
    for host in ("web1", "web2"):  # one halt for each item
        assert envelope["status"] == "needs_approval", envelope
        assert host in json.dumps(envelope["requiresApproval"])
        envelope, _ = cli.tool("resume", "--id", halted_id(envelope), "--approve", "yes")
    assert envelope["status"] == "ok", envelope
    assert (cli.work / "deploy.log").read_text().count("\n") == 2


def _on_a_terminal(argv: list[str], env: dict, cwd: Path, answer: bytes | None = None,
                   ) -> tuple[int, str]:
    """`argv` with stdin, stdout and stderr on a pseudo-terminal; `answer` typed at the first
    `[y/N]`."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    out, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
        if answer is not None and b"[y/N]" in out:
            os.write(fd, answer)
            answer = None
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def test_cancelled_has_one_exit_code_rule_as_the_docs_write_it(cli, tmp_path):
    running = text("docs/running.md")
    assert "The one rule for `cancelled`" in running
    # an answer that says cancelled: exit 0, from resume and from cancel
    envelope, _ = cli.pipeline(GATED)
    answered, code = cli.tool("resume", "--id", halted_id(envelope), "--approve", "no")
    assert (code, answered["status"]) == (0, "cancelled")
    envelope, _ = cli.pipeline(GATED)
    answered, code = cli.tool("cancel", "--id", halted_id(envelope))
    assert (code, answered["status"]) == (0, "cancelled")
    # a person's "no" at the terminal's prompt: exit 1
    code, said = _on_a_terminal([LOBSTER, "run", GATED], {**cli.env, "TERM": "dumb"},
                                cli.work, answer=b"n\n")
    assert code == 1 and "cancelled" in said, said


def test_the_docs_ask_for_the_node_the_differential_tests_run_on():
    for name in ("README.md", "docs/testing.md"):
        assert "Node 22 or newer is needed" not in text(name)
        assert "Node 20" in text(name), name


def test_an_embedder_runs_a_workflow_file_by_its_path_in_pipeline(tmp_path):
    embedding = text("docs/embedding.md")
    assert re.search(r'"pipeline":\s*"flows/deploy\.lobster"', embedding)
    assert "no `file` field" in embedding
    (tmp_path / "flow.lobster").write_text("steps:\n  - id: a\n    run: echo hi\n")
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"))
    assert handle({"action": "run", "pipeline": "flow.lobster"}, options)["output"] == ["hi\n"]
    refused = handle({"action": "run", "file": "flow.lobster"}, options)
    assert refused["error"]["code"] == "E008" and "pipeline" in refused["error"]["message"]


def test_doctor_prints_its_report_on_a_terminal_and_the_envelope_on_a_pipe(tmp_path):
    cli = Cli(tmp_path)
    code, said = _on_a_terminal([LOBSTER, "doctor"], {**cli.env, "TERM": "dumb"}, cli.work)
    assert code == 0, said
    assert "state dir: " in said and "store: directory " in said and '"ok"' not in said
    piped = cli.run("doctor")
    assert piped.returncode == 0
    assert json.loads(piped.stdout)["status"] == "ok"
