"""`lobster migrate`: move paused runs onto a reviewed new version of their program (the
logic is vm/service/migrate.py), and print what was checked and the safety diff."""

from __future__ import annotations

import sys
from typing import Any

from vm.core import js
from vm.service.migrate import MigrateError, MigrationResult, migrate
from vm.service.protocol.options import Options

USAGE = """\
usage: lobster migrate --to NEW.lobster (--id ID | --program HASH) [--dry-run]
                       [--accept FINDING-ID]... [--format text|json]

Move paused runs onto a reviewed new version of their workflow: the checkpoint ID (approval id
or state key), or every paused run of the program HASH (at least 8 hex digits). Each move is
checked first: the gate exists in the new program, unchanged; the steps before it are the same;
every result the new program reads after it is in the paused run. The safety diff of what
changes after the gate is printed; a weakening in it refuses the move until accepted
(--accept ID, as `lobsterc diff`). --dry-run checks and prints, and changes nothing.
Exit 0 when every chosen run was migrated (or is sound, with --dry-run), 1 otherwise.
"""


def cmd_migrate(argv: list[str], frontend: Any = None) -> int:
    values: dict[str, Any] = {"accept": []}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        name, eq, inline = word[2:].partition("=") if word.startswith("--") else ("", "", "")
        if name == "dry-run" and not eq:
            values["dry-run"], i = True, i + 1
        elif name in ("to", "id", "program", "accept", "format"):
            if not eq and i + 1 >= len(argv):
                sys.stderr.write(f"--{name} requires a value\n{USAGE}")
                return 2
            value, i = (inline, i + 1) if eq else (argv[i + 1], i + 2)
            if name == "accept":
                values["accept"] += [a for a in value.split(",") if a]
            else:
                values[name] = value
        else:
            sys.stderr.write(f"unexpected argument {word!r}\n{USAGE}")
            return 2
    fmt = values.get("format", "text")
    wrong = ("--to NEW names the new version" if "to" not in values else
             "name one of --id ID and --program HASH" if ("id" in values) == ("program" in values)
             else "--format must be text or json" if fmt not in ("text", "json") else None)
    if wrong:
        sys.stderr.write(f"lobster migrate: {wrong}\n{USAGE}")
        return 2
    options = Options(mode="tool", log=sys.stderr.write, frontend=frontend)
    try:
        results = migrate(options, values["to"], ident=values.get("id"),
                          program_hash=values.get("program"),
                          dry_run=bool(values.get("dry-run")), accept=tuple(values["accept"]))
    except MigrateError as exc:
        sys.stderr.write(f"lobster migrate: {exc}\n")
        return 1
    ok = "sound" if values.get("dry-run") else "migrated"
    if fmt == "json":
        sys.stdout.write(js.json_pretty([r.to_json() for r in results]) + "\n")
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
