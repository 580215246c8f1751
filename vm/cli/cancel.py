"""`lobster cancel --id ID`: end one checkpoint, by approval id or state key."""

from __future__ import annotations

from vm.cli.common import (Usage, check_store, parse_flags, print_json, refuse, refused_usage,
                           store_failed, store_options)
from vm.cli.flags import UsageError, render
from vm.cli.specs import CANCEL
from vm.host.store import StoreError
from vm.service.protocol.envelope import exit_code

USAGE = render(CANCEL)


def cmd_cancel(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values, _ = parse_flags(argv, CANCEL)
        if not values.get("id"):
            raise Usage("cancel requires --id ID")
    except UsageError as exc:
        if any(w.split("=", 1)[0] == "--older-than" for w in argv):
            exc = UsageError("cancel takes one --id; to cancel by age: lobster pending "
                             "--older-than 7d --cancel (a duration: 30m, 12h, 7d, 1w)", exc.code)
        return refuse(exc)
    except Usage as exc:
        return refused_usage(exc, USAGE)
    try:
        check_store(store_options())  # "not found" only from a store that was asked
        envelope = admin.cancel(store_options(), values["id"])
    except (StoreError, OSError) as exc:
        return store_failed(exc)
    print_json(envelope)
    return exit_code(envelope)
