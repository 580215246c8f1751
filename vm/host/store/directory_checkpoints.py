"""The checkpoints of a state directory, all in `<state>/runs/`: parked frames (`split_frame_file`
reads each format of their files), claims (a rename of the frame file), checkpoint records and
approval ids. The layout of the whole directory, these files' formats included, is in the
docstring of vm/host/store/directory.py."""

from __future__ import annotations

import json
import math
import os
import struct
import time
from typing import TYPE_CHECKING

from vm.host.store.base import (FRAME_MAC_SIZE, STATE_KEY, Parked, StoreError, approval_id_form,
                                frame_mac)
from vm.host.store.files import (atomic_write, fsync_dir, make_private_dirs, publish,
                                 read_fd, read_file, remove_file, retire, scan_dir)

if TYPE_CHECKING:
    from collections.abc import Callable

    from vm.host.store.claims import Claimant, ClaimRecord

EXPIRY_MAGIC = b"LBXP"  # a msgpack frame starts with a map byte, never with "L"
SEALED_MAGIC = b"LBXA"  # format 2: MAC and expiry before the msgpack
_EXPIRY = struct.Struct(">d")
_SEALED_HEAD = len(SEALED_MAGIC) + FRAME_MAC_SIZE + _EXPIRY.size
_LARGE_FRAME = 1 << 20  # a frame file this large is read without slicing its head off


def split_frame_file(data: bytes) -> tuple[bytes | None, float | None, bytes]:
    """A frame file's (MAC, expiry, frame bytes), in any of its formats (the layout in
    vm/host/store/directory.py)."""
    expires_at = mac = None
    if data.startswith(SEALED_MAGIC) and len(data) >= _SEALED_HEAD:
        start = len(SEALED_MAGIC)
        mac = data[start:start + FRAME_MAC_SIZE]
        (expires_at,) = _EXPIRY.unpack(data[start + FRAME_MAC_SIZE:_SEALED_HEAD])
        expires_at = None if math.isnan(expires_at) else expires_at
        data = data[_SEALED_HEAD:]
    elif data.startswith(EXPIRY_MAGIC) and len(data) >= len(EXPIRY_MAGIC) + _EXPIRY.size:
        head = len(EXPIRY_MAGIC) + _EXPIRY.size
        (expires_at,) = _EXPIRY.unpack(data[len(EXPIRY_MAGIC):head])
        data = data[head:]
    return mac, expires_at, data


class CheckpointFiles:
    """The checkpoint methods of the directory `Store` (vm/host/store/directory.py), which gives
    them `root`, `runs`, `path`, `key` and `_claimed` (state key -> claim file, of the claims
    this store made)."""

    def count_checkpoints(self) -> int:
        from vm.host.store.claims import parse_claim_file_name

        count = 0
        for entry in scan_dir(self.runs):
            state_key, _, suffix = entry.name.rpartition(".")
            if (suffix == "frame" and STATE_KEY.fullmatch(state_key)) \
                    or parse_claim_file_name(entry.name) is not None:
                count += 1
        return count

    # frames --------------------------------------------------------------------------------
    def frame_path(self, state_key: str) -> str:
        return f"{self.runs}/{state_key}.frame"

    def save_frame(self, state_key: str, blob: bytes, expires_at: float | None = None,
                   key: bytes | None = None) -> None:
        """Park a frame. It, and an approval id published for it just before, are durable
        when this returns: `publish` commits the rename (and the journal before it, which holds
        the id's symlink; without a journal, the directory's blocks, which hold both names)
        with one sync where the filesystem allows, else syncs the file and then the directory,
        which covers both names. A frame that could not be made durable is
        removed: its key was never handed out."""
        head = SEALED_MAGIC + frame_mac(key or self.key(), state_key, blob) \
            + _EXPIRY.pack(math.nan if expires_at is None else expires_at)
        path = self.frame_path(state_key)
        try:
            # a large body written after its head, never copied behind it; a small one in
            # the same write (new_name: a fresh state key is a new name)
            publish(path, (head, blob) if len(blob) > _LARGE_FRAME else head + blob,
                    new_name=True)
        except OSError:
            remove_file(path)
            raise

    def park(self, state_key: str, blob: bytes, expires_at: float | None, key: bytes,
             program_hash: str, encode: Callable[[], bytes],
             approval_id: str | None = None) -> None:
        # an approval id was published by new_approval_id already (a symlink beside the frame)
        from vm.isa import codec

        self.save_program(program_hash, encode, intact=lambda b: codec.intact(b, program_hash))
        self.save_frame(state_key, blob, expires_at=expires_at, key=key)

    def read_frame(self, state_key: str) -> bytes | None:
        parked = self.read_parked(state_key)
        return None if parked is None else parked.blob

    def read_parked(self, state_key: str) -> Parked | None:
        try:
            fd = os.open(self.frame_path(state_key), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            info = os.fstat(fd)
            if info.st_size > _LARGE_FRAME:  # its head read apart: the body is never copied
                head = os.read(fd, _SEALED_HEAD)
                data = read_fd(fd, info)
                if head.startswith(SEALED_MAGIC) and len(head) == _SEALED_HEAD:
                    mac, expires_at, _ = split_frame_file(head)
                    return Parked(state_key, data, info.st_mtime, expires_at, mac)
                data = head + data  # an older format
            else:
                data = read_fd(fd, info)
        finally:
            os.close(fd)
        if not data:  # a power loss before its one sync (files.publish): never handed out
            return None
        mac, expires_at, blob = split_frame_file(data)
        return Parked(state_key, blob, info.st_mtime, expires_at, mac)

    def _keys(self, suffix: str) -> list[str]:
        """The run keys that have a `runs/<key>.<suffix>` file."""
        keys = []
        for entry in scan_dir(self.runs):
            state_key, _, found = entry.name.rpartition(".")
            if found == suffix and STATE_KEY.fullmatch(state_key):
                keys.append(state_key)
        return keys

    def list_parked(self) -> list[Parked]:
        found = [p for p in map(self.read_parked, self._keys("frame")) if p is not None]
        return sorted(found, key=lambda p: (p.created_at, p.state_key))

    def claim_frame(self, state_key: str, claimant: Claimant | None = None,
                    lease_until: float | None = None, record: bytes | None = None,
                    replaces_record: bool = True) -> bool:
        """Take the frame for this resume (read it first): exactly one concurrent caller
        removes the file (or, with a claimant, renames it to a name that holds its claim
        record), and only that one goes on. The lease is the claim file's mtime (set on the
        frame just before the rename, so the claim never appears without it); `record` (the
        lifecycle's record of this checkpoint) is written beside it, and one directory sync
        makes the claim and the record's name durable when this returns. The record's bytes are
        not synced (it would cost a data flush per resume): a power cut may leave it unreadable,
        and the lifecycle then reads the claim in doubt; the claim file's name keeps who
        claimed it and when, and the file itself the frame. `replaces_record=False`: the
        caller found no record to keep as a spare."""
        if claimant is None:
            return remove_file(self.frame_path(state_key))
        from vm.host.store.claims import claim_file_name

        frame = self.frame_path(state_key)
        path = f"{self.runs}/{claim_file_name(state_key, claimant, time.time())}"
        try:
            parked_at = os.stat(frame).st_mtime
            if lease_until is not None:
                os.utime(frame, (lease_until, lease_until))
            os.rename(frame, path)
        except FileNotFoundError:
            return False
        self._claimed[state_key] = path
        try:
            if record is not None:
                atomic_write(self.record_path(state_key), record, sync=False,
                             keep_replaced=replaces_record)
            fsync_dir(self.runs)
        except OSError as exc:  # a full disk: nothing ran yet, so the frame waits again
            try:
                os.rename(path, frame)
                os.utime(frame, (parked_at, parked_at))
                self._claimed.pop(state_key, None)
            except OSError:
                pass  # the claim stays; its lease runs out and it reads in doubt
            raise StoreError(f"the state directory {self.root} cannot be written: "
                             f"{exc.strerror or exc}") from None
        return True

    def claim_checkpoint(self, state_key: str, claimant: Claimant, lease_until: float,
                         record: dict) -> dict | None:
        from vm.host.store.lifecycle import decode_record, encode_record

        stored = self.read_record(state_key)
        previous = decode_record(stored, state_key)
        if previous is not None:
            record = {**record, "events": [*previous["events"], *record["events"]]}
        if not self.claim_frame(state_key, claimant, lease_until, encode_record(record),
                                replaces_record=stored is not None):
            return None
        # the fencing token: the claim file's name, unique to this claim (its time and pid);
        # a cancel or a takeover removes it
        return record, self._claimed[state_key]

    def holds(self, state_key: str, fence) -> bool:
        """Whether the claim file `fence` (claim_checkpoint's token) is still there."""
        return isinstance(fence, str) and os.path.lexists(fence)

    def renew_claim(self, state_key: str, lease_until: float, fence=None) -> bool:
        """Move the lease of this checkpoint's claim to `lease_until` (not synced: a lease
        lost in a crash only ends sooner). False when there is no claim any more; with
        `fence`, when that claim file is gone (cancelled or taken over)."""
        if fence is not None:
            try:
                os.utime(fence, (lease_until, lease_until))
                return True
            except FileNotFoundError:
                return False
        paths = [self._claimed[state_key]] if state_key in self._claimed else []
        paths += [path for path, _ in self._claims(state_key) if path not in paths]
        for path in paths:
            try:
                os.utime(path, (lease_until, lease_until))
                return True
            except FileNotFoundError:
                continue
        return False

    # checkpoint records (vm/host/store/lifecycle.py writes them) ---------------------------------
    def record_path(self, state_key: str) -> str:
        return f"{self.runs}/{state_key}.record"

    def write_record(self, state_key: str, record: bytes, durable: bool = True) -> None:
        """Replace the record of a checkpoint (whole or not at all). `durable=False` syncs
        nothing: a power loss may bring back the previous record, or leave one that does not
        read (the lifecycle then reads the checkpoint in doubt), never lose the checkpoint."""
        if not STATE_KEY.fullmatch(state_key):
            raise StoreError(f"invalid state key {state_key!r}")
        atomic_write(self.record_path(state_key), record, sync=durable, keep_replaced=True)

    def settle_claim(self, state_key: str, record: bytes, durable: bool = True,
                     fence=None) -> bool:
        """The claim ends: its record is written, then the claimed frame removed. With
        `fence` (the holder's claim file), nothing is written once that file is gone: False."""
        if fence is not None and not self.holds(state_key, fence):
            return False
        self.write_record(state_key, record, durable)
        if fence is not None:
            self._claimed.pop(state_key, None)
            retire(fence)
            return True
        self.finish_claim(state_key)
        return True

    def read_record(self, state_key: str) -> bytes | None:
        if not STATE_KEY.fullmatch(state_key):
            return None
        return read_file(self.record_path(state_key))

    def list_records(self, ended: bool = True) -> list[tuple[str, bytes]]:
        """(state key, record) of every record; `ended=False` may leave out those of ended
        checkpoints (here every record is read: the state is inside it)."""
        found = []
        for state_key in sorted(self._keys("record")):
            blob = read_file(self.record_path(state_key))
            if blob is not None:
                found.append((state_key, blob))
        return found

    def remove_record(self, state_key: str) -> None:
        if STATE_KEY.fullmatch(state_key):
            remove_file(self.record_path(state_key))

    def claim_path(self, state_key: str) -> str:
        """Where an earlier version kept the claim record of `state_key`."""
        return f"{self.runs}/{state_key}.claimed"

    def _claims(self, state_key: str | None = None) -> list[tuple[str, ClaimRecord | None]]:
        """(path, record) of every claim file (of `state_key` only, if given); the record is
        None for a file of an earlier version (its record is inside)."""
        from attrs import evolve

        from vm.host.store.claims import parse_claim_file_name

        found = []
        for entry in scan_dir(self.runs):
            parsed = parse_claim_file_name(entry.name)
            if parsed is None or not STATE_KEY.fullmatch(parsed[0]) \
                    or (state_key is not None and parsed[0] != state_key):
                continue
            record = parsed[1]
            if record is not None:
                try:  # the claim file's mtime is its lease
                    record = evolve(record, lease_until=entry.stat().st_mtime)
                except FileNotFoundError:
                    continue
            found.append((entry.path, record))
        return found

    def repark(self, state_key: str, blob: bytes, expires_at: float | None,
               key: bytes | None = None) -> None:
        # the new frame first; then this process's own claim file, by the name it renamed to
        self.save_frame(state_key, blob, expires_at, key=key)
        own = self._claimed.pop(state_key, None)
        if own is not None:
            retire(own)

    def finish_claim(self, state_key: str) -> None:
        record = self._claimed.pop(state_key, None)
        if record is not None and retire(record):
            return
        for path, _ in self._claims(state_key):
            retire(path)

    def in_doubt(self) -> list[ClaimRecord]:
        records = []
        for path, record in self._claims():
            if record is None:
                state_key = os.path.basename(path)[:-len(".claimed")]
                record = self._legacy_claim_record(state_key)
            if record is not None:
                records.append(record)
        return sorted(records, key=lambda r: (r.claimed_at, r.state_key))

    def claim_record(self, state_key: str) -> ClaimRecord | None:
        if not STATE_KEY.fullmatch(state_key):
            return None
        for _, record in self._claims(state_key):
            if record is not None:
                return record
        return self._legacy_claim_record(state_key)

    def _legacy_claim_record(self, state_key: str) -> ClaimRecord | None:
        """The record an earlier version wrote into `<state_key>.claimed`, or the claim of a
        crash before that record was written (the file still holds the frame's bytes)."""
        from vm.host.store.claims import Claimant, ClaimRecord

        path = self.claim_path(state_key)
        blob = read_file(path)
        if blob is None:
            return None
        try:
            entry = json.loads(blob)
            return ClaimRecord(state_key, float(entry["claimedAt"]),
                               Claimant.from_json(entry.get("claimant")))
        except (ValueError, TypeError, KeyError, AttributeError):  # still the frame's bytes
            try:  # the rename that claimed it changed the ctime (the mtime is the frame's)
                return ClaimRecord(state_key, os.stat(path).st_ctime, None)
            except FileNotFoundError:
                return None

    # approval ids --------------------------------------------------------------------------
    def new_approval_id(self, state_key: str, deferred: bool = False) -> str | None:
        """A fresh 8-hex id pointing at `state_key`, to be followed by save_frame(state_key)
        (published at once, `deferred` or not: the symlink costs no round trip):
        a symlink created exclusively (an existing id is never overwritten) that holds the key
        in its target, so there is no file data to sync; save_frame's directory sync makes it
        durable before the id is handed out. Lookups of an id whose frame is gone say "not
        found", so one left behind by a crash in between is harmless."""
        for _ in range(16):
            approval_id = os.urandom(4).hex()
            link = f"{self.runs}/{approval_id}.approval"
            try:
                os.symlink(state_key, link)
            except FileExistsError:
                continue
            except FileNotFoundError:  # no runs/ yet
                make_private_dirs(self.runs)
                try:
                    os.symlink(state_key, link)
                except FileExistsError:
                    continue
            return approval_id
        return None

    def lookup_approval_id(self, approval_id: str) -> str | None:
        """The state key an id names, or None. The id must be 8 lowercase hex digits exactly,
        and what it leads to must be a plain run key (a planted link cannot point outside)."""
        approval_id = approval_id_form(approval_id)
        if approval_id is None:
            return None
        try:
            key = os.readlink(f"{self.runs}/{approval_id}.approval")
        except OSError:
            key = self._legacy_approval(approval_id)
        return key if isinstance(key, str) and STATE_KEY.fullmatch(key) else None

    def _legacy_approval(self, approval_id: str) -> str | None:
        try:  # an id published by an earlier version
            with open(self.path("approvals", approval_id), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return None
        return data.get("stateKey") if isinstance(data, dict) else None

    def remove_approval_id(self, approval_id: str | None) -> None:
        if approval_id:
            if not remove_file(f"{self.runs}/{approval_id}.approval"):
                remove_file(self.path("approvals", approval_id))
