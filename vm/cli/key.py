"""`lobster key list|rotate`: the state store's signing key set, listed, or a new key added."""

from __future__ import annotations

import sys

from vm.cli.common import Usage, parse_flags, print_json, refused_usage, store_options
from vm.host.store import StoreError
from vm.service.protocol.envelope import store_error

USAGE = """\
usage: lobster key list [--format text|json]
       lobster key rotate [--format text|json]

The signing key set of the state store: tokens and checkpoints are signed with the newest key
and verified with any of them. `list` shows each key's number and id (never the key), when it
was made, and how many waiting checkpoints it signed. `rotate` adds a new key that signs from
now on; the old ones keep verifying until their checkpoints end, and `lobster gc` then retires
them. After a key was lost, `rotate` starts a new one (the checkpoints the lost key signed can
only be cancelled).
"""


def cmd_key(argv: list[str]) -> int:
    from vm.service import admin

    action, rest = (argv[0], argv[1:]) if argv and not argv[0].startswith("-") else ("", argv)
    try:
        values = parse_flags(rest, {"format"}, set(), USAGE)
        if action not in ("list", "rotate"):
            raise Usage(f"lobster key takes list or rotate (got {action!r})" if action
                        else "lobster key takes list or rotate")
    except Usage as exc:
        return refused_usage(exc, USAGE)
    try:
        result = admin.key_list(store_options()) if action == "list" else admin.rotate_key(store_options())
    except (StoreError, OSError) as exc:
        if isinstance(exc, OSError):
            exc = StoreError(f"the state store cannot be used: {exc.strerror or exc}")
        print_json(store_error(exc))
        return 1
    if action == "rotate":
        lost = result["unverifiable"]
        if lost:
            sys.stderr.write(f"lobster: warning: {lost} checkpoint{'' if lost == 1 else 's'} "
                             "no key of this store verifies (a lost key) can only be cancelled\n")
        if values.get("format") == "json":
            print_json(result)
        else:
            sys.stdout.write(f"key {result['number']} ({result['id']}) signs from now on; older "
                             "keys verify until `lobster gc` retires them\n")
        return 0
    if values.get("format") == "json":
        print_json(result)
        return 0
    if not result:
        sys.stdout.write("no signing key yet (the first checkpoint makes one)\n")
        return 0
    rows = [("NUMBER", "ID", "CREATED", "ROLE", "CHECKPOINTS")]
    rows += [(str(k["number"]), k["id"], k["createdAt"], "signs" if k["signing"] else "verifies",
              str(k["checkpoints"])) for k in result]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    return 0
