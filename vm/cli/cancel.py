"""`lobster cancel --id ID`: end one checkpoint, by approval id or state key."""

from __future__ import annotations

from vm.cli.common import Usage, parse_flags, print_json, refused_usage, store_options
from vm.service.protocol.envelope import exit_code

USAGE = """\
usage: lobster cancel --id ID

End one checkpoint, by its approval id or the state key `lobster pending` lists: the same as
`lobster resume --id ID --cancel`. A claim in doubt (or whose lease expired) is cleared; one
being resumed under a live lease is not (T435). The checkpoint's record stays, cancelled.
"""


def cmd_cancel(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values = parse_flags(argv, {"id", "format"}, set(), USAGE)
        if not values.get("id"):
            raise Usage("cancel requires --id ID")
    except Usage as exc:
        return refused_usage(exc, USAGE)
    envelope = admin.cancel(store_options(), values["id"])
    print_json(envelope)
    return exit_code(envelope)
