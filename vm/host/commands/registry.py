"""The stdlib registry: every command's signature as data, and its implementation. Loaded
when a stage first runs (or a tool reads the signatures): `vm.host.commands` names it."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from functools import partial

from attrs import field

from vm.core.records import frozen
from vm.host.commands.base import STDIN_MODES, Args, Context

__all__ = ["COMMANDS", "Command", "Flag", "args_schema", "lookup", "signature"]


@frozen
class Flag:
    """One `--name` flag. `kind` is "bool" (never takes the next token), "str" or "num" (both
    take a value; "num" is documented as a number)."""

    name: str
    kind: str = "str"
    help: str = ""
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()  # for documentation; commands keep their own error texts


RunFn = Callable[[Args, list, Context], list]


@frozen
class Command:
    """A stdlib command: its signature (as data) and its implementation."""

    name: str
    summary: str
    run: RunFn | None = field(eq=False, repr=False)
    flags: tuple[Flag, ...] = ()
    positionals: str = ""  # usage text for positionals, e.g. "<expr>" or "<cmd> [args...]"
    effects: str = "none"  # none | reads | reads_state | writes_state | local_exec | network | halts
    lowering: str = "stage"  # the instruction it compiles to: stage | exec | render | approve | ask
    aliases: tuple[str, ...] = ()
    # exec-style commands: after the first positional every token is passed through verbatim
    rest_after_first_positional: bool = False
    # static argument check run by the compiler: a message (the reference's text) or None
    check: Callable[[Args], str | None] | None = field(default=None, eq=False, repr=False)
    examples: tuple[str, ...] = ()

    def flag(self, name: str) -> Flag | None:
        for f in self.flags:
            if f.name == name or name in f.aliases:
                return f
        return None


class _Lazy:
    """A command module imported on its first call: signatures are data, and a process that
    never runs a command does not pay for importing it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        found = []  # the function, once its module is imported

        def call(*args, **kwargs):
            if not found:
                found.append(getattr(importlib.import_module(self._name), attr))
            return found[0](*args, **kwargs)

        call.__name__ = call.__qualname__ = attr
        return call


data = _Lazy("vm.host.commands.data")
template = _Lazy("vm.host.commands.template")
state_cmds = _Lazy("vm.host.commands.state_cmds")
gateway = _Lazy("vm.host.commands.gateway")
llm = _Lazy("vm.host.commands.llm")
gog = _Lazy("vm.host.commands.gog")
email = _Lazy("vm.host.commands.email")
openclaw = _Lazy("vm.host.commands.openclaw")
workflows = _Lazy("vm.host.commands.workflows")


def _needs_positional(message: str):
    """The first positional, as the original reads `args._[0]`: an empty `''` is none."""
    return lambda args: None if args.positionals and args.positionals[0] != "" else message


def _needs_flag(flag: str, message: str):
    return lambda args: None if isinstance(args.get(flag), str) else message


def _exec_check(args: Args) -> str | None:
    if not (isinstance(args.get("shell"), str) or args.positionals):
        return "exec requires a command"
    mode = args.get("stdin")
    if mode is not None and (not isinstance(mode, str) or mode.lower() not in STDIN_MODES):
        return f"exec --stdin must be raw, json, or jsonl (got {mode if isinstance(mode, str) else 'true'})"
    return None


def _ask_check(args: Args) -> str | None:
    schema = args.get("schema")
    if schema is None:
        return None
    if not isinstance(schema, str):
        return "ask --schema must be valid JSON"
    try:
        value = json.loads(schema)
    except ValueError:
        return "ask --schema must be valid JSON"
    if not isinstance(value, dict):
        return "ask --schema must decode to a JSON schema object"
    from vm.core.schema import schema_error

    return "ask response schema is invalid" if schema_error(value) else None


def _template_requires(args: Args) -> str | None:
    """As the run decides: an empty `--text ''`, `--file ''` or positional `''` is none."""
    def given(name: str) -> bool:
        return isinstance(args.get(name), str) and args.get(name) != ""

    if given("text") or given("file") or " ".join(args.positionals):
        return None
    return "template requires --text or --file (or positional text)"


def _diff_requires(args: Args) -> str | None:
    key = args.get("key")
    if key is None and args.positionals:
        key = args.positionals[0]
    if isinstance(key, str) and key != "":  # `--key ''` is no key, as in the original
        return None
    return "diff.last requires --key"


def _openclaw_agent_check(args: Args) -> str | None:
    def text(name: str) -> str:
        value = args.get(name)
        return "" if value is None else (value if isinstance(value, str) else "true").strip()

    explicit = "prompt" if args.get("prompt") is not None else "message"
    if not (text(explicit) or " ".join(args.positionals).strip()):
        return "openclaw.agent requires --prompt, --message, or positional text"
    if not (text("agent") or text("session-key") or text("session-id")):
        return "openclaw.agent requires --agent, --session-key, or --session-id"
    return None


def _workflows_run_check(args: Args) -> str | None:
    name = args.get("name")
    if name is None and args.positionals:
        name = args.positionals[0]
    return None if name else "workflows.run requires --name"


JSON_TYPES = {"bool": "boolean", "num": "number", "str": "string"}
# what the original's argsSchema lists as required ("_": the positional arguments)
REQUIRED = {"exec": ("_",), "pick": ("_",), "where": ("_",), "state.get": ("_",),
            "state.set": ("_",), "groupBy": ("key",), "diff.last": ("key",),
            "apus.invoke": ("tool", "action"), "clawd.invoke": ("tool", "action"),
            "openclaw.invoke": ("tool", "action"), "workflows.run": ("name",)}


def args_schema(cmd: Command) -> dict:
    """The command's arguments as a JSON Schema object (the shape of the original's
    `argsSchema`): one property per flag and per flag alias, and `_` for positionals."""
    properties: dict = {}
    for f in cmd.flags:
        prop = {"type": JSON_TYPES.get(f.kind, "string"), "description": f.help,
                **({"enum": list(f.choices)} if f.choices else {})}
        properties[f.name] = prop
        for alias in f.aliases:
            properties[alias] = {**prop, "description": f"alias of --{f.name}"}
    if cmd.positionals or cmd.lowering == "exec":
        properties["_"] = {"type": "array", "items": {"type": "string"},
                           "description": cmd.positionals or "arguments"}
    return {"type": "object", "properties": properties,
            "required": list(REQUIRED.get(cmd.name, ()))}


def signature(cmd: Command) -> dict:
    """A command's signature as JSON: what `commands.list` and agents see."""
    return {
        "name": cmd.name,
        "description": cmd.summary,
        "argsSchema": args_schema(cmd),
        "aliases": list(cmd.aliases),
        "flags": [{"name": f.name, "type": JSON_TYPES.get(f.kind, "string"),
                   "aliases": list(f.aliases), "description": f.help,
                   **({"enum": list(f.choices)} if f.choices else {})} for f in cmd.flags],
        "positionals": cmd.positionals or None,
        "sideEffects": cmd.effects,
        "examples": list(cmd.examples),
    }


def commands_list(args: Args, items: list, ctx: Context) -> list:
    return [signature(cmd) for cmd in sorted(_ALL, key=lambda c: c.name)]


KEY = Flag("key", help="dotted path into each item")

GATEWAY_FLAGS = (
    Flag("url", help="gateway URL (default APUS_URL, CLAWD_URL, OPENCLAW_URL)"),
    Flag("token", help="gateway credential, sent to any host"),
    Flag("tool", help="the tool to invoke"), Flag("action", help="the tool's action"),
    Flag("args-json", help="the tool's arguments as JSON"),
    Flag("session-key", help="gateway session", aliases=("sessionKey",)),
    Flag("dry-run", "bool", "ask the tool not to act", aliases=("dryRun",)),
    Flag("each", "bool", "one call per input item"),
    Flag("item-key", help="the args key that holds each item (default item)", aliases=("itemKey",)),
)


def _gateway(name: str) -> Command:
    return Command(name, "invoke a gateway tool over HTTP (POST /tools/invoke)",
                   partial(gateway.invoke, name), flags=GATEWAY_FLAGS, effects="network",
                   examples=(f"{name} --tool message --action send --each --item-key message "
                             "--args-json '{\"provider\":\"telegram\"}'",))

LLM_FLAGS = (
    Flag("provider", help="adapter: apus (alias openclaw), pi or http (default: auto-detect)",
         choices=("apus", "openclaw", "pi", "http")),
    Flag("token", help="bearer credential for the adapter, sent to any host"),
    Flag("prompt", help="the instructions (else the positional words)"),
    Flag("model", help="model id (default LOBSTER_LLM_MODEL, LLM_TASK_MODEL, adapter default)"),
    Flag("artifacts-json", help="JSON array of extra artifacts (after the input items)"),
    Flag("metadata-json", help="JSON object of metadata sent with the request"),
    Flag("output-schema", help="JSON Schema the answer's output.data must satisfy"),
    Flag("schema-version", help="logical schema version for caching (default v1)"),
    Flag("max-validation-retries", "num", "extra calls when the answer fails --output-schema "
         "(default 1)"),
    Flag("temperature", "num", "sampling temperature"),
    Flag("max-output-tokens", "num", "cap on completion tokens"),
    Flag("state-key", help="run-state key for reuse (default LOBSTER_RUN_STATE_KEY)"),
    Flag("refresh", "bool", "ignore run state and cache; always call the adapter"),
    Flag("disable-cache", "bool", "neither read nor write the file cache"),
)


def _llm(name: str, summary: str) -> Command:
    return Command(name, summary, partial(llm.invoke, name), flags=LLM_FLAGS,
                   positionals="[prompt words...]", effects="network",
                   examples=(f"{name} --prompt 'Write summary'",
                             f"exec --json --shell 'cat items.json' | {name} --prompt 'Score each "
                             "item' --output-schema '{\"type\":\"object\"}'"))

_ALL = (
    Command("exec", "run an OS command (argv, or a shell line with --shell)", None,
            flags=(Flag("json", "bool", "parse stdout as one JSON value"),
                   Flag("shell", help="a shell line, run with /bin/sh -c"),
                   Flag("stdin", help="feed items to the child: raw, json or jsonl",
                        choices=("raw", "json", "jsonl"))),
            positionals="[<cmd> [args...]]", effects="local_exec", lowering="exec",
            check=_exec_check,  # every --x is exec's own, after the command too (as the reference)
            examples=("exec --json --shell 'inbox list --json'", "exec git status")),
    Command("where", "keep items matching one predicate (field=value, <, <=, >, >=, !=)",
            data.where, positionals="<expr>",
            check=_needs_positional("where requires an expression (e.g. field=value)"),
            examples=("where score>20", "where team=red")),
    Command("pick", "keep only the named fields of each item", data.pick,
            positionals="<field,field...>",
            check=_needs_positional("pick requires a comma-separated field list"),
            examples=("pick id,name",)),
    Command("head", "the first N items (default 10)", data.head,
            flags=(Flag("n", "num", "how many items"),), examples=("head --n 5",)),
    Command("sort", "stable sort, by the whole item or --key", data.sort,
            flags=(KEY, Flag("desc", "bool", "descending order")),
            examples=("sort --key score --desc",)),
    Command("dedupe", "drop repeated items (by the whole item or --key)", data.dedupe,
            flags=(KEY,), examples=("dedupe --key id",)),
    Command("groupBy", "group items by --key into {key, items, count}", data.group_by,
            flags=(KEY,), aliases=("group_by",), check=_needs_flag("key", "groupBy requires --key"),
            examples=("groupBy --key team",)),
    Command("map", "wrap, unwrap or assign fields (key=template)", data.map_items,
            flags=(Flag("wrap", help="wrap each item as {K: item}"),
                   Flag("unwrap", help="replace each item by item[K]")),
            positionals="[key=value...]", examples=("map --wrap item", "map 'label={{name}}'")),
    Command("template", "render a text template per item ({{path | filter}})", template.template,
            flags=(Flag("text", help="the template text"),
                   Flag("file", help="read the template from a file")),
            positionals="[text...]", check=_template_requires, effects="reads",
            examples=("template --text 'Hello {{name | upper}}'",)),
    Command("json", "render the items as pretty JSON", None, lowering="render",
            examples=("exec --json --shell 'echo [1]' | json",)),
    Command("table", "render the items as a text table", None, lowering="render",
            examples=("pick id,name | table",)),
    Command("approve", "halt for an approval of the items", None,
            flags=(Flag("prompt", help="the question (default 'Approve?')"),
                   Flag("emit", "bool", "always halt, never prompt"),
                   Flag("preview-from-stdin", "bool", "attach a preview of the first items",
                        aliases=("previewFromStdin",)),
                   Flag("limit", help="how many items the preview shows (default 5)",
                        aliases=("previewLimit", "preview-limit"))),
            effects="halts", lowering="approve",
            examples=("approve --preview-from-stdin --limit 5 --prompt 'Apply?'",)),
    Command("ask", "halt for a structured answer (JSON Schema)", None,
            flags=(Flag("prompt", help="the question (default 'Input required')"),
                   Flag("schema", help="JSON Schema of the answer"),
                   Flag("subject-from-stdin", "bool", "attach the items as the subject",
                        aliases=("subjectFromStdin",)),
                   Flag("emit", "bool", "always halt, never prompt")),
            effects="halts", lowering="ask", check=_ask_check,
            examples=("ask --prompt 'How many?' --schema '{\"type\":\"integer\"}'",)),
    Command("state.get", "read a stored value (null if missing)", state_cmds.state_get,
            positionals="<key>", effects="reads_state",
            check=_needs_positional("state.get requires a key"),
            examples=("state.get last-run",)),
    Command("state.set", "store the items (one item, or the array)", state_cmds.state_set,
            positionals="<key>", effects="writes_state",
            check=_needs_positional("state.set requires a key"),
            examples=("state.set last-run",)),
    Command("diff.last", "compare the items with the value stored last time, then store them",
            state_cmds.diff_last, flags=(KEY,), positionals="[<key>]", effects="writes_state",
            check=_diff_requires, examples=("diff.last --key inbox",)),
    Command("commands.list", "every command's signature, as JSON", commands_list,
            examples=("commands.list",)),
    _gateway("apus.invoke"), _gateway("clawd.invoke"), _gateway("openclaw.invoke"),
    Command("gog.gmail.search", "Gmail messages matching a search, read with the gog CLI "
            "(GOG_BIN overrides the program)", gog.gmail_search,
            flags=(Flag("query", help="Gmail search query (default newer_than:1d)"),
                   Flag("max", "num", "at most this many messages (default 20)"),
                   Flag("limit", "num", "same as --max (--max wins)")),
            effects="local_exec",
            examples=("gog.gmail.search --query 'newer_than:1d' --max 20 | email.triage",)),
    Command("gog.gmail.send", "send each {to, subject, body} item as a Gmail message with the "
            "gog CLI", gog.gmail_send,
            flags=(Flag("dry-run", "bool", "send nothing; return the drafts as they would go",
                        aliases=("dryRun",)),),
            effects="network",
            examples=("email.triage --llm --emit drafts | approve --prompt 'Send these?' | "
                      "gog.gmail.send",)),
    Command("email.triage", "sort messages into needs-reply, needs-action and FYI (rules, or "
            "llm.invoke with --llm and a configured provider)", email.triage,
            flags=(Flag("limit", "num", "consider at most this many input items (default 20)"),
                   Flag("llm", "bool", "let llm.invoke decide and draft replies (needs a "
                        "provider; otherwise the rules apply)"),
                   Flag("model", help="model id passed to llm.invoke"),
                   Flag("url", help="accepted and ignored (kept for compatibility)"),
                   Flag("token", help="bearer credential passed to llm.invoke"),
                   Flag("temperature", "num", "sampling temperature for llm.invoke"),
                   Flag("max-output-tokens", "num", "completion token cap for llm.invoke"),
                   Flag("emit", help="report (one summary item, default) or drafts (one "
                        "{to, subject, body, emailId} item per drafted reply)",
                        choices=("report", "drafts")),
                   Flag("state-key", help="run-state key passed to llm.invoke")),
            examples=("gog.gmail.search --query 'newer_than:1d' | email.triage --limit 20",
                      "email.triage --llm --model m --emit drafts | approve --prompt 'Send?' | "
                      "gog.gmail.send")),
    Command("openclaw.agent", "one turn of a configured OpenClaw agent, through the openclaw "
            "CLI (LOBSTER_OPENCLAW_BIN overrides the program); input items are appended to "
            "the message as JSON lines", openclaw.agent,
            flags=(Flag("agent", help="the configured agent's id"),
                   Flag("prompt", help="the message for the agent"),
                   Flag("message", help="same as --prompt (--prompt wins)"),
                   Flag("model", help="model override for this turn"),
                   Flag("session-key", help="OpenClaw session key", aliases=("sessionKey",)),
                   Flag("session-id", help="OpenClaw session id", aliases=("sessionId",)),
                   Flag("thinking", help="thinking level"),
                   Flag("timeout", "num", "the agent's timeout, whole seconds"),
                   Flag("local", "bool", "run the agent embedded, not through the gateway")),
            positionals="[message words...]", effects="network", check=_openclaw_agent_check,
            examples=("openclaw.agent --agent ops --prompt 'Summarize the logs'",)),
    Command("workflows.list", "the built-in named workflows, with their argument schemas",
            workflows.list_workflows, examples=("workflows.list",)),
    Command("workflows.run", "run a built-in named workflow", workflows.run_workflow,
            flags=(Flag("name", help="the workflow (see workflows.list)"),
                   Flag("args-json", help="the workflow's arguments as a JSON object")),
            positionals="[<name>]", effects="writes_state", check=_workflows_run_check,
            examples=("workflows.run --name github.pr.monitor.notify --args-json "
                      "'{\"repo\":\"openclaw/openclaw\",\"pr\":1152}'",)),
    _llm("llm.invoke", "call an LLM adapter (apus, pi, http) with caching and schema checks"),
    _llm("llm_task.invoke", "llm.invoke through the Apus gateway's llm-task tool"),
)

COMMANDS: dict[str, Command] = {}
for _cmd in _ALL:
    COMMANDS[_cmd.name] = _cmd
    for _alias in _cmd.aliases:
        COMMANDS[_alias] = _cmd


def lookup(name: str) -> Command | None:
    return COMMANDS.get(name)
