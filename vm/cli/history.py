"""`lobster history ID`: one checkpoint's record (halted, claimed, how it ended), as text or
JSON."""

from __future__ import annotations

import sys

from vm.cli.common import (Usage, check_store, listing_text, parse_flags, print_json, refuse,
                           refused_usage, store_failed, store_options)
from vm.cli.flags import UsageError, render
from vm.cli.specs import HISTORY
from vm.core import json_write
from vm.host.store import StoreError
from vm.service.protocol.envelope import exit_code

USAGE = render(HISTORY)


def cmd_history(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values, words = parse_flags(argv, HISTORY, takes=1)
        ident = words[0] if words else values.get("id")
        if not ident:
            raise Usage("history requires an ID (approval id, resume token or state key)")
    except UsageError as exc:
        return refuse(exc)
    except Usage as exc:
        return refused_usage(exc, USAGE)
    try:
        check_store(store_options())  # "not found" only from a store that was asked
        answer = admin.history(store_options(), ident)
    except (StoreError, OSError) as exc:
        return store_failed(exc)
    if values.get("format") == "json" or not answer.get("ok"):
        print_json(answer)
        return exit_code(answer)
    checkpoint = answer["checkpoint"]
    head = f"{checkpoint['stateKey']}"
    if checkpoint.get("approvalId"):
        head += f" (approval id {checkpoint['approvalId']})"
    # every value may hold what a step printed: shown escaped, one record a line
    sys.stdout.write(f"{listing_text(head)}: {listing_text(checkpoint['state'])}\n")
    if checkpoint.get("reason"):
        step = f" at step {checkpoint['step']}" if checkpoint.get("step") else ""
        sys.stdout.write(listing_text(f"  in doubt{step}: {checkpoint['reason']}") + "\n")
    for event in checkpoint["events"]:
        details = ", ".join(f"{k}={_shown(v)}" for k, v in event.items()
                            if k not in ("event", "at") and v is not None)
        sys.stdout.write(listing_text(f"  {event.get('at') or '-'}  {event['event']:<9} "
                                      f"{details}") + "\n")
    return 0


def _shown(value) -> str:
    """An event's value in the text listing: a number as Python writes it, anything else as
    the original joins a value into text (a string as it is; a prompt a step printed may be any
    JSON value, written as JSON)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return json_write.to_text(value)
