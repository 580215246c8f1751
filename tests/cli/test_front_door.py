"""The front door (issue 21): the command line checked before the pipeline fallback (SPEC
9.20), `resume --id` for every id `pending` lists, and help for every subcommand made from
the flag table its parser reads (vm/cli/specs.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import LOBSTER
from vm.cli.flags import UsageError, parse
from vm.cli.specs import SPECS

ASKING = ("steps:\n  - id: ask\n    input:\n      prompt: Name?\n      responseSchema:\n"
          "        type: object\n        properties:\n          name: {type: string}\n"
          "        required: [name]\n  - id: hi\n    run: echo \"hi $LOBSTER_ARG_X\"\n")


def refused(proc, code: str, message: str) -> None:
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"lobster: error[{code}]: {message}\n"), proc


# SPEC 9.20 ----------------------------------------------------------------------------------
def test_a_mistyped_option_is_named_with_the_one_meant(in_process_cli):
    cli = in_process_cli
    refused(cli.run("run", "--mod", "tool", "json"), "E025",
            "unknown option --mod; did you mean --mode?")
    refused(cli.run("--frobnicate"), "E025",
            "unknown option --frobnicate (`lobster help run` lists the options)")
    env, code = cli.tool("run", "--mode", "tool", "--dry-rnu", "json")
    assert (code, env["error"]["code"], env["error"]["message"]) == (
        2, "E025", "unknown option --dry-rnu; did you mean --dry-run?")


def test_a_path_to_no_file_is_no_such_file(in_process_cli):
    cli = in_process_cli
    (cli.work / "examples").mkdir()
    (cli.work / "examples" / "inbox-triage.lobster").write_text("steps: []\n")
    refused(cli.run("run", "examples/inbox-triag.lobster"), "E026",
            "no such file: examples/inbox-triag.lobster; did you mean "
            "examples/inbox-triage.lobster?")
    refused(cli.run("nope.yaml"), "E026", "no such file: nope.yaml")
    refused(cli.run("run", "gone/x"), "E026", "no such file: gone/x")


def test_a_word_close_to_a_subcommand_gets_did_you_mean(in_process_cli):
    cli = in_process_cli
    refused(cli.run("rnu", "x.lobster"), "E027", "unknown subcommand 'rnu'; did you mean 'run'?")
    refused(cli.run("pendin"), "E027", "unknown subcommand 'pendin'; did you mean 'pending'?")
    env, code = cli.tool("pendin", "--mode", "tool")
    assert (code, env["error"]["code"]) == (2, "E027")


def test_stray_words_after_a_file_are_refused(in_process_cli):
    cli = in_process_cli
    (cli.work / "w.lobster").write_text("steps:\n  - id: a\n    run: echo hi\n")
    refused(cli.run("run", "w.lobster", "--arg-json", "{}"), "E025",
            "unknown option --arg-json; did you mean --args-json?")
    refused(cli.run("run", "w.lobster", "--mode", "tool", "extra"), "E028",
            "unexpected argument 'extra' after the FILE 'w.lobster' (run takes one FILE or "
            "PIPELINE; quote a pipeline as one argument)")


def test_real_pipelines_still_run(in_process_cli):
    """Words that name pipeline commands are never second-guessed, even close to a
    subcommand or written like a file; one that is nothing at all is the original's error."""
    cli = in_process_cli
    for argv, out in ((["json"], "[]\n"), (["head", "--n", "2"], "[]\n"),
                      (["exec --json --shell 'echo [1,2,3]' | head --n 2"], "[\n  1,\n  2\n]\n"),
                      (["run", "exec", "--json", "--shell", "echo [4]"], "[\n  4\n]\n")):
        proc = cli.run(*argv)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, out, ""), argv
    proc = cli.run("nosuch")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == "Error: Unknown command: nosuch"


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("LOBSTER_REFERENCE"), reason="needs the original")
def test_real_pipelines_answer_as_the_original(in_process_cli, tmp_path):
    cli = in_process_cli
    for argv in (["json"], ["head", "--n", "2"], ["exec --json --shell 'echo [1,2]'"],
                 ["nosuch"]):
        ours = cli.run(*argv)
        ref = subprocess.run([os.environ["LOBSTER_REFERENCE"], *argv], cwd=cli.work,
                             env={**cli.env, "HOME": str(tmp_path)}, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
        assert (ours.returncode, ours.stdout) == (ref.returncode, ref.stdout), argv
        assert ours.stderr.split("\n")[0] == ref.stderr.split("\n")[0], argv


def test_every_subcommand_refuses_an_unknown_option(in_process_cli):
    cli = in_process_cli
    tool_mode = {"resume", "tool", "doctor"}  # they answer with an envelope
    for name in SPECS:
        proc = cli.run(name, "--zzq-nothing")
        assert proc.returncode == 2, (name, proc)
        if name in tool_mode:
            error = json.loads(proc.stdout)["error"]
            assert (error["code"], error["message"].split(" (")[0]) == (
                "E025", "unknown option --zzq-nothing"), name
        else:
            assert proc.stderr.startswith("lobster: error[E025]: unknown option --zzq-nothing"), \
                (name, proc.stderr)
    env, code = cli.tool("resume", "--aprove", "yes", "--id", "1a2b3c4d")
    assert (code, env["error"]["message"]) == (
        2, "unknown option --aprove; did you mean --approve?")


# resume --id --------------------------------------------------------------------------------
def _pending(cli) -> list[dict]:
    proc = cli.run("pending", "--format", "json")
    assert proc.returncode == 0, proc
    return json.loads(proc.stdout)


def test_resume_by_the_id_pending_shows_at_an_input_gate(in_process_cli):
    cli = in_process_cli
    (cli.work / "ask.lobster").write_text(ASKING)
    for halt in (["run", "--mode", "tool", "ask.lobster", "--args-json", '{"x": "bo"}'],
                 ["run", "--mode", "tool", "exec --json --shell 'echo [1]' | ask --prompt N"]):
        env, _ = cli.tool(*halt)
        assert env["status"] == "needs_input", env
        [entry] = _pending(cli)
        assert (entry["kind"], entry["approvalId"]) == ("input", None)
        ident = entry["stateKey"]
        answer = '{"name": "bo"}' if "ask.lobster" in halt else '{"decision": "approve"}'
        env, code = cli.tool("resume", "--id", ident, "--response-json", answer)
        assert (code, env["status"]) == (0, "ok"), env
        assert _pending(cli) == []
        again, code = cli.tool("resume", "--id", ident, "--response-json", answer)
        assert (code, again["ok"]) == (1, False)
        assert again["error"]["message"] in ("Pipeline resume state not found",
                                             "Workflow resume state not found")
    assert env["output"] == [{"decision": "approve"}]


def test_approval_ids_keep_the_originals_texts(in_process_cli):
    cli = in_process_cli
    env, _ = cli.tool("run", "--mode", "tool", "exec --json --shell 'echo [1]' | approve | head --n 5")
    ident = env["requiresApproval"]["approvalId"]
    assert [e["approvalId"] for e in _pending(cli)] == [ident]
    assert cli.tool("resume", "--id", ident, "--approve", "yes")[0]["output"] == [1]
    for gone in (ident, "deadbeef", "nonsense"):
        env, code = cli.tool("resume", "--id", gone, "--approve", "yes")
        assert code == 2
        assert env["error"]["message"] == f'Approval ID "{gone}" not found or expired'
    # the one id the original keeps: an approve that was its pipeline's last stage, approved
    env, _ = cli.tool("run", "--mode", "tool", "exec --json --shell 'echo [1]' | approve")
    ident = env["requiresApproval"]["approvalId"]
    assert cli.tool("resume", "--id", ident, "--approve", "yes")[0]["output"] == [1]
    env, code = cli.tool("resume", "--id", ident, "--approve", "yes")
    assert (code, env["error"]["message"]) == (1, "Pipeline resume state not found")


# help ---------------------------------------------------------------------------------------
OPTION = re.compile(r"^  (?:-h, )?(--[a-z][a-z-]*)", re.MULTILINE)


def _options_section(text: str) -> str:
    return text.split("\noptions:\n", 1)[1]


def test_every_subcommand_has_help_listing_exactly_the_flags_its_parser_takes(in_process_cli):
    cli = in_process_cli
    for name, spec in SPECS.items():
        by_help, by_flag = cli.run("help", name), cli.run(name, "--help")
        assert (by_help.returncode, by_flag.returncode) == (0, 0), name
        assert by_help.stdout == by_flag.stdout and by_help.stdout.startswith(
            f"usage: lobster {name}"), name
        listed = {m.lstrip("-") for m in OPTION.findall(_options_section(by_help.stdout))}
        aliases = set(re.findall(r"\(also --([a-z-]+)", by_help.stdout))
        assert listed | aliases == set(spec.names()), name
        for flag in listed | aliases:  # and the parser takes each one the help names
            try:
                parse(spec, [f"--{flag}", "x"])
            except UsageError as exc:
                raise AssertionError(f"{name} --{flag}: {exc.message}") from None


def test_every_flag_in_help_gets_past_the_subcommand_parser(in_process_cli):
    """Run each subcommand with each flag its help lists: none is refused as unknown (the
    subcommand really parses with its table). Values are chosen to fail fast, never serve."""
    cli = in_process_cli
    for name, spec in SPECS.items():
        if name == "mcp":
            continue  # no flags but --help
        for flag in spec.flags:
            argv = [name, f"--{flag.name}"] + (["nothing-valid"] if flag.value else [])
            proc = cli.run(*argv)
            assert "E025" not in proc.stdout + proc.stderr, (argv, proc)


def test_help_tool_documents_every_request_field():
    from vm.cli.help import FIELD_EXAMPLES, subcommand_help
    from vm.service.protocol.request import REQUEST_FIELDS

    text = subcommand_help("tool")
    for action, fields in REQUEST_FIELDS.items():
        section = text.split(f"\n  {action}:\n", 1)[1]
        for field in fields:
            assert field in FIELD_EXAMPLES, f"{field} needs an example in vm/cli/help.py"
            assert re.search(rf"^    {field} \([a-z0-9 \"]+(, required)?\)$", section,
                             re.MULTILINE), field
            assert f'      example: "{field}": {json.dumps(FIELD_EXAMPLES[field])}' in section


def test_help_tool_examples_run(in_process_cli):
    from vm.cli.help import subcommand_help

    line = subcommand_help("tool").split("examples:\n")[1].splitlines()[0]
    request = json.loads(line.split("lobster tool ", 1)[1].strip("'"))
    env, code = in_process_cli.tool("tool", json.dumps(request))
    assert (code, env["status"]) == (0, "needs_approval")


def test_help_mcp_gives_the_absolute_path_of_this_executable(cli):
    proc = cli.run("help", "mcp")
    config = json.loads(proc.stdout[proc.stdout.index("{"):])
    server = config["mcpServers"]["lobster"]
    assert server == {"command": os.path.abspath(shutil.which(LOBSTER) or LOBSTER),
                      "args": ["mcp"], "cwd": str(cli.work),
                      "env": {"LOBSTER_STATE_DIR": os.path.abspath(cli.env["LOBSTER_STATE_DIR"])}}
    assert os.path.isabs(server["command"])


def test_help_mcp_outside_a_script_names_this_interpreter(in_process_cli):
    proc = in_process_cli.run("mcp", "--help")  # not a script: this interpreter, -m
    server = json.loads(proc.stdout[proc.stdout.index("{"):])["mcpServers"]["lobster"]
    assert server["args"] == ["-m", "vm.cli.main", "mcp"] and os.path.isabs(server["command"])


def test_help_loads_none_of_the_engine_nor_its_libraries(cli):
    from conftest import imported_by_lobster

    for argv in (["help"], ["help", "resume"], ["pending", "--help"]):
        out, modules = imported_by_lobster(cli, *argv)
        assert out.startswith(("lobster - ", "usage: lobster")), argv
        heavy = {m for m in modules if m.split(".")[0] in ("lark", "jsonschema")
                 or m.startswith(("vm.engine", "vm.isa", "vm.host", "vm.service.protocol.r"))}
        assert heavy == set(), (argv, heavy)


# doctor -------------------------------------------------------------------------------------
def test_doctor_reports_the_installation(in_process_cli):
    cli = in_process_cli
    env, code = cli.tool("doctor", "--format", "json",
                         env={"LOBSTER_MAX_OUTPUT_BYTES": "4096", "LOBSTER_SHELL": "/bin/sh"})
    assert code == 0
    [item] = env["output"]
    assert item["stateDir"] == str(cli.state)
    assert item["store"] == {"kind": "directory", "location": str(cli.state), "answers": True}
    assert item["shell"] == {"argv": ["/bin/sh", "-c"], "found": True}
    assert set(item["extras"]) == {"mcp", "postgres", "lsp"}
    for extra in item["extras"].values():
        assert extra["installed"] or "pip install" in extra["install"]
    assert item["limits"]["timeoutMs"]["default"] == 20000
    assert item["limits"]["env"]["LOBSTER_MAX_OUTPUT_BYTES"] == "4096"
    text = cli.run("doctor", "--format", "text").stdout
    assert f"state dir: {cli.state}\n" in text and "extra mcp: " in text
    plain, _ = cli.tool("doctor")  # without --format: the original's item, nothing added
    assert set(plain["output"][0]) == {"toolMode", "protocolVersion", "version"}


def test_doctor_says_when_the_store_does_not_answer(in_process_cli):
    cli = in_process_cli
    blocker = cli.work / "not-a-dir"
    blocker.write_text("")
    proc = cli.run("doctor", "--format", "text", env={"LOBSTER_STATE_DIR": str(blocker)})
    assert proc.returncode == 1
    assert f"store: directory {blocker} (does not answer: " in proc.stdout
    assert proc.stderr.startswith("lobster: error[T499]: ")
