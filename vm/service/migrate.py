"""Paused runs moved onto a reviewed new version of their program (`lobster migrate`).

For each chosen checkpoint: load its frame and program, ask the compiler (the Frontend's
`check_migration`) whether the move is sound and what the safety diff after the gate is, and
only then, unless it is a dry run, rewrite the frame onto the new program under the same state
key (so its token and approval id keep working): the new program is stored, the frame gets the
new pin and pcs, and the store signs it (`save_frame` writes its MAC). A record of the move is
kept with the checkpoint (`history`).

Atomic per checkpoint, and exactly one of a migration and a concurrent resume wins: the
migration claims the checkpoint through its lifecycle (vm/host/store/lifecycle.py), as a resume
does, and releases the claim with the rewritten frame parked in its place; the move is an event
of the checkpoint's record (`lobster history`). A resume that loses gets `... resume state not
found`, as it would against another resume, and a migration that loses reports `resumed
meanwhile`.
"""

from __future__ import annotations

import os
from typing import Any

from attrs import evolve, field, frozen

from vm.core.source import file_name
from vm.isa import codec
from vm.isa.program import Program


@frozen
class MigrationCheck:
    """The compiler's verdict on one move: `sound`, the `reasons` it is not, what was
    `checked`, the safety `diff` text (lobsterc diff) and the ids of its unaccepted
    weakenings, and, when sound, where the frame's pcs land (`pc_map`) and the new index of
    its halt site."""

    sound: bool
    reasons: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()
    diff: str = ""
    weakened: tuple[str, ...] = ()
    pc_map: dict[int, int] = field(factory=dict)
    halt: int | None = None
    gate: str = ""


@frozen
class MigrationResult:
    """What happened to one checkpoint: `status` is `migrated`, `sound` (a dry run: it would
    be migrated), `refused` (with `reasons`), or `resumed meanwhile` (a resume took it first)."""

    state_key: str
    approval_id: str | None
    gate: str
    old_hash: str
    new_hash: str
    status: str
    reasons: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"stateKey": self.state_key, "approvalId": self.approval_id, "gate": self.gate,
                "oldProgram": self.old_hash, "newProgram": self.new_hash, "status": self.status,
                "reasons": list(self.reasons), "checked": list(self.checked), "diff": self.diff}


class MigrateError(Exception):
    """A migration that cannot start: no such checkpoint, no compiler, a bad target."""


def migrate(options: Any, to: str | Program, *, ident: str | None = None,
            program_hash: str | None = None, dry_run: bool = False,
            accept: tuple[str, ...] = ()) -> list[MigrationResult]:
    """Move paused runs onto the program `to` (a workflow file compiled with the options'
    compiler, or a Program): the checkpoint `ident` (an approval id or a state key), or every
    parked checkpoint whose program hash is (or starts with) `program_hash`. Each is checked
    (sound, and no unaccepted weakening in the safety diff: `accept` takes finding ids, as
    does the new file's `x-reviewed:` key) and,
    unless `dry_run`, rewritten under its state key. Raises MigrateError when nothing can be
    chosen or compiled; a refused checkpoint is a result, never an exception."""
    from vm.service.protocol.running import compiler

    if (ident is None) == (program_hash is None):
        raise MigrateError("choose one checkpoint (an approval id or state key) or a program hash")
    frontend = compiler(options.frontend)
    check = getattr(frontend, "check_migration", None)
    if check is None:
        raise MigrateError("the installed compiler cannot check migrations")
    store = options.store()
    new = to if isinstance(to, Program) else _compile(frontend, to, store)
    keys = _chosen(store, ident, program_hash)
    source = None if isinstance(to, Program) else to
    # the new program's file names are relative to its own file: a moved run names them from there
    source_dir = None if source is None else os.path.dirname(file_name(source))

    def checked(old: Program, new: Program, frame: Any, accepted: tuple[str, ...]) -> Any:
        return check(old, new, frame, accepted, source)

    return [_one(store, key, new, checked, dry_run, tuple(accept), source_dir) for key in keys]


def _compile(frontend: Any, path: str, store: Any) -> Program:
    if path.endswith(".lbc"):
        with open(path, "rb") as fh:
            return codec.load_program(fh.read())
    from vm.service.frontend import WORKFLOW_EXTENSIONS

    try:
        if not path.lower().endswith(WORKFLOW_EXTENSIONS):  # a file of pipeline text
            with open(path, encoding="utf-8") as fh:
                return frontend.compile_pipeline(fh.read().strip("\n"), store)
        return frontend.compile_workflow(path, store)
    except frontend.CompileError as exc:
        raise MigrateError(f"{path} does not compile:\n{frontend.render_error(exc)}") from None
    except OSError as exc:
        raise MigrateError(f"{path}: {exc.strerror}") from None


def _chosen(store: Any, ident: str | None, program_hash: str | None) -> list[str]:
    from vm.host.store.base import STATE_KEY, approval_id_form

    if ident is not None:
        key = store.lookup_approval_id(ident) if approval_id_form(ident) else None
        if key is None and STATE_KEY.fullmatch(ident.strip()):
            key = ident.strip()
        if key is None or store.read_parked(key) is None:
            raise MigrateError(f"no paused run {ident!r} (`lobster pending` lists them)")
        return [key]
    wanted = program_hash.strip().removeprefix("sha256:")
    if len(wanted) < 8:
        raise MigrateError("a program hash needs at least 8 hex digits")
    keys = []
    for parked in store.list_parked():
        try:
            frame = codec.load_frame(parked.blob)
        except codec.LoadError:
            continue
        if frame.program_hash.startswith(wanted):
            keys.append(parked.state_key)
    if not keys:
        raise MigrateError(f"no paused run of program {wanted}")
    return keys


def _one(store: Any, key: str, new: Program, check: Any, dry_run: bool,
         accept: tuple[str, ...], source_dir: str | None = None) -> MigrationResult:
    parked = store.read_parked(key)
    if parked is None:
        return MigrationResult(key, None, "", "", new.hash, "resumed meanwhile")
    try:
        # the key of the key set that signed it (and its token): the moved frame keeps it
        signer = next((k for k in store.keys() if parked.authentic(k)), None)
        if signer is None:
            raise codec.LoadError("not written by this store")
        frame = codec.load_frame(parked.blob)
        blob = store.load_program_bytes(frame.program_hash)
        if blob is None:
            raise codec.LoadError(f"program {frame.program_hash} is missing")
        old = codec.load_program(blob)
    except codec.LoadError as exc:
        return MigrationResult(key, None, "", "", new.hash, "refused",
                               (f"the checkpoint cannot be read: {exc}",))
    approval_id = frame.pending.approval_id if frame.pending else None
    done = dict(state_key=key, approval_id=approval_id, old_hash=old.hash, new_hash=new.hash)
    if old.hash == new.hash:
        return MigrationResult(**done, gate="", status="refused",
                               reasons=("the run is already on this program",))
    verdict = check(old, new, frame, accept)
    reasons = list(verdict.reasons)
    if verdict.sound and verdict.weakened:
        reasons.append("the safety diff weakens " + ", ".join(verdict.weakened) +
                       " (review it, then pass --accept ID)")
    if reasons:
        return MigrationResult(**done, gate=verdict.gate, status="refused",
                               reasons=tuple(reasons), checked=verdict.checked,
                               diff=verdict.diff)
    moved = _rewrite(frame, old, new, verdict)
    if source_dir is not None and not isinstance(moved, str):
        moved.source_dir = source_dir
    if isinstance(moved, str):
        return MigrationResult(**done, gate=verdict.gate, status="refused", reasons=(moved,),
                               checked=verdict.checked, diff=verdict.diff)
    if dry_run:
        return MigrationResult(**done, gate=verdict.gate, status="sound",
                               checked=verdict.checked, diff=verdict.diff)
    codec.check_frame(moved, new)
    data = codec.dump_frame(moved)
    store.save_program(new.hash, lambda: codec.dump_program(new),
                       intact=lambda b: codec.intact(b, new.hash))
    from vm.host.store import lifecycle

    taken = lifecycle.claim(store, parked, frame, decision="migrate", via="migrate")
    if taken is None:
        return MigrationResult(**done, gate=verdict.gate, status="resumed meanwhile",
                               checked=verdict.checked, diff=verdict.diff)
    # signed with the key that signed it before (its token's), so gc keeps that key while the
    # frame waits
    taken.release(data, parked.expires_at, {"event": MIGRATED, "from": old.hash,
                                            "to": new.hash, "gate": verdict.gate,
                                            "accepted": list(accept)}, key=signer)
    return MigrationResult(**done, gate=verdict.gate, status="migrated",
                           checked=verdict.checked, diff=verdict.diff)


def _rewrite(frame: Any, old: Program, new: Program, verdict: MigrationCheck) -> Any:
    """The frame with the new pin and its pcs moved (`pc_map`), or why it cannot be placed."""
    where = verdict.pc_map

    def moved(pc: int, what: str) -> int:
        if pc not in where:
            raise LookupError(f"the {what} at pc {pc} has no place in the new program")
        return where[pc]

    try:
        out = evolve(frame, program_hash=new.hash, pc=moved(frame.pc, "next instruction"),
                     loops=[evolve(loop, site=moved(loop.site, "for_each")) for loop in frame.loops],
                     calls=[evolve(call, site=moved(call.site, "sub-workflow call"))
                            for call in frame.calls],
                     tries=[evolve(t, site=moved(t.site, "retry/timeout policy"))
                            for t in frame.tries],
                     pending=evolve(frame.pending, halt=verdict.halt))
    except LookupError as exc:
        return str(exc)
    missing = new.registers - len(out.registers)
    if missing > 0:
        out.registers = [*out.registers, *([None] * missing)]
    return out


MIGRATED = "migrated"  # the event a move leaves in the checkpoint's record


def history(store: Any, key: str) -> list[dict[str, Any]]:
    """The recorded migrations of one checkpoint, oldest first (its `migrated` events)."""
    from vm.host.store import lifecycle

    record = lifecycle.status(store, key).record or {}
    return [e for e in record.get("events", []) if e.get("event") == MIGRATED]
