"""`gog.gmail.search` and `gog.gmail.send`: Gmail through the `gog` CLI
(https://github.com/steipete/gogcli; `GOG_BIN` names another executable)."""

from __future__ import annotations

from typing import Any

from vm.core import js, json_read
from vm.host.commands.base import Args, CommandError, Context
from vm.host.commands.external import after_terminator, glued, program_argv, run_cli

GOG_NOT_FOUND = "gog not found on PATH (install: https://github.com/steipete/gogcli)"


def _gog(ctx: Context) -> str:
    value = ctx.env.get("GOG_BIN")
    return value if value is not None else "gog"


def _flag_text(value: Any, default: str) -> str:
    return default if value is None else js.to_string(value)


def search_items(parsed: Any) -> list:
    """gog's answer as items: a list (whose `{threads: [...]}` pages are flattened), an object
    with `threads`, or any other value as one item."""
    if isinstance(parsed, list):
        out: list = []
        for entry in parsed:
            threads = entry.get("threads") if isinstance(entry, dict) else None
            out.extend(threads if isinstance(threads, list) else [entry])
        return out
    if isinstance(parsed, dict) and isinstance(parsed.get("threads"), list):
        return list(parsed["threads"])
    return [parsed]


def gmail_search(args: Args, items: list, ctx: Context) -> list:
    query = _flag_text(args.get("query"), "newer_than:1d")
    raw_max = args.get("max")
    if raw_max is None:
        raw_max = args.get("limit")
    limit = js.format_number(js.to_number(20 if raw_max is None else raw_max))
    # gog takes the query as a positional argument: after `--`, so `-x` is a query, not a flag
    argv = program_argv(_gog(ctx), ["gmail", "search", "--json", glued("max", limit),
                                    *after_terminator(query)])
    result = run_cli(argv, ctx, not_found=GOG_NOT_FOUND)
    if result.code != 0:
        raise CommandError(f"gog.gmail.search failed ({result.code}): {result.stderr[:400]}",
                           code="T410")
    try:
        parsed = json_read.json_loads(result.stdout)
    except ValueError:
        raise CommandError("gog.gmail.search expected JSON output") from None
    return search_items(parsed)


def _draft(item: Any) -> dict:
    if not isinstance(item, (dict, list)):
        raise CommandError("gog.gmail.send expects draft objects", retryable=False)
    fields = item if isinstance(item, dict) else {}

    def text(name: str) -> str:
        value = fields.get(name)  # `item.x ?? ""`: null, absent or undefined (`pick`) alike
        return js.js_trim("" if value is None or value is js.UNDEFINED else js.to_string(value))

    draft = {"to": text("to"), "subject": text("subject"), "body": text("body")}
    if not draft["to"]:
        raise CommandError("gog.gmail.send draft missing to", retryable=False)
    return draft


def gmail_send(args: Args, items: list, ctx: Context) -> list:
    dry_run = js.truthy(args.get("dry-run", False))
    results: list = []
    sent = False
    for item in items:
        try:
            draft = _draft(item)
        except CommandError as exc:
            exc.retryable = not sent
            raise
        if dry_run:
            results.append({"ok": True, "dryRun": True, **draft})
            continue
        argv = ["gmail", "send", glued("to", draft["to"])]
        if draft["subject"]:
            argv.append(glued("subject", draft["subject"]))
        if draft["body"]:
            argv.append(glued("body", draft["body"]))
        argv.append("--json")
        sent = True  # from here on the mail may be out: never retried automatically
        result = run_cli(program_argv(_gog(ctx), argv), ctx, not_found=GOG_NOT_FOUND,
                         retryable=False)
        if result.code != 0:
            raise CommandError(f"gog.gmail.send failed ({result.code}): {result.stderr[:400]}",
                               code="T410", retryable=False)
        if not result.stdout:
            results.append({"ok": True})
            continue
        try:
            results.append(json_read.json_loads(result.stdout))
        except ValueError:
            results.append({"ok": True, "raw": result.stdout})
    return results
