"""The state directory store: programs by hash, frames by run key, approval ids, the signing
key, claim records, `state.*` values and cache entries. Every write is atomic (temp file, fsync,
rename, fsync of the dir), except cache entries, which are hints and are not synced.

  <state>/key                      key 1 of the signing key set: 32 random bytes, mode 0600,
                                   created on first use (never while checkpoints exist)
  <state>/keys/<n>                 key n >= 2, added by `lobster key rotate`; the newest signs,
                                   every one verifies until gc retires it (vm/service/admin.py)
  <state>/programs/<hash>.lbc      compiled programs (msgpack), written once
  <state>/runs/<state_key>.frame   parked frames; claimed by removing the file. Since format 2:
                                   "LBXA", the frame's MAC (32 bytes, base.frame_mac), the expiry
                                   (unix seconds, a big-endian double; NaN: never), the msgpack.
                                   Format 1 (read, never authentic): the msgpack alone, or
                                   "LBXP", the expiry, the msgpack
  <state>/runs/<id>.approval       approval id -> state key: a symlink whose target is the key,
                                   published exclusively beside its frame (one directory sync
                                   makes both durable); earlier versions kept approvals/<id>
  <state>/runs/<state_key>.<record>.claimed
                                   a claimed frame until finish_claim: the claim renames the
                                   frame file to a name that holds its record (base64url JSON:
                                   claimedAt, claimant; vm/host/store/claims.py), so one directory
                                   sync makes the claim and its record durable. Earlier
                                   versions renamed to <state_key>.claimed and wrote the record
                                   (JSON) into it; those are still read
  <state>/runs/<state_key>.record  the checkpoint's record once claimed (JSON, written by
                                   vm/host/store/lifecycle.py): its state and history; kept as a
                                   tombstone after it ends, until gc. A claim file's mtime is
                                   the claim's lease (unix seconds), renewed while it runs
  <state>/values/<key>.json        state.get / state.set / diff.last values (pretty JSON)
  <state>/cache/<key>.json         compile cache entries (kind "compile")
  <state>/cache/<kind>/<key>.json  other cache entries

A program's mtime is when it was last saved (a save of a stored program touches it), which
`gc` reads. Temporary files are `.<name>.<hex>.tmp` beside their target.

Directories are created 0700 and files 0600 whatever the umask: programs and frames hold the
pipeline text and step results, secrets included.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import secrets
import stat
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from vm.host.store.base import (FRAME_MAC_SIZE, KEY_BYTES, KEY_MAX_BYTES, STATE_KEY, CacheEntry,
                           KeyInfo, Parked, SigningKeyError, StoreError, approval_id_form,
                           cache_name, check_key, frame_mac, key_id, lost_key_error,
                           value_file_name, value_json)

if TYPE_CHECKING:
    from vm.host.store.claims import Claimant, ClaimRecord

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
EXPIRY_MAGIC = b"LBXP"  # a msgpack frame starts with a map byte, never with "L"
SEALED_MAGIC = b"LBXA"  # format 2: MAC and expiry before the msgpack
_EXPIRY = struct.Struct(">d")
_SEALED_HEAD = len(SEALED_MAGIC) + FRAME_MAC_SIZE + _EXPIRY.size


def split_frame_file(data: bytes) -> tuple[bytes | None, float | None, bytes]:
    """A frame file's (MAC, expiry, frame bytes), in any of its formats (header above)."""
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


def make_private_dirs(directory: str) -> None:
    """Create `directory` and its missing parents, each exactly 0700 whatever the umask."""
    missing = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, PRIVATE_DIR)
        except FileExistsError:
            continue
        os.chmod(path, PRIVATE_DIR)  # the umask may have taken bits away


def atomic_write(path: str, data: bytes, mode: int = PRIVATE_FILE, sync_dir: bool = True,
                 sync: bool = True) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the new one.
    The file gets exactly `mode`, whatever the umask. `sync_dir=False` leaves the directory
    sync (which makes the rename durable) to the caller; `sync=False` syncs nothing (a hint
    may be lost, never torn by a writer that dies)."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:  # the first write into this directory
        make_private_dirs(directory)
        fd = os.open(tmp, flags, mode)
    try:
        # held while the data is written and synced: gc never takes a temp file of a write
        # still in progress, however slow (remove_leftover)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    if sync and sync_dir:
        _fsync_dir(directory)


def _remove(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _scan(directory: str) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Store:
    """A StateStore in a directory (`root`), the default."""

    def __init__(self, root: str) -> None:
        self.root = os.fspath(root)
        self.runs = os.path.join(self.root, "runs")
        self._claimed: dict[str, str] = {}  # state key -> claim file, of this store's claims

    @property
    def location(self) -> str:
        return self.root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    # signing keys --------------------------------------------------------------------------
    def _key_path(self, number: int) -> str:
        return self.path("key") if number == 1 else self.path("keys", str(number))

    def _key_numbers(self) -> list[int]:
        """The numbers of the key files present (whatever they hold), newest first."""
        numbers = [int(e.name) for e in _scan(self.path("keys"))
                   if e.name.isascii() and e.name.isdigit() and int(e.name) >= 2]
        if os.path.lexists(self.path("key")):
            numbers.append(1)
        return sorted(numbers, reverse=True)

    def _read_key(self, number: int) -> tuple[bytes, float]:
        """A key file's key and mtime, checked: a regular file, private to its owner, of a
        key's length; else a SigningKeyError (T452) that says what to do."""
        path = self._key_path(number)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            if os.path.islink(path):  # a link to nothing is there, not a missing key
                raise SigningKeyError(f"the signing key {path} is a link to nothing "
                                      f"({os.readlink(path)}); restore the key", "T452") from None
            raise  # removed just now (gc retired it), or never made
        except OSError as exc:
            raise SigningKeyError(f"the signing key {path} cannot be read: "
                                  f"{exc.strerror or exc}", "T452") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise SigningKeyError(f"the signing key {path} is not a regular file (remove "
                                      "what is there and restore the key file)", "T452")
            if info.st_mode & 0o077:
                raise SigningKeyError(
                    f"the signing key {path} is open to others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}, and rotate it "
                    "(`lobster key rotate`) if others may have read it", "T452")
            with os.fdopen(os.dup(fd), "rb") as fh:
                key = fh.read(KEY_MAX_BYTES + 1)
        finally:
            os.close(fd)
        return check_key(key, path), info.st_mtime

    def _key_files(self) -> list[tuple[int, bytes, float]]:
        found = []
        for number in self._key_numbers():
            try:
                found.append((number, *self._read_key(number)))
            except FileNotFoundError:  # removed just now (gc retired it)
                continue
        return found

    def keys(self) -> list[bytes]:
        return [key for _, key, _ in self._key_files()]

    def verification_keys(self) -> list[bytes]:
        keys = self.keys()
        if not keys:
            count = self.count_checkpoints()
            if count:
                raise lost_key_error(self.location, self.path("key"), count)
        return keys

    def key_set(self) -> list[KeyInfo]:
        return [KeyInfo(n, key_id(key), at) for n, key, at in self._key_files()]

    def key(self) -> bytes:
        keys = self.keys()
        if keys:
            return keys[0]
        count = self.count_checkpoints()
        if count:
            raise lost_key_error(self.location, self.path("key"), count)
        self._publish_key(1)
        keys = self.keys()
        if not keys:  # made and gone at once: someone else is at work on this directory
            raise SigningKeyError(f"the signing key {self.path('key')} could not be made",
                                  "T452")
        return keys[0]  # the first maker's key

    def _publish_key(self, number: int) -> bool:
        """Write a new key as key `number`, exclusively: False when that number exists."""
        path = self._key_path(number)
        directory = os.path.dirname(path)
        make_private_dirs(directory)
        tmp = os.path.join(directory, f".key.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        os.fchmod(fd, PRIVATE_FILE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # first writer wins; a concurrent creator reads the winner's key
        except FileExistsError:
            return False
        finally:
            _remove(tmp)
        _fsync_dir(directory)
        return True

    def rotate_key(self) -> KeyInfo:
        for _ in range(16):
            numbers = self._key_numbers()
            number = numbers[0] + 1 if numbers else 1
            if self._publish_key(number):
                key, at = self._read_key(number)
                return KeyInfo(number, key_id(key), at)
        raise StoreError(f"the state store at {self.location} could not add a key")

    def retire_key(self, number: int) -> bool:
        numbers = self._key_numbers()
        if not numbers or number not in numbers or number == numbers[0]:
            return False
        return _remove(self._key_path(number))

    def existing_key(self) -> bytes | None:
        keys = self.keys()
        return keys[0] if keys else None

    def count_checkpoints(self) -> int:
        from vm.host.store.claims import parse_claim_file_name

        count = 0
        for entry in _scan(self.runs):
            state_key, _, suffix = entry.name.rpartition(".")
            if (suffix == "frame" and STATE_KEY.fullmatch(state_key)) \
                    or parse_claim_file_name(entry.name) is not None:
                count += 1
        return count

    # programs ------------------------------------------------------------------------------
    def program_path(self, program_hash: str) -> str:
        return self.path("programs", f"{program_hash}.lbc")

    def save_program(self, program_hash: str, encode: Callable[[], bytes],
                     intact: Callable[[bytes], bool] | None = None) -> None:
        """Store a program once: `encode()` gives its bytes, and is called only when no
        program of that hash is stored yet, or when `intact` says the stored bytes are not
        that program any more (a damaged file is rewritten, never left to fail every run)."""
        path = self.program_path(program_hash)
        stored = _read(path)
        if stored is None or (intact is not None and not intact(stored)):
            atomic_write(path, encode())
            return
        try:
            os.utime(path)  # saved again: gc leaves it alone for a while
        except FileNotFoundError:  # collected just now: write it back
            atomic_write(path, encode())

    def load_program_bytes(self, program_hash: str) -> bytes | None:
        return _read(self.program_path(program_hash))

    def list_programs(self) -> list[tuple[str, float]]:
        found = []
        for entry in _scan(self.path("programs")):
            if entry.name.endswith(".lbc") and not entry.name.startswith("."):
                try:
                    found.append((entry.name[:-4], entry.stat().st_mtime))
                except FileNotFoundError:
                    continue
        return sorted(found)

    def remove_program(self, program_hash: str, unused_since: float) -> bool:
        if "/" in program_hash or program_hash.startswith("."):
            return False
        path = self.program_path(program_hash)
        try:
            if os.stat(path).st_mtime >= unused_since:
                return False
        except FileNotFoundError:
            return False
        return _remove(path)

    # frames --------------------------------------------------------------------------------
    def frame_path(self, state_key: str) -> str:
        return os.path.join(self.runs, f"{state_key}.frame")

    def save_frame(self, state_key: str, blob: bytes, expires_at: float | None = None,
                   key: bytes | None = None) -> None:
        """Park a frame. It, and an approval id published for it just before, are durable
        when this returns: they share a directory, and one sync of it covers both."""
        head = SEALED_MAGIC + frame_mac(key or self.key(), state_key, blob) \
            + _EXPIRY.pack(math.nan if expires_at is None else expires_at)
        atomic_write(self.frame_path(state_key), head + blob, sync_dir=False)
        _fsync_dir(self.runs)

    def read_frame(self, state_key: str) -> bytes | None:
        parked = self.read_parked(state_key)
        return None if parked is None else parked.blob

    def read_parked(self, state_key: str) -> Parked | None:
        try:
            with open(self.frame_path(state_key), "rb") as fh:
                data = fh.read()
                created_at = os.fstat(fh.fileno()).st_mtime
        except FileNotFoundError:
            return None
        mac, expires_at, blob = split_frame_file(data)
        return Parked(state_key, blob, created_at, expires_at, mac)

    def _keys(self, suffix: str) -> list[str]:
        """The run keys that have a `runs/<key>.<suffix>` file."""
        keys = []
        for entry in _scan(self.runs):
            state_key, _, found = entry.name.rpartition(".")
            if found == suffix and STATE_KEY.fullmatch(state_key):
                keys.append(state_key)
        return keys

    def list_parked(self) -> list[Parked]:
        found = [p for p in map(self.read_parked, self._keys("frame")) if p is not None]
        return sorted(found, key=lambda p: (p.created_at, p.state_key))

    def claim_frame(self, state_key: str, claimant: Claimant | None = None,
                    lease_until: float | None = None, record: bytes | None = None) -> bool:
        """Take the frame for this resume (read it first): exactly one concurrent caller
        removes the file (or, with a claimant, renames it to a name that holds its claim
        record), and only that one goes on. The lease is the claim file's mtime (set on the
        frame just before the rename, so the claim never appears without it); `record` (the
        lifecycle's record of this checkpoint) is written beside it, and one directory sync
        makes the claim and the record's name durable when this returns. The record's bytes are
        not synced (it would cost a data flush per resume): a power cut may leave it unreadable,
        and the lifecycle then reads the claim in doubt; the claim file's name keeps who
        claimed it and when, and the file itself the frame."""
        if claimant is None:
            return _remove(self.frame_path(state_key))
        from vm.host.store.claims import claim_file_name

        frame = self.frame_path(state_key)
        path = os.path.join(self.runs, claim_file_name(state_key, claimant, time.time()))
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
                atomic_write(self.record_path(state_key), record, sync=False)
            _fsync_dir(self.runs)
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

    def renew_claim(self, state_key: str, lease_until: float) -> bool:
        """Move the lease of this checkpoint's claim to `lease_until` (not synced: a lease
        lost in a crash only ends sooner). False when there is no claim any more."""
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
        return os.path.join(self.runs, f"{state_key}.record")

    def write_record(self, state_key: str, record: bytes, durable: bool = True) -> None:
        """Replace the record of a checkpoint (whole or not at all). `durable=False` syncs
        nothing: a power loss may bring back the previous record, or leave one that does not
        read (the lifecycle then reads the checkpoint in doubt), never lose the checkpoint."""
        if not STATE_KEY.fullmatch(state_key):
            raise StoreError(f"invalid state key {state_key!r}")
        atomic_write(self.record_path(state_key), record, sync=durable)

    def settle_claim(self, state_key: str, record: bytes, durable: bool = True) -> None:
        """The claim ends: its record is written, then the claimed frame removed."""
        self.write_record(state_key, record, durable)
        self.finish_claim(state_key)

    def read_record(self, state_key: str) -> bytes | None:
        if not STATE_KEY.fullmatch(state_key):
            return None
        return _read(self.record_path(state_key))

    def list_records(self, ended: bool = True) -> list[tuple[str, bytes]]:
        """(state key, record) of every record; `ended=False` may leave out those of ended
        checkpoints (here every record is read: the state is inside it)."""
        found = []
        for state_key in sorted(self._keys("record")):
            blob = _read(self.record_path(state_key))
            if blob is not None:
                found.append((state_key, blob))
        return found

    def remove_record(self, state_key: str) -> None:
        if STATE_KEY.fullmatch(state_key):
            _remove(self.record_path(state_key))

    def claim_path(self, state_key: str) -> str:
        """Where an earlier version kept the claim record of `state_key`."""
        return os.path.join(self.runs, f"{state_key}.claimed")

    def _claims(self, state_key: str | None = None) -> list[tuple[str, ClaimRecord | None]]:
        """(path, record) of every claim file (of `state_key` only, if given); the record is
        None for a file of an earlier version (its record is inside)."""
        from attrs import evolve

        from vm.host.store.claims import parse_claim_file_name

        found = []
        for entry in _scan(self.runs):
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
            _remove(own)

    def finish_claim(self, state_key: str) -> None:
        record = self._claimed.pop(state_key, None)
        if record is not None and _remove(record):
            return
        for path, _ in self._claims(state_key):
            _remove(path)

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
        blob = _read(path)
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
    def new_approval_id(self, state_key: str) -> str | None:
        """A fresh 8-hex id pointing at `state_key`, to be followed by save_frame(state_key):
        a symlink created exclusively (an existing id is never overwritten) that holds the key
        in its target, so there is no file data to sync; save_frame's directory sync makes it
        durable before the id is handed out. Lookups of an id whose frame is gone say "not
        found", so one left behind by a crash in between is harmless."""
        for _ in range(16):
            approval_id = secrets.token_hex(4)
            link = os.path.join(self.runs, f"{approval_id}.approval")
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
            key = os.readlink(os.path.join(self.runs, f"{approval_id}.approval"))
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
            if not _remove(os.path.join(self.runs, f"{approval_id}.approval")):
                _remove(self.path("approvals", approval_id))

    # state.* values ------------------------------------------------------------------------
    def value_path(self, key: str) -> str:
        return self.path("values", value_file_name(key))

    def get_value(self, key: str, default=None, strict: bool = False):
        blob = _read(self.value_path(key))
        if blob is None:
            return default
        try:
            return json.loads(blob.decode("utf-8"))
        except ValueError as exc:
            if strict:  # state.get reports a damaged value; diff.last starts over
                raise StoreError(str(exc)) from None
            return default

    def set_value(self, key: str, value) -> None:
        atomic_write(self.value_path(key), value_json(value).encode("utf-8"))

    # cache entries -------------------------------------------------------------------------
    def cache_path(self, kind: str, key: str) -> str:
        kind, key = cache_name(kind, key)
        if kind == "compile":
            return self.path("cache", f"{key}.json")
        return self.path("cache", kind, f"{key}.json")

    def get_cache(self, kind: str, key: str) -> bytes | None:
        try:
            return _read(self.cache_path(kind, key))
        except OSError:
            return None

    def put_cache(self, kind: str, key: str, blob: bytes) -> None:
        try:
            atomic_write(self.cache_path(kind, key), blob, sync=False)
        except OSError:
            pass  # a cache that cannot be written only costs a later call the work

    def list_cache(self) -> list[CacheEntry]:
        found = []
        for entry in _scan(self.path("cache")):
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                kinds = [(entry.name, sub) for sub in _scan(entry.path)]
            else:
                kinds = [("compile", entry)]
            for kind, item in kinds:
                key = item.name[:-5] if item.name.endswith(".json") else ""
                if not item.name.startswith(".") and key:
                    try:
                        found.append(CacheEntry(kind, key, item.stat().st_mtime))
                    except FileNotFoundError:
                        continue
        return sorted(found)

    def remove_cache(self, kind: str, key: str) -> None:
        _remove(self.cache_path(kind, key))

    # what interrupted writes leave -----------------------------------------------------------
    def leftovers(self, older_than: float) -> list[str]:
        found = []
        claimed = self._claimed_keys()
        for directory, _dirs, files in os.walk(self.root):
            for name in files:
                path = os.path.join(directory, name)
                if not self._is_leftover(path, claimed):
                    continue
                try:
                    if os.lstat(path).st_mtime < older_than:
                        found.append(os.path.relpath(path, self.root))
                except FileNotFoundError:
                    continue
        return sorted(found)

    def _claimed_keys(self) -> set[str]:
        return {os.path.basename(path).partition(".")[0] for path, _ in self._claims()}

    def _is_leftover(self, path: str, claimed: set[str] | None = None) -> bool:
        directory, name = os.path.split(path)
        if name.startswith(".") and name.endswith(".tmp"):
            return True
        if os.path.normpath(directory) != os.path.normpath(self.runs) \
                or not name.endswith(".approval"):
            return False
        try:
            state_key = os.readlink(path)
        except OSError:
            return False
        if not STATE_KEY.fullmatch(state_key):
            return True  # leads nowhere a run could be
        if claimed is None:
            claimed = self._claimed_keys()
        return not (os.path.lexists(self.frame_path(state_key)) or state_key in claimed
                    or os.path.lexists(self.record_path(state_key)))

    def remove_leftover(self, name: str) -> bool:
        root = os.path.normpath(self.root)
        path = os.path.normpath(os.path.join(root, name))
        if os.path.isabs(name) or not path.startswith(root + os.sep) \
                or not self._is_leftover(path):
            return False
        if not path.endswith(".tmp"):
            return _remove(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its writer is still writing or syncing it
            return False
        else:
            return _remove(path)
        finally:
            os.close(fd)
