"""`lobster help [COMMAND]` (and `lobster`, `-h`, `--help`, `lobster COMMAND --help`): the
overview, a subcommand's help made from its flag table (vm/cli/specs.py), or a pipeline
command's help made from its signature. The overview and a subcommand's help load nothing of
the machine; `help tool` reads the request field table, a pipeline command's help the command
registry."""

from __future__ import annotations

import os
import sys

from vm.cli.flags import UsageError, closest, parse, render
from vm.cli.specs import SPECS

HEAD = "lobster - run tool pipelines as one call, with durable approval and input checkpoints"
TAIL = """\
`lobster PIPELINE` is the same as `lobster run PIPELINE`. `lobster help COMMAND` (or
`lobster COMMAND --help`) shows one subcommand in full, or a pipeline command's help.

examples:
  lobster run --mode tool "exec --json --shell 'echo [1,2,3]' | head --n 2"
  lobster "exec --json --shell 'inbox list --json' | approve --prompt 'Apply?'"
  lobster resume --token <resumeToken> --approve yes

environment: LOBSTER_STATE_DIR (default ~/.lobster/state), LOBSTER_SHELL (default /bin/sh),
LOBSTER_MAX_OUTPUT_BYTES (cap on each child's output); `lobster doctor` shows what is in force.
pipeline commands: run `lobster help COMMAND`, or the pipeline `commands.list`.
"""

# an example value of each tool request field, for `lobster help tool` (a test holds every
# field of the request table to having one)
FIELD_EXAMPLES = {
    "pipeline": 'exec --json --shell "echo [1,2]" | approve --prompt Go?',
    "argsJson": '{"who": "bo"}',
    "cwd": "projects/inbox",
    "timeoutMs": 30000,
    "maxStdoutBytes": 1048576,
    "checkpointTtl": "12h",
    "token": "<resumeToken>",
    "approvalId": "1a2b3c4d",
    "approve": True,
    "responseJson": '{"name": "bo"}',
    "cancel": True,
}


def overview() -> str:
    lines = [HEAD, "", "usage:"]
    for spec in SPECS.values():
        lines.append(f"  {spec.usage.splitlines()[0].strip()}")
        lines.append(f"      {spec.summary}")
    return "\n".join(lines) + "\n\n" + TAIL


def cmd_help(argv: list[str]) -> int:
    """`lobster help [COMMAND]`: the texts are ours (SPEC 9.11)."""
    try:
        _, argv = parse(SPECS["help"], argv)
    except UsageError as exc:
        from vm.cli.common import refuse

        return refuse(exc)
    if not argv or not argv[0]:  # `lobster help ''` is `lobster help`, as in the original
        sys.stdout.write(overview())
        return 0
    name = argv[0]
    if name in SPECS:
        sys.stdout.write(subcommand_help(name))
        return 0
    from vm.host.commands import COMMANDS, lookup

    cmd = lookup(name)
    if cmd is None:
        sys.stderr.write(f"Unknown command: {name}\n")  # the original's words
        guess = closest(name, [*SPECS, *COMMANDS])
        if guess is not None:
            sys.stderr.write(f"lobster: did you mean '{guess}'? (`lobster help {guess}`)\n")
        return 2
    sys.stdout.write(command_help(cmd))
    return 0


def subcommand_help(name: str) -> str:
    text = render(SPECS[name])
    if name == "tool":
        text += "\n" + request_fields()
    elif name == "mcp":
        text += "\n" + mcp_config()
    return text


def command_help(cmd) -> str:
    """A pipeline command's help, from its signature."""
    lines = [f"{cmd.name} — {cmd.summary}", "",
             f"usage: {cmd.name}" + "".join(f" [--{f.name}{'' if f.kind == 'bool' else ' V'}]"
                                            for f in cmd.flags)
             + (f" {cmd.positionals}" if cmd.positionals else "")]
    for f in cmd.flags:
        alias = f" (also --{', --'.join(f.aliases)})" if f.aliases else ""
        lines.append(f"  --{f.name:<20} {f.help}{alias}")
    if cmd.aliases:
        lines.append(f"aliases: {', '.join(cmd.aliases)}")
    lines.append(f"side effects: {cmd.effects}")
    for example in cmd.examples:
        lines.append(f"example: {example}")
    return "\n".join(lines) + "\n"


def request_fields() -> str:
    """Every field of a tool request, per action, with its JSON type, what it is and an
    example: made from the request table `lobster tool` reads requests by."""
    import json

    from vm.service.protocol.request import REQUEST_FIELDS, REQUIRED_FIELDS

    import shlex
    import textwrap

    lines = ["request fields (a JSON object; \"action\" is \"run\" or \"resume\"):"]
    for action, fields in REQUEST_FIELDS.items():
        lines.append(f"  {action}:")
        for name, (schema, text) in fields.items():
            need = ", required" if name in REQUIRED_FIELDS.get(action, ()) else ""
            lines.append(f"    {name} ({schema_type(schema)}{need})")
            lines += textwrap.wrap(text, 92, initial_indent=" " * 6,
                                   subsequent_indent=" " * 6)
            lines.append(f"      example: \"{name}\": {json.dumps(FIELD_EXAMPLES.get(name))}")
    lines.append("  a resume names the run by token or approvalId, and gives exactly one of "
                 "approve,\n  responseJson, cancel.")
    run = {"action": "run", "pipeline": FIELD_EXAMPLES["pipeline"]}
    resume = {"action": "resume", "token": FIELD_EXAMPLES["token"], "approve": True}
    lines += ["examples:", f"  lobster tool {shlex.quote(json.dumps(run))}",
              f"  echo {shlex.quote(json.dumps(resume))} | lobster tool -"]
    return "\n".join(lines) + "\n"


def schema_type(schema: dict) -> str:
    import json

    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type", "any")
    return " or ".join(kind) if isinstance(kind, list) else kind


def executable() -> tuple[str, list[str]]:
    """How a client starts this very `lobster`: the running script by its absolute path, or
    this interpreter with `-m` when the process is not a script (an embedding, a test)."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.isfile(script) and os.access(script, os.X_OK) and not script.endswith(".py"):
        return script, []
    return sys.executable, ["-m", "vm.cli.main"]


def mcp_config() -> str:
    import json

    command, args = executable()
    server: dict = {"command": command, "args": [*args, "mcp"], "cwd": os.getcwd()}
    state = os.environ.get("LOBSTER_STATE_DIR")
    if state:  # a client starts the server without this shell's environment
        server["env"] = {"LOBSTER_STATE_DIR": os.path.abspath(state)}
    config = {"mcpServers": {"lobster": server}}
    return ("an MCP client's configuration for this installation (absolute paths, so it works "
            "from any\ndirectory and without activating a virtual environment; runs start "
            "in `cwd`):\n" + json.dumps(config, indent=2) + "\n")
