"""Operand payloads: the typed constant-pool records that instructions name by index.

The codec writes each one as a map tagged with its class name under `$type`; plain JSON
constants (conditions, arg defaults, renderer names, a cost limit, a stdin reference) stay
plain. Class and field names are wire format. The records only workflows use are built on
their first use (`WORKFLOW_RECORDS`, below).
"""

from typing import Any, ClassVar

from attrs import field

from vm.core.records import built_on_first_use, frozen


def _as_tuple(value: Any) -> tuple:
    return tuple(value)


@frozen
class Stage:
    """A stdlib command with its parsed flags and positionals; `templated` words are rendered
    against args and step results when the stage runs."""

    command: str
    flags: dict[str, Any]
    positionals: tuple[str, ...] = field(converter=_as_tuple)
    templated: bool = False


@frozen
class Exec:
    """A child process: a shell line or an argv; `json` parses its stdout as JSON lines."""

    json: bool = False
    shell: str | None = None
    argv: tuple[str, ...] | None = None
    stdin: str | None = None  # raw | json | jsonl
    templated: bool = False

    def spec(self) -> dict[str, Any]:
        """The shape the exec command takes."""
        out: dict[str, Any] = {"json": self.json}
        if self.shell is not None:
            out["shell"] = self.shell
        else:
            out["argv"] = list(self.argv or ())
        if self.stdin is not None:
            out["stdin"] = self.stdin
        return out


class HaltSite:
    """What a HALT_* instruction needs to build its request, known at compile time: one of
    the four gate kinds below. `id` is the gate's label in the program (a pipeline stage
    `N:command`, a workflow stage `STEP:N`, a workflow step's label); nothing is parsed out of
    it. `kind` is the request the gate makes: "approval" or "input"."""

    __slots__ = ()
    kind: ClassVar[str]


@frozen
class PipelineApprove(HaltSite):
    """An `approve` stage: asks to let the items that reached it through (HALT_APPROVE)."""

    kind: ClassVar[str] = "approval"
    id: str
    prompt: str
    preview: bool = False  # attach a preview of the first `limit` items
    limit: int = 5
    emit: bool = False  # halt even where an interactive prompt would be possible


@frozen
class PipelineAsk(HaltSite):
    """An `ask` stage: asks for an answer that replaces the items (HALT_INPUT)."""

    kind: ClassVar[str] = "input"
    id: str
    prompt: str
    schema: Any = None  # the JSON Schema of the answer
    subject: bool = False  # attach the items as the subject
    emit: bool = False
    step: str | None = None  # the workflow `pipeline:` step it is a stage of; None: a pipeline


# the four gate kinds, by name (the codec's `$type`); `HALT_SITES` holds the classes themselves
# (the two of workflow steps are built on first use, below)
HALT_SITE_NAMES = ("PipelineApprove", "PipelineAsk", "StepApproval", "StepInput")


# Every payload class, by name (the codec's `$type`), in this order: `PAYLOADS` holds the
# classes themselves.
PAYLOAD_NAMES = ("Stage", "Exec", "Shell", "LoadStdin", "Loop", "Call", "Policy", "Parallel",
                 "StepValue")
# The records only a workflow's steps use (a pipeline's program holds none of them): built on
# their first use, not at import, since attrs builds each class as it is defined (about 0.3 ms
# a class, some 4 ms of every cold `lobster` process for these thirteen). Reading one of them
# (`ops.Loop`, `from vm.isa.ops import Loop`) builds them all, once.
WORKFLOW_RECORDS = ("Shell", "LoadStdin", "Loop", "Call", "Retry", "Policy", "Branch",
                    "Parallel", "StepValue", "Given", "ApproverRules", "StepApproval", "StepInput")


def _workflow_records() -> tuple[type, ...]:
    @frozen
    class Shell:
        """A workflow shell step: its (templated) line, stdin reference, env and cwd."""

        run: str
        stdin: Any = None
        env: dict[str, str] = field(factory=dict)
        cwd: str | None = None

    @frozen
    class LoadStdin:
        """The start of a workflow pipeline step: its stdin reference, env and cwd."""

        stdin: Any = None
        env: dict[str, str] = field(factory=dict)
        cwd: str | None = None

    @frozen
    class Loop:
        """A for_each: the list it walks, the names an iteration binds, its own sub-steps."""

        source: Any
        item_var: str = "item"
        index_var: str = "index"
        batch_size: int = 1
        pause_ms: int = 0
        steps: tuple[str, ...] = field(default=(), converter=_as_tuple)

    @frozen
    class Call:
        """A sub-workflow call: its args (templated), the callee's defaults, env and cwd."""

        args: dict[str, Any] = field(factory=dict)
        defaults: dict[str, Any] = field(factory=dict)
        env: dict[str, str] = field(factory=dict)
        cwd: str | None = None

    @frozen
    class Retry:
        max: int = 1
        backoff: str = "fixed"  # fixed | exponential
        delay_ms: int = 1000
        max_delay_ms: int = 30000
        jitter: bool = False

    @frozen
    class Policy:
        """What TRY does when its block fails or runs too long."""

        on_error: str = "stop"  # stop | continue | skip_rest
        timeout_ms: int | None = None
        retry: Retry | None = None

    @frozen
    class Branch:
        """One parallel branch: the code region at `start` that runs it (a SHELL, or a pipeline
        from LOAD_STDIN to STORE_PIPELINE) and ends with END_BRANCH."""

        id: str
        start: int = -1

    @frozen
    class Parallel:
        wait: str = "all"  # all | any
        timeout_ms: int | None = None
        branches: tuple[Branch, ...] = field(default=(), converter=_as_tuple)

    @frozen
    class StepValue:
        """SET_RESULT: a step that runs nothing; its result is the value of the stdin reference
        `stdin` (None: not given). `gated`: an approval follows and finishes the step."""

        stdin: Any = None
        gated: bool = False

    @frozen
    class Given:
        """A value that was written in the source (None stands for "not given")."""

        value: Any

    @frozen
    class ApproverRules:
        """Who may decide a workflow approval. In a StepApproval a None rule is read from the
        environment when the gate halts; in a StepApprovalWait the rules are resolved (None: no
        such rule)."""

        initiated_by: str | None = None
        required_approver: str | None = None
        require_different_approver: bool | None = None

    @frozen
    class StepApproval(HaltSite):
        """A workflow step's `approval:`, after the step ran (HALT_APPROVE)."""

        kind: ClassVar[str] = "approval"
        id: str
        prompt: str
        step: str  # the step whose result the gate shows and records the decision in
        items: Given | None = None  # the items to show, instead of the result's
        preview: Given | None = None  # the preview to show
        approvers: ApproverRules = ApproverRules()

    @frozen
    class StepInput(HaltSite):
        """A workflow input step (HALT_INPUT): its answer becomes the step's result."""

        kind: ClassVar[str] = "input"
        id: str
        prompt: str
        step: str
        schema: Any = None  # the JSON Schema of the answer
        defaults: Given | None = None  # defaults of the answer
        stdin: Given | None = None  # the subject's reference; None: the previous step's value

    return (Shell, LoadStdin, Loop, Call, Retry, Policy, Branch, Parallel, StepValue, Given,
            ApproverRules, StepApproval, StepInput)


def _tables() -> None:
    namespace = globals()
    namespace["PAYLOADS"] = tuple(namespace[n] for n in PAYLOAD_NAMES)
    namespace["HALT_SITES"] = tuple(namespace[n] for n in HALT_SITE_NAMES)


# the workflow records, `PAYLOADS` and `HALT_SITES`, built on first use
__getattr__ = built_on_first_use(globals(), (*WORKFLOW_RECORDS, "PAYLOADS", "HALT_SITES"),
                                 _workflow_records, _tables)
