"""`vm` never imports the parser: importing the VM, and resuming a real halted run, load
neither lark nor lobsterc."""

from __future__ import annotations

import json
import subprocess
import sys

from vm.protocol import Options, handle

PARSER = ("lark", "lobsterc", "grammar")
REPORT = ("import sys, json; print(json.dumps(sorted(m for m in sys.modules "
          f"if m.split('.')[0] in {PARSER!r})), file=sys.stderr)")


def park(cli, pipeline: str) -> dict:
    """A real checkpoint in the fixture's state dir (compiled here, in the test process)."""
    options = Options(state_dir=str(cli.state), cwd=str(cli.work), env=dict(cli.env),
                      mode="tool")
    return handle({"action": "run", "pipeline": pipeline}, options)


def python(code: str, cli) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cli.work, env=cli.env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def parser_modules(proc: subprocess.CompletedProcess) -> list[str]:
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_importing_the_vm_loads_no_parser(cli):
    proc = python(f"import vm, vm.protocol, vm.machine, vm.cli, vm.codec, vm.store\n{REPORT}",
                  cli)
    assert proc.returncode == 0, proc.stderr
    assert parser_modules(proc) == []


def resume_in_fresh_python(cli, *argv: str) -> tuple[dict, list[str]]:
    code = (f"import sys, vm.cli\nrc = vm.cli.main({list(argv)!r})\nsys.stdout.flush()\n"
            f"{REPORT}\nsys.exit(rc)")
    proc = python(code, cli)
    return json.loads(proc.stdout), parser_modules(proc)


def test_resuming_a_halted_run_loads_no_parser(cli):
    envelope = park(cli, "exec --json echo '[{\"a\":1},{\"a\":2}]' | approve"
                         " | where a>=2 | template --text '{{a | upper}}' | ask"
                         " | map --wrap answer")
    token = envelope["requiresApproval"]["resumeToken"]
    envelope, loaded = resume_in_fresh_python(cli, "resume", "--token", token, "--approve", "yes")
    assert envelope["status"] == "needs_input", envelope
    assert loaded == []
    token = envelope["requiresInput"]["resumeToken"]
    envelope, loaded = resume_in_fresh_python(cli, "resume", "--token", token,
                                              "--response-json", '{"decision":"approve"}')
    assert envelope["output"] == [{"answer": {"decision": "approve"}}], envelope
    assert loaded == []


def test_resume_by_id_through_lobster_tool_loads_no_parser(cli):
    envelope = park(cli, "exec --json echo '[1]' | approve | sort")
    approval_id = envelope["requiresApproval"]["approvalId"]
    request = json.dumps({"action": "resume", "approvalId": approval_id, "approve": True})
    envelope, loaded = resume_in_fresh_python(cli, "tool", request)
    assert envelope["output"] == [1], envelope
    assert loaded == []


def test_running_a_pipeline_does_compile_it(cli):
    # the check above means something: running pipeline text does import the parser
    code = (f"import sys, vm.cli\nrc = vm.cli.main(['run', '--mode', 'tool', 'exec echo hi'])\n"
            f"sys.stdout.flush()\n{REPORT}")
    proc = python(code, cli)
    assert "lark" in parser_modules(proc)
