"""`lobster tool [REQUEST | -]`: one tool request (JSON, as an argument or on stdin) in, its
envelope out."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from vm.cli.common import print_json, refuse
from vm.cli.flags import UsageError, parse
from vm.cli.specs import TOOL
from vm.core import json_read
from vm.service.protocol.envelope import error_envelope, exit_code, too_deep
from vm.service.protocol.options import Options
from vm.service.protocol.request import MAX_REQUEST_BYTES, handle_js

if TYPE_CHECKING:
    from vm.service.frontend import Frontend


def cmd_tool(argv: list[str], frontend: Frontend | None = None) -> int:
    """One request: at most MAX_REQUEST_BYTES of JSON text, nested at most MAX_JSON_DEPTH."""
    limit = MAX_REQUEST_BYTES
    try:
        _, argv = parse(TOOL, argv)
        if len(argv) > 1:
            raise UsageError(f"unexpected argument {argv[1]!r}: tool takes one request (quote "
                             "the JSON as one argument)")
    except UsageError as exc:
        return refuse(exc, tool=True)
    if argv and argv[0] != "-":
        text = argv[0]
        oversize = len(text.encode("utf-8", "surrogateescape")) > limit
    else:
        data = sys.stdin.buffer.read(limit + 1)
        oversize = len(data) > limit
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:  # refused, never replaced: U+FFFD is not what was sent
            text = None
            not_utf8 = error_envelope("E009", f"tool request is not UTF-8 text (invalid byte at "
                                              f"offset {exc.start})")
    envelope = None
    if oversize:
        envelope = error_envelope("E006", f"tool request is over the limit of {limit} bytes")
    elif text is None:
        envelope = not_utf8
    else:
        try:
            request = json_read.json_loads(text)
        except json_read.JSONTooDeep:
            envelope = too_deep("tool request").envelope
        except ValueError as exc:
            from vm.core.detail import json_detail

            envelope = error_envelope("E002", "tool request must be valid JSON",
                                      detail=json_detail(exc))
    if envelope is None:
        envelope = handle_js(request, Options(mode="tool", frontend=frontend))
    print_json(envelope)
    return exit_code(envelope)
