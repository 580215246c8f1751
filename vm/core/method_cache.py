"""The compiled methods of our record classes, kept across processes.

attrs writes each class's `__init__` as Python source and compiles it when the class is built.
A cold `lobster resume` builds about forty of our classes, and those compiles were 8% of its
instructions (valgrind: 24 of 306 million; `compile` parses, checks and generates code for
each, every time). The code object a compile makes depends only on the source, the file name,
the compile flags and the interpreter, so it is kept: in our `__pycache__` (or under
`sys.pycache_prefix`, as our bytecode is), under the same trust as our `.pyc` files (whoever can
write there can write those), one file per interpreter and bytecode version (the cache tag and
importlib's magic number in its name). Each entry is the exact source, file name and flags,
then the code, each marshalled, behind a header of their lengths and a CRC-32 of both
(`_ENTRY`). A process reads the file once and unmarshals a code object only when one of its
classes asks for it, after checking its CRC.

Only a class of our packages built by vm.core.records (`building(module)` is on) goes through
the cache; any other attrs class of the process (an embedder's, a test's, one attrs renames
because a class of that name was built before) is compiled as attrs does it, so the file holds
one entry per class of ours and stops growing. An entry is appended when its method is first
compiled (one write of its own, no rewrite of the file). The file is read up to the first
entry that does not check out (a write cut short, a file damaged): the next append then starts
the file again, since nothing after such an entry would ever be read; so does one past
MAX_BYTES. With PYTHONDONTWRITEBYTECODE (or `-B`) nothing is written, as no bytecode is. When
attrs' private compile step (`_make._compile_and_eval(script, globs, locs, filename)`, the same
from attrs 22 to 26) is not there as expected, or the file cannot be read or written, classes
are built as attrs builds them: the cache changes how fast, never what.
"""

from __future__ import annotations
import __future__

import binascii
import marshal
import os
import struct
import sys
import threading
import types
from _frozen_importlib_external import MAGIC_NUMBER
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from vm.core.module_cache import cache_dir

MAX_BYTES = 1 << 20  # a file over this is started again (entries of older attrs versions)
PACKAGES = ("vm", "lobsterc")  # whose classes are kept
_PATH = os.path.join(cache_dir(), f"record-methods.{sys.implementation.cache_tag}."
                                  f"{MAGIC_NUMBER[:2].hex()}.marshal")
_ENTRY = struct.Struct("<III")  # an entry: its key's and code's marshalled lengths, their CRC-32
_FUTURES = 0  # the compile flags of every __future__ feature (attrs' module may hold some)
for _name in __future__.all_feature_names:
    _FUTURES |= getattr(__future__, _name).compiler_flag
_codes: dict[tuple, Any] | None = None  # key -> code, or its checked bytes; read on first use
_restart = False  # the file read ends in an entry that does not check out: the next append
# starts the file again
_unwritable = False  # an append failed: this process tries no more
_state = threading.local()
_lock = threading.Lock()


@contextmanager
def building(module: str) -> Iterator[None]:
    """While a record class of `module` is built, its compiles go through the cache if the
    module is one of PACKAGES'."""
    depth = getattr(_state, "depth", 0)
    ours = module.partition(".")[0] in PACKAGES
    _state.depth = depth + 1 if ours else 0
    try:
        yield
    finally:
        _state.depth = depth


def _read() -> dict[tuple, Any]:
    """Every entry of the file up to the first that does not check out, its code still
    marshalled (its CRC checked)."""
    global _restart
    codes: dict[tuple, Any] = {}
    try:
        with open(_PATH, "rb") as file:
            data = memoryview(file.read())
    except OSError:  # none yet, or unreadable
        return codes
    at = 0
    while at < len(data):
        start = at + _ENTRY.size
        if start > len(data):
            _restart = True
            break
        key_size, code_size, crc = _ENTRY.unpack_from(data, at)
        end = start + key_size + code_size
        if end > len(data) or binascii.crc32(data[start:end]) != crc:
            _restart = True
            break
        try:
            key = marshal.loads(data[start:start + key_size])
        except Exception:  # noqa: BLE001 - a CRC that matches damaged bytes: as good as none
            _restart = True
            break
        if type(key) is tuple and len(key) == 3:
            codes[key] = bytes(data[start + key_size:end])
        at = end
    return codes


def _append(key: tuple, code: Any) -> None:
    global _restart, _unwritable
    if sys.dont_write_bytecode or _unwritable:
        return
    try:
        key_bytes, code_bytes = marshal.dumps(key), marshal.dumps(code)
        body = key_bytes + code_bytes
        entry = _ENTRY.pack(len(key_bytes), len(code_bytes), binascii.crc32(body)) + body
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        try:
            if _restart or os.path.getsize(_PATH) > MAX_BYTES:
                flags |= os.O_TRUNC
        except OSError:
            os.makedirs(os.path.dirname(_PATH), exist_ok=True)
        fd = os.open(_PATH, flags, 0o644)
        try:
            # one write: another process's entry is never inside it; a short one (a full
            # disk) leaves an entry cut short, which the next reader restarts the file at
            written = os.write(fd, entry)
        finally:
            os.close(fd)
        _restart = False
        if written != len(entry):
            _unwritable = True
    except (OSError, ValueError):
        _unwritable = True  # read-only install, full disk: compiled as attrs does it


def _load(blob: bytes, filename: str) -> Any:
    """The code object of a checked entry, or None when it is not one (of that file)."""
    try:
        code = marshal.loads(blob)
    except Exception:  # noqa: BLE001 - bytes that pass the CRC but are no code: a miss
        return None
    if type(code) is not types.CodeType or code.co_filename != filename:
        return None
    return code


def compiled(script: str, filename: str, flags: int) -> Any:
    """The code of `script` as `compile(script, filename, "exec", flags, dont_inherit=True)`
    makes it."""
    global _codes
    key = (script, filename, flags)
    with _lock:
        if _codes is None:
            _codes = _read()
        code = _codes.get(key)
        if type(code) is bytes:
            code = _codes[key] = _load(code, filename)
    if code is None:
        code = compile(script, filename, "exec", flags, dont_inherit=True)
        with _lock:
            _codes[key] = code
        _append(key, code)
    return code


def install() -> None:
    """Route attrs' compile step through the cache while `building()` is on, if that step is
    the function this module knows: `(script, globs, locs=None, filename="")`, returning None."""
    try:
        from attr import _make
    except ImportError:  # pragma: no cover - attrs without the module
        return
    original = getattr(_make, "_compile_and_eval", None)
    code = getattr(original, "__code__", None)
    if code is None or getattr(original, "_lobster", False) \
            or code.co_varnames[:code.co_argcount] != ("script", "globs", "locs", "filename"):
        return
    flags = code.co_flags & _FUTURES  # what attrs' own compile inherits from its module

    def compile_and_eval(script: str, globs: dict[str, Any] | None,
                         locs: Any = None, filename: str = "") -> None:
        if not getattr(_state, "depth", 0):
            return original(script, globs, locs, filename)
        eval(compiled(script, filename, flags), globs, locs)  # attrs' own generated code
        return None

    compile_and_eval._lobster = True  # type: ignore[attr-defined]
    _make._compile_and_eval = compile_and_eval
