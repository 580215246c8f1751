"""The stdlib registry: every command's signature as data, and its implementation."""

from __future__ import annotations

import importlib
import json
from functools import partial

from vm.commands.base import Args, Command, CommandError, Context, Flag

__all__ = ["Args", "COMMANDS", "Command", "CommandError", "Context", "Flag", "lookup"]


class _Lazy:
    """A command module imported on its first call: signatures are data, and a process that
    never runs a command does not pay for importing it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        def call(*args, **kwargs):
            return getattr(importlib.import_module(self._name), attr)(*args, **kwargs)

        call.__name__ = call.__qualname__ = attr
        return call


data = _Lazy("vm.commands.data")
template = _Lazy("vm.commands.template")
state_cmds = _Lazy("vm.commands.state_cmds")
gateway = _Lazy("vm.commands.gateway")
llm = _Lazy("vm.commands.llm")
STDIN_MODES = ("raw", "json", "jsonl")  # exec --stdin


def _needs_positional(message: str):
    return lambda args: None if args.positionals else message


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
    from vm.schema import schema_error

    return "ask response schema is invalid" if schema_error(value) else None


def _template_requires(args: Args) -> str | None:
    if isinstance(args.get("text"), str) or isinstance(args.get("file"), str) or args.positionals:
        return None
    return "template requires --text or --file (or positional text)"


def _diff_requires(args: Args) -> str | None:
    if isinstance(args.get("key"), str) or args.positionals:
        return None
    return "diff.last requires --key"


def signature(cmd: Command) -> dict:
    """A command's signature as JSON: what `commands.list` and agents see."""
    return {
        "name": cmd.name,
        "description": cmd.summary,
        "aliases": list(cmd.aliases),
        "flags": [{"name": f.name, "type": "boolean" if f.kind == "bool" else "string",
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
    Flag("max-validation-retries", help="extra calls when the answer fails --output-schema "
         "(default 1)"),
    Flag("temperature", help="sampling temperature"),
    Flag("max-output-tokens", help="cap on completion tokens"),
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
            flags=(Flag("n", help="how many items"),), examples=("head --n 5",)),
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
