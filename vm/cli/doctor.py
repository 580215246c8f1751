"""`lobster doctor`: run one pipeline and check the state store; an `ok` envelope describing
this installation, or a `doctor_error` (T499) saying what is wrong."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from vm import __version__
from vm.cli.common import print_json
from vm.service.protocol.envelope import (PROTOCOL_VERSION, RequestError, error_envelope,
                                          ok_envelope)
from vm.service.protocol.options import Options

if TYPE_CHECKING:
    from vm.service.frontend import Frontend


def cmd_doctor(argv: list[str], frontend: Frontend | None = None) -> int:
    from vm.service.protocol.checkpoint import store_problem
    from vm.service.protocol.running import run

    options = Options(mode="tool", frontend=frontend)
    envelope = run("exec --json --shell 'echo [1]'", options)
    problem = store_problem(options)
    if problem is not None:
        envelope = error_envelope("T450", problem)
    if not envelope.get("ok") or envelope.get("output") != [1]:
        message = envelope.get("error", {}).get("message", "unexpected output")
        print_json(error_envelope("T499", message))
        return 1
    sys.stderr.write(checkpoint_note(options))
    item = {"toolMode": True, "protocolVersion": PROTOCOL_VERSION, "version": __version__}
    if argv:
        item["notes"] = list(argv)
    print_json(ok_envelope("ok", [item]))
    return 0


def checkpoint_note(options: Options) -> str:
    """`lobster doctor`'s line on the store's checkpoints, by state (stderr; the envelope stays
    the original's): empty when none waits, runs or is in doubt."""
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
