"""`lobster key list|rotate`: the state store's signing key set, listed, or a new key added."""

from __future__ import annotations

import sys

from vm.cli.common import (Usage, check_store, parse_flags, print_json, refuse, refused_usage,
                           store_failed, store_options)
from vm.cli.flags import UsageError, closest, render
from vm.cli.specs import KEY
from vm.host.store import StoreError

USAGE = render(KEY)


def cmd_key(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values, words = parse_flags(argv, KEY, takes=1)
        action = words[0] if words else ""
        if action not in ("list", "rotate"):
            guess = closest(action, ("list", "rotate")) if action else None
            raise Usage(f"lobster key takes list or rotate (got {action!r}"
                        + (f"; did you mean {guess}?)" if guess else ")") if action
                        else "lobster key takes list or rotate")
    except UsageError as exc:
        return refuse(exc)
    except Usage as exc:
        return refused_usage(exc, USAGE)
    try:
        check_store(store_options())
        result = admin.key_list(store_options()) if action == "list" else admin.rotate_key(store_options())
    except (StoreError, OSError) as exc:
        return store_failed(exc)
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
