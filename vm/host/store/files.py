"""Private files on disk, for the state directory store: directories made 0700 and files
written 0600 whatever the umask, atomically (temp file, fsync, rename, fsync of the directory),
and the small read, scan and remove helpers that treat a missing file as an answer.

Every fsync of a file or a directory goes through `fsync_fd` and is counted in `SYNCS`: a
durable cycle is bounded by how many of them it makes (a test holds it to two where
`publish` needs one sync, three elsewhere), and counting here needs no tracer.

`publish` is the write of a checkpoint (a frame, a program): one sync instead of two where the
filesystem makes that enough (`one_sync_publish`).

Files are recycled rather than made and deleted. A small file a store is done with (`retire`: a
finished claim's frame; `atomic_write`: the file a rewrite replaced) is kept in `<dir>/.spare/`,
and the next temp file of that directory is one of them, renamed and written over, instead of
a new one. A cycle then frees no inode and no block, and makes one file instead of four. That
matters on ext4 without a journal: it does not hand out an inode freed in the last minute
again, and each new file walks past every inode freed since, so making files got slower with
every cycle that deleted some; and with `discard`, every freed block costs a discard
(docs/benchmarks.md, "The durable cycle")."""

from __future__ import annotations

import fcntl
import itertools
import os
import stat

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


class SyncCounter:
    """How many fsyncs this process made through this module, and of what (the last path)."""

    def __init__(self) -> None:
        self.count = 0
        self.last = ""


SYNCS = SyncCounter()


def fsync_fd(fd: int, path: str) -> None:
    """fsync `fd` (of `path`, a file or a directory), counted in SYNCS."""
    os.fsync(fd)
    SYNCS.count += 1
    SYNCS.last = path


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


def atomic_write(path: str, data: bytes | tuple[bytes, ...], mode: int = PRIVATE_FILE,
                 sync_dir: bool = True,
                 sync: bool = True, keep_replaced: bool = False) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the new one.
    The file gets exactly `mode`, whatever the umask. `sync_dir=False` leaves the directory
    sync (which makes the rename durable) to the caller; `sync=False` syncs nothing (a hint
    may be lost, never torn by a writer that dies). `keep_replaced`: the file replaced
    becomes a spare (its bytes stay until it is reused: not for a value a user overwrites)."""
    tmp, fd, held = _new_temp(path, mode)
    try:
        try:
            write_over(fd, data, held)
            if sync:
                fsync_fd(fd, tmp)
        finally:
            os.close(fd)
        if keep_replaced:
            _replace_keeping_old(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        remove_file(tmp)
        raise
    if sync and sync_dir:
        fsync_dir(os.path.dirname(path))


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (os.write may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_over(fd: int, data: bytes | tuple[bytes, ...], held: int) -> None:
    """Make the file of a new `_new_temp`, which holds `held` bytes (a spare holds its last
    ones), hold exactly `data` (bytes, or a tuple of them written one after the other, so a
    large body is never copied behind its head): written from its start, then cut to that
    length if it held more (within a block it held already, this frees nothing)."""
    size = 0
    for part in data if isinstance(data, tuple) else (data,):
        write_all(fd, part)
        size += len(part)
    if held > size:
        os.ftruncate(fd, size)


def _new_temp(path: str, mode: int) -> tuple[str, int, int]:
    """A temp file beside `path`: its name, an open descriptor and how many bytes it holds
    (`write_over` it). It is only ours, has exactly `mode` and is locked: the lock is held
    while the data is written and synced, so gc never takes a temp file of a write still in
    progress, however slow (remove_leftover). A spare of the directory when there is one,
    else a new file."""
    directory, name = os.path.split(path)
    tmp = f"{directory}/.{name}.{unique_name()}.tmp"
    taken = _take_spare(directory, tmp, mode)
    if taken is not None:
        return tmp, *taken
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:  # the first write into this directory
        make_private_dirs(directory)
        fd = os.open(tmp, flags, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.fchmod(fd, mode)  # the umask may have taken bits away
    except BaseException:
        os.close(fd)
        remove_file(tmp)
        raise
    return tmp, fd, 0


# Names no other temp file or spare has: this process's random prefix and a count. The prefix
# is drawn again in a forked child (which would otherwise count on from the same one); a
# process needs one random draw, not one per file.
_names = itertools.count()
_prefix = ""


def unique_name() -> str:
    global _prefix
    if not _prefix:
        _prefix = os.urandom(6).hex()
    return f"{_prefix}{next(_names):x}"


def _new_prefix_after_fork() -> None:
    global _prefix
    _prefix = ""


os.register_at_fork(after_in_child=_new_prefix_after_fork)


# spares (see the module's docstring) ------------------------------------------------------------
SPARES = ".spare"  # the subdirectory of a store directory that holds its spares
SPARE_LIMIT = 64  # spares a process keeps in one directory; beyond that a file is removed
SPARE_BYTES = 1 << 16  # a larger file is removed, not kept
_spare_names: dict[str, list[str]] = {}  # directory -> names of its spares, as this process knows


def _spares_of(directory: str) -> list[str]:
    """The names of `directory`'s spares: read once per process, then kept up to date by this
    process's own takes and retires (another process's new spares are found at its next start;
    one it took is skipped when the rename finds it gone)."""
    names = _spare_names.get(directory)
    if names is None:
        names = _spare_names[directory] = [
            entry.name for entry in scan_dir(os.path.join(directory, SPARES))
            if entry.name.endswith(".spare")]
    return names


def _take_spare(directory: str, tmp: str, mode: int) -> tuple[int, int] | None:
    """A spare of `directory`, renamed to `tmp`, opened for writing, locked and given `mode`:
    its descriptor and size; None when there is none. It is locked before the rename, so no temp file named `tmp` is ever unlocked (gc
    leaves locked temp files alone), and it is checked to have no other name: a crash between
    the two steps of `_replace_keeping_old` leaves a spare that is still a live file too."""
    names = _spares_of(directory)
    while names:
        try:
            spare = os.path.join(directory, SPARES, names.pop())
        except IndexError:  # another thread took the last one
            return None
        try:
            fd = os.open(spare, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # taken by another process (or not a file)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            info = os.fstat(fd)
            if info.st_nlink != 1:  # also a live file: only this name goes
                remove_file(spare)
                raise FileNotFoundError(spare)
            os.rename(spare, tmp)
        except OSError:  # another process is taking it, or took it
            os.close(fd)
            continue
        try:
            if stat.S_IMODE(info.st_mode) != mode:
                os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            remove_file(tmp)
            raise
        return fd, info.st_size
    return None


def retire(path: str) -> bool:
    """Remove the name `path` (False when it was not there); its file is kept as a spare of its
    directory when it is a small regular file and the directory has room for one, else
    removed."""
    directory = os.path.dirname(path)
    names = _spares_of(directory)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if len(names) >= SPARE_LIMIT or info.st_size > SPARE_BYTES \
            or not stat.S_ISREG(info.st_mode):
        return remove_file(path)
    name = f"{unique_name()}.spare"
    try:
        _rename_into_spares(path, os.path.join(directory, SPARES, name))
    except FileNotFoundError:
        return False
    except OSError:  # another filesystem under the same path, say: removed as before
        return remove_file(path)
    names.append(name)
    return True


def _rename_into_spares(path: str, spare: str) -> None:
    try:
        os.rename(path, spare)
    except FileNotFoundError:
        if os.path.isdir(os.path.dirname(spare)) or not os.path.lexists(path):
            raise
        make_private_dirs(os.path.dirname(spare))
        os.rename(path, spare)


def _replace_keeping_old(tmp: str, path: str) -> None:
    """os.replace(tmp, path), keeping the file `path` named before as a spare: it is given
    a spare's name first (a second name, no copy). A crash in between leaves a spare that is
    still the live file too: `_take_spare` lets go of such a name instead of writing over it."""
    directory = os.path.dirname(path)
    names = _spares_of(directory)
    if len(names) >= SPARE_LIMIT:
        os.replace(tmp, path)
        return
    name = f"{unique_name()}.spare"
    spare = os.path.join(directory, SPARES, name)
    try:
        os.link(path, spare, follow_symlinks=False)
    except FileNotFoundError:
        if not os.path.lexists(path):
            os.replace(tmp, path)  # a new name: nothing replaced
            return
        make_private_dirs(os.path.dirname(spare))  # the directory's first spare
        _replace_keeping_old(tmp, path)
        return
    except OSError:  # a filesystem without hard links, say
        os.replace(tmp, path)
        return
    try:
        os.replace(tmp, path)
    except BaseException:
        remove_file(spare)
        raise
    names.append(name)


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
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def read_fd(fd: int, info: os.stat_result | None = None) -> bytes:
    """Everything from `fd`'s offset to its end, in one read when the file's size (`info`,
    its fstat, if the caller has it) says how much, as it does for a file nobody is writing:
    a read that returns less than it asked for has met the end of a regular file."""
    wanted = max((info or os.fstat(fd)).st_size, 0) + 1
    first = os.read(fd, wanted)
    if len(first) < wanted:
        return first
    chunks = [first]
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


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
        fsync_fd(fd, directory)
    finally:
        os.close(fd)


# Filesystems on which one fsync of a file, made after it was renamed into place, makes the
# rename durable with the data: the rename changes the file's inode (its ctime) in the same
# journal transaction as the directory entry, and an fsync commits the journal up to the
# file's last change (ext4 with its journal, xfs: every earlier transaction too, so a symlink
# made before in the same directory is durable as well). tmpfs keeps nothing through a power
# loss anyway. Anywhere else (ext4 without a journal, btrfs, network and overlay filesystems,
# unknown ones) the POSIX sequence runs.
ONE_SYNC_FILESYSTEMS = frozenset({"ext4", "xfs", "tmpfs"})
_FS_TYPES: dict[str, tuple[str, str]] = {}  # directory -> (type, source)


def filesystem_type(directory: str) -> str:
    """The type of the filesystem `directory` is on, as /proc/self/mountinfo names it ("" when
    it cannot be told); read once per directory per process."""
    return _mount(directory)[0]


def _mount(directory: str) -> tuple[str, str]:
    found = _FS_TYPES.get(directory)
    if found is None:
        found = _FS_TYPES[directory] = _mount_of(os.path.realpath(directory))
    return found


def _mount_of(path: str) -> tuple[str, str]:
    """(filesystem type, mount source) of the mount `path` is on."""
    best, found = -1, ("", "")
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return found
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields = head.split(" ")
        if len(fields) < 5 or not tail:
            continue
        mount = _unescape(fields[4])
        inside = path == mount or path.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= best:  # of equal mounts, the last is the one on top
            kind, _, rest = tail.partition(" ")
            best, found = len(mount), (kind, _unescape(rest.partition(" ")[0]))
    return found


def _ext4_journaled(source: str, sysfs: str = "/sys/fs/ext4") -> bool:
    """Whether the ext4 filesystem on device `source` keeps a journal (ext4 can be made
    without one, and then an fsync of a file does not commit a rename): its jbd2 thread, as
    /sys/fs/ext4/DEVICE/journal_task names it ("<none>" without a journal)."""
    device = os.path.basename(os.path.realpath(source)) if source.startswith("/") else source
    try:
        with open(os.path.join(sysfs, device, "journal_task"), encoding="utf-8") as fh:
            task = fh.read().strip()
    except OSError:
        return False  # cannot be told: the POSIX sequence
    return bool(task) and task != "<none>"


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in a path as octal escapes."""
    for code in ("040", "011", "012", "134"):
        field = field.replace("\\" + code, chr(int(code, 8)))
    return field


def one_sync_publish(directory: str, new_name: bool = False) -> bool:
    """Whether `publish` into `directory` needs one sync (see ONE_SYNC_FILESYSTEMS). An ext4
    filesystem without its journal counts only for a `new_name`: there an fsync of a file that
    was just given a new name in a directory (created, linked or renamed to a name that was not
    there) also writes that directory's changed blocks and inode (ext4 marks such a file and
    its fsync syncs the parent, as it must for a new file with no journal to commit it); a
    rename over a name that exists is not marked, so it takes the POSIX steps."""
    kind, source = _mount(directory)
    if kind == "ext4":
        return new_name or _ext4_journaled(source)
    return kind in ONE_SYNC_FILESYSTEMS


def publish(path: str, data: bytes | tuple[bytes, ...], new_name: bool = False) -> None:
    """Write `data` to `path` durably (the file and its name survive a power loss when this
    returns) with as few syncs as the filesystem allows: on those of `one_sync_publish`, the
    temp file is renamed into place and then synced once, which commits the data and the
    rename together; elsewhere, `atomic_write`'s four steps. `new_name`: the caller knows no
    file has that name (a frame's name holds a fresh random key). Between the rename and the
    end of that sync a power loss may leave the name with no data (an empty file): readers of
    a published file take an empty one for none (nothing was promised before this returned)."""
    if not one_sync_publish(os.path.dirname(path), new_name):
        atomic_write(path, data)
        return
    tmp, fd, held = _new_temp(path, PRIVATE_FILE)
    try:
        try:
            write_over(fd, data, held)
            os.replace(tmp, path)
        except BaseException:
            remove_file(tmp)
            raise
        fsync_fd(fd, path)  # a failure leaves the file in place: the caller decides
    finally:
        os.close(fd)
