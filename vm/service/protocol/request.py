"""Tool requests: the fields each action takes (`REQUEST_FIELDS`, which `lobster mcp`
publishes as schemas), and `handle`, which reads a request by them and runs or resumes it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from attrs import evolve

from vm.core import bounds, json_read
from vm.core.source import file_name, located
from vm.host.children import Scope
from vm.host.workdir import WorkdirRefused, contained_cwd
from vm.isa.program import Program
from vm.service.protocol.envelope import (RequestError, as_json_data, check_unicode,
                                          internal_error, too_deep, unknown_field)
from vm.service.protocol.options import (DEFAULT_MAX_STDOUT_BYTES, DEFAULT_TIMEOUT_MS, Options,
                                         Settings)
from vm.service.protocol.resuming import Decision, resume_settled
from vm.service.protocol.running import compile_source, is_workflow_path, run_settled

if TYPE_CHECKING:
    from vm.service.messages import Envelope, Request

MAX_REQUEST_BYTES = 4 * 1024 * 1024  # one tool request's JSON text (E006)

_BOUNDS = {  # their limits: vm/core/bounds.py
    "timeoutMs": ({"type": "number", **bounds.schema(bounds.TIMEOUT_MS, text=False)},
                  f"wall-clock limit of this call in ms (default {DEFAULT_TIMEOUT_MS}; "
                  "less counts as 200)"),
    "maxStdoutBytes": ({"type": "number", **bounds.schema(bounds.MAX_STDOUT_BYTES, text=False)},
                       f"cap on the envelope and on each child's output in bytes (default "
                       f"{DEFAULT_MAX_STDOUT_BYTES}; less counts as 1024)"),
    "checkpointTtl": ({"type": ["string", "integer"], **bounds.schema(bounds.CHECKPOINT_TTL)},
                      "how long a checkpoint this call parks stays resumable: a duration (30m, "
                      "12h, 7d) or ms; before the workflow's checkpoint_ttl and "
                      "LOBSTER_CHECKPOINT_TTL"),
}
# A tool request's fields per action: name -> (JSON Schema of the value, what it is). `handle`
# reads these and no others (a test holds it to that); `lobster mcp` publishes them as schemas.
REQUEST_FIELDS: dict[str, dict[str, tuple[dict[str, Any], str]]] = {
    "run": {
        "pipeline": ({"type": "string", "minLength": 1},
                     "inline pipeline text, or a workflow file path (.lobster/.yaml/.yml/.json)"),
        "argsJson": ({"type": "string"}, "a JSON object of args for a workflow file, as text"),
        "cwd": ({"type": "string"}, "working directory, relative to the server's and inside it"),
        **_BOUNDS},
    "resume": {
        "token": ({"type": "string", "minLength": 1}, "the resumeToken of a halted run"),
        "approvalId": ({"type": "string", "minLength": 1}, "the approvalId, instead of a token"),
        "approve": ({"type": "boolean"}, "the decision on an approval request"),
        "responseJson": ({"type": "string"}, "the answer to an input request, as JSON text"),
        "cancel": ({"const": True}, "true: cancel the halted run"),
        **_BOUNDS},
}
REQUIRED_FIELDS = {"run": ("pipeline",), "resume": ()}  # resume: token or approvalId, and
# exactly one of approve, responseJson, cancel (checked by `handle`)


def handle(request: Request | Mapping[str, Any], options: Options | None = None, *,
           scope: Scope | None = None) -> Envelope:
    """One tool call: a `vm.service.messages.Request` (`{"action": "run" | "resume", ...}`, a plain
    dict) -> its `vm.service.messages.Envelope`. The run's children live in `scope` (a fresh one
    unless given), so the caller can cancel this run alone. Never raises: whatever goes wrong
    becomes an error envelope (a bad request its own code, a bug T498), and nothing is
    consumed by a refusal. The envelope is JSON data (`as_json_data`): for an embedder, and
    for `lobster mcp`'s structured content."""
    return cast("Envelope", as_json_data(_handle(request, options, scope)))


def handle_js(request: Request | Mapping[str, Any], options: Options | None = None, *,
              scope: Scope | None = None) -> dict[str, Any]:
    """`handle`, its envelope as the run made it (undefined included, as `run_js`'s): for
    `lobster tool`, which writes it with our JSON writer."""
    return _handle(request, options, scope)


def _handle(request: Any, options: Options | None, scope: Scope | None) -> dict[str, Any]:
    options = options or Options()
    scope = scope or Scope()
    try:
        if not isinstance(request, dict):
            raise RequestError("request must be a JSON object")
        action = request.get("action")
        if action not in REQUEST_FIELDS:
            raise RequestError("action must be run or resume")
        _refuse_unknown_fields(request, action)
        check_unicode(request, "the request")
        if action == "run":
            return _run_request(request, options, scope)
        return _resume_request(request, options, scope)
    except RequestError as exc:
        return cast("dict[str, Any]", exc.envelope)
    except Exception as exc:  # noqa: BLE001 - the last resort: no request ends in a traceback
        return internal_error(exc)


def _refuse_unknown_fields(request: dict[str, Any], action: str) -> None:
    """A field the action does not take is refused by name (a typo is not silently ignored)."""
    known = REQUEST_FIELDS[action]
    for name in request:
        if name == "action" or name in known:
            continue
        other = next((a for a, fields in REQUEST_FIELDS.items() if name in fields), None)
        if other is not None:
            hint = f" (it belongs to a {other} request)"
        else:
            import difflib

            close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise unknown_field(name, action, list(known), hint)


def request_cwd(cwd: Any, base: str) -> str:
    """A request's `cwd` under the one rule for a chosen working directory (vm/host/workdir.py):
    relative, inside `base`; else refused (E001)."""
    try:
        return contained_cwd(cwd, base)
    except WorkdirRefused as exc:
        raise RequestError(str(exc)) from None


def _run_request(request: dict[str, Any], options: Options, scope: Scope) -> dict[str, Any]:
    pipeline = request.get("pipeline")
    if not isinstance(pipeline, str) or not pipeline.strip():
        raise RequestError("pipeline required")
    settings = Settings.of_request(request, options)
    if request.get("cwd") is not None:
        settings = evolve(settings, cwd=request_cwd(request["cwd"], options.cwd))
    args_json = request.get("argsJson")
    if args_json is not None and not isinstance(args_json, str):
        raise RequestError("argsJson must be a string: the args object as JSON text")
    if is_workflow_path(pipeline, settings.cwd):
        return run_settled(pipeline, options, settings, scope, args_json=args_json, file=True,
                           program=_contained_workflow(pipeline.strip(), options, settings))
    return run_settled(pipeline, options, settings, scope, args_json=args_json)


def _contained_workflow(path: str, options: Options, settings: Settings) -> Program:
    """A request's workflow file and every file it calls, each held to the rule of a request
    `cwd` (vm/host/workdir.py): inside the gateway working directory, symbolic links resolved
    (an absolute path is taken when it names a file in there)."""
    def contain(name: str) -> None:
        try:
            contained_cwd(os.path.relpath(os.path.join(settings.cwd, name), options.cwd),
                          options.cwd)
        except WorkdirRefused:
            raise RequestError(f"workflow file {name!r} must stay within the gateway working "
                               "directory") from None

    contain(path)
    program = compile_source(path, options, settings.cwd, workflow=True)
    main_dir = os.path.dirname(file_name(os.path.join(settings.cwd, path)))
    for name in program.files[1:]:  # named from the main file's real directory
        contain(located(main_dir, name))
    return program


def _resume_request(request: dict[str, Any], options: Options, scope: Scope) -> dict[str, Any]:
    token = request.get("token")
    approval_id = request.get("approvalId")
    if not (isinstance(token, str) and token) and not (isinstance(approval_id, str) and approval_id):
        raise RequestError("token or approvalId required")
    given = [k for k in ("approve", "responseJson", "cancel") if request.get(k) is not None]
    if len(given) != 1:
        raise RequestError("resume requires exactly one of approve, responseJson, or cancel: true")
    if "cancel" in given and request["cancel"] is not True:
        raise RequestError("cancel must be true")
    decision: Decision
    if "approve" in given:
        if not isinstance(request["approve"], bool):
            raise RequestError("approve must be a boolean")
        decision = Decision(approve=request["approve"])
    elif "responseJson" in given:
        decision = Decision(response=parse_response_json(request["responseJson"],
                                                         "responseJson"), has_response=True)
    else:
        decision = Decision(cancel=True)
    settings = Settings.of_request(request, options)
    if isinstance(approval_id, str) and approval_id:
        return resume_settled(options, settings, scope, decision, approval_id=approval_id)
    return resume_settled(options, settings, scope, decision, token=token)


def parse_response_json(text: Any, name: str) -> Any:
    """The answer to an input request, given as JSON text (`responseJson`, `--response-json`)."""
    try:
        if not isinstance(text, str):
            raise ValueError(text)
        value = json_read.json_loads(text)
    except json_read.JSONTooDeep:
        raise too_deep(name) from None
    except ValueError as exc:
        from vm.core.detail import json_detail

        raise RequestError(f"{name} must be valid JSON", detail=json_detail(exc)) from None
    check_unicode(value, name)
    return value
