"""`lobster pending`, `lobster cancel`, `lobster gc` and `lobster key`: the store's checkpoints
and key set from outside a run (the logic is vm/service/admin.py). Usage errors exit 2 with a one-line
message."""

from __future__ import annotations

import sys

from vm.core import js
from vm.service import protocol
from vm.service.protocol import Options, RequestError

PENDING_USAGE = """\
usage: lobster pending [--format text|json] [--older-than DURATION [--cancel]]

List the checkpoints that wait for a decision (waiting or expired), those being resumed now
(claimed: their resume holds a live lease) and those whose resume failed, was cut off or
stopped renewing its lease (in_doubt, with the reason and the step reached). --older-than 7d
keeps those at least that old (durations: 30m, 12h, 7d, 1w, 1h30m); with --cancel they are
cancelled (never a claimed one). `lobster history ID` shows one checkpoint's whole record.
"""
CANCEL_USAGE = """\
usage: lobster cancel --id ID

End one checkpoint, by its approval id or the state key `lobster pending` lists: the same as
`lobster resume --id ID --cancel`. A claim in doubt (or whose lease expired) is cleared; one
being resumed under a live lease is not (T435). The checkpoint's record stays, cancelled.
"""
GC_USAGE = """\
usage: lobster gc [--dry-run] [--format text|json] [--grace DURATION]

Remove what no checkpoint needs: programs no checkpoint refers to, old cache entries, leftovers
of interrupted writes, and checkpoints expired longer than the grace (default 1d) ago.
--dry-run lists what would be removed. Safe while other lobster processes run.
"""


KEY_USAGE = """\
usage: lobster key list [--format text|json]
       lobster key rotate [--format text|json]

The signing key set of the state store: tokens and checkpoints are signed with the newest key
and verified with any of them. `list` shows each key's number and id (never the key), when it
was made, and how many waiting checkpoints it signed. `rotate` adds a new key that signs from
now on; the old ones keep verifying until their checkpoints end, and `lobster gc` then retires
them. After a key was lost, `rotate` starts a new one (the checkpoints the lost key signed can
only be cancelled).
"""


HISTORY_USAGE = """\
usage: lobster history ID [--format text|json]

Show one checkpoint's record: where it is now (waiting, expired, claimed, finished, in_doubt,
cancelled) and what happened to it: halted (program and items hashes, when), claimed (when, by
which process, the decision and the approver's identity), and how it ended. ID is its approval
id, its resume token, or the state key `lobster pending` lists. Ended checkpoints are kept for
LOBSTER_TOMBSTONE_TTL (default 7d), then `lobster gc` removes their records.
"""


class Usage(Exception):
    pass


def _options() -> Options:
    return Options(mode="tool", log=sys.stderr.write)


def _parse(argv: list[str], flags: set[str], switches: set[str], usage: str) -> dict:
    """`--flag value`, `--flag=value` and `--switch`; anything else is a usage error."""
    values: dict = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("-h", "--help"):
            sys.stdout.write(usage)
            raise SystemExit(0)
        name, eq, inline = word[2:].partition("=") if word.startswith("--") else ("", "", "")
        if name in switches and not eq:
            values[name], i = True, i + 1
        elif name in flags:
            if eq:
                values[name], i = inline, i + 1
            elif i + 1 < len(argv):
                values[name], i = argv[i + 1], i + 2
            else:
                raise Usage(f"--{name} requires a value")
        else:
            raise Usage(f"unexpected argument {word!r}")
    fmt = values.get("format", "text")
    if fmt not in ("text", "json"):
        raise Usage("--format must be text or json")
    return values


def _seconds(text: str, flag: str) -> float:
    """A duration flag (`--older-than`, `--grace`) in seconds, within bounds.AGE."""
    from vm.core import bounds

    try:
        return bounds.AGE.parse(text, f"--{flag}") / 1000
    except bounds.BoundError as exc:
        raise Usage(exc.message) from None


def _usage_error(exc: Exception, usage: str) -> int:
    sys.stderr.write(f"{exc}\n{usage}")
    return 2


def _age(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _print_json(value) -> None:
    sys.stdout.write(js.json_pretty(value) + "\n")


def cmd_pending(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values = _parse(argv, {"format", "older-than"}, {"cancel"}, PENDING_USAGE)
        if values.get("cancel") and "older-than" not in values:
            raise Usage("--cancel needs --older-than (cancel one with `lobster cancel --id`)")
        older = _seconds(values["older-than"], "older-than") if "older-than" in values else None
    except Usage as exc:
        return _usage_error(exc, PENDING_USAGE)
    problem = admin.key_problem(_options()) if not values.get("cancel") else None
    if problem is not None:
        sys.stderr.write(f"lobster: warning[{problem['code']}]: {problem['message']}\n")
    try:
        if values.get("cancel"):
            entries = admin.cancel_older_than(_options(), older)
        else:
            entries = admin.pending(_options())
            if older is not None:
                entries = [e for e in entries if e["ageSeconds"] >= older]
    except RequestError as exc:
        _print_json(exc.envelope)
        return protocol.exit_code(exc.envelope)
    except protocol.StoreError as exc:
        envelope = protocol.store_error(exc)
        _print_json(envelope)
        return 1
    lost = sum(e["status"] == "unverifiable" for e in entries)
    if lost and problem is None and not values.get("cancel"):
        sys.stderr.write(f"lobster: warning: {lost} checkpoint{'' if lost == 1 else 's'} "
                         "signed by no key of this store's key set (a lost key?) can only be "
                         "cancelled; `lobster key list` shows the keys\n")
    if values.get("format") == "json":
        _print_json(entries)
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
            detail = e.get("prompt") or e.get("error", "")
        rows.append((e["approvalId"] or e["stateKey"], status, e["kind"] or "-",
                     _age(e["ageSeconds"]), e.get("step") or "-", e.get("source") or "-",
                     e.get("expiresAt") or "-", detail or ""))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)]
        sys.stdout.write("  ".join([*cells, str(row[-1])]).rstrip() + "\n")
    return 0


def cmd_cancel(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values = _parse(argv, {"id", "format"}, set(), CANCEL_USAGE)
        if not values.get("id"):
            raise Usage("cancel requires --id ID")
    except Usage as exc:
        return _usage_error(exc, CANCEL_USAGE)
    envelope = admin.cancel(_options(), values["id"])
    _print_json(envelope)
    return protocol.exit_code(envelope)


def checkpoint_note(options: Options) -> str:
    """`lobster doctor`'s line on the store's checkpoints, by state (stderr; the envelope stays
    the original's): empty when none waits, runs or is in doubt."""
    import collections

    from vm.service import admin

    try:
        counts = collections.Counter(e["status"] for e in admin.pending(options))
    except (RequestError, protocol.StoreError):
        return ""
    if not counts:
        return ""
    order = ("waiting", "expired", "claimed", "in_doubt")
    said = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in order if counts[s])
    hint = " (a resume failed or was cut off: `lobster pending` lists why, `lobster history ID` " \
        "shows the record, `lobster cancel --id ID` clears it)" if counts["in_doubt"] else ""
    return f"lobster doctor: checkpoints: {said}{hint}\n"


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
        values = _parse(rest, {"format", "id"}, set(), HISTORY_USAGE)
        ident = ident or values.get("id")
        if not ident:
            raise Usage("history requires an ID (approval id, resume token or state key)")
    except Usage as exc:
        return _usage_error(exc, HISTORY_USAGE)
    answer = admin.history(_options(), ident)
    if values.get("format") == "json" or not answer.get("ok"):
        _print_json(answer)
        return protocol.exit_code(answer)
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


def cmd_gc(argv: list[str]) -> int:
    from vm.service import admin

    try:
        values = _parse(argv, {"format", "grace"}, {"dry-run"}, GC_USAGE)
        grace = _seconds(values["grace"], "grace") if "grace" in values else admin.GC_GRACE_S
    except Usage as exc:
        return _usage_error(exc, GC_USAGE)
    try:
        report = admin.gc(_options(), dry_run=bool(values.get("dry-run")), grace_s=grace)
    except RequestError as exc:  # a bad LOBSTER_TOMBSTONE_TTL
        _print_json(exc.envelope)
        return protocol.exit_code(exc.envelope)
    except protocol.StoreError as exc:
        _print_json(protocol.store_error(exc))
        return 1
    if values.get("format") == "json":
        _print_json(report)
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


def cmd_key(argv: list[str]) -> int:
    from vm.service import admin

    action, rest = (argv[0], argv[1:]) if argv and not argv[0].startswith("-") else ("", argv)
    try:
        values = _parse(rest, {"format"}, set(), KEY_USAGE)
        if action not in ("list", "rotate"):
            raise Usage(f"lobster key takes list or rotate (got {action!r})" if action
                        else "lobster key takes list or rotate")
    except Usage as exc:
        return _usage_error(exc, KEY_USAGE)
    try:
        result = admin.key_list(_options()) if action == "list" else admin.rotate_key(_options())
    except (protocol.StoreError, OSError) as exc:
        if isinstance(exc, OSError):
            exc = protocol.StoreError(f"the state store cannot be used: {exc.strerror or exc}")
        _print_json(protocol.store_error(exc))
        return 1
    if action == "rotate":
        lost = result["unverifiable"]
        if lost:
            sys.stderr.write(f"lobster: warning: {lost} checkpoint{'' if lost == 1 else 's'} "
                             "no key of this store verifies (a lost key) can only be cancelled\n")
        if values.get("format") == "json":
            _print_json(result)
        else:
            sys.stdout.write(f"key {result['number']} ({result['id']}) signs from now on; older "
                             "keys verify until `lobster gc` retires them\n")
        return 0
    if values.get("format") == "json":
        _print_json(result)
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
