"""The codec's first use from many threads at once (issue 47 HIGH 2): every table the codec
uses is complete before any thread can use it, so no concurrent first write loses a field.

Each child is a fresh interpreter that reads a pipeline's and a workflow's program (so its
writing tables are still cold) and then lets 16 threads, released together, write a frame and
a program (a copy of its own: the bytes are made once per object; half of them the workflow's,
whose records are built on first use). Every blob written is read back and compared with what
was written. The interpreter switches threads as often as it can (sys.setswitchinterval),
which makes a lazily filled table show its half-filled state; 20 children are run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from lobsterc.generate.codegen import compile_pipeline
from lobsterc.generate.workflow import compile_workflow_files
from vm.isa import codec

CHILD = r"""
import json, sys, threading
import attrs
from vm.engine import machine
from vm.isa import codec

with open(sys.argv[1], "rb") as file:
    pipeline = codec.load_program(file.read())
with open(sys.argv[2], "rb") as file:
    workflow = codec.load_program(file.read())
frames = {}
for program in (pipeline, workflow):
    frame = machine.new_frame(program, cwd=".", mode="tool")
    frame.results["x"] = {"id": "x", "json": [1, {"a": None}]}
    frames[id(program)] = frame
THREADS = 16
start = threading.Barrier(THREADS)
written = [None] * THREADS

def write(n):
    program = pipeline if n % 2 else workflow
    copy = attrs.evolve(program)
    start.wait()
    written[n] = (program, codec.dump_frame(frames[id(program)]), copy, codec.dump_program(copy))

sys.setswitchinterval(1e-6)
threads = [threading.Thread(target=write, args=(n,)) for n in range(THREADS)]
for t in threads: t.start()
for t in threads: t.join()
sys.setswitchinterval(0.005)
bad = []
for n, (program, frame_blob, copy, program_blob) in enumerate(written):
    try:
        ok = (codec.load_frame(frame_blob, program) == frames[id(program)]
              and codec.load_program(program_blob) == copy)
    except Exception as exc:
        ok = f"{type(exc).__name__}: {exc}"
    if ok is not True:
        bad.append([n, str(ok)])
print(json.dumps(bad))
"""

PIPELINE = ("exec --json --shell 'echo [1,2]' | where 'n>=1' | approve --prompt ok"
            " | ask --schema '{\"type\":\"integer\"}' | json")
WORKFLOW = ("name: w\nsteps:\n  - id: a\n    run: echo 1\n    approval: ok?\n"
            "  - id: b\n    for_each: $a.json\n    steps:\n      - id: c\n        run: echo 2\n")


def test_first_writes_from_16_threads_in_20_fresh_processes_all_read_back(tmp_path):
    (tmp_path / "w.lobster").write_text(WORKFLOW)
    (tmp_path / "pipeline.bin").write_bytes(codec.dump_program(compile_pipeline(PIPELINE)))
    workflow = compile_workflow_files(str(tmp_path / "w.lobster"))[0]
    (tmp_path / "workflow.bin").write_bytes(codec.dump_program(workflow))

    def one_child(_: int) -> list:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "pipeline.bin"),
                               str(tmp_path / "workflow.bin")], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one_child, range(20)))
    assert [bad for bad in results if bad] == []
