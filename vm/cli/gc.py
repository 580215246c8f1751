"""`lobster gc`: remove what no checkpoint needs (or list it, with `--dry-run`)."""

from __future__ import annotations

import sys

from vm.cli.common import (Usage, check_store, parse_flags, print_json, refuse, refused_usage,
                           seconds, store_failed, store_options)
from vm.cli.flags import UsageError, render
from vm.cli.specs import GC
from vm.host.store import StoreError
from vm.service.protocol.envelope import RequestError, exit_code

USAGE = render(GC)


def cmd_gc(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values, _ = parse_flags(argv, GC)
        grace = seconds(values["grace"], "grace") if "grace" in values else admin.GC_GRACE_S
    except UsageError as exc:
        return refuse(exc)
    except Usage as exc:
        return refused_usage(exc, USAGE)
    try:
        check_store(store_options())
        report = admin.gc(store_options(), dry_run=bool(values.get("dry-run")), grace_s=grace)
    except RequestError as exc:  # a bad LOBSTER_TOMBSTONE_TTL
        print_json(exc.envelope)
        return exit_code(exc.envelope)
    except (StoreError, OSError) as exc:
        return store_failed(exc)
    if values.get("format") == "json":
        print_json(report)
        return 0
    verb = "would remove" if report["dryRun"] else "removed"
    labels = (("checkpoints", "expired checkpoint"),
              ("tombstones", "record of an ended checkpoint"), ("keys", "retired key"),
              ("programs", "program"), ("cache", "cache entry"), ("leftovers", "leftover"))
    for key, label in labels:
        for name in report[key]:
            sys.stdout.write(f"{verb} {label} {name}\n")
    counts = ", ".join(f"{len(report[key])} {key}" for key, _ in labels)
    sys.stdout.write(f"{verb}: {counts}\n")
    return 0
