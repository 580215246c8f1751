"""`exec`: run a child process (argv, or a shell line) and turn its stdout into items."""

from __future__ import annotations

from typing import Any

from vm.core import js
from vm.host.commands import STDIN_MODES
from vm.host.commands.base import CommandError, Context
from vm.host.process import (Cancelled, CommandNotFound, OutputLimitExceeded, ProcessError,
                        ProcessTimeout, run_process, shell_argv)


def encode_stdin(mode: str | None, items: list) -> bytes | None:
    """The bytes fed to the child for `--stdin MODE` (None: stdin is closed at once)."""
    if mode is None:
        return None
    if mode == "json":
        text = js.json_compact(items)
    elif mode == "jsonl":
        text = "".join(js.json_compact(item) + "\n" for item in items)
    else:
        text = "\n".join(js.to_text(item) for item in items)
    return text.encode("utf-8")


def decode_stdout(stdout: bytes, as_json: bool) -> list:
    text = stdout.decode("utf-8", errors="replace")
    if as_json:
        text = text.strip()
        if not text:
            return [None]
        try:
            value = js.json_loads(text)
        except ValueError as exc:
            from vm.core.detail import excerpt_detail

            raise CommandError(f"exec --json could not parse stdout as JSON: {exc}",
                               detail=excerpt_detail(text, exc)) from None
        return value if isinstance(value, list) else [value]
    return [line for line in text.replace("\r\n", "\n").split("\n") if line]


def run_exec(spec: dict[str, Any], items: list, ctx: Context) -> list:
    """spec: {"argv": [...]} or {"shell": line}, plus "json": bool and "stdin": mode|None."""
    mode = spec.get("stdin")
    if mode is not None:
        mode = mode.lower()
        if mode not in STDIN_MODES:
            raise CommandError(f"exec --stdin must be raw, json, or jsonl (got {spec['stdin']})")
    shell = spec.get("shell")
    argv = shell_argv(shell, ctx.env) if shell is not None else list(spec["argv"])
    try:
        result = run_process(argv, stdin=encode_stdin(mode, items), cwd=ctx.cwd, env=ctx.env,
                             deadline=ctx.deadline, max_output_bytes=ctx.max_output_bytes,
                             shell=shell is not None, scope=ctx.scope)
    except ProcessError as exc:
        raise CommandError(exc.message, code=process_code(exc)) from None
    if result.code != 0:
        detail = (result.stderr.decode("utf-8", "replace").strip()
                  or result.stdout.decode("utf-8", "replace").strip()
                  or (shell if shell is not None else argv[0]))
        raise CommandError(f"exec failed ({result.code}): {detail}", code="T410")
    return decode_stdout(result.stdout, bool(spec.get("json")))


PROCESS_CODES = {ProcessTimeout: "T420", OutputLimitExceeded: "T421", CommandNotFound: "T411",
                 Cancelled: "T422"}


def process_code(exc: ProcessError) -> str:
    return PROCESS_CODES.get(type(exc), "T412")
