"""The one cattrs converter, and the bytes of Programs (.lbc) and Frames.

  .lbc   := map {header: {magic: "LBC", format_version, opcode_version, compiler_version,
                          source_name, source_sha256, program_hash},
                 constants: [Const], code: [[op, a, b, c]], steps: [StepInfo],
                 halts: [Gate], source_map: [[file, line, col, end_line, end_col] | nil],
                 registers: int, files: [str], checkpoint_ttl_ms: int | nil}
  Gate   := {"$type": <halt site class name>, field: value, ...}   (vm/isa/ops.py HALT_SITES)
  Const  := Value | {"$type": <payload class name>, field: value, ...}
          | {"$type": "json", "value": map}        (a plain map that has a "$type" key)
  frame  := map {format, program_hash, pc, registers: [Value], results: {str: Value},
                 loops: [LoopFrame], calls: [CallFrame], tries: [TryFrame], cost: Ledger,
                 pending: {"$type": <pending class name>, field: value, ...} | nil, ...}

msgpack with no ext types and no object hooks: a blob is data, never code. Decoding treats
every blob as untrusted: size, unpack (any exception -> LoadError), magic/format, structure,
hash check, verify; a frame is checked against its program before anything acts on it.
"""

from __future__ import annotations

import hashlib
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs
import msgpack
from cattrs.preconf.msgpack import make_converter

from vm.isa import ops
from vm.isa.cost import Charge, CostLimit, Ledger
from vm.isa.frame import (FRAME_FORMAT, PENDING_KINDS, CallFrame, Frame, LoopFrame, Pending,
                          TryFrame)
from vm.isa.program import FORMAT_VERSION, MAGIC, Header, Instr, Program

MAX_BLOB = 64 * 1024 * 1024
TAG = "$type"
_PAYLOADS: dict[str, type] = {cls.__name__: cls for cls in ops.PAYLOADS}


class LoadError(Exception):
    """A blob that is not a valid program or frame of this format."""


converter = make_converter(forbid_extra_keys=True, detailed_validation=False)
# A field typed Any holds plain data (step results, registers, constants): msgpack takes it as it
# is. Left to cattrs, every dict and list in it would be copied element by element, which was
# nine tenths of saving a frame with a few thousand items. Anything not plain fails in msgpack.
converter.register_unstructure_hook_func(lambda type_: type_ is Any, lambda value: value)
converter.register_unstructure_hook(Instr, lambda i: [i.op, i.a, i.b, i.c])
converter.register_structure_hook(Instr, lambda v, _: Instr(*v))


# Payloads, halt sites and frame records are structured by the small checkers below, not by
# functions cattrs generates: every generated function is a compile() that a cold process pays
# for (a dozen classes cost more than the rest of a resume).
def _bad(expected: str, value: Any) -> Any:
    raise TypeError(f"expected {expected}, got {type(value).__name__}")


def _shape(tp: Any) -> Callable[[Any], Any]:
    """A function that checks a decoded value against the annotation `tp` and converts
    what the annotation calls for (lists to tuples, maps to records)."""
    if tp is Any:
        return lambda v: v
    if tp is bool or tp is str:
        return lambda v: v if type(v) is tp else _bad(tp.__name__, v)
    if tp is int:
        return lambda v: v if type(v) is int else _bad("int", v)
    if tp is float:
        return lambda v: v if type(v) in (int, float) else _bad("float", v)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict or origin is list:
        return lambda v: v if type(v) is origin else _bad(origin.__name__, v)
    if origin is tuple:
        item = _shape(args[0])
        return lambda v: tuple(item(x) for x in v) if type(v) in (list, tuple) else _bad("array", v)
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        check = _shape(inner)
        return lambda v: None if v is None else check(v)
    if attrs.has(tp):
        return lambda v: converter.structure(v, tp)
    raise TypeError(f"no shape for {tp!r}")


def _register_record(cls: type) -> None:
    # vm/isa/ops.py and vm/isa/frame.py keep their annotations as objects (no `from __future__ import
    # annotations`), so no string is evaluated here
    names = tuple(f.name for f in attrs.fields(cls))
    required = {f.name for f in attrs.fields(cls) if f.default is attrs.NOTHING}
    shapes: dict[str, Callable[[Any], Any]] = {}

    def structure(raw: Any, _: Any) -> Any:
        if not shapes:
            shapes.update({f.name: _shape(f.type) for f in attrs.fields(cls)})
        if type(raw) is not dict or not raw.keys() <= shapes.keys() or not required <= raw.keys():
            raise TypeError(f"not a {cls.__name__} record")
        return cls(**{k: shapes[k](v) for k, v in raw.items()})

    def unstructure(value: Any) -> dict:
        return {name: _plain(getattr(value, name)) for name in names}

    converter.register_structure_hook(cls, structure)
    converter.register_unstructure_hook(cls, unstructure)


def _plain(value: Any) -> Any:
    if attrs.has(type(value)):
        return converter.unstructure(value)
    if type(value) is tuple and value and attrs.has(type(value[0])):
        return [converter.unstructure(v) for v in value]
    return value


def _register_variants(base: type, variants: tuple[type, ...]) -> None:
    """A field typed `base` holds one of `variants`, written as its record tagged with its
    class name under `$type`."""
    by_name = {cls.__name__: cls for cls in variants}
    for cls in variants:
        _register_record(cls)
        plain = converter.get_unstructure_hook(cls)
        converter.register_unstructure_hook(
            cls, lambda value, plain=plain: {TAG: type(value).__name__, **plain(value)})

    def structure(raw: Any, _: Any) -> Any:
        if type(raw) is not dict or raw.get(TAG) not in by_name:
            raise TypeError(f"not a tagged {base.__name__} record")
        fields = dict(raw)
        return converter.structure(fields, by_name[fields.pop(TAG)])

    converter.register_structure_hook(base, structure)
    converter.register_unstructure_hook(base, lambda value: converter.unstructure(value,
                                                                                  type(value)))


for _cls in (*ops.PAYLOADS, ops.Retry, ops.Branch, ops.Given, ops.ApproverRules, LoopFrame,
             CallFrame, TryFrame, Ledger, CostLimit, Charge):
    _register_record(_cls)
_register_variants(ops.HaltSite, ops.HALT_SITES)
_register_variants(Pending, PENDING_KINDS)


def _tag(value: Any) -> Any:
    cls = type(value)
    if cls.__name__ in _PAYLOADS and _PAYLOADS[cls.__name__] is cls:
        return {TAG: cls.__name__, **converter.unstructure(value, cls)}
    if isinstance(value, dict) and TAG in value:
        return {TAG: "json", "value": value}
    return value


def _untag(value: Any) -> Any:
    if not isinstance(value, dict) or TAG not in value:
        return value
    fields = dict(value)
    name = fields.pop(TAG)
    if name == "json" and set(fields) == {"value"}:
        return fields["value"]
    cls = _PAYLOADS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise LoadError(f"unknown constant type {name!r}")
    return converter.structure(fields, cls)


class NotAuthentic(LoadError):
    """Bytes that decode, but are not the program or frame they claim to be."""


class Unstorable(Exception):
    """A frame that cannot be saved so that it loads again (too large, or not encodable)."""


def _pack(value: Any) -> bytes:
    # surrogatepass: a lone surrogate (JSON text may hold one: "\ud83d") is stored as it is
    return msgpack.packb(value, use_bin_type=True, unicode_errors="surrogatepass")


def _unpack(blob: bytes) -> Any:
    if len(blob) > MAX_BLOB:
        raise LoadError("blob too large")
    try:
        return msgpack.unpackb(blob, raw=False, strict_map_key=True,
                               unicode_errors="surrogatepass")
    except Exception as exc:  # msgpack raises several types outside UnpackException
        raise LoadError(f"not msgpack: {exc}") from None


def _unstructure_program(program: Program) -> dict:
    raw = converter.unstructure(program)
    raw["constants"] = [_tag(value) for value in program.constants]
    return raw


def _body(program: Program) -> dict:
    raw = _unstructure_program(program)
    raw.pop("header")
    return raw


def program_hash(program: Program) -> str:
    """sha256 of the canonical msgpack encoding of everything but the header."""
    return hashlib.sha256(_pack(_body(program))).hexdigest()


def seal(program: Program) -> Program:
    """The same program with header.program_hash filled in."""
    header = converter.structure(
        {**converter.unstructure(program.header), "program_hash": program_hash(program)}, Header
    )
    return attrs.evolve(program, header=header)


def dump_program(program: Program) -> bytes:
    return _pack(_unstructure_program(program))


_LOADED: dict[bytes, Program] = {}  # verified programs of this process, by their bytes' digest


def _remember(digest: bytes, program: Program) -> None:
    if len(_LOADED) >= 256:
        _LOADED.clear()
    _LOADED[digest] = program


def intact(blob: bytes, program_hash: str) -> bool:
    """Whether stored bytes still decode to the program of that hash."""
    try:
        return load_program(blob).hash == program_hash
    except LoadError:
        return False


def load_program(blob: bytes) -> Program:
    """Decode and verify a program; a process that loads the same bytes again (a gateway
    resuming many runs of one program) gets the verified object back at once."""
    digest = hashlib.sha256(blob).digest()
    program = _LOADED.get(digest)
    if program is None:
        program = _decode_program(blob)
        _remember(digest, program)
    return program


def _decode_program(blob: bytes) -> Program:
    raw = _unpack(blob)
    if not isinstance(raw, dict) or not isinstance(raw.get("header"), dict):
        raise LoadError("not a Lobster program")
    header = raw["header"]
    if header.get("magic") != MAGIC:
        raise LoadError("not a Lobster program (bad magic)")
    if header.get("format_version") != FORMAT_VERSION:
        raise LoadError(f"unsupported bytecode format {header.get('format_version')!r}")
    try:
        if not isinstance(raw.get("constants"), list):
            raise LoadError("constants are not a list")
        raw["constants"] = [_untag(value) for value in raw["constants"]]
        program = converter.structure(raw, Program)
    except Exception as exc:
        raise LoadError(f"malformed program: {exc}") from None
    if program_hash(program) != program.header.program_hash:
        raise NotAuthentic("program hash mismatch")
    from vm.isa.verify import VerifyError, verify

    try:
        verify(program)
    except VerifyError as exc:
        raise LoadError(f"invalid program: {exc}") from None
    return program


def dump_frame(frame: Frame) -> bytes:
    """The frame's bytes; Unstorable when they could not be loaded again (over MAX_BLOB, or a
    value msgpack cannot hold), so that nothing is parked that resume would refuse."""
    try:
        blob = _pack(converter.unstructure(frame))
    except (ValueError, OverflowError, UnicodeError) as exc:  # a TypeError is our bug
        raise Unstorable(f"a value in it cannot be stored ({exc})") from None
    if len(blob) > MAX_BLOB:
        raise Unstorable(f"it is {len(blob)} bytes, over the limit of {MAX_BLOB}")
    return blob


def load_frame(blob: bytes, program: Program | None = None) -> Frame:
    """Decode a frame; with its `program`, also refuse one that does not fit it (see
    vm.isa.verify.verify_frame), before any caller acts on it."""
    raw = _unpack(blob)
    if not isinstance(raw, dict) or raw.get("format") != FRAME_FORMAT:
        raise LoadError("not a Lobster frame of this format")
    try:
        frame = converter.structure(raw, Frame)
    except Exception as exc:
        raise LoadError(f"malformed frame: {exc}") from None
    if program is not None:
        check_frame(frame, program)
    return frame


def check_frame(frame: Frame, program: Program) -> None:
    """LoadError unless `frame` is a state that `program` can be in."""
    from vm.isa.verify import VerifyError, verify_frame

    try:
        verify_frame(frame, program)
    except VerifyError as exc:
        raise LoadError(f"frame does not fit its program: {exc}") from None
