"""Our modules' bytecode in one file, which a `lobster` process reads once.

Python finds and loads each module of ours through importlib. For every one it searches the
package's folder, stats the source twice, opens, reads and closes its `.pyc`, and makes some
hundred Python-level calls of the import system around that. A cold `lobster resume` imports
about seventy of our modules, and that machinery cost about 0.3 million instructions each
(valgrind, the same for an empty module): some 20 of the resume's 262 million, the largest part
of what it costs above the interpreter's floor after attrs' class building.

The `lobster` console script (and only it: an embedding process keeps its import system as it
is) therefore puts `Finder` first on `sys.meta_path`. It serves a module of `vm` or `lobsterc`
from one file that holds the bytecode of every module of ours a `lobster` process imported
before, keyed by the folder it was found in and its name, with the source's size and mtime
and the folder's mtime (in nanoseconds). A module is served only while all three are unchanged:
a new, edited, moved or deleted module changes its source's, and a package or an extension
module of the same name added beside it changes its folder's, which the ordinary import would
now find instead. Anything else (a package with a __path__ of several folders, a damaged file)
is imported as Python does it, and noted. `save()`, which the script calls once its command is
done, then writes the file again: the old entries still unchanged, and the noted modules' code
taken from the `.pyc` that Python has just validated or written for them, checked against the
source as it is now (its timestamp, or the source hash of a hash-based `.pyc`). The check is
never weaker than Python's own (its `.pyc` keeps the mtime in whole seconds).

The module's loader is importlib's own for its source file, handed the code the file held, so
`get_source`, `get_data`, resources, `reload` and a second `exec_module` behave as they do
after an ordinary import.

The file lives beside our `.pyc` files (vm/__pycache__, or under `sys.pycache_prefix`), one
per interpreter, bytecode version and optimization level, and is trusted as they are: whoever
can write there can write those. Removing `__pycache__` removes it. It is replaced whole (a
write to a temporary name of its own, then a rename), never edited, so a reader sees an old
file or a new one, and it is read as its header says or not at all: a file of another length
than the header gives (cut short, grown) or of another format is ignored and written again. With PYTHONDONTWRITEBYTECODE (or `-B`), or a folder we cannot
write, nothing is written, as no bytecode is. The cache changes how fast a module loads, never
which code runs.
"""

from __future__ import annotations

import _imp
import marshal
import os
import sys
from _frozen_importlib import ModuleSpec
from _frozen_importlib_external import (
    _RAW_MAGIC_NUMBER,
    MAGIC_NUMBER,
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
# the header: the magic, then the lengths of the index and of the code after it (4 bytes each,
# little-endian); struct, binascii and types are not imported, for `lobster --help`'s sake
_MAGIC = b"LBMODS2\0"
_HEAD_SIZE = len(_MAGIC) + 8
_CODE = type(cache_dir.__code__)  # types.CodeType

# The index: (folder, name) -> an entry, the tuple
#   (source path, is a package, source mtime_ns, source size, folder mtime_ns, .pyc path,
#    offset of the code after the index, its length)
_index: dict[tuple[str, str], tuple] | None = None
_data = memoryview(b"")  # the file after its index
_folders: dict[str, int | None] = {}  # a folder's mtime_ns, stat'ed once a process
_noted: set[str] = set()  # our modules this process imported without the file


def read(path: str) -> tuple[dict[tuple[str, str], tuple], memoryview]:
    """The index of a file and the bytes after it; ({}, empty) when there is none or it does
    not check out."""
    try:
        with open(path, "rb") as file:
            data = file.read()
        size = int.from_bytes(data[len(_MAGIC):len(_MAGIC) + 4], "little")
        code_size = int.from_bytes(data[len(_MAGIC) + 4:_HEAD_SIZE], "little")
        if data[:len(_MAGIC)] != _MAGIC or len(data) != _HEAD_SIZE + size + code_size:
            raise ValueError
        index = marshal.loads(memoryview(data)[_HEAD_SIZE:_HEAD_SIZE + size])
        if type(index) is not dict:
            raise ValueError
    except (OSError, ValueError, EOFError, TypeError):
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
        if _index is None:
            _index, _data = read(PATH)
        entry = _index.get((path[0], name))
        code = None if entry is None else _code(path[0], entry)
        if code is None:
            _noted.add(name)
            return None
        origin, package, cached = entry[0], entry[1], entry[5]
        spec = ModuleSpec(name, _Loader(name, origin, code), origin=origin, is_package=package)
        spec.has_location = True  # __file__ and __cached__ as the ordinary import sets them
        spec.cached = cached
        if package:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        return spec


def _folder_mtime(folder: str) -> int | None:
    if folder not in _folders:
        try:
            _folders[folder] = os.stat(folder).st_mtime_ns
        except OSError:
            _folders[folder] = None
    return _folders[folder]


def _code(folder: str, entry: tuple) -> CodeType | None:
    """The code of an entry whose source and folder are as they were."""
    try:
        origin, _, mtime_ns, size, folder_mtime_ns, _, offset, length = entry
        if _folder_mtime(folder) != folder_mtime_ns:
            return None
        st = os.stat(origin)
        if st.st_mtime_ns != mtime_ns or st.st_size != size:
            return None
        code = marshal.loads(_data[offset:offset + length])
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if type(code) is not _CODE:
        return None
    _imp._fix_co_filename(code, origin)  # as importlib does for a .pyc made elsewhere
    return code


def install() -> None:
    """Put the finder first on sys.meta_path (once)."""
    if Finder not in sys.meta_path:
        sys.meta_path.insert(0, Finder)


def save() -> None:
    """Write the file again if this process imported a module of ours without it."""
    if not _noted or sys.dont_write_bytecode:
        return
    noted = sorted(_noted)
    _noted.clear()
    try:
        _save(noted)
    except Exception:  # noqa: BLE001, S110 - the file is a shortcut: a command whose work is
        pass  # done never fails on it


def _save(noted: list[str]) -> None:
    folder = os.path.dirname(PATH)
    if not os.access(folder if os.path.isdir(folder) else os.path.dirname(folder), os.W_OK):
        return  # a read-only install: no bytecode of ours is written either
    _folders.clear()  # as the folders are now, after this process's imports
    found = [entry for entry in (_from_pyc(name) for name in noted) if entry is not None]
    if not found:
        return
    entries = {}
    for key, entry in (_index or {}).items():
        code = _data[entry[6]:entry[6] + entry[7]]
        if len(code) == entry[7] and _unchanged(key[0], entry):
            entries[key] = (*entry[:6], bytes(code))
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


def _unchanged(folder: str, entry: tuple) -> bool:
    """Whether an entry's source and folder still have the size and mtimes it keeps."""
    try:
        st = os.stat(entry[0])
    except OSError:
        return False
    return (st.st_mtime_ns, st.st_size) == (entry[2], entry[3]) \
        and _folder_mtime(folder) == entry[4]


def _from_pyc(name: str) -> tuple[tuple[str, str], tuple] | None:
    """The key and entry of a module of ours imported the ordinary way from its source, its
    code taken from the `.pyc` importlib keeps for it if that is of the source as it is now;
    None for anything else (a module that was not found, an alias of another, one without
    a usable `.pyc`)."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if spec is None or spec.name != name or getattr(module, "__name__", None) != name \
            or type(spec.loader) is not SourceFileLoader:
        return None
    origin, package = spec.origin, spec.submodule_search_locations is not None
    if type(origin) is not str or not origin.endswith(".py"):
        return None
    folder = os.path.dirname(os.path.dirname(origin) if package else origin)
    try:
        st = os.stat(origin)
        cached = cache_from_source(origin)
        with open(cached, "rb") as file:
            pyc = file.read()
        if len(pyc) < 16 or pyc[:4] != MAGIC_NUMBER:
            return None
        flags = int.from_bytes(pyc[4:8], "little")
        if flags == 0:  # checked by the source's mtime (in seconds) and size
            if pyc[8:16] != (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") \
                    + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"):
                return None
        elif flags in (1, 3):  # hash-based: by the source's hash
            with open(origin, "rb") as file:
                source = file.read()
            if len(source) != st.st_size or _imp.source_hash(_RAW_MAGIC_NUMBER, source) \
                    != pyc[8:16]:
                return None
        else:
            return None
    except (OSError, ValueError, NotImplementedError):
        return None
    folder_mtime_ns = _folder_mtime(folder)
    if folder_mtime_ns is None:
        return None
    return (folder, name), (origin, package, st.st_mtime_ns, st.st_size, folder_mtime_ns, cached,
                            pyc[16:])
