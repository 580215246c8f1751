"""`lobster pending`: the checkpoints that wait, are being resumed or are in doubt, as a
table or JSON; with `--older-than D --cancel`, those at least that old cancelled."""

from __future__ import annotations

import sys

from vm.cli.common import (Usage, check_store, listing_text, parse_flags, print_json, refuse,
                           refused_usage, seconds, store_failed, store_options)
from vm.cli.flags import UsageError, render
from vm.cli.specs import PENDING
from vm.core import json_write
from vm.host.store import StoreError
from vm.service.protocol.envelope import RequestError, exit_code

USAGE = render(PENDING)


def cmd_pending(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values, _ = parse_flags(argv, PENDING)
        if values.get("cancel") and "older-than" not in values:
            raise Usage("--cancel needs --older-than (cancel one with `lobster cancel --id`)")
        older = seconds(values["older-than"], "older-than") if "older-than" in values else None
    except UsageError as exc:
        return refuse(exc)
    except Usage as exc:
        return refused_usage(exc, USAGE)
    try:
        check_store(store_options())
        problem = admin.key_problem(store_options()) if not values.get("cancel") else None
        if problem is not None:
            sys.stderr.write(f"lobster: warning[{problem['code']}]: {problem['message']}\n")
        if values.get("cancel"):
            entries = admin.cancel_older_than(store_options(), older)
        else:
            entries = admin.pending(store_options())
            if older is not None:
                entries = [e for e in entries if e["ageSeconds"] >= older]
    except RequestError as exc:
        print_json(exc.envelope)
        return exit_code(exc.envelope)
    except (StoreError, OSError) as exc:
        return store_failed(exc)
    lost = sum(e["status"] == "unverifiable" for e in entries)
    if lost and problem is None and not values.get("cancel"):
        sys.stderr.write(f"lobster: warning: {lost} checkpoint{'' if lost == 1 else 's'} "
                         "signed by no key of this store's key set (a lost key?) can only be "
                         "cancelled; `lobster key list` shows the keys\n")
    if values.get("format") == "json":
        print_json(entries)
        return 0
    if not entries:
        sys.stdout.write("no checkpoints wait\n")
        return 0
    rows = [("ID", "STATUS", "KIND", "AGE", "STEP", "SOURCE", "EXPIRES", "PROMPT")]
    for e in entries:
        status = e["status"] + ("" if "cancelled" not in e
                                else " (cancelled)" if e["cancelled"] else " (not cancelled)")
        if e["status"] == "in_doubt":
            detail = f"{e.get('reason')} (claimed by {e.get('claimedBy') or 'unknown'})"
        elif e["status"] == "claimed":
            detail = f"being resumed by {e.get('claimedBy')} (lease until {e.get('leaseUntil')})"
        else:
            prompt = e.get("prompt")  # a step may have printed one of any JSON type
            detail = json_write.to_text(prompt) if prompt not in (None, "") \
                else e.get("error", "")
        rows.append(tuple(listing_text(cell) for cell in (
            e["approvalId"] or e["stateKey"], status, e["kind"] or "-", _age(e["ageSeconds"]),
            e.get("step") or "-", e.get("source") or "-", e.get("expiresAt") or "-",
            detail or "")))  # untrusted text: one record a line (listing_text)
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)]
        sys.stdout.write("  ".join([*cells, str(row[-1])]).rstrip() + "\n")
    return 0


def _age(age: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if age >= size:
            return f"{age // size}{unit}"
    return f"{age}s"
