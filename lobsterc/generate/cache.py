"""The compile cache: programs by source, so a repeated pipeline or workflow skips parsing.
The programs are the store's; this index sits beside them:

  <state>/cache/<key>.json  := {"program": <program hash>, "deps": {path: sha256 of its text}}

The key is a sha256 of the compiler's fingerprint (its own sha256) and the source (pipeline
text, or a workflow file's real path). A workflow entry is used only while every file it was
compiled from still has the same content. Entries are hints: a torn, stale or foreign one is
a miss, never an error, so they are written without fsync.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import lru_cache

import vm.core
from lobsterc.syntax import grammars
from vm import __version__
from vm.host.store import StateStore
from vm.isa import codec
from vm.isa.program import FORMAT_VERSION, Program


@lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """Versions, plus size and mtime of the compiler's files (a changed compiler is a miss):
    lobsterc/, the grammars, and vm/core/, whose schema and JSON rules the checks apply.
    Walked with scandir: every cold run computes this, and Path.rglob cost ten times more."""
    parts = [__version__, str(FORMAT_VERSION)]
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # lobsterc/
    core = os.path.realpath(vm.core.__path__[0])
    for folder, prefix in ((package, ""), (grammars.directory(), ""), (core, "vm/core/")):
        parts.extend(_files(folder, prefix))
    return "\0".join(parts)


def _files(folder: str, prefix: str) -> list[str]:
    """`relative/path:size:mtime_ns` of every .py, .lark and .json file under `folder`,
    sorted, __pycache__ left out."""
    found = []
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            name = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    found.extend(_files(entry.path, name + "/"))
            elif entry.name.endswith((".py", ".lark", ".json")):
                st = entry.stat()
                found.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return found


@lru_cache(maxsize=1)
def _fingerprint_digest() -> str:
    return hashlib.sha256(compiler_fingerprint().encode()).hexdigest()


_KEYED_SOURCE_MAX = 4096  # a longer source is hashed every time, never held


def key(kind: str, source: str) -> str:
    """sha256 of the compiler's fingerprint (digested once per process: it is a few KB) and
    the source, remembered per source (a gateway sends few texts)."""
    if len(source) > _KEYED_SOURCE_MAX:
        return _key(kind, source)
    return _remembered_key(kind, source)


def _key(kind: str, source: str) -> str:
    return hashlib.sha256(f"{_fingerprint_digest()}\0{kind}\0{source}".encode()).hexdigest()


_remembered_key = lru_cache(maxsize=1024)(_key)


def file_sha(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return hashlib.sha256(file.read()).hexdigest()
    except OSError:
        return None


_MEMO: dict[tuple[str, str], tuple[Program, dict[str, str]]] = {}  # (store location, key) -> hit


def compiled(store: StateStore | None, kind: str, source: str,
             build: Callable[[], tuple[Program, list[str]]]) -> Program:
    """The cached program for `source`, or `build()`'s (a program and the files it read),
    remembered. Without a store, always `build()`."""
    if store is None:
        return build()[0]
    cache_key = key(kind, source)
    program = lookup(store, cache_key)
    if program is None:
        program, files = build()
        remember(store, cache_key, program, {f: file_sha(f) for f in files})
    return program


def lookup(store: StateStore, cache_key: str) -> Program | None:
    memo = _MEMO.get((store.location, cache_key))
    if memo is not None:
        program, deps = memo
        if all(file_sha(path) == sha for path, sha in deps.items()):
            return program
    try:
        raw = store.get_cache("compile", cache_key)
        if raw is None:
            return None
        entry = json.loads(raw)
        deps = entry["deps"]
        if any(file_sha(path) != sha for path, sha in deps.items()):
            return None
        blob = store.load_program_bytes(entry["program"])
        if blob is None:
            return None
        program = codec.load_program(blob)
        _MEMO[(store.location, cache_key)] = (program, deps)
        return program
    except (OSError, ValueError, KeyError, TypeError, AttributeError, codec.LoadError):
        return None  # a damaged entry or program is a miss: compiled again, and rewritten


def remember(store: StateStore, cache_key: str, program: Program, deps: dict[str, str]) -> None:
    _MEMO[(store.location, cache_key)] = (program, deps)  # the next run here asks no store
    try:
        store.save_program(program.hash, lambda: codec.dump_program(program),
                           intact=lambda blob: codec.intact(blob, program.hash))
        store.put_cache("compile", cache_key,
                        json.dumps({"program": program.hash, "deps": deps}).encode("utf-8"))
    except OSError:
        pass  # a cache that cannot be written only costs the next run a compile
