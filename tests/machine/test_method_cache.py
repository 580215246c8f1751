"""vm.core.method_cache: a record class built again in a later process takes its compiled
`__init__` from the cache, and builds the same class; a damaged, unwritable or disabled cache
changes nothing but speed. Each process here is a real child interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# builds a records class, then reports how many compiles attrs asked for and what the class does
CHILD = """
import builtins, json, sys
sys.path.insert(0, sys.argv[1])
from vm.core import method_cache
method_cache._PATH = sys.argv[2]
method_cache.PACKAGES += ("__main__",)  # the class below stands for one of ours
compiles = []
real = builtins.compile
def counting(source, filename, *args, **kwargs):
    if str(filename).startswith("<attrs generated"):
        compiles.append(filename)
    return real(source, filename, *args, **kwargs)
builtins.compile = counting
import attrs
from vm.core import records

@records.frozen
class Point:
    x: int
    tags: list = attrs.field(factory=list)
    label: str = "p"

@attrs.define
class Theirs:  # an attrs class not built by records: never cached
    y: int = 0

Other = records.frozen(type("Other", (), {"__module__": "embedder", "z": 5,
                                           "__annotations__": {"z": "int"}}))

made = Point(3)
print(json.dumps({"compiles": len(compiles), "point": [made.x, made.tags, made.label],
                  "fresh_list": Point(1).tags is not made.tags,
                  "theirs": Theirs(2).y, "other": Other().z}))
"""


def _build(cache: Path, *, write: bool = True) -> dict:
    import json

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(cache)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_later_process_builds_the_same_class_without_compiling_it(tmp_path):
    cache = tmp_path / "methods.marshal"
    first = _build(cache)
    assert first["compiles"] >= 3  # ours, theirs and another package's records class
    size = cache.stat().st_size
    assert size > 0
    second = _build(cache)
    assert second["compiles"] == first["compiles"] - 1  # only the class records did not build
    assert second == {**first, "compiles": second["compiles"]}
    assert second["point"] == [3, [], "p"] and second["fresh_list"] and second["theirs"] == 2
    assert second["other"] == 5
    assert cache.stat().st_size == size  # nothing new to keep


def test_nothing_is_written_without_bytecode_writing(tmp_path):
    cache = tmp_path / "methods.marshal"
    _build(cache, write=False)
    assert not cache.exists()


def _damaged(data: bytes, damage: str) -> bytes:
    if damage == "cut":  # a write cut short
        return data[:len(data) - 7]
    if damage == "garbage":  # bytes that are no entry
        return b"\x05" * 40 + data
    middle = len(data) // 2  # a byte of the code changed: marshal may read it, or crash on it
    return data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1:]


@pytest.mark.parametrize("damage", ["cut", "garbage", "flipped"])
def test_a_damaged_cache_is_compiled_around_and_started_again(tmp_path, damage):
    cache = tmp_path / "methods.marshal"
    clean = _build(cache)
    data = cache.read_bytes()
    cache.write_bytes(_damaged(data, damage))
    again = _build(cache)
    assert again == clean  # compiled as attrs does it, same class
    assert cache.read_bytes() == data  # the file was started again with the entry
    assert _build(cache)["compiles"] == clean["compiles"] - 1


def test_an_unwritable_cache_place_is_no_error(tmp_path):
    blocked = tmp_path / "a-file"  # its cache would be inside a file: nothing can be written
    blocked.write_text("")
    built = _build(blocked / "methods.marshal")
    assert built["point"] == [3, [], "p"] and built["compiles"] >= 3
