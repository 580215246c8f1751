"""`openclaw.agent`: one turn of a configured OpenClaw agent through the `openclaw` CLI
(`LOBSTER_OPENCLAW_BIN` names another executable). The CLI's `--json` answer is the item."""

from __future__ import annotations

from typing import Any

from vm.core import js, json_read, json_write
from vm.host.commands.base import Args, CommandError, Context
from vm.host.commands.external import glued, run_cli

MAX_OUTPUT_BYTES = 10 * 1024 * 1024


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return js.js_trim(js.to_string(value)) or None


def with_input(prompt: str, items: list) -> str:
    """The message: the prompt, then the piped-in items as JSON lines under a heading."""
    if not items:
        return prompt
    lines = "\n".join(json_write.json_compact(item) for item in items)
    return f"{prompt}\n\nPipeline input (JSONL):\n{lines}"


def agent(args: Args, items: list, ctx: Context) -> list:
    explicit = args.get("prompt")
    prompt = _text(explicit if explicit is not None else args.get("message")) \
        or js.js_trim(" ".join(args.positionals))
    if not prompt:
        raise CommandError("openclaw.agent requires --prompt, --message, or positional text")
    name = _text(args.get("agent"))
    session_key = _text(args.get("session-key"))
    session_id = _text(args.get("session-id"))
    if not (name or session_key or session_id):
        raise CommandError("openclaw.agent requires --agent, --session-key, or --session-id")
    argv = ["agent", "--json", glued("message", with_input(prompt, items))]
    for flag, value in (("agent", name), ("model", _text(args.get("model"))),
                        ("session-key", session_key), ("session-id", session_id),
                        ("thinking", _text(args.get("thinking")))):
        if value is not None:
            argv.append(glued(flag, value))
    if args.get("timeout") is not None:
        seconds = js.to_number(args.get("timeout"))
        if not (isinstance(seconds, int) or (isinstance(seconds, float) and seconds.is_integer())) \
                or seconds < 0:
            raise CommandError("openclaw.agent --timeout must be a non-negative integer in seconds")
        argv.append(glued("timeout", js.format_number(seconds)))
    if args.get("local") is True:
        argv.append("--local")
    program = _text(ctx.env.get("LOBSTER_OPENCLAW_BIN")) or "openclaw"
    # the agent may act as soon as it starts: a failed turn is never retried automatically
    result = run_cli([program, *argv], ctx, retryable=False,
                     not_found="openclaw.agent could not find the OpenClaw CLI",
                     max_output_bytes=MAX_OUTPUT_BYTES,
                     limit_message=f"openclaw.agent output exceeded {MAX_OUTPUT_BYTES} bytes")
    if result.code != 0:
        detail = js.js_trim(result.stderr or result.stdout or f"exited with code {result.code}")
        raise CommandError(f"openclaw.agent failed: {detail}", code="T410", retryable=False)
    try:
        answer = json_read.json_loads(js.js_trim(result.stdout) or "null")
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise CommandError("openclaw.agent expected JSON output from `openclaw agent --json`",
                           retryable=False)
    return [answer]
