"""The fields of a workflow file: one table, the single owner of what each object takes.

Each object of the format (the file, an arg, a step, its approval, input, retry and parallel
objects, a parallel branch, a loop sub-step) is a Shape: its fields in the order they are listed
to users, each with its JSON Schema fragment (type and description), its default and how it
lowers. The JSON Schema (lobsterc/workflow.schema.json, `lobsterc schema`) is generated from this
table (`workflow_schema`; tests/compiler/test_schema_check.py fails when the file drifts), key
checking (lobsterc.check.keys) reads the names, the editor support its descriptions.

A new step field is one entry in STEP_FIELDS (and what it means in lobsterc.load.build and the
code generator); nothing else restates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import field, frozen

from lobsterc.syntax.ast import ABSENT


@frozen
class Field:
    """One key of an object of the format."""

    name: str
    schema: Mapping[str, Any]  # its JSON Schema fragment (a `$ref` to a Shape for objects)
    default: Any = ABSENT  # what the run uses without it (ABSENT: nothing)
    lowers: str = ""  # what it becomes: the AST attribute or the instruction that reads it
    where: frozenset[str] = field(default=frozenset({"step"}), converter=frozenset)
    # other descriptions by shape, where the same key means something narrower (a branch's id)
    docs: Mapping[str, str] = field(factory=dict)


@frozen
class Shape:
    """An object of the format: its fields in order, and its JSON Schema."""

    name: str  # its $defs name ("" for the file itself)
    fields: tuple[Field, ...]
    title: str = ""
    description: str = ""
    required: tuple[str, ...] = ()
    alternatives: tuple[Mapping[str, Any], ...] = ()  # other values than an object (oneOf)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


def _ref(name: str, description: str = "") -> dict:
    node = {"$ref": f"#/$defs/{name}"}
    return {**node, "description": description} if description else node


_SHELL_LINE = ("A shell line run with /bin/sh -c; ${arg} and $step.path are substituted as raw "
               "text (prefer $LOBSTER_ARG_<NAME>).")
_PIPELINE = "A Lobster pipeline (stage | stage ...) run with native commands."
_STDIN = ("A step reference ($step.stdout, $step.json, $step.json.a.b), a template string, or "
          "any literal value.")
_CONDITION = ("Run the step only when true: a boolean, or an expression over $step references "
              "with ( ) ! && || == != < <= > >=. A false condition records the step as skipped.")
_TIMEOUT = {"description": "Per-attempt timeout in milliseconds, an integer from 1 to 2147483647.",
            "type": "integer", "minimum": 1, "maximum": 2147483647}
_IDENTITY = "An approver identity (a user name)."
_ALL = ("step", "loop", "branch")


# ---------------------------------------------------------------------------------------------
# the file

WORKFLOW = Shape("", (
    Field("name", {"title": "Name", "description": "Informational name of the workflow.",
                   "type": ["string", "null"]}, lowers="Workflow.name"),
    Field("description", {"title": "Description",
                          "description": "Informational description of the workflow.",
                          "type": ["string", "null"]}, lowers="Workflow.description"),
    Field("args", {"title": "Arguments",
                   "description": "Declared arguments: name -> {default?, description?}. Only "
                   "`default` is used; callers may pass undeclared arguments too. Use as ${name} "
                   "in templates or $LOBSTER_ARG_<NAME> in shell lines.",
                   "type": "object", "additionalProperties": _ref("arg")},
          default={}, lowers="INIT_ARGS (the defaults)"),
    Field("env", _ref("env", "Environment variables for every step (values are templated). "
                             "Step env overrides this."), default={}, lowers="Shell/Given env"),
    Field("cwd", {"title": "Working directory",
                  "description": "Default working directory of every step, relative to the "
                  "caller's directory; only ${arg} is substituted.", "type": "string"},
          lowers="Shell/Given cwd"),
    Field("steps", {"title": "Steps", "description": "The steps, run in file order. Required "
                    "and non-empty.", "type": "array", "minItems": 1, "items": _ref("step")},
          lowers="one block per step"),
    Field("cost_limit", _ref("costLimit"), lowers="COST_LIMIT"),
    Field("checkpoint_ttl", {
        "title": "Checkpoint TTL",
        "description": "How long a checkpoint of this workflow stays resumable: a duration (30m, "
        "12h, 7d, 1w, 1h30m; units ms, s, m, h, d, w) or a positive integer of milliseconds. A "
        "request's own TTL (checkpointTtl, lobster run --checkpoint-ttl) comes first; this comes "
        "before LOBSTER_CHECKPOINT_TTL. Resuming an expired checkpoint is refused (T433).",
        "type": ["string", "integer"]}, lowers="Program.checkpoint_ttl_ms"),
), title="Lobster workflow file",
    description="A Lobster workflow (.lobster, .yaml, .yml or .json): steps run in file order; "
    "data flows only through $step references. Unknown keys are errors, except keys starting "
    "with x- (free for tools).", required=("steps",))

COST_LIMIT = Shape("costLimit", (
    Field("max_usd", {"description": "Limit in US dollars, a non-negative number."},
          lowers="COST_LIMIT"),
    Field("action", {"description": "What happens when the limit is exceeded: `warn` (default) "
                     "prints a warning, `stop` fails the run.", "enum": ["warn", "stop"]},
          default="warn", lowers="COST_LIMIT"),
), title="Cost limit", description="LLM spend limit checked after every step.",
    required=("max_usd",))

ARG = Shape("arg", (
    Field("default", {"description": "Value used when the caller does not pass this argument."},
          lowers="INIT_ARGS"),
    Field("description", {"description": "Informational.", "type": "string"}),
), title="Argument")


# ---------------------------------------------------------------------------------------------
# a step, a loop sub-step, a parallel branch

STEP_FIELDS: tuple[Field, ...] = (
    Field("id", {"description": "Step id, unique across steps and parallel branches; referenced "
                 "as $id.stdout, $id.json, $id.response... (every field: docs/workflows.md, Step results)", "type": "string", "minLength": 1},
          lowers="Step.id (the step table)", where=_ALL,
          docs={"branch": "Branch id, unique across all steps and branches; its result is "
                          "stored under it.",
                "loop": "Sub-step id, unique within the loop; must differ from item_var and "
                        "index_var."}),
    Field("run", {"description": _SHELL_LINE, "type": "string"}, lowers="Shell (SHELL)",
          where=_ALL),
    Field("command", {"description": "Alias of run (run wins when both are set).",
                      "type": "string"}, lowers="Shell (SHELL)", where=_ALL,
          docs={"branch": "Alias of run.", "loop": "Alias of run."}),
    Field("pipeline", {"description": _PIPELINE, "type": "string"},
          lowers="PipelineStep (the stages inline)", where=_ALL),
    Field("workflow", {"description": "Path of a sub-workflow file, relative to this file's "
                       "directory.", "type": "string"}, lowers="SubWorkflow (CALL)"),
    Field("workflow_args", {"description": "Arguments for the sub-workflow; string values are "
                            "templated.", "type": "object"}, default={}, lowers="CALL"),
    Field("parallel", _ref("parallel"), lowers="Parallel (PARALLEL)"),
    Field("for_each", {"description": "A step reference expression that resolves to an array, "
                       "e.g. $list.json.", "type": "string"}, lowers="ForEach (LOOP_BEGIN)"),
    Field("steps", {"description": "The loop body of a for_each step.", "type": "array",
                    "items": _ref("loopStep")}, lowers="ForEach.steps"),
    Field("item_var", {"description": "Name under which the current item is visible (default "
                       "item): $item.json.", "type": "string"}, default="item",
          lowers="LOOP_BEGIN"),
    Field("index_var", {"description": "Name under which the current index is visible (default "
                        "index): $index.json.", "type": "string"}, default="index",
          lowers="LOOP_BEGIN"),
    Field("batch_size", {"description": "With pause_ms: pause before every batch_size-th item.",
                         "type": "integer", "minimum": 1}, default=1, lowers="LOOP_BEGIN"),
    Field("pause_ms", {"description": "Pause in milliseconds between batches.",
                       "type": "number", "minimum": 0}, default=0, lowers="LOOP_BEGIN"),
    Field("approval", _ref("approval"), lowers="Approval (HALT_APPROVE)"),
    Field("input", _ref("input"), lowers="InputGate (HALT_INPUT)"),
    Field("stdin", {"title": "Standard input", "description": _STDIN},
          lowers="LOAD_STDIN", where=_ALL),
    Field("env", _ref("env", "Per-step environment; overrides the workflow env."), default={},
          lowers="Shell/Given env", where=_ALL,
          docs={"branch": "Overrides the step's env for this branch.", "loop": ""}),
    Field("cwd", {"description": "Working directory of the step; only ${arg} is substituted.",
                  "type": "string"}, lowers="Shell/Given cwd", where=_ALL,
          docs={"branch": "Working directory of this branch.",
                "loop": "Working directory of the sub-step."}),
    Field("when", {"title": "Condition", "description": _CONDITION},
          lowers="When (EVAL_COND + JUMP_IF_NOT)", where=("step", "loop")),
    Field("condition", {"title": "Condition", "description": "Alias of when (when wins if both "
                        "are set)."}, lowers="When", where=("step", "loop")),
    Field("timeout_ms", _TIMEOUT, lowers="Policy (TRY)"),
    Field("retry", _ref("retry"), lowers="Policy.retry (TRY)"),
    Field("on_error", {"description": "`stop` (default) fails the run; `continue` records the "
                       "error and goes on; `skip_rest` records it and ends the run "
                       "successfully.", "enum": ["stop", "continue", "skip_rest"]},
          default="stop", lowers="Policy (TRY)"),
    Field("effects", {"description": "What the step does outside the run, for lint's approval "
                      "check: `write`, `read` or `none` (lint warns about any other value)."},
          lowers="Step.effects (lint only)"),
)


def _shape_of(name: str, where: str, order: tuple[str, ...] = (), **kwargs: Any) -> Shape:
    """The step fields that `where` (step, loop, branch) types, with its descriptions; `order`:
    the names in the order users read them, when it is not the table's."""
    fields = []
    chosen = [f for f in STEP_FIELDS if where in f.where]
    if order:
        chosen.sort(key=lambda f: order.index(f.name))
    for f in chosen:
        doc = f.docs.get(where)
        if doc is not None:
            schema = {k: v for k, v in f.schema.items() if k != "description"}
            f = Field(f.name, {"description": doc, **schema} if doc else schema, f.default,
                      f.lowers, f.where, f.docs)
        fields.append(f)
    return Shape(name, tuple(fields), required=("id",), **kwargs)


STEP = _shape_of("step", "step", title="Step", description="One step. Exactly one execution "
                 "kind (run/command, pipeline, workflow, parallel, for_each), or none with "
                 "approval or input.")
# A loop sub-step's keys are a step's (gates may stand inside a loop here); the schema types
# the ones a loop body is meant to use.
LOOP_STEP = _shape_of("loopStep", "loop", title="Loop sub-step",
                      description="A step inside for_each: a run, command or pipeline "
                      "step, or an approval or input gate, which halts once for each item "
                      "(examples/deploy-hosts.lobster).")
BRANCH = _shape_of("branch", "branch", title="Parallel branch",
                   order=("id", "run", "command", "pipeline", "env", "cwd", "stdin"))

PARALLEL = Shape("parallel", (
    Field("wait", {"description": "`all` (default): every branch must succeed; `any`: the first "
                   "branch to settle wins.", "enum": ["all", "any"]}, default="all",
          lowers="PARALLEL"),
    Field("timeout_ms", {**_TIMEOUT, "description": "Timeout of the whole parallel step."},
          lowers="PARALLEL"),
    Field("branches", {"type": "array", "minItems": 1, "items": _ref("branch")},
          lowers="one region per branch (END_BRANCH)"),
), title="Parallel", required=("branches",))

_IDENTITY_FIELDS = (
    ("initiated_by", "Who initiated the run."),
    ("initiatedBy", "Alias of initiated_by."),
    ("required_approver", "Only this identity (LOBSTER_APPROVAL_APPROVED_BY) may approve."),
    ("requiredApprover", "Alias of required_approver."),
)

APPROVAL = Shape("approval", (
    Field("prompt", {"description": "The question shown to the approver.", "type": "string"},
          lowers="HALT_APPROVE"),
    Field("items", {"description": "Items shown with the request (default: the step's JSON).",
                    "type": "array"}, lowers="HALT_APPROVE"),
    Field("preview", {"description": "Preview text (default: the start of the step's output).",
                      "type": "string"}, lowers="HALT_APPROVE"),
    *(Field(name, {"description": f"{doc} {_IDENTITY}", "type": "string"}, lowers="HALT_APPROVE")
      for name, doc in _IDENTITY_FIELDS),
    Field("require_different_approver", {"description": "The approver must differ from the "
                                         "initiator.", "type": "boolean"}, default=False,
          lowers="HALT_APPROVE"),
    Field("requireDifferentApprover", {"description": "Alias of require_different_approver.",
                                       "type": "boolean"}, lowers="HALT_APPROVE"),
), title="Approval gate", description="Halt for approval after the step's execution (if any): "
    "true, a prompt string (`required` = default prompt), or an object.",
    alternatives=({"type": "null"}, {"type": "boolean"}, {"type": "string"}))

INPUT = Shape("input", (
    Field("prompt", {"description": "The question.", "type": "string"}, lowers="HALT_INPUT"),
    Field("responseSchema", {"description": "A JSON Schema the answer must satisfy, read as "
                             "draft-07 (as the original's Ajv reads it: 2020-12's `prefixItems` "
                             "constrains nothing).", "type": "object"}, lowers="HALT_INPUT"),
    Field("defaults", {"description": "Suggested answer shown with the request."},
          lowers="HALT_INPUT"),
), title="Input request", description="Halt for a structured answer validated by responseSchema. "
    "An input step has no run, command, pipeline, workflow, parallel or for_each.",
    required=("prompt", "responseSchema"))

RETRY = Shape("retry", (
    Field("max", {"description": "Total attempts (default 1).", "type": "integer", "minimum": 1},
          default=1, lowers="TRY"),
    Field("backoff", {"description": "Delay growth between attempts (default fixed).",
                      "enum": ["fixed", "exponential"]}, default="fixed", lowers="TRY"),
    Field("delay_ms", {"description": "Base delay in milliseconds (default 1000).",
                       "type": "number", "minimum": 0}, default=1000, lowers="TRY"),
    Field("max_delay_ms", {"description": "Upper bound of an exponential delay (default 30000).",
                           "type": "number", "minimum": 0}, default=30000, lowers="TRY"),
    Field("jitter", {"description": "Randomise each delay by +-10% (default false).",
                     "type": "boolean"}, default=False, lowers="TRY"),
), title="Retry")

ENV = Shape("env", (), title="Environment")
_ENV_VALUES = {"description": "A string value; ${arg} and $step.path are substituted.",
               "type": "string"}

SHAPES: tuple[Shape, ...] = (WORKFLOW, COST_LIMIT, ARG, ENV, STEP, LOOP_STEP, BRANCH, PARALLEL,
                             APPROVAL, INPUT, RETRY)


def default(shape: Shape, name: str) -> Any:
    """The default of a field (ABSENT when it has none)."""
    found = shape.field(name)
    return ABSENT if found is None else found.default


# ---------------------------------------------------------------------------------------------
# the JSON Schema

def shape_schema(shape: Shape) -> dict:
    node: dict[str, Any] = {}
    if shape.title:
        node["title"] = shape.title
    if shape.description:
        node["description"] = shape.description
    body: dict[str, Any] = {"type": "object"}
    if shape.required:
        body["required"] = list(shape.required)
    if shape is ENV:
        body["additionalProperties"] = dict(_ENV_VALUES)
    else:
        body["properties"] = {f.name: dict(f.schema) for f in shape.fields}
    if shape.alternatives:
        node["oneOf"] = [dict(alt) for alt in shape.alternatives] + [body]
    else:
        node.update(body)
    return node


def workflow_schema() -> dict:
    """The workflow file format as a JSON Schema (draft 2020-12), made from the table."""
    top = shape_schema(WORKFLOW)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:lobster:workflow-file:1", **top,
            "$defs": {shape.name: shape_schema(shape) for shape in SHAPES if shape.name}}
