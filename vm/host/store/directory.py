"""The state directory store: programs by hash, frames by run key, approval ids, the signing
key, claim records, `state.*` values and cache entries. Every write is atomic (temp file, fsync,
rename, fsync of the dir; vm/host/store/files.py), except cache entries, which are hints and are
not synced, and frames and programs, published with one sync where the filesystem makes that
enough (files.publish). The keys are directory_keys.py, everything in runs/ directory_checkpoints.py; this
module holds the layout, the programs, values, cache entries and leftovers.

  <state>/key                      key 1 of the signing key set: 32 random bytes, mode 0600,
                                   created on first use (never while checkpoints exist)
  <state>/keys/<n>                 key n >= 2, added by `lobster key rotate`; the newest signs,
                                   every one verifies until gc retires it (vm/service/admin.py)
  <state>/programs/<hash>.lbc      compiled programs (msgpack), written once (files.publish)
  <state>/runs/<state_key>.frame   parked frames (files.publish: one sync where the filesystem
                                   allows; an empty one is a power loss before that sync, read
                                   as none, a leftover for gc); claimed by removing the file.
                                   Since format 2:
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

A program's mtime is when it was last saved (a save of a stored program touches it, at most
once a minute), which `gc` reads. Temporary files are `.<name>.<hex>.tmp` beside their target. Files the store is
done with (a finished claim's frame, a record's previous version) wait in `runs/.spare/<hex>.spare`
(at most 64, of 64 KiB at most) to be written over as the next temp files instead of new ones
(vm/host/store/files.py says why); they hold their old bytes until then, and gc removes those
unused for the temp files' age.

Directories are created 0700 and files 0600 whatever the umask: programs and frames hold the
pipeline text and step results, secrets included.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable

from vm.core import json_read
from vm.host.store.base import (STATE_KEY, CacheEntry, StoreError, cache_name, value_file_name,
                                value_json)
from vm.host.store.directory_checkpoints import CheckpointFiles
from vm.host.store.directory_keys import RACY_SECONDS, KeyFiles
from vm.host.store.files import (SPARES, atomic_write, publish, read_file, remove_file,
                                 scan_dir)


# Programs this process read and found intact, by path: (inode, size, mtime, ctime) then.
# A program's file is written whole and never changed in place, so while its stat is the
# same its bytes are too (a repair or a touch changes the ctime). A file changed within the
# timestamps' granularity of its check could keep them: one is kept only once it is older
# than RACY_SECONDS (as the key set is, vm/host/store/directory_keys.py).
_VERIFIED: dict[str, tuple[int, int, int, int]] = {}
PROGRAM_TOUCH_S = 60.0  # a stored program's mtime moves at most this often (admin.gc)


def _program_stamp(info: os.stat_result) -> tuple[int, int, int, int]:
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


class Store(KeyFiles, CheckpointFiles):
    """A StateStore in a directory (`root`), the default: its signing keys are KeyFiles, its
    checkpoints CheckpointFiles; programs, values, cache entries and leftovers are here."""

    program_touch_s = PROGRAM_TOUCH_S

    def __init__(self, root: str) -> None:
        self.root = os.fspath(root)
        self._prefix = self.root if self.root.endswith("/") else self.root + "/"
        self.runs = self._prefix + "runs"
        self._claimed: dict[str, str] = {}  # state key -> claim file, of this store's claims

    @property
    def location(self) -> str:
        return self.root

    def path(self, *parts: str) -> str:
        """A path under the root (`parts` are names this store makes, never absolute)."""
        return self._prefix + "/".join(parts)

    # programs ------------------------------------------------------------------------------
    def program_path(self, program_hash: str) -> str:
        return self.path("programs", f"{program_hash}.lbc")

    def save_program(self, program_hash: str, encode: Callable[[], bytes],
                     intact: Callable[[bytes], bool] | None = None) -> None:
        """Store a program once: `encode()` gives its bytes, and is called only when no
        program of that hash is stored yet, or when `intact` says the stored bytes are not
        that program any more (a damaged file is rewritten, never left to fail every run).
        A file this process found intact is not read again while its stat is unchanged, and
        its mtime (which gc reads: a program saved within its last GC_RECENT_S, 600 s, is
        never removed) is moved forward only when it is older than PROGRAM_TOUCH_S."""
        path = self.program_path(program_hash)
        try:
            info = os.stat(path)
        except FileNotFoundError:
            publish(path, encode())
            return
        if intact is None or _VERIFIED.get(path) != _program_stamp(info):
            stored = read_file(path)
            if stored is None or (intact is not None and not intact(stored)):
                publish(path, encode())
                return
            if intact is not None and info.st_ctime < time.time() - RACY_SECONDS:
                _VERIFIED[path] = _program_stamp(info)
        if info.st_mtime >= time.time() - PROGRAM_TOUCH_S:
            return
        try:
            os.utime(path)  # saved again: gc leaves it alone for a while
        except FileNotFoundError:  # collected just now: write it back
            publish(path, encode())

    def load_program_bytes(self, program_hash: str) -> bytes | None:
        return read_file(self.program_path(program_hash))

    def list_programs(self) -> list[tuple[str, float]]:
        found = []
        for entry in scan_dir(self.path("programs")):
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
        return remove_file(path)

    # state.* values ------------------------------------------------------------------------
    def value_path(self, key: str) -> str:
        return self.path("values", value_file_name(key))

    def get_value(self, key: str, default=None, strict: bool = False):
        blob = read_file(self.value_path(key))
        if blob is None:
            return default
        try:
            # JSON.parse's reading and words (Node decodes bad UTF-8 as U+FFFD)
            return json_read.json_loads(blob.decode("utf-8", "replace"))
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
            return read_file(self.cache_path(kind, key))
        except OSError:
            return None

    def put_cache(self, kind: str, key: str, blob: bytes) -> None:
        try:
            atomic_write(self.cache_path(kind, key), blob, sync=False)
        except OSError:
            pass  # a cache that cannot be written only costs a later call the work

    def list_cache(self) -> list[CacheEntry]:
        found = []
        for entry in scan_dir(self.path("cache")):
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                kinds = [(entry.name, sub) for sub in scan_dir(entry.path)]
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
        remove_file(self.cache_path(kind, key))

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
                    info = os.lstat(path)
                except FileNotFoundError:
                    continue
                # a spare's ctime is when it became one (the rename or link changed it)
                if (info.st_ctime if _is_spare(path) else info.st_mtime) < older_than:
                    found.append(os.path.relpath(path, self.root))
        return sorted(found)

    def _claimed_keys(self) -> set[str]:
        return {os.path.basename(path).partition(".")[0] for path, _ in self._claims()}

    def _is_leftover(self, path: str, claimed: set[str] | None = None) -> bool:
        directory, name = os.path.split(path)
        if (name.startswith(".") and name.endswith(".tmp")) or _is_spare(path):
            return True
        if os.path.normpath(directory) != os.path.normpath(self.runs):
            return False
        if name.endswith(".frame"):  # empty: a power loss before its sync (files.publish)
            try:
                return os.lstat(path).st_size == 0
            except FileNotFoundError:
                return False
        if not name.endswith(".approval"):
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

    def remove_leftover(self, name: str) -> bool:  # a spare too: one in use is renamed first
        root = os.path.normpath(self.root)
        path = os.path.normpath(os.path.join(root, name))
        if os.path.isabs(name) or not path.startswith(root + os.sep) \
                or not self._is_leftover(path):
            return False
        if not path.endswith(".tmp"):
            return remove_file(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its writer is still writing or syncing it
            return False
        else:
            return remove_file(path)
        finally:
            os.close(fd)


def _is_spare(path: str) -> bool:
    """A file kept for reuse (vm/host/store/files.py): gc removes those unused for the temp
    files' age, so no finished run's bytes stay on disk for long."""
    directory, name = os.path.split(path)
    return os.path.basename(directory) == SPARES and name.endswith(".spare")
