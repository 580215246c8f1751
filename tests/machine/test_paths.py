"""One path form: every location names its file absolute and resolved (symbolic links, `.` and
`..` resolved), at compile time and at run time, for the main file and its sub-workflows, in
envelopes, diagnostics and events; programs and their disassembly name files relative to the
main file, so that the same source gives the same bytes wherever it is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from attrs import evolve

from lobsterc.generate.workflow import compile_workflow
from vm.engine import machine
from vm.isa import codec
from vm.isa.dis import disassemble
from vm.service.protocol import Decision, Options, handle, resume

LOBSTER = str(Path(sys.executable).parent / "lobster")
LOBSTERC = str(Path(sys.executable).parent / "lobsterc")

MAIN = """\
steps:
  - id: hello
    run: echo hi
  - id: call
    workflow: ../lib/child.lobster
"""
CHILD = """\
steps:
  - id: one
    run: echo one
  - id: boom
    run: exit 4
"""
GATE = """\
steps:
  - id: ask
    approval: go on?
  - id: call
    workflow: ../lib/child.lobster
"""
FAILS_HERE = """\
steps:
  - id: a
    run: echo a
  - id: b
    run: exit 3
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/real/{flows,lib}/..., and tmp/link -> real: a directory reached through a link."""
    real = tmp_path / "real"
    for rel, text in (("flows/main.lobster", MAIN), ("flows/gate.lobster", GATE),
                      ("flows/fails.lobster", FAILS_HERE), ("lib/child.lobster", CHILD)):
        (real / rel).parent.mkdir(parents=True, exist_ok=True)
        (real / rel).write_text(text, encoding="utf-8")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    return tmp_path


def real(tree: Path, rel: str) -> str:
    return str((tree / "real" / rel).resolve())


def options(cwd: Path, **kw) -> Options:
    return Options(cwd=str(cwd), state_dir=str(cwd / "state"), env={}, **kw)


def run(tree: Path, pipeline: str, **kw) -> dict:
    return handle({"action": "run", "pipeline": pipeline}, options(tree, **kw))


def where(envelope: dict) -> tuple[str, int, int]:
    loc = envelope["error"]["location"]
    return loc["file"], loc["line"], loc["column"]


# run time ------------------------------------------------------------------------------------

@pytest.mark.parametrize("given", ["real/flows/fails.lobster", "link/flows/fails.lobster",
                                   "link/flows/../flows/fails.lobster"])
def test_a_trap_in_the_main_file_names_it_resolved_not_by_its_basename(tree, given):
    assert where(run(tree, given)) == (real(tree, "flows/fails.lobster"), 5, 10)


@pytest.mark.parametrize("given", ["real/flows/main.lobster", "link/flows/main.lobster"])
def test_a_trap_in_a_sub_workflow_names_it_resolved_not_relative(tree, given):
    assert where(run(tree, given)) == (real(tree, "lib/child.lobster"), 5, 10)


def test_a_resumed_run_names_files_the_same_way_from_any_directory(tree, tmp_path_factory):
    halted = run(tree, "link/flows/gate.lobster")
    token = halted["requiresApproval"]["resumeToken"]
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    done = resume(evolve(options(tree), cwd=str(elsewhere)), Decision(approve=True), token=token)
    assert where(done) == (real(tree, "lib/child.lobster"), 5, 10)


def test_the_failed_event_carries_the_envelope_location(tree):
    events: list[dict] = []
    envelope = run(tree, "link/flows/main.lobster", on_event=events.append)
    failed = [e for e in events if e["type"] == "failed"]
    assert [e["location"] for e in failed] == [envelope["error"]["location"]]


def test_a_policy_handled_failure_event_names_its_file(tree):
    (tree / "real" / "lib" / "soft.lobster").write_text(
        "steps:\n  - id: a\n    run: exit 2\n    on_error: continue\n", encoding="utf-8")
    (tree / "real" / "flows" / "soft.lobster").write_text(
        "steps:\n  - id: c\n    workflow: ../lib/soft.lobster\n", encoding="utf-8")
    events: list[dict] = []
    assert run(tree, "link/flows/soft.lobster", on_event=events.append)["ok"]
    (failed,) = [e for e in events if e["type"] == "failed"]
    assert (failed["handled"], failed["location"]) == (
        "continue", {"file": real(tree, "lib/soft.lobster"), "line": 3, "column": 10})


def test_a_frame_without_the_main_directory_keeps_file_table_names(tree):
    """A frame saved before frames carried the directory: names as the file table has them."""
    program = compile_workflow(str(tree / "real" / "flows" / "main.lobster"))
    frame = machine.new_frame(program, cwd=str(tree), mode="tool")
    failed = machine.run(program, frame, machine.Host(ctx=options(tree).context()))
    assert (failed.file, failed.span[:2]) == ("../lib/child.lobster", (5, 10))


def test_a_frame_saved_before_source_dir_still_loads(tree):
    import msgpack

    program = compile_workflow(str(tree / "real" / "flows" / "main.lobster"))
    frame = machine.new_frame(program, cwd=str(tree), mode="tool", source=str(tree / "link" /
                                                                          "flows" / "main.lobster"))
    assert frame.source_dir == real(tree, "flows")
    raw = msgpack.unpackb(codec.dump_frame(frame))
    del raw["source_dir"]
    assert codec.load_frame(msgpack.packb(raw), program).source_dir == ""


def test_inline_pipelines_keep_their_name(tree):
    assert where(run(tree, "exec --shell 'exit 3'")) == ("<pipeline>", 1, 1)


# compile time ----------------------------------------------------------------------------------

@pytest.mark.parametrize("given", ["real/flows/bad.lobster", "link/flows/bad.lobster",
                                   "link/flows/../flows/bad.lobster"])
def test_a_compile_error_names_the_main_file_resolved(tree, given):
    (tree / "real" / "flows" / "bad.lobster").write_text(
        "steps:\n  - id: a\n    pipeline: sortt\n", encoding="utf-8")
    assert where(run(tree, given)) == (real(tree, "flows/bad.lobster"), 3, 15)


def test_a_compile_error_in_a_sub_workflow_names_that_file_resolved(tree):
    (tree / "real" / "lib" / "child.lobster").write_text(
        "steps:\n  - id: x\n    pipeline: sortt\n", encoding="utf-8")
    assert where(run(tree, "link/flows/main.lobster")) == (real(tree, "lib/child.lobster"), 3, 15)


def test_messages_keep_the_originals_forms(tree):
    """The texts are the original's: a missing file as `path.resolve` makes it (links kept),
    a cycle by its real path; the location beside them is the resolved form."""
    (tree / "real" / "flows" / "missing.lobster").write_text(
        "steps:\n  - id: a\n    workflow: ../lib/nope.lobster\n", encoding="utf-8")
    (tree / "real" / "flows" / "cycle.lobster").write_text(
        "steps:\n  - id: a\n    workflow: ./cycle.lobster\n", encoding="utf-8")
    missing = run(tree, "link/flows/missing.lobster")
    assert missing["error"]["message"] == \
        f"Workflow step a workflow file not found: {tree / 'link' / 'lib' / 'nope.lobster'}"
    assert where(missing) == (real(tree, "flows/missing.lobster"), 3, 15)
    cycle = run(tree, "link/flows/cycle.lobster")
    assert cycle["error"]["message"] == (f"Workflow step a creates a cycle: "
                                         f"{real(tree, 'flows/cycle.lobster')} is already being "
                                         "executed")
    assert where(cycle) == (real(tree, "flows/cycle.lobster"), 3, 15)


def test_lint_names_main_and_sub_workflow_files_alike(tree):
    (tree / "real" / "lib" / "child.lobster").write_text(
        "steps:\n  - id: x\n    pipeline: sortt\n", encoding="utf-8")
    (tree / "real" / "flows" / "main.lobster").write_text(
        MAIN + "  - id: z\n    pipeline: headd\n", encoding="utf-8")
    proc = subprocess.run([LOBSTERC, "lint", "--format", "json", "link/flows/main.lobster"],
                          cwd=tree, capture_output=True, text=True)
    found = {(f["file"], f["message"]) for f in json.loads(proc.stdout) if f["code"] == "E201"}
    assert found == {(real(tree, "flows/main.lobster"), "Unknown command: headd"),
                     (real(tree, "lib/child.lobster"), "Unknown command: sortt")}


def test_lint_of_stdin_keeps_its_name(tree):
    proc = subprocess.run([LOBSTERC, "lint", "-"], cwd=tree, capture_output=True, text=True,
                          input="steps:\n  - id: a\n    pipeline: sortt\n")
    assert proc.stdout.startswith("<stdin>:3:15: error[E201]: Unknown command: sortt\n")


def test_an_editor_buffer_keeps_its_findings(tree, monkeypatch):
    """The language server compares a finding's file with the buffer's in the resolved form:
    an untitled buffer, or a file opened through a link, keeps its findings on its own lines."""
    from lobsterc.tools.lsp import server

    monkeypatch.chdir(tree / "link" / "flows")
    text = "steps:\n  - id: a\n    pipeline: sortt\n"
    for uri in ("untitled:Untitled-1", (tree / "link" / "flows" / "open.lobster").as_uri()):
        (found,) = server.lint(server.server, uri, text)
        assert (found.message, found.span.line, found.span.col) == \
            ("Unknown command: sortt", 3, 15), uri


def test_lobsterc_diff_names_a_revision_through_a_linked_temporary_directory(tmp_path):
    repo, tmp_real = tmp_path / "repo", tmp_path / "tmp-real"
    repo.mkdir()
    tmp_real.mkdir()
    (tmp_path / "tmp-link").symlink_to(tmp_real, target_is_directory=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "GIT_CONFIG_GLOBAL": os.devnull, "TMPDIR": str(tmp_path / "tmp-link")}
    (repo / "f.lobster").write_text("steps:\n  - id: a\n    pipeline: nosuch\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    (repo / "f.lobster").write_text("steps:\n  - id: a\n    pipeline: json\n")
    proc = subprocess.run([LOBSTERC, "diff", "--rev", "HEAD..", "f.lobster"], cwd=repo,
                          capture_output=True, text=True, env=env)
    assert proc.stderr.splitlines()[1] == \
        "HEAD:f.lobster:3:15: error[E201]: Unknown command: nosuch", proc.stderr


# programs --------------------------------------------------------------------------------------

def test_the_same_source_gives_the_same_bytes_wherever_it_is(tree, tmp_path_factory):
    copy = tmp_path_factory.mktemp("elsewhere") / "deeper" / "copy"
    shutil.copytree(tree / "real", copy)
    blobs = {codec.dump_program(compile_workflow(str(path))) for path in (
        tree / "real" / "flows" / "main.lobster", tree / "link" / "flows" / "main.lobster",
        tree / "link" / "flows" / ".." / "flows" / "main.lobster",
        copy / "flows" / "main.lobster")}
    assert len(blobs) == 1
    (blob,) = blobs
    assert str(tree).encode() not in blob and str(copy).encode() not in blob


def test_a_linked_main_file_is_named_by_its_real_name(tree):
    """The file table holds the real name: a program is the same whichever name compiled it
    (the cache keeps one program per real path)."""
    alias = tree / "real" / "flows" / "alias.lobster"
    alias.symlink_to(tree / "real" / "flows" / "main.lobster")
    program = compile_workflow(str(alias))
    assert program.files == ("main.lobster", "../lib/child.lobster")
    assert program.header.source_name == "main.lobster"
    assert where(run(tree, "link/flows/alias.lobster")) == (real(tree, "lib/child.lobster"), 5, 10)


def test_dis_names_files_relative_to_the_main_file(tree):
    listing = disassemble(compile_workflow(str(tree / "link" / "flows" / "main.lobster")))
    assert "; files   main.lobster ../lib/child.lobster" in listing.splitlines()
    assert "; ../lib/child.lobster:5" in listing and str(tree) not in listing


# the real CLI ----------------------------------------------------------------------------------

def test_the_cli_names_files_resolved_in_tool_and_human_mode(tree):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    env.update(LOBSTER_STATE_DIR=str(tree / "state"), HOME=str(tree))
    child = real(tree, "lib/child.lobster")
    tool = subprocess.run([LOBSTER, "run", "--mode", "tool", "link/flows/main.lobster"],
                          cwd=tree, env=env, capture_output=True, text=True)
    assert json.loads(tool.stdout)["error"]["location"] == {"file": child, "line": 5,
                                                           "column": 10}
    human = subprocess.run([LOBSTER, "run", "--quiet", "main.lobster"],
                           cwd=tree / "link" / "flows", env=env, capture_output=True, text=True)
    assert human.stderr.splitlines()[1:] == [
        f"{child}:5:10: error[T410]: workflow command failed (4): exit 4",
        "  5 |     run: exit 4",
        "    |          ^^^^^^"]


def test_a_compiled_program_run_from_its_lbc_names_files_from_there(tree):
    """`lobsterc compile` writes the .lbc beside its source; a run of it resolves the
    program's file names against the .lbc's real directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    env.update(LOBSTER_STATE_DIR=str(tree / "state"), HOME=str(tree))
    subprocess.run([LOBSTERC, "compile", "link/flows/main.lobster"], cwd=tree, env=env,
                   check=True, capture_output=True)
    proc = subprocess.run([LOBSTER, "run", "--mode", "tool", str(tree / "link" / "flows" /
                                                                 "main.lbc")],
                          cwd=tree / "real" / "lib", env=env, capture_output=True, text=True)
    assert where(json.loads(proc.stdout)) == (real(tree, "lib/child.lobster"), 5, 10)


def test_a_pipeline_file_is_named_resolved_by_lint_compile_and_dis(tree):
    """A file of pipeline text (`.pipeline`) too; its program keeps its bare name."""
    (tree / "real" / "flows" / "p.pipeline").write_text("json | sortt\n", encoding="utf-8")
    shown = real(tree, "flows/p.pipeline")
    for argv in (["lint"], ["compile"], ["dis"]):
        proc = subprocess.run([LOBSTERC, *argv, "link/flows/p.pipeline"], cwd=tree,
                              capture_output=True, text=True)
        assert (proc.stdout + proc.stderr).startswith(
            f"{shown}:1:8: error[E201]: Unknown command: sortt\n  1 | json | sortt\n"), argv


def test_a_run_moved_onto_a_file_elsewhere_names_files_from_there(tree):
    """`lobster migrate --to` a version in another directory: the moved run's traps name
    that version's files."""
    from vm.service.migrate import migrate

    v2 = tree / "real" / "v2"
    v2.mkdir()
    (v2 / "gate.lobster").write_text(GATE.replace("../lib/child.lobster", "child2.lobster"),
                                     encoding="utf-8")
    (v2 / "child2.lobster").write_text("steps:\n  - id: boom\n    run: exit 4\n",
                                       encoding="utf-8")
    halted = run(tree, "link/flows/gate.lobster")
    approval = halted["requiresApproval"]["approvalId"]
    [moved] = migrate(options(tree), str(tree / "link" / "v2" / "gate.lobster"), ident=approval)
    assert moved.status == "migrated", moved
    done = resume(options(tree), Decision(approve=True), approval_id=approval)
    assert where(done) == (real(tree, "v2/child2.lobster"), 3, 10)
