"""The VM core: one handler and one CFG rule per opcode, typed payloads and their checks,
frames refused before they are claimed, no clock reading in a frame, positions with files."""

from __future__ import annotations

from pathlib import Path

import attrs
import msgpack
import pytest

from lobsterc.generate.codegen import Emitter, compile_pipeline
from lobsterc.tools.effects import Cfg
from lobsterc.generate.workflow import compile_workflow
from vm.isa import codec, ops
from vm.engine import machine
from vm.host import token as tokens
from vm.isa.codec import LoadError
from vm.isa.asm import assemble
from vm.isa.dis import disassemble
from vm.isa.frame import LoopFrame, TryFrame
from vm.engine.interp import HANDLERS
from vm.isa.opcodes import FLOWS, OPS, Op
from vm.isa.ops import Exec
from vm.isa.program import Instr
from vm.service.protocol import Decision, Options, handle, resume
from vm.core.source import Source, render_trap
from vm.isa.regions import regions_of
from vm.isa.verify import VerifyError, verify, verify_frame


def workflow(tmp_path: Path, text: str, name: str = "flow.lobster", **files: str):
    for rel, body in files.items():
        path = tmp_path / rel.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return compile_workflow(str(path))


def options(tmp_path: Path) -> Options:
    return Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path), env={}, mode="tool")


# one table ------------------------------------------------------------------------------------

def test_the_interpreter_has_one_handler_per_opcode():
    assert set(HANDLERS) == set(Op)


def test_the_cfg_has_a_rule_for_every_opcodes_flow_kind():
    assert set(Cfg.RULES) == set(FLOWS)
    missing = [op.name for op, info in OPS.items() if info.flow not in Cfg.RULES]
    assert not missing, f"the CFG does not know {missing}"


def test_every_typed_opcode_names_its_payload_beside_the_table():
    typed = {Op.STAGE: ops.Stage, Op.EXEC: ops.Exec, Op.SHELL: ops.Shell,
             Op.LOAD_STDIN: ops.LoadStdin, Op.LOOP_BEGIN: ops.Loop, Op.CALL: ops.Call,
             Op.TRY: ops.Policy, Op.PARALLEL: ops.Parallel}
    for op, cls in typed.items():
        assert OPS[op].payload_type is cls and cls in ops.PAYLOADS
        assert attrs.has(cls) and attrs.fields(cls)


def test_back_patching_follows_the_table(tmp_path):
    program = workflow(tmp_path, "steps:\n  - id: a\n    run: echo a\n    on_error: continue\n")
    try_pc = next(pc for pc, ins in enumerate(program.code) if ins.op == Op.TRY)
    end_try = program.code[program.code[try_pc].c]
    assert end_try.op == Op.END_TRY and OPS[Op.TRY].targets == (2,)
    assert OPS[Op.END_TRY].targets == (1,) and end_try.b == program.code[try_pc].c + 1


# verify ---------------------------------------------------------------------------------------

SUB = "steps:\n  - id: inner\n    run: echo inner\n"


def first(program, op: Op) -> int:
    return next(pc for pc, ins in enumerate(program.code) if ins.op == op)


# programs written as listings (vm/isa/asm.py), each test breaking one line of a good one
LOOPED = """\
@prologue
  prologue.0   INIT_ARGS      {}
step hosts
  hosts.0      TRY            hosts Policy{on_error="stop" timeout_ms=- retry={max=2 backoff="fixed" delay_ms=1000 max_delay_ms=30000 jitter=false}} -> hosts.2
  hosts.1      SHELL          hosts Shell{run="echo '[\\"a\\"]'" stdin=- env={} cwd=-}
  hosts.2      END_TRY        hosts -> hosts.end
step each
  each.0       LOOP_BEGIN     each Loop{source="$hosts.json" item_var="item" index_var="index" batch_size=1 pause_ms=0 steps=["roll"]} -> each/(next).end
step each/roll
  each/roll.0  SHELL          roll Shell{run="echo $item.stdout" stdin=- env={} cwd=-}
step each/(next)
  each/(next).0 LOOP_NEXT      each -> each/roll.0
step call
  call.0       CALL           call Call{args={} defaults={} env={} cwd=-} -> call/inner.0
@end
  end.0        END_WORKFLOW
step call/inner
  call/inner.0 SHELL          inner Shell{run="echo inner" stdin=- env={} cwd=-}
@return call
  call/(return).0 RETURN         call
"""
FORKED = """\
@prologue
  prologue.0   INIT_ARGS      {}
step fetch
  fetch.0      PARALLEL       fetch Parallel{wait="any" timeout_ms=- branches=[users@fetch/users.0, orders@fetch/orders.0]}
@end
  end.0        END_WORKFLOW
@branch fetch/users
  fetch/users.0 SHELL          users Shell{run="echo users" stdin=- env={} cwd=-}
  fetch/users.1 END_BRANCH     users
@branch fetch/orders
  fetch/orders.0 LOAD_STDIN     r0 LoadStdin{stdin=- env={} cwd=-}
  fetch/orders.1 EXEC           r0 Exec{json=false shell="echo orders" argv=- stdin=- templated=true} r0
  fetch/orders.2 STORE_PIPELINE orders r0
  fetch/orders.3 END_BRANCH     orders
"""


def broken(listing: str, good: str, bad: str):
    """The program of `listing` with its one `good` text replaced by `bad`."""
    assert listing.count(good) == 1, good
    return assemble(listing.replace(good, bad))


def test_verify_checks_payload_types():
    verify(assemble(LOOPED))
    loop = 'Loop{source="$hosts.json" item_var="item" index_var="index" batch_size=1 ' \
           'pause_ms=0 steps=["roll"]}'
    with pytest.raises(VerifyError, match="SHELL payload is not a Shell"):
        verify(broken(LOOPED, """hosts Shell{run="echo '[\\"a\\"]'" stdin=- env={} cwd=-}""",
                      f"hosts {loop}"))


@pytest.mark.parametrize("good, bad, message", [
    ("}} -> hosts.2", "}} -> prologue.0", "TRY does not pair with an END_TRY"),
    ("-> each/(next).end", "-> hosts.0", "LOOP_BEGIN does not pair with a LOOP_NEXT"),
    ("-> call/inner.0", "-> hosts.0", "CALL region does not end in a RETURN"),
])
def test_verify_checks_block_pairing(good, bad, message):
    with pytest.raises(VerifyError, match=message):
        verify(broken(LOOPED, good, bad))


def test_a_sealed_program_with_a_bad_pairing_is_refused_at_load():
    bad = codec.seal(broken(LOOPED, "}} -> hosts.2", "}} -> prologue.0"))
    with pytest.raises(LoadError, match="invalid program: .*TRY"):
        codec.load_program(codec.dump_program(bad))


def test_the_structure_is_found_once_and_kept_with_its_program():
    program = assemble(LOOPED)
    verify(program)
    structure = regions_of(program)
    assert regions_of(program) is structure  # dis, effects and the machine read this one
    (call,) = structure.regions(first(program, Op.CALL))
    assert program.code[call.end].op == Op.RETURN and structure.exits[call.end] == call.entry + 1
    loop = first(program, Op.LOOP_BEGIN)
    assert program.code[structure.loops[loop]].op == Op.LOOP_NEXT
    assert program.code[structure.tries[first(program, Op.TRY)]].op == Op.END_TRY
    assert not structure.problems
    assert regions_of(attrs.evolve(program)) is not structure  # another program, its own


def test_verify_checks_branch_regions():
    verify(assemble(FORKED))
    with pytest.raises(VerifyError, match="branch 'users' is not a region"):
        verify(broken(FORKED, "users@fetch/users.0", "users@prologue.0"))


# the codec ------------------------------------------------------------------------------------

def test_payloads_are_tagged_records_and_plain_constants_stay_plain(tmp_path):
    lookalike = {"$type": "Shell", "run": "rm -rf /"}
    em = Emitter()
    em.enter_file("x.pipeline")
    em.emit(Op.LOAD_CONST, 0, em.const(lookalike))
    em.emit(Op.LOAD_CONST, 0, em.const({"cfg": lookalike}))
    em.emit(Op.EXEC, 0, em.const(Exec(shell="echo hi")), 0)
    em.emit(Op.END, 0)
    program = em.program("x.pipeline", "")
    raw = msgpack.unpackb(codec.dump_program(program))
    assert raw["constants"] == [
        {"$type": "json", "value": lookalike}, {"cfg": lookalike},
        {"$type": "Exec", "json": False, "shell": "echo hi", "argv": None, "stdin": None,
         "templated": False}]
    loaded = codec.load_program(codec.dump_program(program))
    assert loaded == program and loaded.constants[0] == lookalike


def test_an_unknown_payload_tag_or_field_is_refused():
    raw = msgpack.unpackb(codec.dump_program(compile_pipeline("exec --shell 'echo hi'")))
    exec_const = next(c for c in raw["constants"] if isinstance(c, dict))
    for doctored in ({**exec_const, "$type": "Rm"}, {**exec_const, "extra": 1},
                     {**exec_const, "json": "yes"}):
        raw["constants"] = [doctored if isinstance(c, dict) else c for c in raw["constants"]]
        with pytest.raises(LoadError):
            codec.load_program(msgpack.packb(raw))


# frames ---------------------------------------------------------------------------------------

TIMED = "steps:\n  - id: slow\n    run: echo done\n    timeout_ms: 60000\n"


def test_a_budget_exit_leaves_time_left_in_the_frame_never_a_clock_reading(tmp_path):
    program = workflow(tmp_path, TIMED)
    frame = machine.new_frame(program, cwd=str(tmp_path), mode="tool")
    host = machine.Host(ctx=options(tmp_path).context())
    outcome = machine.run(program, frame, host, budget=2)  # INIT_ARGS, TRY
    assert isinstance(outcome, machine.Parked) and outcome.frame.pending is None
    [entry] = outcome.frame.tries
    assert isinstance(entry, TryFrame) and entry.site == first(program, Op.TRY)
    assert 0 < entry.remaining_ms <= 60000
    raw = msgpack.unpackb(codec.dump_frame(outcome.frame))
    assert set(raw["tries"][0]) == {"site", "attempt", "remaining_ms", "loops", "calls"}
    frame = codec.load_frame(codec.dump_frame(outcome.frame), program)
    assert isinstance(machine.run(program, frame, host), machine.Finished)


def parked(tmp_path: Path):
    program = workflow(tmp_path, "steps:\n  - id: list\n    run: echo '[1, 2]'\n"
                                 "  - id: each\n    for_each: $list.json\n    steps:\n"
                                 "      - id: ok\n        approval: Go?\n")
    frame = machine.new_frame(program, cwd=str(tmp_path), mode="tool")
    outcome = machine.run(program, frame, machine.Host(ctx=options(tmp_path).context()))
    assert isinstance(outcome, machine.Parked) and outcome.frame.pending is not None
    return program, outcome.frame


@pytest.mark.parametrize("damage, message", [
    (lambda f: setattr(f, "pc", 9999), "pc 9999 is outside the code"),
    (lambda f: f.registers.append([]), "3 registers, the program has 2"),
    (lambda f: setattr(f.loops[0], "site", 0), "a loop record names pc 0, not a LOOP_BEGIN"),
    (lambda f: setattr(f.loops[0], "index", 5), "is past its items"),
    (lambda f: setattr(f, "pc", f.pc - 1), "not the instruction before pc"),
    (lambda f: setattr(f.pending, "halt", 7), "pending halt 7 does not exist"),
    (lambda f: f.tries.append(TryFrame(site=1)), "names pc 1, not a TRY"),
])
def test_a_damaged_frame_is_refused(tmp_path, damage, message):
    program, frame = parked(tmp_path)
    assert isinstance(frame.loops[0], LoopFrame)
    verify_frame(frame, program)
    damage(frame)
    with pytest.raises(VerifyError, match=message):
        verify_frame(frame, program)
    with pytest.raises(LoadError, match="frame does not fit its program"):
        codec.load_frame(codec.dump_frame(frame), program)


def test_a_crafted_frame_is_refused_before_the_checkpoint_is_claimed(tmp_path):
    opts = options(tmp_path)
    envelope = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]' | approve"},
                      opts)
    token = envelope["requiresApproval"]["resumeToken"]
    store = opts.store()
    key = tokens.decode(token).state_key
    good = store.read_frame(key)
    raw = msgpack.unpackb(good)
    raw["pc"] = 9999
    store.save_frame(key, msgpack.packb(raw))
    refused = resume(options(tmp_path), Decision(approve=True), token=token)
    assert refused["error"]["code"] == "T431"
    assert "Resume state is corrupt" in refused["error"]["message"]
    assert store.read_frame(key) is not None  # not claimed: the checkpoint is still there
    store.save_frame(key, good)
    done = resume(options(tmp_path), Decision(approve=True), token=token)
    assert done["status"] == "ok" and done["output"] == [1]


# positions with files -------------------------------------------------------------------------

MAIN = """\
# calls a sub-workflow whose second step fails
args:
  who: {default: x}
steps:
  - id: call
    workflow: lib/fails.lobster
"""
FAILS = """\
# a sub-workflow
steps:
  - id: one
    run: echo one
  - id: two
    run: echo broken >&2; exit 3
  - id: three
    run: echo three
"""


def test_a_trap_in_a_sub_workflow_names_its_file_and_line(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "fails.lobster").write_text(FAILS, encoding="utf-8")
    (tmp_path / "main.lobster").write_text(MAIN, encoding="utf-8")
    envelope = handle({"action": "run", "pipeline": "main.lobster"}, options(tmp_path))
    error = envelope["error"]
    assert error["code"] == "T410"
    assert error["location"] == {"file": str((tmp_path / "lib" / "fails.lobster").resolve()),
                                 "line": 6, "column": 10}


def test_a_runtime_trap_renders_like_a_compile_error(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "fails.lobster").write_text(FAILS, encoding="utf-8")
    path = tmp_path / "main.lobster"
    path.write_text(MAIN, encoding="utf-8")
    program = compile_workflow(str(path))
    assert program.files == ("main.lobster", "lib/fails.lobster")
    frame = machine.new_frame(program, cwd=str(tmp_path), mode="tool", source=str(path))
    failed = machine.run(program, frame, machine.Host(ctx=options(tmp_path).context()))
    assert isinstance(failed, machine.Failed)
    fails = str((tmp_path / "lib" / "fails.lobster").resolve())
    assert (failed.file, failed.span) == (fails, (6, 10, 6, 33))
    assert render_trap(failed).splitlines() == [
        f"{fails}:6:10: error[T410]: workflow command failed (3): broken",
        "  6 |     run: echo broken >&2; exit 3",
        "    |          " + "^" * 23]


def test_an_inline_pipeline_trap_renders_with_the_given_text():
    text = "exec --shell 'exit 4'"
    program = compile_pipeline(text)
    frame = machine.new_frame(program, cwd=".", mode="tool")
    failed = machine.run(program, frame, machine.Host(ctx=Options(env={}).context()))
    assert failed.file == "<pipeline>"
    rendered = render_trap(failed, source=Source("<pipeline>", text)).splitlines()
    assert rendered[0].startswith("<pipeline>:1:1: error[T410]: exec failed (4)")
    assert rendered[1:] == [f"  1 | {text}", "    | " + "^" * len(text)]


# the disassembly ------------------------------------------------------------------------------

GATE = """\
steps:
  - id: plan
    run: echo plan
  - id: ship
    approval:
      prompt: Ship?
      required_approver: alice
"""


def test_a_changed_approver_shows_in_the_gates_line(tmp_path):
    old = disassemble(workflow(tmp_path, GATE)).splitlines()
    new = disassemble(workflow(tmp_path, GATE.replace("alice", "mallory"))).splitlines()
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    assert len(old) == len(new) and len(changed) == 3  # the two hash lines, and the gate
    gate_old, gate_new = changed[-1]
    assert "required_approver=\"alice\"" in gate_old
    assert "required_approver=\"mallory\"" in gate_new


PARALLEL = """\
steps:
  - id: fetch
    parallel:
      wait: any
      branches:
        - id: users
          run: echo users
        - id: orders
          pipeline: exec --shell 'echo orders'
"""


def test_labels_fit_and_regions_have_their_own_names(tmp_path):
    long_id = "a_step_with_a_rather_long_name"
    text = PARALLEL + f"  - id: {long_id}\n    workflow: child.lobster\n"
    listing = disassemble(workflow(tmp_path, text, **{"child.lobster": SUB}))
    lines = listing.splitlines()
    assert "@branch fetch/users" in lines and "@branch fetch/orders" in lines
    assert f"@return {long_id}" in lines
    for line in lines:
        if line.startswith("  "):
            label, mnemonic = line.split()[:2]
            assert mnemonic in Op.__members__, line
    assert any(line.split()[0] == f"{long_id}/(return).0" for line in lines if line[:2] == "  ")
    assert "branches=[users@fetch/users.0, orders@fetch/orders.0]" in listing


def test_a_sub_workflow_cost_limit_heads_its_region_under_its_own_label(tmp_path):
    child = "cost_limit: {max_usd: 1, action: stop}\n" + SUB
    text = "steps:\n  - id: call\n    workflow: child.lobster\n"
    listing = disassemble(workflow(tmp_path, text, **{"child.lobster": child}))
    lines = listing.splitlines()
    enter = lines.index("@enter call")
    assert lines[enter + 1].split()[:2] == ["call/(enter).0", "COST_LIMIT"]
    assert lines[enter + 2] == "step call/inner"
    structure = regions_of(workflow(tmp_path, text, **{"child.lobster": child}))
    (region,) = [r for rs in structure.entered.values() for r in rs]
    assert region.kind == "call" and region.name == "call"


def test_parallel_branches_are_code_regions(tmp_path):
    program = workflow(tmp_path, PARALLEL.replace("wait: any", "wait: all"))
    spec = program.constants[program.code[first(program, Op.PARALLEL)].b]
    assert isinstance(spec, ops.Parallel) and [b.id for b in spec.branches] == ["users", "orders"]
    for branch in spec.branches:
        at = branch.start
        while program.code[at].op != Op.END_BRANCH:
            at += 1
        assert program.constants[program.code[at].a] == branch.id
    frame = machine.new_frame(program, cwd=str(tmp_path), mode="tool")
    outcome = machine.run(program, frame, machine.Host(ctx=options(tmp_path).context()))
    assert isinstance(outcome, machine.Finished)
    assert outcome.output == [{"orders": "orders"}]  # a branch without JSON output is left out


def test_every_instruction_is_an_instr():
    assert all(isinstance(ins, Instr) for ins in compile_pipeline("json").code)
