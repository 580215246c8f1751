"""Our modules' bytecode in one file, which a `lobster` process reads once.

Python finds and loads each module of ours through importlib. For every one it searches the
package's folder, stats the source twice, opens, reads and closes its `.pyc`, and makes some
hundred Python-level calls of the import system around that. A cold `lobster resume` imports
about seventy of our modules, and that machinery cost about 0.3 million instructions each
(valgrind, the same for an empty module): some 20 of the resume's 262 million, the largest part
of what it costs above the interpreter's floor.

The `lobster` console script (and only it: an embedding process keeps its import system as it
is) therefore puts `Finder` first on `sys.meta_path`. It serves a module of `vm` or `lobsterc`
from one file that holds the bytecode of every module of ours a `lobster` process imported
before, with the source's path, size and mtime (in nanoseconds) for each. A module is served
from it only when its source still has that size and mtime and lies in the folder its package
is imported from; anything else (a new, edited, moved or deleted module, another checkout,
an unreadable file) is imported as Python does it, and noted. `save()`, which the script calls
once its command is done, writes the file again when something was noted: the old entries
whose sources are unchanged, and the noted modules' bytecode taken from the `.pyc` that Python
has just validated or written for them. So the file follows the sources, as `.pyc` files do,
and holds no more than our packages.

The file lives beside our `.pyc` files (vm/__pycache__, or under `sys.pycache_prefix`), one
per interpreter and bytecode version, and is trusted as they are: whoever can write there can
write those. It is replaced whole (a write to a temporary name, then a rename), never edited,
so a reader sees an old file or a new one. Its index carries a CRC-32; a file whose header or
index does not check out is ignored and written again. With PYTHONDONTWRITEBYTECODE (or `-B`)
nothing is written, as no bytecode is. The cache changes how fast a module loads, never which
code runs.
"""

from __future__ import annotations

import _imp
import binascii
import marshal
import os
import struct
import sys
import types
from _frozen_importlib import ModuleSpec
from _frozen_importlib_external import MAGIC_NUMBER, cache_from_source


def cache_dir() -> str:
    """Where our bytecode goes: vm/__pycache__, or its place under sys.pycache_prefix (this
    file and vm.core.method_cache's go there too)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # vm/
    if sys.pycache_prefix:
        return os.path.join(sys.pycache_prefix, package.lstrip(os.sep))
    return os.path.join(package, "__pycache__")


PACKAGES = ("vm.", "lobsterc.")  # whose modules are served (the packages themselves are
# imported before the finder is installed)
PATH = os.path.join(cache_dir(), f"modules.{sys.implementation.cache_tag}."
                                 f"{MAGIC_NUMBER[:2].hex()}.marshal")
_HEAD = struct.Struct("<8sII")  # magic, the index's length, its CRC-32
_MAGIC = b"LBMODS1\0"

# name -> (source path, is a package, source mtime_ns, source size, .pyc path, offset, length)
_index: dict[str, tuple] | None = None
_data = memoryview(b"")  # the file after its index: the code of each entry at its offset
_noted: set[str] = set()  # our modules this process imported without the file


def read(path: str) -> tuple[dict[str, tuple], memoryview]:
    """The index of a file and the bytes after it; ({}, empty) when there is none or it does
    not check out."""
    try:
        with open(path, "rb") as file:
            data = file.read()
        magic, size, crc = _HEAD.unpack_from(data)
        raw = memoryview(data)[_HEAD.size:_HEAD.size + size]
        if magic != _MAGIC or len(raw) != size or binascii.crc32(raw) != crc:
            raise ValueError
        index = marshal.loads(raw)
        if type(index) is not dict:
            raise ValueError
    except (OSError, ValueError, EOFError, TypeError, struct.error):
        return {}, memoryview(b"")
    return index, memoryview(data)[_HEAD.size + size:]


class _Loader:
    """Runs the code the finder found; what importlib asks of a loader besides is left to it."""

    @staticmethod
    def create_module(spec: ModuleSpec) -> None:
        return None  # the default module object

    @staticmethod
    def exec_module(module: types.ModuleType) -> None:
        spec = module.__spec__
        code, spec.loader_state = spec.loader_state, None
        exec(code, module.__dict__)  # noqa: S102 - the module's own code, as importlib runs it


_LOADER = _Loader()


class Finder:
    """A meta path finder for our modules, from the file (see the module's docstring)."""

    @staticmethod
    def find_spec(name: str, path: list[str] | None = None,
                  target: types.ModuleType | None = None) -> ModuleSpec | None:
        global _index, _data
        if not name.startswith(PACKAGES) or path is None:
            return None
        if _index is None:
            _index, _data = read(PATH)
        entry = _index.get(name)
        code = None if entry is None else _code(entry, path)
        if code is None:
            _noted.add(name)
            return None
        origin, package, cached = entry[0], entry[1], entry[4]
        spec = ModuleSpec(name, _LOADER, origin=origin, loader_state=code, is_package=package)
        spec.has_location = True  # __file__ and __cached__ as the ordinary import sets them
        spec.cached = cached
        if package:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        return spec


def _code(entry: tuple, path: list[str]) -> types.CodeType | None:
    """The code of an entry whose source is as it was, in one of the package's folders."""
    try:
        origin, package, mtime_ns, size, _, offset, length = entry
        folder = os.path.dirname(os.path.dirname(origin) if package else origin)
        if folder not in path:
            return None
        st = os.stat(origin)
        if st.st_mtime_ns != mtime_ns or st.st_size != size:
            return None
        code = marshal.loads(_data[offset:offset + length])
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if type(code) is not types.CodeType:
        return None
    _imp._fix_co_filename(code, origin)  # as importlib does for a .pyc made elsewhere
    return code


def install() -> None:
    """Put the finder first on sys.meta_path (once)."""
    if Finder not in sys.meta_path:
        sys.meta_path.insert(0, Finder)


def save() -> None:
    """Write the file again if this process imported a module of ours without it. Errors are
    swallowed: the file is only ever a shortcut."""
    if not _noted or sys.dont_write_bytecode:
        return
    folder = os.path.dirname(PATH)
    if os.path.isdir(folder) and not os.access(folder, os.W_OK):
        _noted.clear()  # a read-only install: no file to write, every time
        return
    noted = [(name, sys.modules.get(name)) for name in sorted(_noted)]
    _noted.clear()
    found = [entry for entry in map(_from_pyc, noted) if entry is not None]
    if not found:
        return
    entries = {name: (*entry[:5], bytes(_data[entry[5]:entry[5] + entry[6]]))
               for name, entry in (_index or {}).items()
               if len(_data[entry[5]:entry[5] + entry[6]]) == entry[6] and _unchanged(*entry[:4])}
    entries.update(found)
    index, blobs, at = {}, [], 0
    for name, (*head, code) in sorted(entries.items()):
        index[name] = (*head, at, len(code))
        blobs.append(code)
        at += len(code)
    raw = marshal.dumps(index)
    temp = f"{PATH}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(temp, "wb") as file:
            file.write(_HEAD.pack(_MAGIC, len(raw), binascii.crc32(raw)) + raw + b"".join(blobs))
        os.replace(temp, PATH)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass


def _unchanged(origin: str, package: bool, mtime_ns: int, size: int) -> bool:
    try:
        st = os.stat(origin)
    except OSError:
        return False
    return st.st_mtime_ns == mtime_ns and st.st_size == size


def _from_pyc(noted: tuple[str, types.ModuleType | None]) -> tuple[str, tuple] | None:
    """(name, entry) of a module imported the ordinary way from its source, its code taken
    from the timestamp-checked `.pyc` importlib keeps for it, if that matches the source."""
    name, module = noted
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    if spec is None or type(spec.loader).__name__ != "SourceFileLoader" \
            or type(origin) is not str or not origin.endswith(".py"):
        return None
    try:
        st = os.stat(origin)
        cached = cache_from_source(origin)
        with open(cached, "rb") as file:
            pyc = file.read()
    except (OSError, ValueError, NotImplementedError):
        return None
    if len(pyc) < 16 or pyc[:4] != MAGIC_NUMBER or pyc[4:8] != b"\0\0\0\0" \
            or pyc[8:12] != (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") \
            or pyc[12:16] != (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"):
        return None  # hash-based, or not of this source: Python would not use it either
    package = spec.submodule_search_locations is not None
    return name, (origin, package, st.st_mtime_ns, st.st_size, cached, pyc[16:])
