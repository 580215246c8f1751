"""vm.core.module_cache: the `lobster` script loads our modules' bytecode from one file, and
only while each module's source is the one the file was written from.

Each test works on a copy of our two packages in its own folder (so that sources can be
edited and removed, and the file lands in the copy's vm/__pycache__), and imports through the
finder in fresh interpreters. A module loaded from the file has `module_cache`'s loader; one
imported the ordinary way has importlib's SourceFileLoader.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vm.core import module_cache

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """\
import json, sys, types
from vm.core import module_cache
module_cache.install()
seen = {}
for name in sys.argv[1:]:
    try:
        __import__(name)
    except ImportError as exc:
        seen[name] = {"error": type(exc).__name__}
        continue
    m = sys.modules[name]
    own = [v for v in vars(m).values() if isinstance(v, types.FunctionType)
           and v.__module__ == name]
    seen[name] = {"loader": type(m.__loader__).__name__, "file": m.__file__,
                  "cached": m.__cached__, "path": getattr(m, "__path__", None),
                  "package": m.__package__, "origin": m.__spec__.origin,
                  "marker": getattr(m, "MARKER", None),
                  "co_filename": own[0].__code__.co_filename if own else None}
module_cache.save()
print(json.dumps(seen))
"""
# a module, a module of a subpackage, a package (each imports a good part of the VM)
NAMES = ["vm.cli.main", "vm.engine.run", "vm.host.store"]
SERVED, ORDINARY = "_Loader", "SourceFileLoader"


def copy_of_ours(dest: Path) -> Path:
    for package in ("vm", "lobsterc"):
        shutil.copytree(ROOT / package, dest / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def env(**extra: str) -> dict[str, str]:
    drop = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def imports(tree: Path, *names: str, **extra: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", DRIVER, *names], check=False, cwd=tree,
                          env=env(PYTHONPATH=str(tree), **extra), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def the_file(tree: Path) -> Path:
    return tree / "vm" / "__pycache__" / os.path.basename(module_cache.PATH)


def loaders(seen: dict) -> dict[str, str]:
    return {name: found.get("loader", found.get("error")) for name, found in seen.items()}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return copy_of_ours(tmp_path / "one")


def test_a_second_process_loads_our_modules_from_the_file_as_python_would(tree):
    first = imports(tree, *NAMES)
    assert set(loaders(first).values()) == {ORDINARY}
    index, _ = module_cache.read(str(the_file(tree)))
    assert set(NAMES) <= set(index) and "vm.isa.frame" in index  # and what they import
    assert all(origin.startswith(str(tree)) for origin, *_ in index.values())
    second = imports(tree, *NAMES)
    assert set(loaders(second).values()) == {SERVED}
    for name in NAMES:  # __file__, __cached__, __path__, __package__, functions' file names
        assert {**second[name], "loader": None} == {**first[name], "loader": None}
    assert second["vm.host.store"]["path"] == [str(tree / "vm" / "host" / "store")]
    assert second["vm.engine.run"]["co_filename"] == str(tree / "vm" / "engine" / "run.py")


def test_nothing_more_is_written_once_every_module_was_served(tree):
    imports(tree, *NAMES)
    before = the_file(tree).stat()
    assert set(loaders(imports(tree, *NAMES)).values()) == {SERVED}
    after = the_file(tree).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_an_edited_module_comes_from_its_source_and_then_from_the_file_again(tree):
    imports(tree, *NAMES)
    source = tree / "vm" / "engine" / "run.py"
    source.write_text(source.read_text() + "\nMARKER = 41\n")
    edited = imports(tree, *NAMES)
    assert loaders(edited) == {"vm.cli.main": SERVED, "vm.engine.run": ORDINARY,
                               "vm.host.store": SERVED}
    assert edited["vm.engine.run"]["marker"] == 41
    again = imports(tree, *NAMES)
    assert set(loaders(again).values()) == {SERVED}
    assert again["vm.engine.run"]["marker"] == 41


def test_a_source_with_a_new_mtime_and_the_same_size_is_not_served(tree):
    imports(tree, *NAMES)
    source = tree / "vm" / "cli" / "main.py"
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))
    assert loaders(imports(tree, *NAMES))["vm.cli.main"] == ORDINARY


def test_a_removed_module_is_not_found_though_the_file_holds_it(tree):
    extra = tree / "vm" / "extra_for_test.py"
    extra.write_text("MARKER = 7\n")
    imports(tree, "vm.extra_for_test")
    assert imports(tree, "vm.extra_for_test")["vm.extra_for_test"]["marker"] == 7  # served
    assert "vm.extra_for_test" in module_cache.read(str(the_file(tree)))[0]
    extra.unlink()
    assert loaders(imports(tree, "vm.extra_for_test")) == {
        "vm.extra_for_test": "ModuleNotFoundError"}


@pytest.mark.parametrize("damage", ["index", "head", "cut"])
def test_a_damaged_file_is_ignored_and_written_again(tree, damage):
    imports(tree, *NAMES)
    path = the_file(tree)
    data = bytearray(path.read_bytes())
    if damage == "index":
        data[40] ^= 0xFF
    elif damage == "head":
        data[:8] = b"NOTOURS\0"
    else:
        del data[len(data) // 3:]  # the index checks out; code is missing behind it
    path.write_bytes(bytes(data))
    found = imports(tree, *NAMES)
    if damage == "cut":  # what is cut off is imported the ordinary way: one name at least
        assert ORDINARY in loaders(found).values()
    else:
        assert set(loaders(found).values()) == {ORDINARY}
    assert set(loaders(imports(tree, *NAMES)).values()) == {SERVED}


def test_another_checkout_with_a_copy_of_the_file_imports_its_own_sources(tree, tmp_path):
    imports(tree, *NAMES)
    other = tmp_path / "two"
    shutil.copytree(tree, other)  # the file and the .pyc files too, mtimes kept
    seen = imports(other, *NAMES)
    assert set(loaders(seen).values()) == {ORDINARY}
    assert all(found["file"].startswith(str(other)) for found in seen.values())


def test_nothing_is_written_when_python_writes_no_bytecode(tree):
    imports(tree, *NAMES, PYTHONDONTWRITEBYTECODE="1")
    assert not the_file(tree).exists()


def test_the_lobster_script_writes_the_file_and_then_needs_nothing_more(tree):
    script = ("import sys; sys.argv = ['lobster', 'version']\n"
              "from lobsterc.frontend import lobster\nlobster()\n")

    def version() -> str:
        return subprocess.run([sys.executable, "-c", script], cwd=tree,
                              env=env(PYTHONPATH=str(tree)), capture_output=True, text=True,
                              timeout=60, check=True).stdout

    out = version()
    index, _ = module_cache.read(str(the_file(tree)))
    assert "vm.cli.main" in index and out.strip()
    before = the_file(tree).stat()
    assert version() == out
    after = the_file(tree).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
