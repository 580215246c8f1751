"""`lobster doctor`: run one pipeline and check the state store; an `ok` envelope describing
this installation, or a `doctor_error` (T499) saying what is wrong. It also reports what a
newcomer needs when something misbehaves: the version, the state dir and store (and whether
it answers), the shell, which extras are installed, and the limits in force: `--format text`
prints it for people, `--format json` adds it to the envelope's item. Without `--format`
a terminal gets the text report and a pipe the original's output (the envelope alone)."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from vm import __version__, install_hint
from vm.cli.common import check_store, is_terminal, print_json, refuse
from vm.cli.flags import NO_VALUE, UsageError, parse
from vm.cli.specs import DOCTOR
from vm.host.store import StoreError
from vm.service.protocol.envelope import (PROTOCOL_VERSION, RequestError, error_envelope,
                                          ok_envelope)
from vm.service.protocol.options import Options

if TYPE_CHECKING:
    from vm.service.frontend import Frontend

EXTRAS = {"mcp": "mcp", "postgres": "psycopg", "lsp": "pygls"}  # extra -> the module it adds
LIMIT_ENV = ("LOBSTER_MAX_OUTPUT_BYTES", "LOBSTER_MAX_TOOL_ENVELOPE_BYTES",
             "LOBSTER_MAX_HTTP_RESPONSE_BYTES", "LOBSTER_CHECKPOINT_TTL", "LOBSTER_CLAIM_LEASE",
             "LOBSTER_TOMBSTONE_TTL")


def cmd_doctor(argv: list[str], frontend: Frontend | None = None) -> int:
    from vm.service.protocol.checkpoint import store_problem
    from vm.service.protocol.running import run_js

    try:
        values, notes = parse(DOCTOR, argv)
        fmt = values.get("format")
        if fmt is not None and fmt not in ("text", "json"):
            raise UsageError(f"doctor --format must be text or json (got "
                             f"{'nothing' if fmt == NO_VALUE else repr(fmt)})")
    except UsageError as exc:
        return refuse(exc, tool=True)
    if fmt is None and is_terminal(sys.stdout):  # a person reads it: the report, not JSON
        fmt = "text"
    options = Options(mode="tool", frontend=frontend)
    envelope = run_js("exec --json --shell 'echo [1]'", options)
    try:
        check_store(options)  # a store that cannot be asked, named (without its password)
        problem = store_problem(options)
    except StoreError as exc:
        problem = str(exc)
    if problem is not None:
        envelope = error_envelope("T450", problem)
    if not envelope.get("ok") or envelope.get("output") != [1]:
        message = envelope.get("error", {}).get("message", "unexpected output")
        if fmt == "text":
            sys.stdout.write(text_report(report(options, problem)))
            sys.stderr.write(f"lobster: error[T499]: {message}\n")
        else:
            print_json(error_envelope("T499", message))
        return 1
    item: dict[str, Any] = {"toolMode": True, "protocolVersion": PROTOCOL_VERSION,
                            "version": __version__}
    if notes:
        item["notes"] = list(notes)
    found = report(options, None) if fmt else {}
    if fmt == "json":
        print_json(ok_envelope("ok", [{**item, **found}]))
    elif fmt == "text":
        sys.stdout.write(text_report(found) + checkpoint_note(options).replace(
            "lobster doctor: ", ""))
    else:
        sys.stderr.write(checkpoint_note(options))
        print_json(ok_envelope("ok", [item]))
    return 0


def report(options: Options, problem: str | None) -> dict[str, Any]:
    """This installation as the doctor sees it (the fields `--format json` adds)."""
    from vm.core import bounds
    from vm.host.process import shell_argv
    from vm.host.store import is_postgres_url
    from vm.host.store.base import default_state_dir
    from vm.service.protocol.options import DEFAULT_MAX_STDOUT_BYTES, DEFAULT_TIMEOUT_MS

    env = options.env
    location = (env.get("LOBSTER_STORE") or "").strip() or default_state_dir(env)
    shell = shell_argv("LINE", env)[:-1]
    defaults = {"timeoutMs": DEFAULT_TIMEOUT_MS, "maxStdoutBytes": DEFAULT_MAX_STDOUT_BYTES}
    return {
        "stateDir": default_state_dir(env),
        "store": {"kind": "postgresql" if is_postgres_url(location) else "directory",
                  "location": _without_password(location), "answers": problem is None,
                  **({"problem": problem} if problem else {})},
        "shell": {"argv": shell, "found": _found(shell[0])},
        "extras": {name: ({"installed": True} if importlib.util.find_spec(module)
                          else {"installed": False, "install": install_hint(name)})
                   for name, module in EXTRAS.items()},
        "limits": {
            **{name: {"default": defaults.get(name), "minimum": b.minimum,
                      "maximum": b.maximum, "unit": b.unit}
               for name, b in bounds.BOUNDS.items()},
            "env": {name: env.get(name) for name in sorted({*LIMIT_ENV, *(
                n for n in env if n.startswith("LOBSTER_MAX_"))})},
        },
    }


def text_report(found: dict[str, Any]) -> str:
    store = found["store"]
    lines = [f"lobster {__version__}",
             f"state dir: {found['stateDir']}",
             f"store: {store['kind']} {store['location']} ("
             + ("answers" if store["answers"] else f"does not answer: {store.get('problem')}")
             + ")",
             f"shell: {' '.join(found['shell']['argv'])}"
             + ("" if found["shell"]["found"] else " (not found)")]
    for name, extra in found["extras"].items():
        lines.append(f"extra {name}: " + ("installed" if extra["installed"]
                                          else f"not installed ({extra['install']})"))
    for name, limit in found["limits"].items():
        if name == "env":
            continue
        default = "" if limit["default"] is None else f"default {limit['default']}, "
        lines.append(f"limit {name}: {default}{limit['minimum']}..{limit['maximum']} "
                     f"{limit['unit']}")
    for name, value in found["limits"]["env"].items():
        lines.append(f"{name}: {'unset' if value is None else value}")
    return "".join(f"{line}\n" for line in lines)


def _found(program: str) -> bool:
    import shutil

    return bool(shutil.which(program) if os.sep not in program
                else os.access(program, os.X_OK))


def _without_password(location: str) -> str:
    """A store URL as it may be shown: its password replaced."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", location)


def checkpoint_note(options: Options) -> str:
    """`lobster doctor`'s line on the store's checkpoints, by state: empty when none waits,
    runs or is in doubt."""
    import collections

    from vm.host.store import StoreError
    from vm.service import admin

    try:
        counts = collections.Counter(e["status"] for e in admin.pending(options))
    except (RequestError, StoreError):
        return ""
    if not counts:
        return ""
    order = ("waiting", "expired", "claimed", "in_doubt")
    said = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in order if counts[s])
    hint = " (a resume failed or was cut off: `lobster pending` lists why, `lobster history ID` " \
        "shows the record, `lobster cancel --id ID` clears it)" if counts["in_doubt"] else ""
    return f"lobster doctor: checkpoints: {said}{hint}\n"
