"""`lobster history ID`: one checkpoint's record (halted, claimed, how it ended), as text or
JSON."""

from __future__ import annotations

import sys

from vm.cli.common import Usage, parse_flags, print_json, refused_usage, store_options
from vm.service.protocol.envelope import exit_code

USAGE = """\
usage: lobster history ID [--format text|json]

Show one checkpoint's record: where it is now (waiting, expired, claimed, finished, in_doubt,
cancelled) and what happened to it: halted (program and items hashes, when), claimed (when, by
which process, the decision and the approver's identity), and how it ended. ID is its approval
id, its resume token, or the state key `lobster pending` lists. Ended checkpoints are kept for
LOBSTER_TOMBSTONE_TTL (default 7d), then `lobster gc` removes their records.
"""


def cmd_history(argv: list[str]) -> int:
    from vm.service import admin

    ident = None
    rest = []
    for word in argv:
        if ident is None and not word.startswith("-"):
            ident = word
        else:
            rest.append(word)
    try:
        values = parse_flags(rest, {"format", "id"}, set(), USAGE)
        ident = ident or values.get("id")
        if not ident:
            raise Usage("history requires an ID (approval id, resume token or state key)")
    except Usage as exc:
        return refused_usage(exc, USAGE)
    answer = admin.history(store_options(), ident)
    if values.get("format") == "json" or not answer.get("ok"):
        print_json(answer)
        return exit_code(answer)
    checkpoint = answer["checkpoint"]
    head = f"{checkpoint['stateKey']}"
    if checkpoint.get("approvalId"):
        head += f" (approval id {checkpoint['approvalId']})"
    sys.stdout.write(f"{head}: {checkpoint['state']}\n")
    if checkpoint.get("reason"):
        step = f" at step {checkpoint['step']}" if checkpoint.get("step") else ""
        sys.stdout.write(f"  in doubt{step}: {checkpoint['reason']}\n")
    for event in checkpoint["events"]:
        details = ", ".join(f"{k}={v}" for k, v in event.items()
                            if k not in ("event", "at") and v is not None)
        sys.stdout.write(f"  {event.get('at') or '-'}  {event['event']:<9} {details}\n")
    return 0
