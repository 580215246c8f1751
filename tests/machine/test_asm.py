"""The assembler: every golden listing and every generated program's listing assembles back to
the same text, an assembled golden program is the compiled one up to what the text hides, and
a text that is no listing is refused with its line."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lobsterc.tools.cli import compile_target
from vm.isa import ops
from vm.isa.asm import AsmError, assemble, assemble_listing
from vm.isa.dis import disassemble
from vm.isa.opcodes import CONST, HALT, OPCODE_VERSION, OPS, STEP, Op
from vm.isa.program import FORMAT_VERSION, MAGIC, Header, Instr, Program, StepInfo
from vm.isa.verify import verify

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
LISTINGS = sorted(GOLDEN.glob("*.lbs"))


@pytest.mark.parametrize("path", LISTINGS, ids=[p.name for p in LISTINGS])
def test_a_golden_listing_assembles_back_to_its_own_text(path):
    text = path.read_text(encoding="utf-8")
    program, source = assemble_listing(text)
    assert disassemble(program, source) == text
    verify(program)


def _by_value(program: Program) -> list:
    """Each instruction with its pool operands as the values they name."""
    out = []
    for ins in program.code:
        kinds = OPS[Op(ins.op)].operands
        values = [program.constants[v] if k in (CONST, STEP) else
                  program.halts[v] if k == HALT else v
                  for k, v in zip(kinds, (ins.a, ins.b, ins.c))]
        out.append((Op(ins.op), values))
    return out


@pytest.mark.parametrize("path", LISTINGS, ids=[p.name for p in LISTINGS])
def test_an_assembled_golden_program_is_the_compiled_one(path):
    source = next(p for p in GOLDEN.glob(path.stem + ".*") if p.suffix != ".lbs")
    compiled, _ = compile_target(str(source))
    program = assemble(path.read_text(encoding="utf-8"))
    assert _by_value(program) == _by_value(compiled)
    assert [(s.id, s.first_pc, s.last_pc, s.file) for s in program.steps] == \
        [(s.id, s.first_pc, s.last_pc, s.file) for s in compiled.steps]
    assert program.files == compiled.files
    assert attrs.evolve(program.header, compiler_version=compiled.header.compiler_version) == \
        compiled.header
    assert program.checkpoint_ttl_ms == compiled.checkpoint_ttl_ms


def test_a_hand_written_program_runs_through_verify():
    program = assemble(HAND)
    verify(program)
    assert [Op(i.op) for i in program.code] == [Op.INIT_ARGS, Op.SET_RESULT, Op.HALT_APPROVE,
                                                Op.JUMP, Op.END_WORKFLOW]
    assert program.code[3].a == 4 and program.halts[0].id == "ok"
    assert program.steps == (StepInfo("ok", 1, 3),)
    bare = assemble(HAND.split("@prologue", 1)[1].join(["@prologue", ""]))  # no header lines
    assert (bare.header.format_version, bare.header.opcode_version) == (FORMAT_VERSION,
                                                                        OPCODE_VERSION)
    assert bare.code == program.code


HAND = """\
; lobster bytecode format=3 opcodes=2
; source  hand.lobster sha256:
; program sha256:
@prologue
  prologue.0   INIT_ARGS      {}
step ok
  ok.0         SET_RESULT     ok StepValue{stdin=- gated=true}
  ok.1         HALT_APPROVE   r0 StepApproval{prompt="Go?" step="ok" items=- preview=- \
approvers={initiated_by=- required_approver=- require_different_approver=-}}
  ok.2         JUMP           -> ok.end
@end
  end.0        END_WORKFLOW
"""


@pytest.mark.parametrize("text, message", [
    ("; lobster bytecode format=x", "unknown header line"),
    ("step a\n  a.0          FROB", "unknown opcode 'FROB'"),
    ("  a.0          END_WORKFLOW", "before any block header"),
    ("step a\n  a.0          JUMP           -> nowhere.3", "unknown label 'nowhere.3'"),
    ("step a\n  a.0          SHELL          a Nope{}", "unknown payload 'Nope'"),
    ("step a\n  a.0          SHELL          a Shell{run=1 stdin=-}", "expected ' '"),
    ("step a\n  a.0          END            x0", "line 2: expected 'r'"),
    ("step a\n  a.0          END_WORKFLOW\n  a.0          END_WORKFLOW", "label 'a.0' twice"),
])
def test_a_text_that_is_no_listing_is_refused_with_its_line(text, message):
    with pytest.raises(AsmError, match=message):
        assemble(text)


# generated programs ---------------------------------------------------------------------------

_IDS = st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | _TEXT
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6)
_ENV = st.dictionaries(_IDS, _TEXT, max_size=2)
_MAYBE_TEXT = st.none() | _TEXT
_GIVEN = st.none() | _JSON.map(ops.Given)
_POLICY = st.builds(ops.Policy, st.sampled_from(["stop", "continue", "skip_rest"]),
                    st.none() | st.integers(0, 10**6),
                    st.none() | st.builds(ops.Retry, st.integers(1, 5),
                                          st.sampled_from(["fixed", "exponential"]),
                                          st.integers(0, 9999), st.integers(0, 99999),
                                          st.booleans()))
_SHELL = st.builds(ops.Shell, _TEXT, st.none() | _JSON, _ENV, _MAYBE_TEXT)
_APPROVERS = st.builds(ops.ApproverRules, _MAYBE_TEXT, _MAYBE_TEXT, st.none() | st.booleans())
_HALT = st.one_of(  # every gate kind, its id set by the step it is drawn for
    st.builds(ops.PipelineApprove, st.just(""), _TEXT, st.booleans(), st.integers(0, 50),
              st.booleans()),
    st.builds(ops.PipelineAsk, st.just(""), _TEXT, st.none() | _JSON, st.booleans(),
              st.booleans(), _MAYBE_TEXT),
    st.builds(ops.StepApproval, st.just(""), _TEXT, _TEXT, _GIVEN, _GIVEN, _APPROVERS),
    st.builds(ops.StepInput, st.just(""), _TEXT, _TEXT, st.none() | _JSON, _GIVEN, _GIVEN))
_STAGE = st.builds(ops.Stage, _IDS, st.dictionaries(_IDS, _JSON, max_size=2),
                   st.lists(_TEXT, max_size=2), st.booleans())
_EXEC = st.builds(ops.Exec, st.booleans(), _MAYBE_TEXT,
                  st.none() | st.lists(_TEXT, max_size=2).map(tuple),
                  st.sampled_from([None, "raw", "json", "jsonl"]), st.booleans())


@st.composite
def programs(draw):
    """A workflow-shaped program: a prologue, steps of shell runs under policies, gates,
    conditions and pipelines, and an end; locations in the main source or another file."""
    constants: list = []
    halts: list = []

    def const(value) -> int:
        constants.append(value)
        return len(constants) - 1

    code: list[tuple] = []  # (op, a, b, c), with targets as ("end", step) or ("pc", n)
    steps: list[StepInfo] = []
    if draw(st.booleans()):
        code.append((Op.INIT_ARGS, const(draw(st.dictionaries(_IDS, _JSON, max_size=2))), 0, 0))
    for step_id in draw(st.lists(_IDS, min_size=1, max_size=4, unique=True)):
        first = len(code)
        s = const(step_id)
        for shape in draw(st.lists(st.sampled_from(["shell", "gate", "cond", "pipe"]),
                                   min_size=1, max_size=3)):
            if shape == "shell":
                at = len(code)
                code += [(Op.TRY, s, const(draw(_POLICY)), ("pc", at + 2)),
                         (Op.SHELL, s, const(draw(_SHELL)), 0),
                         (Op.END_TRY, s, ("end", step_id), 0)]
            elif shape == "gate":
                halts.append(attrs.evolve(draw(_HALT), id=step_id))
                op = Op.HALT_APPROVE if halts[-1].kind == "approval" else Op.HALT_INPUT
                code += [(Op.SET_RESULT, s, const(ops.StepValue(draw(st.none() | _JSON),
                                                                 draw(st.booleans()))), 0),
                         (op, 0, len(halts) - 1, 0)]
            elif shape == "cond":
                code += [(Op.EVAL_COND, 1, const(draw(_JSON)), 0),
                         (Op.JUMP_IF_NOT, 1, ("end", step_id), 0),
                         (Op.SKIP_STEP, s, 0, 0)]
            else:
                code += [(Op.LOAD_STDIN, 0, const(ops.LoadStdin(draw(st.none() | _JSON),
                                                                draw(_ENV))), 0),
                         (Op.EXEC, 0, const(draw(_EXEC)), 0),
                         (Op.STAGE, 0, const(draw(_STAGE)), 0),
                         (Op.RENDER, 0, const(draw(st.sampled_from(["json", "table"]))), 0),
                         (Op.STORE_PIPELINE, s, 0, 0)]
        steps.append(StepInfo(step_id, first, len(code) - 1))
    code.append((Op.END_WORKFLOW, 0, 0, 0))
    ends = {step.id: step.last_pc + 1 for step in steps}

    def resolve(v):
        return v if isinstance(v, int) else ends[v[1]] if v[0] == "end" else v[1]

    files = draw(st.lists(_IDS.map(lambda n: f"lib/{n}.lobster"), max_size=2, unique=True))
    files = ("main.lobster", *files)
    lines = draw(st.lists(_TEXT.filter(lambda t: t.splitlines() in ([], [t])), min_size=1,
                          max_size=4))
    locs = []
    for _ in code:
        where = draw(st.integers(0, len(files) - 1))
        line = draw(st.integers(1, len(lines)))
        col = draw(st.integers(1, 4))
        locs.append(draw(st.sampled_from([None, (where, line, col, line, col + 3),
                                          (0, line, col, line + 1, 1)])))
    header = Header(MAGIC, 3, 2, "asm", "main.lobster", draw(st.from_regex(r"[0-9a-f]{0,8}",
                                                                            fullmatch=True)),
                    draw(st.from_regex(r"[0-9a-f]{0,8}", fullmatch=True)))
    program = Program(header, constants,
                      [Instr(op, resolve(a), resolve(b), resolve(c)) for op, a, b, c in code],
                      steps, halts, locs, registers=2, files=files if len(files) > 1 else (),
                      checkpoint_ttl_ms=draw(st.none() | st.integers(0, 10**9)))
    return program, "\n".join(lines) + "\n"


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_a_generated_listing_assembles_back_to_its_own_text(generated):
    program, source = generated
    bare = disassemble(program)
    assert disassemble(assemble(bare)) == bare
    annotated = disassemble(program, source)
    assert disassemble(*assemble_listing(annotated)) == annotated
    verify(assemble(annotated))
