"""The compiled methods of our record classes, kept across processes.

attrs writes each class's `__init__` as Python source and compiles it when the class is built.
A cold `lobster resume` builds some forty of our classes, and those compiles were a sixth of its
instructions (valgrind: 24 of 297 million; `compile` parses, checks and generates code for
each, every time). The code object a compile makes depends only on the source, the file name
and the interpreter, so it is kept: in `vm/__pycache__/`, beside our bytecode and under the
same trust (whoever can write there can write our `.pyc` files), one file per interpreter
(`sys.implementation.cache_tag`), each entry the exact source and file name with their code
(`_ENTRY` lengths, then each marshalled). A process reads the file once and unmarshals a
code object only when a class of its own asks for it: the file holds the methods of every
class any process built, the compiler's included.

Only a class of our packages built by vm.core.records (`building(module)` is on) goes through
the cache; any other attrs class of the process (an embedder's, a test's, one attrs renames
because a class of that name was built before) is compiled as attrs does it, so the file holds
one entry per class of ours and stops growing. An entry is appended
when its method is first compiled (one write of its own, no rewrite of the file); the file is
read once per process, entry by entry, up to the first that does not read (a write cut short),
and started again when it outgrows MAX_BYTES. With PYTHONDONTWRITEBYTECODE (or `-B`) nothing is
written, as no bytecode is. When attrs has no `_make._compile_and_eval` (its private compile
step, there from attrs 22 to 26), or the directory cannot be read or written, classes are built
as attrs builds them: the cache changes how fast, never what.
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MAX_BYTES = 1 << 20  # a file over this is started again (entries of older attrs versions)
PACKAGES = ("vm", "lobsterc")  # whose classes are kept

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "__pycache__", f"record-methods.{sys.implementation.cache_tag}.marshal")
_ENTRY = struct.Struct("<II")  # an entry: the lengths of its marshalled key and code
_codes: dict[tuple[str, str], Any] | None = None  # key -> code, or its bytes; read on first use
_restart = False  # the file read ends in an entry that does not read: the next append restarts it
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


def _read() -> dict[tuple[str, str], Any]:
    """Every entry of the file, its code still marshalled, up to the first entry that does not
    read whole (a write cut short: the next append then starts the file again, since nothing
    after such an entry would ever be read)."""
    global _restart
    codes: dict[tuple[str, str], Any] = {}
    try:
        with open(_PATH, "rb") as file:
            data = memoryview(file.read())
    except OSError:  # none yet, or unreadable
        return codes
    at = 0
    while at < len(data):
        end = at + _ENTRY.size
        if end <= len(data):
            key_size, code_size = _ENTRY.unpack_from(data, at)
            end += key_size + code_size
        try:
            if end > len(data):
                raise ValueError("an entry cut short")
            key = marshal.loads(data[at + _ENTRY.size:at + _ENTRY.size + key_size])
        except (EOFError, ValueError, TypeError):
            _restart = True
            break
        if type(key) is tuple and len(key) == 2:
            codes[key] = bytes(data[end - code_size:end])
        at = end
    return codes


def _append(script: str, filename: str, code: Any) -> None:
    global _restart, _unwritable
    if sys.dont_write_bytecode or _unwritable:
        return
    try:
        key, body = marshal.dumps((script, filename)), marshal.dumps(code)
        entry = _ENTRY.pack(len(key), len(body)) + key + body
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            if _restart or os.path.getsize(_PATH) > MAX_BYTES:
                flags |= os.O_TRUNC
        except OSError:
            os.makedirs(os.path.dirname(_PATH), exist_ok=True)
        fd = os.open(_PATH, flags, 0o644)
        try:
            os.write(fd, entry)  # one write: another process's entry is never inside it
        finally:
            os.close(fd)
        _restart = False
    except (OSError, ValueError):
        _unwritable = True  # read-only install, full disk: compiled as attrs does it


def compiled(script: str, filename: str) -> Any:
    """The code of `script` as `compile(script, filename, "exec")` makes it."""
    global _codes
    with _lock:
        if _codes is None:
            _codes = _read()
        code = _codes.get((script, filename))
        if type(code) is bytes:
            try:
                code = marshal.loads(code)
            except (EOFError, ValueError, TypeError):
                code = None
            if type(code) is not types.CodeType:  # damaged in a way marshal still reads
                code = None
    if code is None:
        code = compile(script, filename, "exec")
        with _lock:
            _codes[(script, filename)] = code
        _append(script, filename, code)
    return code


def install() -> None:
    """Route attrs' compile step through the cache while `building()` is on."""
    try:
        from attr import _make
    except ImportError:  # pragma: no cover - attrs without the module
        return
    original = getattr(_make, "_compile_and_eval", None)
    if original is None or getattr(original, "_lobster", False):
        return

    def compile_and_eval(script: str, globs: dict[str, Any] | None,
                         locs: Any = None, filename: str = "") -> None:
        if not getattr(_state, "depth", 0):
            original(script, globs, locs, filename)
            return
        eval(compiled(script, filename), globs, locs)  # attrs' own generated code

    compile_and_eval._lobster = True  # type: ignore[attr-defined]
    _make._compile_and_eval = compile_and_eval
