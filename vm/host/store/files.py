"""Private files on disk, for the state directory store: directories made 0700 and files
written 0600 whatever the umask, atomically (temp file, fsync, rename, fsync of the directory),
and the small read, scan and remove helpers that treat a missing file as an answer."""

from __future__ import annotations

import fcntl
import os
import secrets

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


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
        remove_file(tmp)
        raise
    if sync and sync_dir:
        fsync_dir(directory)


def remove_file(path: str) -> bool:
    """Remove `path`; False when it was not there."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def read_file(path: str) -> bytes | None:
    """The bytes of `path`, or None when it is not there."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def scan_dir(directory: str) -> list[os.DirEntry]:
    """The entries of `directory`; [] when it is not there."""
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


def fsync_dir(directory: str) -> None:
    """Make the renames and links made in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
