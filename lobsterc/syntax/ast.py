"""Syntax trees: pipelines, and workflow files (Workflow, Step and its kinds, gates, policies);
frozen attrs nodes, each with the Span it came from (workflow nodes: worked out when asked for)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from operator import itemgetter
from typing import Any, Union

from attrs import field, frozen

from lobsterc.diagnostics import Diagnostic
from lobsterc.syntax.source import Source, Span
from vm.core.js import UNDEFINED


@frozen
class Word:
    """One token of a stage after quote removal. `quoted` is true if any part was quoted."""

    text: str
    quoted: bool
    span: Span


@frozen
class Stage:
    """`name word*` between two pipes."""

    name: Word
    words: tuple[Word, ...]
    span: Span


@frozen
class Pipeline:
    stages: tuple[Stage, ...]
    span: Span


# ---------------------------------------------------------------------------------------------
# workflow files: built once from a positioned document by lobsterc.load.build, walked by
# lobsterc.check.checker (every diagnostic), lint (W-rules), plan (--dry-run) and graph.


# A key the file does not have: JavaScript `undefined`, the one sentinel of the code base for a
# value that is not there (vm.core.js.UNDEFINED; falsy, and distinct from None, which is `null`).
ABSENT: Any = UNDEFINED
Absent = type(UNDEFINED)  # the type of ABSENT, for the fields that may be left out
Number = Union[int, float]  # a JSON number (1 and 1.0 alike)


class Loc(tuple):
    """Where a node sits: its document and the path to it. Spans are worked out when asked
    for, as a file that compiles asks for a handful of them. A pair (a file builds dozens of
    these, and a tuple is made at a fraction of the cost of a frozen attrs class)."""

    __slots__ = ()

    def __new__(cls, doc: Any, at: tuple) -> Loc:  # doc: lobsterc.load.Document
        return tuple.__new__(cls, (doc, at))

    doc = property(itemgetter(0))
    at = property(itemgetter(1))

    def __repr__(self) -> str:
        return f"Loc({self.at!r})"

    @property
    def file(self) -> str:
        return self.doc.path

    def span(self, *keys: Any) -> Span:
        """The span of the value at `keys` below this node (of the node itself without keys)."""
        return self.doc.span_of(*self.at, *keys)

    def key_span(self, *keys: Any) -> Span:
        """The span of the mapping key that names `keys` below this node."""
        return self.doc.key_span_of(*self.at, *keys)


@frozen
class When:
    """A `when` or `condition` value. `tree` is the compiled condition (lobsterc.syntax.expr), None
    when it does not compile; `problems` then say why (E212, placed in the file)."""

    key: str  # "when" | "condition"
    value: Any  # as written: a boolean, a string, null...
    tree: list | None  # ["cmp", op, left, right], ... (lobsterc.syntax.expr.compile_condition)
    loc: Loc  # at the value
    problems: tuple[Diagnostic, ...] = ()

    @property
    def span(self) -> Span:
        return self.loc.span()


@frozen
class PipelineText:
    """A pipeline written in a workflow file; `parsed` is None when it does not parse, and
    `syntax` then holds the parser's diagnostics. A parsed pipeline's stages are checked once, as
    it is built: `bound` holds the stages that bind to their commands
    (lobsterc.check.stages.BoundStage), `problems` the diagnostics of those that do not. The
    spans of `syntax` and `problems` are relative to `text`."""

    text: str
    parsed: Pipeline | None
    loc: Loc  # at the string value
    bound: tuple[Any, ...] = ()  # lobsterc.check.stages.BoundStage (a layer above this one)
    problems: tuple[Diagnostic, ...] = ()
    syntax: tuple[Diagnostic, ...] = ()

    @property
    def span(self) -> Span:
        return self.loc.span()


@frozen
class Shell:
    line: str
    key: str  # "run" | "command"
    tag = "shell"


@frozen
class PipelineStep:
    pipeline: PipelineText
    tag = "pipeline"


@frozen
class SubWorkflow:
    """A `workflow:` call. `path` is the file it names (real path), None when the value is not
    literal; `Workflow.callee` gives the loaded file."""

    target: str
    args: Mapping[str, Any]  # workflow_args (an empty dict without them)
    path: str | None
    loc: Loc  # at the `workflow` value
    tag = "workflow"


@frozen
class Branch:
    id: str
    shell: Shell | None
    pipeline: PipelineText | None
    stdin: Any
    env: Mapping[str, str]
    cwd: str | None
    loc: Loc


@frozen
class Parallel:
    wait: str
    timeout_ms: Number | Absent
    branches: tuple[Branch, ...]
    loc: Loc  # at the `parallel` value
    tag = "parallel"


@frozen
class ForEach:
    source: str
    item_var: str
    index_var: str
    batch_size: Number  # as written, ABSENT when not given (the plan shows what was given)
    pause_ms: Number  # as written, ABSENT when not given
    steps: tuple[Step, ...]
    loc: Loc  # at the `for_each` value
    tag = "for_each"


@frozen
class InputGate:
    prompt: str
    schema: dict | None  # responseSchema; None without one
    defaults: Any  # any JSON value; ABSENT without them
    loc: Loc  # at the `input` value
    tag = "input"


@frozen
class NoOp:
    """A step that executes nothing: an approval gate alone (`approval`) or nothing at all."""

    tag: str  # "approval" | "noop"


@frozen
class Approval:
    """A step's own approval gate, asked after the step has run."""

    written: str | None  # the prompt as the file gives it, None when it gives none
    prompt: str  # the text shown: `written` (even empty), or a default when that is None
    config: Mapping[str, Any]  # items, preview and the identity rules (camelCase keys)
    loc: Loc  # at the `approval` value


@frozen
class Retry:
    """A step's retry, its defaults filled in from the field table (lobsterc.load.fields)."""

    max: Number
    backoff: str
    delay_ms: Number
    max_delay_ms: Number
    jitter: bool


@frozen
class Policy:
    """timeout_ms, retry and on_error of a step, as written (ABSENT where not)."""

    timeout_ms: Number | Absent
    on_error: str | Absent
    retry: Retry | None


StepKind = Union[Shell, PipelineStep, SubWorkflow, Parallel, ForEach, InputGate, NoOp]


@frozen
class Step:
    id: str
    kind: StepKind
    stdin: Any  # any JSON value; ABSENT without one
    when: When | None
    approval: Approval | None
    policy: Policy | None  # None when the step sets none of timeout_ms, retry, on_error
    env: Mapping[str, str]
    cwd: str | None
    effects: Any  # as written (lint warns about other values than write, read, none); ABSENT
    loc: Loc  # at the step

    @property
    def span(self) -> Span:
        """The step's `id` value: where messages about the step point."""
        return self.loc.span("id")


@frozen
class Workflow:
    """One workflow file. Sub-workflow files are loaded once into `library` (shared by every
    file of one load), keyed by real path."""

    path: str
    name: str | None | Absent
    description: str | None | Absent
    args: Mapping[str, Any]  # as written (an empty dict without args)
    defaults: Mapping[str, Any]  # arg name -> default, for the args that have one
    env: Mapping[str, str]
    cwd: str | None
    steps: tuple[Step, ...]
    cost_limit: Mapping[str, Any] | None
    loc: Loc
    library: Any = field(eq=False, repr=False)  # lobsterc.load.build.Library
    checkpoint_ttl_ms: int | None = None  # `checkpoint_ttl` (a duration or ms); None: not set

    @property
    def source(self) -> Source:
        return self.loc.doc.source

    def texts(self) -> Iterator[str]:
        """Every string of the file outside `args`, in order (what may use an arg)."""
        stack = [value for key, value in reversed(self.loc.doc.data.items()) if key != "args"]
        while stack:
            value = stack.pop()
            if isinstance(value, str):
                yield value
            elif isinstance(value, dict):
                stack.extend(reversed(value.values()))
            elif isinstance(value, list):
                stack.extend(reversed(value))

    def callee(self, call: SubWorkflow) -> Any:
        """The Loaded file a `workflow:` step calls, None when there is none to load."""
        return self.library.get(call.path) if call.path else None
