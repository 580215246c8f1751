"""vm.core.module_cache: the `lobster` script loads our modules' bytecode from one file, and
only while the ordinary import would load the same code from the same place.

Each test works on a copy of our two packages in its own folder, byte-compiled as an install
leaves them (so that sources can be edited, added and removed, and the file lands in the
copy's vm/__pycache__), and imports through the finder in fresh interpreters. A module loaded
from the file has `module_cache`'s loader; one imported the ordinary way has importlib's
SourceFileLoader. A source a test writes is dated a minute back, as one written before the
run: a `.pyc` made within RACY_NS of its source's mtime is not taken as it is.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import py_compile
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vm.core import module_cache

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """\
import json, os, sys, time, types
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
edit = os.environ.get("EDIT_BEFORE_SAVE")
if edit:  # a source changed between its import and save()
    with open(edit, "a") as file:
        file.write("# edited\\n")
    back = os.environ.get("EDIT_DATED_BACK")
    if back:  # and dated back, as an edit copied in with its old mtime is
        at = time.time_ns() - int(float(back) * 1e9)
        os.utime(edit, ns=(at, at))
make = os.environ.get("MAKE_BEFORE_SAVE")
if make:  # a file made beside the modules between their import and save()
    os.makedirs(os.path.dirname(make), exist_ok=True)
    with open(make, "w") as file:
        file.write("MARKER = 'made'\\n")
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


def backdate(path: Path, seconds: float = 60) -> Path:
    """Date `path` `seconds` back: a source written before the run, not within RACY_NS."""
    at = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(at, at))
    return path


def env(**extra: str) -> dict[str, str]:
    drop = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH", "PYTHONOPTIMIZE")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run(tree: Path, code: str, *args: str, flags: tuple[str, ...] = (), **extra: str) -> str:
    proc = subprocess.run([sys.executable, *flags, "-c", code, *args], check=False, cwd=tree,
                          env=env(PYTHONPATH=str(tree), **extra), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def imports(tree: Path, *names: str, flags: tuple[str, ...] = (), **extra: str) -> dict:
    return json.loads(run(tree, DRIVER, *names, flags=flags, **extra))


def the_file(tree: Path, optimize: int = 0) -> Path:
    name = os.path.basename(module_cache.PATH)
    if optimize:
        tag = sys.implementation.cache_tag
        name = name.replace(f".{tag}.", f".{tag}.opt-{optimize}.")
    return tree / "vm" / "__pycache__" / name


def index_names(tree: Path, optimize: int = 0) -> set[str]:
    return {name for _, name in module_cache.read(str(the_file(tree, optimize)))[0]}


def loaders(seen: dict) -> dict[str, str]:
    return {name: found.get("loader", found.get("error")) for name, found in seen.items()}


def write_module(tree: Path, relative: str, text: str) -> Path:
    path = tree / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return backdate(path)


def compile_pyc(source: Path, **options) -> None:
    """Compile `source` into the .pyc the copy's interpreters read (not under this
    process's pycache prefix, which the suite may set)."""
    cfile = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(source), cfile=str(cfile), doraise=True, **options)


@pytest.fixture(scope="session")
def compiled_copy(tmp_path_factory) -> Path:
    """Our packages, their sources dated an hour back, byte-compiled by an interpreter of
    their own (not under this process's pycache prefix)."""
    template = copy_of_ours(tmp_path_factory.mktemp("template"))
    for source in template.rglob("*.py"):
        backdate(source, 3600)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "vm", "lobsterc"], cwd=template,
                   env=env(), check=True, capture_output=True)
    return template


@pytest.fixture
def tree(tmp_path: Path, compiled_copy: Path) -> Path:
    shutil.copytree(compiled_copy, tmp_path / "one")  # mtimes kept: the .pyc files hold
    return tmp_path / "one"


def test_a_second_process_loads_our_modules_from_the_file_as_python_would(tree):
    first = imports(tree, *NAMES)
    assert set(loaders(first).values()) == {ORDINARY}
    index, _ = module_cache.read(str(the_file(tree)))
    assert set(NAMES) | {"vm.isa.frame"} <= {name for _, name in index}  # and their imports
    assert all(folder.startswith(str(tree)) for folder, _ in index)
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
    backdate(source, 30)
    edited = imports(tree, *NAMES)
    assert loaders(edited) == {"vm.cli.main": SERVED, "vm.engine.run": ORDINARY,
                               "vm.host.store": SERVED}
    assert edited["vm.engine.run"]["marker"] == 41
    again = imports(tree, *NAMES)
    assert set(loaders(again).values()) == {SERVED}
    assert again["vm.engine.run"]["marker"] == 41


@pytest.mark.parametrize("change", ["mtime", "size"])
def test_a_source_with_a_new_mtime_or_size_alone_is_not_served(tree, change):
    source = write_module(tree, "vm/probe_one.py", "MARKER = 1\n")
    imports(tree, "vm.probe_one")
    assert imports(tree, "vm.probe_one")["vm.probe_one"]["loader"] == SERVED
    st = source.stat()
    if change == "mtime":
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))
    else:  # another text under the same mtime
        source.write_text("MARKER = 22\n")
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    seen = imports(tree, "vm.probe_one")["vm.probe_one"]
    assert seen["loader"] == ORDINARY
    assert seen["marker"] == (1 if change == "mtime" else 22)


@pytest.mark.parametrize("pyc", ["timestamp", "timestamp, edit dated back", "checked-hash"])
def test_a_source_edited_before_the_save_is_not_written_with_its_old_code(tree, pyc):
    source = write_module(tree, "vm/probe_two.py", "MARKER = 1\n")
    if pyc == "checked-hash":
        compile_pyc(source, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    # dated back, the edit is not too recent to tell: only the .pyc's header (its source's
    # mtime and size) says that the .pyc is not of the text now there
    back = {"EDIT_DATED_BACK": "30"} if "dated back" in pyc else {}
    imports(tree, "vm.probe_two", "vm.cli.main", EDIT_BEFORE_SAVE=str(source), **back)
    assert "vm.probe_two" not in index_names(tree)  # its .pyc is of the text before the edit
    assert "vm.cli.main" in index_names(tree)


def test_a_removed_module_is_not_found_though_the_file_holds_it(tree):
    extra = write_module(tree, "vm/probe_three.py", "MARKER = 7\n")
    imports(tree, "vm.probe_three")
    assert imports(tree, "vm.probe_three")["vm.probe_three"]["marker"] == 7  # served
    assert "vm.probe_three" in index_names(tree)
    extra.unlink()
    assert loaders(imports(tree, "vm.probe_three")) == {"vm.probe_three": "ModuleNotFoundError"}


def test_a_package_added_beside_a_module_of_the_same_name_wins_as_in_python(tree):
    write_module(tree, "vm/shadowed.py", "MARKER = 'module'\n")
    imports(tree, "vm.shadowed")
    assert loaders(imports(tree, "vm.shadowed")) == {"vm.shadowed": SERVED}
    write_module(tree, "vm/shadowed/__init__.py", "MARKER = 'package'\n")
    assert imports(tree, "vm.shadowed")["vm.shadowed"]["marker"] == "package"


def test_an_extension_module_added_beside_a_module_is_what_python_tries(tree):
    """Python prefers an extension module to a source of the same name: this one is not a
    real library, so the ordinary import fails on it, and so must ours."""
    write_module(tree, "vm/extended.py", "MARKER = 'source'\n")
    imports(tree, "vm.extended")
    assert loaders(imports(tree, "vm.extended")) == {"vm.extended": SERVED}
    suffix = next(s for s in __import__("importlib.machinery").machinery.EXTENSION_SUFFIXES)
    write_module(tree, f"vm/extended{suffix}", "not a library")
    assert loaders(imports(tree, "vm.extended")) == {"vm.extended": "ImportError"}


def test_a_module_that_stands_in_for_another_is_not_written_under_its_name(tree):
    write_module(tree, "vm/probe_real.py", "MARKER = 'real'\n")
    write_module(tree, "vm/probe_alias.py",
                 "import sys, vm.probe_real\nsys.modules[__name__] = vm.probe_real\n")
    code = ("import sys\nfrom vm.core import module_cache\nmodule_cache.install()\n"
            "import vm.probe_alias, vm.probe_real\nmodule_cache.save()\n"
            "print(sys.modules['vm.probe_alias'] is sys.modules['vm.probe_real'])\n")
    assert run(tree, code).strip() == "True"
    assert "vm.probe_alias" not in index_names(tree) and "vm.probe_real" in index_names(tree)
    assert run(tree, code).strip() == "True"


def test_the_loader_of_a_served_module_does_what_importlib_s_does(tree):
    write_module(tree, "vm/probe_data/__init__.py", "MARKER = 3\n")
    write_module(tree, "vm/probe_data/table.txt", "a table\n")
    code = """\
import importlib, importlib.resources, importlib.util, inspect, pkgutil, sys
from vm.core import module_cache
module_cache.install()
import vm.probe_data as m
again = importlib.util.module_from_spec(m.__spec__)
m.__spec__.loader.exec_module(again)
print(type(m.__loader__).__name__, again.MARKER,
      m.__loader__.get_source("vm.probe_data").strip(),
      importlib.resources.files("vm.probe_data").joinpath("table.txt").read_text().strip(),
      pkgutil.get_data("vm.probe_data", "table.txt").decode().strip(),
      importlib.reload(m).MARKER, inspect.getsource(m).strip(), sep="|")
module_cache.save()
"""
    run(tree, code)
    assert run(tree, code).strip().split("|") == [
        SERVED, "3", "MARKER = 3", "a table", "a table", "3", "MARKER = 3"]


@pytest.mark.parametrize("damage", ["head", "cut", "grown", "index"])
def test_a_damaged_file_is_ignored_and_written_again(tree, damage):
    imports(tree, *NAMES)
    path = the_file(tree)
    data = bytearray(path.read_bytes())
    if damage == "head":
        data[:8] = b"NOTOURS\0"
    elif damage == "cut":
        del data[len(data) // 3:]
    elif damage == "grown":
        data += b"\0"
    else:  # the index is no longer marshal data
        data[16:24] = b"\xff" * 8
    path.write_bytes(bytes(data))
    assert set(loaders(imports(tree, *NAMES)).values()) == {ORDINARY}
    assert set(loaders(imports(tree, *NAMES)).values()) == {SERVED}


def test_another_checkout_with_a_copy_of_the_file_imports_its_own_sources(tree, tmp_path):
    imports(tree, *NAMES)
    other = tmp_path / "two"
    shutil.copytree(tree, other)  # the file and the .pyc files too, mtimes kept
    seen = imports(other, *NAMES)
    assert set(loaders(seen).values()) == {ORDINARY}
    assert all(found["file"].startswith(str(other)) for found in seen.values())


def test_optimization_levels_keep_files_of_their_own(tree):
    write_module(tree, "vm/probe_opt.py", "def check():\n    try:\n        assert False\n"
                 "    except AssertionError:\n        return 'ran'\n    return 'stripped'\n"
                 "MARKER = check()\n")
    imports(tree, "vm.probe_opt", flags=("-O",))
    optimized = imports(tree, "vm.probe_opt", flags=("-O",))["vm.probe_opt"]
    assert (optimized["loader"], optimized["marker"]) == (SERVED, "stripped")
    assert the_file(tree, 1).exists() and not the_file(tree).exists()
    plain = imports(tree, "vm.probe_opt")["vm.probe_opt"]
    assert (plain["loader"], plain["marker"]) == (ORDINARY, "ran")


def test_a_hash_based_pyc_is_taken_when_it_is_of_the_source(tree):
    source = write_module(tree, "vm/probe_hash.py", "def f():\n    return 1\nMARKER = f()\n")
    compile_pyc(source, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    imports(tree, "vm.probe_hash")
    assert imports(tree, "vm.probe_hash")["vm.probe_hash"]["loader"] == SERVED


def test_code_compiled_under_another_name_gets_the_source_s_path(tree):
    """A .pyc compiled elsewhere (a package built in a build root) names the source it was
    compiled from; importlib gives its code the path it is loaded from, and so must we."""
    source = write_module(tree, "vm/probe_moved.py", "def f():\n    return 1\n")
    compile_pyc(source, dfile="/build/root/vm/probe_moved.py")
    ordinary = imports(tree, "vm.probe_moved")["vm.probe_moved"]
    served = imports(tree, "vm.probe_moved")["vm.probe_moved"]
    assert served["loader"] == SERVED
    assert served["co_filename"] == ordinary["co_filename"] == str(source)


def test_nothing_is_written_when_python_writes_no_bytecode(tree):
    imports(tree, *NAMES, PYTHONDONTWRITEBYTECODE="1")
    assert not the_file(tree).exists()


def test_the_lobster_script_writes_the_file_and_then_needs_nothing_more(tree):
    script = ("import sys; sys.argv = ['lobster', 'version']\n"
              "from lobsterc.frontend import lobster\nlobster()\n")
    out = run(tree, script)
    assert "vm.cli.main" in index_names(tree) and out.strip()
    before = the_file(tree).stat()
    assert run(tree, script) == out
    after = the_file(tree).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_an_extension_init_added_inside_a_package_is_what_python_tries(tree):
    write_module(tree, "vm/probe_pkg/__init__.py", "MARKER = 'source'\n")
    imports(tree, "vm.probe_pkg")  # makes vm/probe_pkg/__pycache__: a change of its folder
    imports(tree, "vm.probe_pkg")
    assert loaders(imports(tree, "vm.probe_pkg")) == {"vm.probe_pkg": SERVED}
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    write_module(tree, f"vm/probe_pkg/__init__{suffix}", "not a library")
    assert loaders(imports(tree, "vm.probe_pkg")) == {"vm.probe_pkg": "ImportError"}


def test_a_hash_based_module_edited_to_the_same_size_and_mtime_is_not_served(tree):
    """Python checks a checked-hash .pyc against the source's hash at every import; so does
    the file, which an unchanged size and mtime do not satisfy."""
    source = write_module(tree, "vm/probe_hashed.py", "MARKER = 1\n")
    compile_pyc(source, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    imports(tree, "vm.probe_hashed")
    assert imports(tree, "vm.probe_hashed")["vm.probe_hashed"]["loader"] == SERVED
    st = source.stat()
    source.write_text("MARKER = 2\n")
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert imports(tree, "vm.probe_hashed")["vm.probe_hashed"]["marker"] == 2


def test_a_package_made_beside_a_module_before_the_save_is_not_hidden_by_it(tree):
    write_module(tree, "vm/probe_late.py", "MARKER = 'module'\n")
    first = imports(tree, "vm.probe_late", MAKE_BEFORE_SAVE=str(tree / "vm/probe_late/__init__.py"))
    assert first["vm.probe_late"]["marker"] == "module"  # what this process had imported
    assert imports(tree, "vm.probe_late")["vm.probe_late"]["marker"] == "made"


def test_a_package_made_while_a_process_runs_is_found_by_its_later_imports(tree):
    write_module(tree, "vm/probe_other.py", "MARKER = 0\n")
    write_module(tree, "vm/probe_later.py", "MARKER = 'module'\n")
    imports(tree, "vm.probe_other", "vm.probe_later")
    code = """\
import importlib, os, sys
from vm.core import module_cache
module_cache.install()
import vm.probe_other
os.makedirs("vm/probe_later")
with open("vm/probe_later/__init__.py", "w") as file:
    file.write("MARKER = 'package'\\n")
importlib.invalidate_caches()
import vm.probe_later
print(type(vm.probe_other.__loader__).__name__, vm.probe_later.MARKER)
"""
    assert run(tree, code).split() == [SERVED, "package"]


def test_a_finder_put_ahead_of_python_s_own_still_sees_our_modules_first(tree):
    write_module(tree, "vm/probe_hooked.py", "MARKER = 'ours'\n")
    imports(tree, "vm.probe_hooked", "vm.cli.main")
    code = """\
import importlib.util, sys
class Instrument:  # as a sitecustomize hook would: first on sys.meta_path, before the script
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "vm.probe_hooked":
            return None
        spec = importlib.util.spec_from_loader(name, loader=None)
        spec.loader = Instrument
        return spec
    @staticmethod
    def create_module(spec):
        return None
    @staticmethod
    def exec_module(module):
        module.MARKER = "instrumented"
sys.meta_path.insert(0, Instrument)
from vm.core import module_cache
module_cache.install()
import vm.probe_hooked, vm.cli.main
print(vm.probe_hooked.MARKER, type(sys.modules["vm.cli.main"].__loader__).__name__)
"""
    assert run(tree, code).split() == ["instrumented", SERVED]


def test_a_stale_pyc_python_would_take_is_not_kept_in_the_file(tree):
    """A source edited to the same size within the second its .pyc was written: Python
    takes the stale .pyc (it keeps whole seconds); the file keeps the source's own code, so
    removing the .pyc files (the usual cure) is not undone by it."""
    at = (time.time_ns() // 10**9 - 100) * 10**9  # a whole second, 100 s back
    source = write_module(tree, "vm/probe_racy.py", "MARKER = 1\n")
    os.utime(source, ns=(at + 100_000_000, at + 100_000_000))
    compile_pyc(source)  # its .pyc, written within the second
    pyc = source.parent / "__pycache__" / f"probe_racy.{sys.implementation.cache_tag}.pyc"
    os.utime(pyc, ns=(at + 500_000_000, at + 500_000_000))
    source.write_text("MARKER = 2\n")  # the same size, in the same second
    os.utime(source, ns=(at + 300_000_000, at + 300_000_000))
    assert imports(tree, "vm.probe_racy")["vm.probe_racy"]["marker"] == 1  # as Python does
    served = imports(tree, "vm.probe_racy")["vm.probe_racy"]
    assert (served["loader"], served["marker"]) == (SERVED, 2)


@pytest.mark.parametrize("kind", ["fifo", "directory", "too large"])
def test_a_file_that_is_no_cache_file_is_not_read(tree, kind):
    path = the_file(tree)
    path.parent.mkdir(exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)  # reading it would wait for a writer forever
    elif kind == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as file:
            file.truncate(module_cache.MAX_BYTES + 1)
    assert set(loaders(imports(tree, *NAMES)).values()) == {ORDINARY}
    if kind != "directory":  # replaced by the save
        assert set(loaders(imports(tree, *NAMES)).values()) == {SERVED}
