"""Our modules' bytecode in one file, which a `lobster` process reads once.

Python finds and loads each module of ours through importlib. For every one it searches the
package's folder, stats the source twice, opens, reads and closes its `.pyc`, and makes some
hundred Python-level calls of the import system around that. A cold `lobster resume` imports
about seventy of our modules, and that machinery cost about 0.3 million instructions each
(valgrind, the same for an empty module): some 20 of the resume's 262 million.

The `lobster` console script (and only it: an embedding process keeps its import system as it
is) therefore puts `Finder` on `sys.meta_path`, just before Python's own finders (a finder put
ahead of those, an instrumenting hook, still sees every import first). It serves a
module of `vm` or `lobsterc` from one file that holds the bytecode of every module of ours a
`lobster` process imported before, keyed by the folder it was found in and its name, with the
mtime (in nanoseconds) and size of its source, and the mtimes of its folder and, for a package,
of the package's own folder. A module is served only while all of them are unchanged: a new,
edited, moved or deleted module changes its source's, and a module, package or extension module
of the same name added beside it (an extension `__init__` in a package) changes a folder's,
which the ordinary import would now find instead. A source is stat'ed at each import, a folder
once a process until `importlib.invalidate_caches()`, which Python's documentation asks of a
program that makes a module while it runs. Anything else (a package whose __path__ is several folders, a folder a path
hook of someone else's reads, a damaged file) is imported as Python does it.

A module of ours imported the ordinary way is noted, with its folder's mtime then, and `save()`
(which the script calls once its command is done) writes the file again: the old entries still
unchanged, and each noted module whose folder did not change since, its code taken from the
`.pyc` Python has just validated or written for it and checked against the source as it is now.
The check is never weaker than Python's: a timestamp `.pyc` must match the source's mtime (in
seconds) and size, and must have been written at least two seconds after the source's mtime
(else a same-size edit within the second could hide behind it, as it does from Python; such a
module's source is compiled instead); the code of a hash-based `.pyc` is kept with the source's
hash, and served only while the source still hashes to it.

The module's loader is importlib's own for its source file, handed the code the file held, so
`get_source`, `get_data`, resources, `reload` and a second `exec_module` behave as they do
after an ordinary import.

The file lives beside our `.pyc` files (vm/__pycache__, or its place under
`sys.pycache_prefix`), one per interpreter, bytecode version and optimization level, and is
trusted as they are: whoever can write there can write those. Removing `vm/__pycache__`
removes it. It is replaced whole (a write to a temporary name of its own, then a rename), never
edited, so a reader sees an old file or a new one, and it is read only if it is a regular file
of at most MAX_BYTES and exactly the length its header gives; anything else (cut short, grown,
another format, a FIFO) is ignored and written again. With PYTHONDONTWRITEBYTECODE (or `-B`),
or a folder we cannot write, nothing is written, as no bytecode is. The cache changes how fast
a module loads, never which code runs.
"""

from __future__ import annotations

import _imp
import marshal
import os
import sys
import time
from _frozen_importlib import BuiltinImporter, FrozenImporter, ModuleSpec
from _frozen_importlib_external import (
    _RAW_MAGIC_NUMBER,
    MAGIC_NUMBER,
    FileFinder,
    PathFinder,
    SourceFileLoader,
    cache_from_source,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (`lobster --help`)
if TYPE_CHECKING:
    from types import CodeType, ModuleType


def cache_dir() -> str:
    """Where our bytecode goes: vm/__pycache__, or its place under sys.pycache_prefix (this
    file and vm.core.method_cache's go there too)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # vm/
    if sys.pycache_prefix:
        return os.path.join(sys.pycache_prefix, package.lstrip(os.sep))
    return os.path.join(package, "__pycache__")


PACKAGES = ("vm.", "lobsterc.")  # whose modules are served (the packages themselves are
# imported before the finder is installed)
_OPT = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""  # as cache_from_source names
PATH = os.path.join(cache_dir(), f"modules.{sys.implementation.cache_tag}{_OPT}."
                                 f"{MAGIC_NUMBER[:2].hex()}.marshal")
MAX_BYTES = 64 << 20  # a file larger than this is not read (ours is about 1 MiB)
RACY_NS = 2_000_000_000  # a .pyc written this soon after its source's mtime is not trusted
# the header: the magic, then the lengths of the index and of the code after it (4 bytes each,
# little-endian); struct, binascii, stat and types are not imported, for `lobster --help`
_MAGIC = b"LBMODS3\0"
_HEAD_SIZE = len(_MAGIC) + 8
_CODE = type(cache_dir.__code__)  # types.CodeType
_REGULAR = 0o100000  # stat.S_IFREG

# The index: (folder, name) -> an entry, the tuple
#   (source path, is a package, source mtime_ns, source size, ((folder, mtime_ns), ...),
#    .pyc path, the source's hash for a hash-based .pyc or None, offset of the code, its length)
_index: dict[tuple[str, str], tuple] | None = None
_data = memoryview(b"")  # the file after its index
_folders: dict[str, int | None] = {}  # a folder's mtime_ns, stat'ed once until invalidated
_noted: dict[str, tuple] = {}  # our modules imported without the file: the mtime_ns of their
# folder and of the folder a package of theirs would be, when the finder was asked
_hooks: list | None = None  # sys.path_hooks as install() found them, when they were Python's


def read(path: str) -> tuple[dict[tuple[str, str], tuple], memoryview]:
    """The index of a file and the bytes after it; ({}, empty) when there is none or it does
    not check out."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o170000 != _REGULAR or not _HEAD_SIZE <= st.st_size <= MAX_BYTES:
                raise ValueError
            with open(fd, "rb", closefd=False) as file:
                data = file.read(st.st_size + 1)
        finally:
            os.close(fd)
        size = int.from_bytes(data[len(_MAGIC):len(_MAGIC) + 4], "little")
        code_size = int.from_bytes(data[len(_MAGIC) + 4:_HEAD_SIZE], "little")
        if data[:len(_MAGIC)] != _MAGIC or len(data) != _HEAD_SIZE + size + code_size:
            raise ValueError
        index = marshal.loads(memoryview(data)[_HEAD_SIZE:_HEAD_SIZE + size])
        if type(index) is not dict:
            raise ValueError
    except Exception:  # noqa: BLE001 - none, unreadable, damaged, too large: as if none
        return {}, memoryview(b"")
    return index, memoryview(data)[_HEAD_SIZE + size:]


class _Loader(SourceFileLoader):
    """importlib's loader of the module's source file, handed the code the file held for it:
    its first `get_code` returns that code; anything after (a second exec, `get_source`,
    `get_data`, resources) is importlib's own."""

    def __init__(self, name: str, path: str, code: CodeType) -> None:
        super().__init__(name, path)
        self._code: CodeType | None = code

    def get_code(self, fullname: str) -> CodeType:
        code, self._code = self._code, None
        if code is not None and fullname == self.name:
            return code
        return super().get_code(fullname)


class Finder:
    """A meta path finder for our modules, from the file (see the module's docstring)."""

    @staticmethod
    def find_spec(name: str, path: list[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        global _index, _data
        if not name.startswith(PACKAGES) or path is None or len(path) != 1:
            return None
        folder = path[0]
        finder = sys.path_importer_cache.get(folder)
        if sys.path_hooks != _hooks or (finder is not None and type(finder) is not FileFinder):
            return None  # a path hook of someone else's may read this folder
        if _index is None:
            _index, _data = read(PATH)
        entry = _index.get((folder, name))
        code = None if entry is None else _code(entry)
        if code is None:
            _noted[name] = (_folder_mtime(folder),
                            _mtime(os.path.join(folder, name.rpartition(".")[2])))
            return None
        origin, package, cached = entry[0], entry[1], entry[5]
        spec = ModuleSpec(name, _Loader(name, origin, code), origin=origin, is_package=package)
        spec.has_location = True  # __file__ and __cached__ as the ordinary import sets them
        spec.cached = cached
        if package:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        return spec

    @staticmethod
    def invalidate_caches() -> None:
        """What `importlib.invalidate_caches()` asks: forget the folders' mtimes."""
        _folders.clear()


def _folder_mtime(folder: str) -> int | None:
    found = _folders.get(folder, _folders)
    if found is _folders:
        found = _folders[folder] = _mtime(folder)
    return found


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _unchanged(entry: tuple) -> bool:
    """Whether an entry's source and folders still have the size and mtimes it keeps."""
    try:
        st = os.stat(entry[0])
        if st.st_mtime_ns != entry[2] or st.st_size != entry[3]:
            return False
        for folder, mtime_ns in entry[4]:
            if _folder_mtime(folder) != mtime_ns:
                return False
    except OSError:
        return False
    return True


def _code(entry: tuple) -> CodeType | None:
    """The code of an entry whose source and folders are as they were."""
    try:
        origin, source_hash, offset, length = entry[0], entry[6], entry[7], entry[8]
        if not _unchanged(entry):
            return None
        if source_hash is not None:
            with open(origin, "rb") as file:
                if _imp.source_hash(_RAW_MAGIC_NUMBER, file.read()) != source_hash:
                    return None
        code = marshal.loads(_data[offset:offset + length])
    except Exception:  # noqa: BLE001 - an entry that does not check out: imported as Python does
        return None
    if type(code) is not _CODE:
        return None
    _imp._fix_co_filename(code, origin)  # as importlib does for a .pyc made elsewhere
    return code


def install() -> None:
    """Put the finder on sys.meta_path just before Python's own finders (once), after any
    other (an instrumenting hook sees our imports first), if the path hooks are Python's own
    (a zip importer, then the file finder). The built-in and frozen modules' finders find none
    of ours, so it goes before them."""
    global _hooks
    hooks = list(sys.path_hooks)
    zipimport = sys.modules.get("zipimport")
    if Finder in sys.meta_path or len(hooks) != 2 or zipimport is None \
            or hooks[0] is not zipimport.zipimporter \
            or not getattr(hooks[1], "__qualname__", "").startswith("FileFinder.path_hook"):
        return
    _hooks = hooks
    at = next((i for i, finder in enumerate(sys.meta_path)
               if finder in (BuiltinImporter, FrozenImporter, PathFinder)), len(sys.meta_path))
    sys.meta_path.insert(at, Finder)


def save() -> None:
    """Write the file again if this process imported a module of ours without it."""
    if not _noted or sys.dont_write_bytecode:
        return
    noted = sorted(_noted.items())
    _noted.clear()
    try:
        _save(noted)
    except Exception:  # noqa: BLE001, S110 - the file is a shortcut: a command whose work is
        pass  # done never fails on it


def _save(noted: list[tuple[str, tuple]]) -> None:
    folder = os.path.dirname(PATH)
    if not os.access(folder if os.path.isdir(folder) else os.path.dirname(folder), os.W_OK):
        return  # a read-only install: no bytecode of ours is written either
    _folders.clear()  # as the folders are now
    found = [entry for entry in (_entry(name, *stamps) for name, stamps in noted) if entry]
    if not found:
        return
    entries = {}
    for key, entry in (_index or {}).items():
        code = _data[entry[7]:entry[7] + entry[8]]
        if len(code) == entry[8] and _unchanged(entry):
            entries[key] = (*entry[:7], bytes(code))
    entries.update(found)
    index, blobs, at = {}, [], 0
    for key, (*head, code) in sorted(entries.items()):
        index[key] = (*head, at, len(code))
        blobs.append(code)
        at += len(code)
    raw = marshal.dumps(index)
    temp = f"{PATH}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    os.makedirs(folder, exist_ok=True)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with open(fd, "wb") as file:
            file.write(_MAGIC + len(raw).to_bytes(4, "little") + at.to_bytes(4, "little") + raw
                       + b"".join(blobs))
        os.replace(temp, PATH)
    except BaseException:
        os.unlink(temp)
        raise


def _entry(name: str, folder_mtime_ns: int | None, own_mtime_ns: int | None
           ) -> tuple[tuple[str, str], tuple] | None:
    """The key and entry of a module of ours imported the ordinary way from its source, if
    its folders are as they were when it was found; None for anything else (a module that was
    not found, an alias of another, one without a usable `.pyc`)."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if spec is None or spec.name != name or getattr(module, "__name__", None) != name \
            or type(spec.loader) is not SourceFileLoader:
        return None
    origin, package = spec.origin, spec.submodule_search_locations is not None
    if type(origin) is not str or not origin.endswith(".py"):
        return None
    folder = os.path.dirname(os.path.dirname(origin) if package else origin)
    folders = ((folder, folder_mtime_ns),)
    if package:
        folders += ((os.path.dirname(origin), own_mtime_ns),)
    if any(mtime_ns is None or _mtime(path) != mtime_ns for path, mtime_ns in folders):
        return None  # changed while this process ran: noted again by the next one
    try:
        st = os.stat(origin)
        cached = cache_from_source(origin)
        code, source_hash = _code_of(origin, st, cached)
    except (OSError, ValueError, SyntaxError, NotImplementedError):
        return None
    if code is None:
        return None
    return (folder, name), (origin, package, st.st_mtime_ns, st.st_size, folders, cached,
                            source_hash, code)


def _code_of(origin: str, st: os.stat_result, cached: str) -> tuple[bytes | None, bytes | None]:
    """The marshalled code of the source `origin` (stat'ed as `st`) and, for a hash-based
    `.pyc`, the source's hash: from its `.pyc` when that is of this source, compiled anew when
    a timestamp `.pyc` was written too soon after the source's mtime to tell."""
    with open(cached, "rb") as file:
        pyc = file.read()
        written_ns = os.fstat(file.fileno()).st_mtime_ns
    if len(pyc) < 16 or pyc[:4] != MAGIC_NUMBER:
        return None, None
    flags = int.from_bytes(pyc[4:8], "little")
    if flags == 0:  # checked by the source's mtime (in seconds) and size
        if pyc[8:16] != (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") \
                + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"):
            return None, None
        if written_ns >= st.st_mtime_ns + RACY_NS:
            return pyc[16:], None
        with open(origin, "rb") as file:  # racy: whatever the .pyc holds, compile what is there
            source = file.read()
        if (os.stat(origin).st_mtime_ns, len(source)) != (st.st_mtime_ns, st.st_size) \
                or time.time_ns() < st.st_mtime_ns + RACY_NS:
            return None, None  # still being written: the next process tries again
        return marshal.dumps(compile(source, origin, "exec", dont_inherit=True)), None
    if flags in (1, 3):  # hash-based: kept with the hash of the source it was compiled from
        with open(origin, "rb") as file:
            source_hash = _imp.source_hash(_RAW_MAGIC_NUMBER, file.read())
        return (pyc[16:], source_hash) if source_hash == pyc[8:16] else (None, None)
    return None, None
