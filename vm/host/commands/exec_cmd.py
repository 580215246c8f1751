"""`exec`: run a child process (argv, or a shell line) and turn its stdout into items."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vm.core import js, json_read, json_write
from vm.host.commands.base import STDIN_MODES, CommandError, Context
from vm.host.process import (Cancelled, CommandNotFound, OutputLimitExceeded, ProcessError,
                        ProcessTimeout, run_process, shell_argv)


def encode_stdin(mode: str | None, items: list) -> bytes | None:
    """The bytes fed to the child for `--stdin MODE` (None: stdin is closed at once)."""
    if mode is None:
        return None
    if mode == "json":
        text = json_write.json_compact(items)
    elif mode == "jsonl":
        text = "".join(("" if i is js.UNDEFINED else json_write.json_compact(i)) + "\n"
                       for i in items)
    else:
        text = json_write.joined_text(items, "\n")
    return text.encode("utf-8")


def decode_text(text: str, as_json: bool) -> list:
    """A child's stdout as items: one JSON value (an array's items), or its non-empty lines."""
    if as_json:
        text = js.js_trim(text)  # String.prototype.trim: a BOM goes, a \x1c stays
        if not text:
            return [None]
        try:
            value = json_read.json_loads(text)
        except ValueError as exc:
            from vm.core.detail import excerpt_detail

            raise CommandError(f"exec --json could not parse stdout as JSON: {exc}",
                               detail=excerpt_detail(text, exc)) from None
        return value if isinstance(value, list) else [value]
    return [line for line in text.replace("\r\n", "\n").split("\n") if line]


def run_exec(spec: dict[str, Any], items: list, ctx: Context) -> list:
    """spec: {"argv": [...]} or {"shell": line}, plus "json": bool and "stdin": mode|None."""
    return decode_text(_stdout(spec, items, ctx), bool(spec.get("json")))


def run_exec_kept(spec: dict[str, Any], items: list, ctx: Context,
                  keep: Callable[[Any], bool]) -> tuple[list, bool]:
    """run_exec of an `exec --json` whose items go through `keep` (a where) next: the items,
    and whether they are already only those `keep` keeps. An array's items are then tested
    as they are parsed, and the ones dropped are never all held at once."""
    text = js.js_trim(_stdout(spec, items, ctx))
    # trimmed as JavaScript trims (json_array_kept would also skip Python's other white space,
    # \x1c say, which JSON.parse refuses): an array from its first character to its last
    kept = json_read.json_array_kept(text, keep) if text[:1] == "[" and text[-1:] == "]" else None
    if kept is not None:
        return kept, True
    return decode_text(text, True), False


def _stdout(spec: dict[str, Any], items: list, ctx: Context) -> str:
    """The child's stdout as text, once it exited with status 0."""
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
    return result.stdout.decode("utf-8", errors="replace")  # (the bytes go with `result`)


PROCESS_CODES = {ProcessTimeout: "T420", OutputLimitExceeded: "T421", CommandNotFound: "T411",
                 Cancelled: "T422"}


def process_code(exc: ProcessError) -> str:
    return PROCESS_CODES.get(type(exc), "T412")
