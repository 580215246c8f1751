"""The signing key set of a state directory: key 1 in `<state>/key`, key n >= 2 in
`<state>/keys/<n>` (the newest signs, every one verifies), each created exclusively and checked
as it is read (a regular file, private to its owner, of a key's length)."""

from __future__ import annotations

import os
import stat
import time

from vm.host.store.base import (KEY_BYTES, KEY_MAX_BYTES, KeyInfo, SigningKeyError, StoreError,
                                check_key, key_id, lost_key_error)
from vm.host.store.files import (PRIVATE_FILE, fsync_dir, fsync_fd, make_private_dirs,
                                 remove_file, scan_dir)


# The key set each state directory had when last read, with what it was read from: an entry
# is used while the stat of every key file and of keys/ is the same (a key is written whole
# before it is linked into place and never changed after, so its bytes stand for as long as
# its file does). A listing younger than RACY_SECONDS is not kept: a key added within the
# timestamp's granularity of a listing could leave keys/ with the same mtime.
_KEY_SETS: dict[str, tuple[tuple, list[tuple[int, bytes, float]]]] = {}
RACY_SECONDS = 2.0


def _stamp(path: str) -> tuple | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_dev, info.st_mode, info.st_uid, info.st_size,
            info.st_mtime_ns, info.st_ctime_ns)


class KeyFiles:
    """The key methods of the directory `Store` (vm/host/store/directory.py), which gives them
    `path`, `location` and `count_checkpoints`."""

    def _key_path(self, number: int) -> str:
        return self.path("key") if number == 1 else self.path("keys", str(number))

    def _key_numbers(self) -> list[int]:
        """The numbers of the key files present (whatever they hold), newest first."""
        numbers = [int(e.name) for e in scan_dir(self.path("keys"))
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
        """The key files present, newest first, each (number, key, mtime): read again only
        when a key file or keys/ changed since this process last read them (_KEY_SETS)."""
        cached = _KEY_SETS.get(self.root)
        if cached is not None and cached[0] == self._key_stamps(cached[1]):
            return cached[1]
        keys_dir = _stamp(self.path("keys"))
        found = self._read_key_files()
        stamps = self._key_stamps(found)
        recent = (time.time() - RACY_SECONDS) * 1e9
        if stamps[0] == keys_dir and all(s is None or max(s[5], s[6]) < recent for s in stamps):
            _KEY_SETS[self.root] = (stamps, found)
        else:
            _KEY_SETS.pop(self.root, None)
        return found

    def _key_stamps(self, found: list[tuple[int, bytes, float]]) -> tuple:
        """keys/, key 1 (there or not) and every other key file read."""
        return (_stamp(self.path("keys")), _stamp(self.path("key")),
                *(_stamp(self._key_path(n)) for n, _, _ in found if n != 1))

    def _read_key_files(self) -> list[tuple[int, bytes, float]]:
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
        tmp = os.path.join(directory, f".key.{os.urandom(6).hex()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        os.fchmod(fd, PRIVATE_FILE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(KEY_BYTES))
            fh.flush()
            fsync_fd(fh.fileno(), tmp)
        try:
            os.link(tmp, path)  # first writer wins; a concurrent creator reads the winner's key
        except FileExistsError:
            return False
        finally:
            remove_file(tmp)
        fsync_dir(directory)
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
        return remove_file(self._key_path(number))

    def existing_key(self) -> bytes | None:
        keys = self.keys()
        return keys[0] if keys else None
