"""Programs and frames as bytes: round trips, determinism, and refusal of junk."""

from __future__ import annotations

import subprocess
import sys

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobsterc.generate.codegen import compile_pipeline
from vm.core import js
from vm.isa import codec
from vm.engine import machine
from vm.isa.codec import LoadError
from vm.isa.opcodes import OPS, Op
from vm.isa.program import FORMAT_VERSION

PIPELINE = ("exec --json --shell 'echo [1,2]' | where 'n>=1' | approve --prompt ok --preview-from-stdin"
            " | ask --schema '{\"type\":\"integer\"}' | json")


def test_program_round_trip():
    program = compile_pipeline(PIPELINE)
    blob = codec.dump_program(program)
    assert codec.load_program(blob) == program
    assert program.hash == codec.program_hash(program)


def test_a_program_s_bytes_are_made_once_per_program_object():
    import attrs

    program = compile_pipeline("exec --json 'echo 1' | approve --prompt ok")
    first = codec.dump_program(program)
    assert codec.dump_program(program) is first  # kept, not made again
    other = codec.seal(attrs.evolve(program, checkpoint_ttl_ms=5000))  # its own bytes
    assert codec.dump_program(other) != first
    assert codec.load_program(codec.dump_program(other)).checkpoint_ttl_ms == 5000


def test_compiling_twice_in_separate_processes_gives_identical_bytes(tmp_path):
    script = ("import sys; from lobsterc.generate.codegen import compile_pipeline; from vm.isa import codec; "
              "sys.stdout.buffer.write(codec.dump_program(compile_pipeline(sys.argv[1])))")
    runs = [subprocess.run([sys.executable, "-c", script, PIPELINE], capture_output=True,
                           check=True, env={"PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    assert runs[0] == runs[1] == codec.dump_program(compile_pipeline(PIPELINE))


def test_every_opcode_has_a_table_entry():
    assert set(OPS) == set(Op)
    assert len({int(op) for op in Op}) == len(Op)


def test_frame_round_trip(tmp_path):
    program = compile_pipeline(PIPELINE)
    frame = machine.new_frame(program, cwd=str(tmp_path), mode="tool")
    frame.env = {"A": "1"}
    frame.results["x"] = {"id": "x", "json": [1, {"a": None}], "stdout": "é"}
    assert codec.load_frame(codec.dump_frame(frame)) == frame


_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=5) | st.binary(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(_PLAIN, _PLAIN)
def test_plain_data_in_a_frame_is_saved_as_it_is(result, register):
    frame = machine.new_frame(compile_pipeline("json"), cwd=".", mode="tool")
    frame.results["s"] = {"json": result}
    frame.registers = [register]
    blob = codec.dump_frame(frame)
    raw = msgpack.unpackb(blob, raw=False)
    assert raw["results"]["s"]["json"] == result and raw["registers"] == [register]
    assert codec.load_frame(blob) == frame


def test_a_value_holding_undefined_is_saved_as_json_would_keep_it():
    """`pick` of a field an item lacks makes an undefined property; the original persists a
    paused run as JSON, so after a resume the property is gone (an array item is null)."""
    frame = machine.new_frame(compile_pipeline("json"), cwd=".", mode="tool")
    picked = [{"b": js.UNDEFINED, "a": 1}, [js.UNDEFINED]]
    frame.results["s"] = {"json": picked}
    frame.registers = [picked]
    loaded = codec.load_frame(codec.dump_frame(frame))
    assert loaded.results["s"]["json"] == [{"a": 1}, [None]]
    assert loaded.registers == [[{"a": 1}, [None]]]
    assert frame.results["s"]["json"] is picked and picked[0] == {"b": js.UNDEFINED, "a": 1}


def test_a_value_that_is_not_plain_data_fails_to_save_rather_than_being_mangled():
    frame = machine.new_frame(compile_pipeline("json"), cwd=".", mode="tool")
    frame.results["s"] = {"json": {1, 2}}
    with pytest.raises(TypeError):
        codec.dump_frame(frame)


def test_a_record_is_written_as_its_field_is_typed_not_as_its_list_starts():
    from vm.isa.frame import LoopFrame

    frame = machine.new_frame(compile_pipeline("json"), cwd=".", mode="tool")
    frame.loops = [LoopFrame(site=0, items=[1, 2]), LoopFrame(site=3, items=[], index=1)]
    assert codec.load_frame(codec.dump_frame(frame)) == frame
    frame.registers = [LoopFrame(site=0, items=[]), 1]  # a record where plain data belongs
    with pytest.raises(TypeError):
        codec.dump_frame(frame)


def test_additive_ledger_fields_are_written_only_when_used():
    """A frame of a run that billed no live call reads in a reader that predates the fields."""
    import attrs as _attrs

    frame = machine.new_frame(compile_pipeline("json"), cwd=".", mode="tool")
    raw = msgpack.unpackb(codec.dump_frame(frame), raw=False)
    assert "billed_calls" not in raw["cost"] and "open_calls" not in raw["cost"]
    frame.cost = _attrs.evolve(frame.cost, billed_calls=('["k","m",1,2]',))
    raw = msgpack.unpackb(codec.dump_frame(frame), raw=False)
    assert raw["cost"]["billed_calls"] == ['["k","m",1,2]'] and "open_calls" not in raw["cost"]
    assert codec.load_frame(codec.dump_frame(frame)) == frame


def test_tampered_program_hash_is_refused():
    raw = msgpack.unpackb(codec.dump_program(compile_pipeline("exec --shell 'echo hi'")))
    raw["constants"][0]["shell"] = "rm -rf /"
    with pytest.raises(LoadError, match="hash mismatch"):
        codec.load_program(msgpack.packb(raw))


def test_unknown_format_and_magic_are_refused():
    raw = msgpack.unpackb(codec.dump_program(compile_pipeline("json")))
    raw["header"]["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(LoadError, match="unsupported bytecode format"):
        codec.load_program(msgpack.packb(raw))
    raw["header"]["magic"] = "ELF"
    with pytest.raises(LoadError, match="bad magic"):
        codec.load_program(msgpack.packb(raw))


def test_out_of_range_operands_fail_verification():
    raw = msgpack.unpackb(codec.dump_program(compile_pipeline("json")))
    raw["code"][0][2] = 99
    program = codec.converter.structure(raw, codec.Program)
    raw["header"]["program_hash"] = codec.program_hash(program)
    with pytest.raises(LoadError, match="out of range"):
        codec.load_program(msgpack.packb(raw))


def _containers(inner):
    return st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)


_PACKED = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=5),
                       _containers, max_leaves=12).map(msgpack.packb)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | _PACKED)
def test_junk_blobs_raise_only_load_error(blob):
    for load in (codec.load_program, codec.load_frame):
        try:
            load(blob)
        except LoadError:
            pass
