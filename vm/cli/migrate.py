"""`lobster migrate`: move paused runs onto a reviewed new version of their program (the
logic is vm/service/migrate.py), and print what was checked and the safety diff."""

from __future__ import annotations

import sys
from typing import Any

from vm.cli.common import check_store, refuse, store_failed
from vm.cli.flags import NO_VALUE, UsageError, parse, render
from vm.cli.specs import MIGRATE
from vm.core import json_write
from vm.host.store import StoreError
from vm.service.migrate import MigrateError, MigrationResult, migrate
from vm.service.protocol.options import Options

USAGE = render(MIGRATE)


def cmd_migrate(argv: list[str], frontend: Any = None) -> int:
    try:
        values, words = parse(MIGRATE, argv)
        if words:
            raise UsageError(f"unexpected argument {words[0]!r} (`lobster help migrate` shows "
                             "the usage)")
    except UsageError as exc:
        return refuse(exc)
    missing = next((n for n, v in values.items() if NO_VALUE in (v if n == "accept" else [v])),
                   None)
    if missing is not None:
        sys.stderr.write(f"--{missing} requires a value\n{USAGE}")
        return 2
    values["accept"] = [a for value in values.get("accept", []) for a in value.split(",") if a]
    fmt = values.get("format", "text")
    wrong = ("--to NEW names the new version" if "to" not in values else
             "name one of --id ID and --program HASH" if ("id" in values) == ("program" in values)
             else "--format must be text or json" if fmt not in ("text", "json") else None)
    if wrong:
        sys.stderr.write(f"lobster migrate: {wrong}\n{USAGE}")
        return 2
    options = Options(mode="tool", log=sys.stderr.write, frontend=frontend)
    try:
        check_store(options)
        results = migrate(options, values["to"], ident=values.get("id"),
                          program_hash=values.get("program"),
                          dry_run=bool(values.get("dry-run")), accept=tuple(values["accept"]))
    except MigrateError as exc:
        sys.stderr.write(f"lobster migrate: {exc}\n")
        return 1
    except (StoreError, OSError) as exc:
        return store_failed(exc, tool=fmt == "json")
    ok = "sound" if values.get("dry-run") else "migrated"
    if fmt == "json":
        sys.stdout.write(json_write.json_pretty([r.to_json() for r in results]) + "\n")
    else:
        for r in results:
            sys.stdout.write(_text(r))
    return 0 if all(r.status == ok for r in results) else 1


def _text(r: MigrationResult) -> str:
    name = r.approval_id or r.state_key
    lines = [f"checkpoint {name} ({r.state_key})" + (f", paused at the {r.gate}" if r.gate else ""),
             f"  program {r.old_hash[:12] or '?'} -> {r.new_hash[:12]}"]
    lines += [f"  ok: {c}" for c in r.checked]
    lines += [f"  refused: {reason}" for reason in r.reasons]
    if r.diff:
        lines.append("  safety diff:")
        lines += [f"    {line}" for line in r.diff.rstrip("\n").splitlines()[1:]]
    status = {"sound": "sound: would migrate (dry run, nothing changed)",
              "migrated": "migrated: the run continues on the new program when resumed",
              "refused": "refused: the run stays on its program",
              "resumed meanwhile": "not migrated: a resume took the checkpoint first"}[r.status]
    lines.append(f"  {status}")
    return "\n".join(lines) + "\n"
