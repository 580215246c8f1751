"""The one cattrs converter, and the bytes of Programs (.lbc) and Frames.

  .lbc   := map {magic: "LBC", format, opcodes, compiler, source_name, source_sha256,
                 program_hash, constants: [Value], code: [[op, a, b, c]], steps: [StepInfo],
                 halts: [HaltSite], source_map: [[line, col, end_line, end_col] | nil],
                 registers: int}
  frame  := map {format, program_hash, pc, registers: [Value], results: {str: Value}, ...}

msgpack with no ext types and no object hooks: a blob is data, never code. Decoding treats
every blob as untrusted: size, unpack (any exception -> LoadError), magic/format, structure,
hash check.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack
from cattrs.preconf.msgpack import make_converter

from vm.frame import Frame, FRAME_FORMAT
from vm.program import FORMAT_VERSION, MAGIC, Header, Instr, Program

MAX_BLOB = 64 * 1024 * 1024


class LoadError(Exception):
    """A blob that is not a valid program or frame of this format."""


converter = make_converter(forbid_extra_keys=True, detailed_validation=False)
# A field typed Any holds plain data (step results, registers, constants): msgpack takes it as it
# is. Left to cattrs, every dict and list in it would be copied element by element, which was
# nine tenths of saving a frame with a few thousand items. Anything not plain fails in msgpack.
converter.register_unstructure_hook_func(lambda type_: type_ is Any, lambda value: value)
converter.register_unstructure_hook(Instr, lambda i: [i.op, i.a, i.b, i.c])
converter.register_structure_hook(Instr, lambda v, _: Instr(*v))


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _unpack(blob: bytes) -> Any:
    if len(blob) > MAX_BLOB:
        raise LoadError("blob too large")
    try:
        return msgpack.unpackb(blob, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several types outside UnpackException
        raise LoadError(f"not msgpack: {exc}") from None


def _body(program: Program) -> dict:
    raw = converter.unstructure(program)
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
    return Program(header=header, constants=program.constants, code=program.code,
                   steps=program.steps, halts=program.halts, source_map=program.source_map,
                   registers=program.registers)


def dump_program(program: Program) -> bytes:
    return _pack(converter.unstructure(program))


_LOADED: dict[bytes, Program] = {}  # verified programs of this process, by their bytes' digest


def load_program(blob: bytes) -> Program:
    """Decode and verify a program; a process that loads the same bytes again (a gateway
    resuming many runs of one program) gets the verified object back at once."""
    digest = hashlib.sha256(blob).digest()
    program = _LOADED.get(digest)
    if program is None:
        program = _decode_program(blob)
        if len(_LOADED) >= 256:
            _LOADED.clear()
        _LOADED[digest] = program
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
        program = converter.structure(raw, Program)
    except Exception as exc:
        raise LoadError(f"malformed program: {exc}") from None
    if program_hash(program) != program.header.program_hash:
        raise LoadError("program hash mismatch")
    from vm.verify import VerifyError, verify

    try:
        verify(program)
    except VerifyError as exc:
        raise LoadError(f"invalid program: {exc}") from None
    return program


def dump_frame(frame: Frame) -> bytes:
    return _pack(converter.unstructure(frame))


def load_frame(blob: bytes) -> Frame:
    raw = _unpack(blob)
    if not isinstance(raw, dict) or raw.get("format") != FRAME_FORMAT:
        raise LoadError("not a Lobster frame of this format")
    try:
        return converter.structure(raw, Frame)
    except Exception as exc:
        raise LoadError(f"malformed frame: {exc}") from None
