"""The import budget: what a `lobster` process may load for a cached run, a halt, a resume and
its help. Every start-up pays for each module it imports, so a module joins the run path only
by being written into the budget below, deliberately.

The budget is this one table. Each case runs the console script's entry point in a fresh
interpreter and reads `sys.modules` when it returns: our modules must be listed for that path,
a module from outside the standard library must be one of THIRD_PARTY, and nothing in NEVER
may appear (the parser, the schema validator, the database driver, the MCP SDK, any HTTP
client: a run that needs one of them is not a cached run).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# --- the budget ----------------------------------------------------------------------------
RUN_PATH = frozenset("""
    lobsterc lobsterc.frontend lobsterc.generate lobsterc.generate.cache lobsterc.syntax
    lobsterc.syntax.grammars
    vm vm.cli vm.cli.common vm.cli.main vm.cli.run vm.cli.resume
    vm.cli.flags vm.cli.specs vm.cli.frontdoor
    vm.core vm.core.bounds vm.core.codes vm.core.condition vm.core.distribution vm.core.js
    vm.core.json_read vm.core.json_write
    vm.core.patterns vm.core.records
    vm.core.schema vm.core.schema_compile vm.core.schema_refs
    vm.core.source
    vm.isa vm.isa.codec vm.isa.cost vm.isa.frame vm.isa.opcodes vm.isa.ops vm.isa.program
    vm.isa.regions vm.isa.verify
    vm.host vm.host.children vm.host.process vm.host.token vm.host.workdir
    vm.host.commands vm.host.commands.base vm.host.commands.data vm.host.commands.exec_cmd
    vm.host.commands.registry
    vm.host.store vm.host.store.base vm.host.store.claims vm.host.store.directory
    vm.host.store.directory_checkpoints vm.host.store.directory_keys vm.host.store.files
    vm.host.store.leases vm.host.store.lifecycle
    vm.engine vm.engine.control vm.engine.data vm.engine.gates vm.engine.interp
    vm.engine.machine vm.engine.outcome vm.engine.parallel vm.engine.refs vm.engine.run
    vm.engine.steps
    vm.service vm.service.frontend vm.service.protocol vm.service.protocol.checkpoint
    vm.service.protocol.envelope vm.service.protocol.options vm.service.protocol.park
    vm.service.protocol.request vm.service.protocol.resuming vm.service.protocol.running
""".split())
HALT_ONLY = frozenset("vm.service.protocol.park vm.host.token vm.host.store.lifecycle "
                      "vm.host.store.leases vm.host.store.claims".split())  # what only a program that can halt needs
# what only a run that runs a stage needs, and what only one that starts a child needs
STAGE_ONLY = frozenset("vm.host.commands.registry vm.host.commands.data".split())
CHILD_ONLY = frozenset("vm.host.process vm.host.commands.exec_cmd".split())
HELP_PATH = frozenset("lobsterc lobsterc.frontend vm vm.cli vm.cli.help vm.cli.main "
                      "vm.cli.flags vm.cli.specs vm.core vm.core.distribution".split())
# (specs: the flag tables; distribution: the install hint they name)
THIRD_PARTY = frozenset({"attr", "attrs", "msgpack",
                         "cython_runtime"})  # msgpack's compiled extension registers it
HELP_THIRD_PARTY: frozenset[str] = frozenset()  # help is text: not even attrs
HELP_NEVER_STDLIB = frozenset({"typing", "json", "signal", "subprocess"})
CHILD_ONLY_STDLIB = frozenset({"subprocess", "selectors"})  # loaded when a child is started
NEVER = frozenset({
    "lark", "jsonschema", "psycopg", "psycopg_pool", "mcp", "anyio", "httpx", "requests",
    "http", "urllib.request", "email", "ssl", "asyncio", "importlib.metadata",
    "socket", "secrets",  # a hostname, random bytes
    "lobsterc.syntax.parse", "lobsterc.load", "lobsterc.check", "lobsterc.generate.codegen",
    "lobsterc.generate.workflow", "lobsterc.diagnostics",
})
# -------------------------------------------------------------------------------------------

# the console script's own path (`lobster()` with no argv: its exit), kept
# from ending the process at once by an exit callback, so that sys.modules can be read
DRIVER = """\
import atexit, json, sys
from lobsterc.frontend import lobster
atexit.register(lambda: None)
sys.argv[0] = "lobster"
try:
    lobster()
finally:
    sys.stdout.flush()
    sys.stderr.write("\\n@@modules " + json.dumps(sorted(sys.modules)) + "\\n")
"""
OURS = ("vm", "lobsterc")


def loaded(cli, *argv: str) -> tuple[str, set[str]]:
    """The stdout of `lobster ARGV` run by its entry point in a fresh interpreter, and every
    module in sys.modules when it returned."""
    proc = subprocess.run([sys.executable, "-c", DRIVER, *argv], cwd=cli.work, env=cli.env,
                          capture_output=True, text=True, timeout=60)
    _, _, tail = proc.stderr.rpartition("\n@@modules ")
    assert tail, proc.stderr
    return proc.stdout, set(json.loads(tail))


def over_budget(modules: set[str], ours: frozenset[str], third_party: frozenset[str]) -> list:
    """Every module outside the budget: ours not listed, third-party not allowed, NEVER."""
    stdlib = sys.stdlib_module_names
    wrong = set()
    for name in modules:
        top = name.partition(".")[0]
        if name in NEVER or top in NEVER:
            wrong.add(name)
        elif top in OURS:
            if name not in ours:
                wrong.add(name)
        elif top not in stdlib and not top.startswith("_") and top not in third_party:
            wrong.add(name)
    return sorted(wrong)


def tool(cli, *argv: str) -> dict:
    out = subprocess.run([sys.executable, "-c", DRIVER, *argv], cwd=cli.work, env=cli.env,
                         capture_output=True, text=True, timeout=60).stdout
    return json.loads(out)


FIVE_STAGES = "exec --json --shell 'echo [1,2,3]' | where a=1 | sort | pick a | head --n 2"


def test_a_cached_pipeline_run_stays_in_its_budget(cli):
    tool(cli, "run", "--mode", "tool", FIVE_STAGES)  # compiled and cached
    out, modules = loaded(cli, "run", "--mode", "tool", FIVE_STAGES)
    assert json.loads(out)["status"] == "ok"
    assert over_budget(modules, RUN_PATH - HALT_ONLY, THIRD_PARTY) == []


def test_a_cached_workflow_run_stays_in_its_budget(cli):
    steps = "".join(f"  - id: s{i}\n    run: echo {i}\n" for i in range(10))
    (cli.work / "ten.lobster").write_text(f"name: ten\nsteps:\n{steps}")
    tool(cli, "run", "--mode", "tool", "--file", "ten.lobster")
    out, modules = loaded(cli, "run", "--mode", "tool", "--file", "ten.lobster")
    assert json.loads(out)["status"] == "ok"
    assert over_budget(modules, RUN_PATH - HALT_ONLY, THIRD_PARTY) == []


def test_a_halt_and_its_resume_stay_in_their_budget(cli):
    pipeline = "exec --json --shell 'echo [1,2]' | approve --prompt ok | pick a"
    tool(cli, "run", "--mode", "tool", pipeline)
    out, modules = loaded(cli, "run", "--mode", "tool", pipeline)
    token = json.loads(out)["requiresApproval"]["resumeToken"]
    assert over_budget(modules, RUN_PATH, THIRD_PARTY) == []
    assert "vm.service.protocol.park" in modules  # (so HALT_ONLY names what a halt loads)
    assert "subprocess" in modules  # (its exec ran a child)
    out, modules = loaded(cli, "resume", "--token", token, "--approve", "yes")
    assert json.loads(out)["status"] == "ok"
    assert over_budget(modules, RUN_PATH - CHILD_ONLY, THIRD_PARTY) == []
    assert sorted(modules & CHILD_ONLY_STDLIB) == []  # no step after the gate starts a child


def test_a_resume_past_the_last_stage_loads_no_command(cli):
    """The commonest resume: the gate was the pipeline's last stage, so the resume only
    returns the approved items. It loads neither the command registry nor the process
    machinery."""
    pipeline = "exec --json --shell 'echo [1,2]' | approve --prompt ok"
    tool(cli, "run", "--mode", "tool", pipeline)
    token = tool(cli, "run", "--mode", "tool", pipeline)["requiresApproval"]["resumeToken"]
    out, modules = loaded(cli, "resume", "--token", token, "--approve", "yes")
    assert json.loads(out)["output"] == [1, 2]
    assert over_budget(modules, RUN_PATH - CHILD_ONLY - STAGE_ONLY, THIRD_PARTY) == []


def test_an_ask_halt_stays_in_its_budget(cli):
    """A schema with no `format` has no compile warning to write: its halt never loads the
    schema validator (NEVER: jsonschema), which only the resume's check of the answer needs."""
    pipeline = """ask --prompt q --schema '{"type":"string","minLength":1}'"""
    tool(cli, "run", "--mode", "tool", pipeline)
    out, modules = loaded(cli, "run", "--mode", "tool", pipeline)
    assert json.loads(out)["status"] == "needs_input"
    assert over_budget(modules, RUN_PATH, THIRD_PARTY) == []


RECORDS_DRIVER = """\
import sys
from lobsterc.frontend import lobster
try:
    lobster(sys.argv[1:])
finally:
    sys.stdout.flush()
    ops, source = sys.modules["vm.isa.ops"], sys.modules["vm.core.source"]
    frame = sys.modules["vm.isa.frame"]
    built = sorted((set(vars(ops)) & set(ops.WORKFLOW_RECORDS))
                   | (set(vars(frame)) & set(frame.WORKFLOW_RECORDS))
                   | (set(vars(source)) & set(source._RECORDS)))
    sys.stderr.write("\\n@@built " + ",".join(built) + "\\n")
"""


def built_records(cli, *argv: str) -> tuple[str, str]:
    """The stdout of `lobster ARGV` in a fresh interpreter, and which of the records built on
    first use (the workflow records of vm.isa.ops and vm.isa.frame, vm.core.source's
    Span and Source) it built."""
    proc = subprocess.run([sys.executable, "-c", RECORDS_DRIVER, *argv], cwd=cli.work,
                          env=cli.env, capture_output=True, text=True, timeout=60)
    _, marker, tail = proc.stderr.rpartition("\n@@built ")
    assert marker, proc.stderr
    return proc.stdout, tail.strip()


def test_a_pipeline_builds_no_record_it_does_not_use(cli):
    pipeline = "exec --json --shell 'echo [1,2]' | approve --prompt ok | pick a"
    tool(cli, "run", "--mode", "tool", pipeline)
    out, built = built_records(cli, "run", "--mode", "tool", pipeline)
    assert built == ""
    token = json.loads(out)["requiresApproval"]["resumeToken"]
    out, built = built_records(cli, "resume", "--token", token, "--approve", "yes")
    assert json.loads(out)["status"] == "ok" and built == ""
    (cli.work / "one.lobster").write_text("name: one\nsteps:\n  - id: a\n    run: echo 1\n")
    out, built = built_records(cli, "run", "--mode", "tool", "--file", "one.lobster")
    assert json.loads(out)["status"] == "ok" and "Shell" in built.split(",")
    (cli.work / "gated.lobster").write_text("name: gated\nsteps:\n  - id: a\n    run: echo 1\n"
                                            "    approval: ok?\n")
    tool(cli, "run", "--mode", "tool", "--file", "gated.lobster")
    out, built = built_records(cli, "run", "--mode", "tool", "--file", "gated.lobster")
    token = json.loads(out)["requiresApproval"]["resumeToken"]
    assert {"StepApproval", "StepApprovalWait"} <= set(built.split(","))
    out, built = built_records(cli, "resume", "--token", token, "--approve", "yes")
    assert json.loads(out)["status"] == "ok" and "StepApprovalWait" in built.split(",")


@pytest.mark.parametrize("argv", [["--help"], ["help"], ["version"]])
def test_help_and_version_load_text_only(cli, argv):
    out, modules = loaded(cli, *argv)
    assert out.strip()
    assert over_budget(modules - {"json"}, HELP_PATH, HELP_THIRD_PARTY) == []  # the driver's json
    assert sorted(modules & (HELP_NEVER_STDLIB - {"json"})) == []


def test_the_budget_check_can_fail(cli):
    # compiling is outside the budget: a first run of new text imports the parser
    out, modules = loaded(cli, "run", "--mode", "tool", "exec --json --shell 'echo [7]'")
    assert json.loads(out)["output"] == [7]
    assert "lark" in over_budget(modules, RUN_PATH, THIRD_PARTY)
    assert over_budget({"vm.cli.mcp", "yaml", "os"}, RUN_PATH, THIRD_PARTY) == [
        "vm.cli.mcp", "yaml"]
