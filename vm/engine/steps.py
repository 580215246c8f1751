"""Workflow step results: how a shell run, a pipeline, a stdin value or a sub-workflow
becomes `{id, stdout, json, ...}`, and how the last completed step becomes the output."""

from __future__ import annotations

from typing import Any

from vm.core import js, json_read, json_write

APPROVAL_PREVIEW_LIMIT = 2000


def parse_json(text: str) -> Any:
    """JSON of the trimmed text (JavaScript's trim), or js.UNDEFINED when it is not JSON."""
    trimmed = js.js_trim(text)
    if not trimmed:
        return js.UNDEFINED
    try:
        return json_read.json_loads(trimmed)
    except ValueError:
        return js.UNDEFINED


def shell_result(step: str, stdout: str) -> dict:
    result: dict[str, Any] = {"id": step, "stdout": stdout}
    value = parse_json(stdout)
    if value is not js.UNDEFINED:
        result["json"] = value
    return result


def serialize_items(items: list) -> str:
    if items and all(isinstance(i, str) for i in items):
        return "\n".join(items)
    if len(items) == 1:
        return "" if items[0] is None or items[0] is js.UNDEFINED else json_write.to_text(items[0])
    return json_write.json_compact(items) if items else ""


def pipeline_result(step: str, items: list, rendered: str | None) -> dict:
    result: dict[str, Any] = {"id": step}
    result["stdout"] = rendered if rendered else serialize_items(items)
    if items:
        value = items[0] if len(items) == 1 else list(items)
        if value is not js.UNDEFINED:  # one undefined item: `json` is undefined, i.e. absent
            result["json"] = value
    elif rendered:
        value = parse_json(rendered)
        if value is not js.UNDEFINED:
            result["json"] = value
    return result


def value_result(step: str, value: Any) -> dict:
    """A synthetic result from a stdin value (approval-only and no-op steps)."""
    result: dict[str, Any] = {"id": step}
    if value is None or value is js.UNDEFINED:
        return result
    if isinstance(value, str):
        result["stdout"] = value
        parsed = parse_json(value)
        if parsed is not js.UNDEFINED:
            result["json"] = parsed
    else:
        result["stdout"] = json_write.json_compact(value)
        result["json"] = value
    return result


def output_of(result: dict | None) -> list:
    """Workflow output: the last completed step's json (arrays spread), else its response,
    else its stdout ('' gives [])."""
    if not result:
        return []
    if "json" in result:
        value = result["json"]
        return list(value) if isinstance(value, list) else [value]
    if "response" in result:
        value = result["response"]
        return list(value) if isinstance(value, list) else [value]
    stdout = result.get("stdout")
    if isinstance(stdout, str) and stdout != "":
        return [stdout]
    return []


def call_result(step: str, output: list) -> dict:
    result: dict[str, Any] = {"id": step}
    if len(output) == 1:
        value = output[0]
        result["json"] = value
        result["stdout"] = json_write.to_text(value)
    else:
        result["json"] = list(output)
        result["stdout"] = json_write.json_compact(list(output))
    return result


def stdin_bytes(value: Any) -> bytes | None:
    """What a shell step's child reads: strings as they are, other values as JSON."""
    if value is None or value is js.UNDEFINED:
        return None
    text = json_write.to_text(value)
    return text.encode("utf-8")


def stdin_items(value: Any) -> list:
    """What a pipeline step starts with: an array's elements, nothing for null, else one item."""
    if value is None or value is js.UNDEFINED:
        return []
    return list(value) if isinstance(value, list) else [value]


def _forwarded_request(source: dict) -> dict:
    """An approval request a step printed, as the original takes it: `items ?? []`, and the
    preview only when it is truthy (a field `pick` set that the item lacks is undefined)."""
    items = source.get("items")
    preview = source.get("preview")
    return {"prompt": source["prompt"],
            "items": [] if items is None or items is js.UNDEFINED else items,
            **({"preview": preview} if js.truthy(preview) else {})}


def _prompted(source: dict) -> bool:
    return js.truthy(source.get("prompt", js.UNDEFINED))


def approval_request(result: dict | None, site_prompt: str, config: dict) -> dict:
    """Prompt, items and preview of a workflow approval gate, from its step's result: a request
    the step printed counts when its prompt is truthy (as JavaScript has it: a number or an
    object counts, "" and 0 do not), and is taken as printed, whatever its values' types."""
    result = result or {}
    value = result.get("json", js.UNDEFINED)
    if isinstance(value, dict) and isinstance(value.get("requiresApproval"), dict) \
            and _prompted(value["requiresApproval"]):
        return _forwarded_request(value["requiresApproval"])
    if isinstance(value, dict) and _prompted(value):
        return _forwarded_request(value)
    if "items" in config:
        items = config["items"]
    elif value is js.UNDEFINED:
        items = []
    else:
        items = list(value) if isinstance(value, list) else [value]
    request = {"prompt": site_prompt, "items": items}
    if "preview" in config:
        request["preview"] = config["preview"]
    else:
        stdout = result.get("stdout")
        text = stdout.strip() if isinstance(stdout, str) else (
            "" if value is js.UNDEFINED else json_write.json_compact(value))
        if text:
            request["preview"] = text[:APPROVAL_PREVIEW_LIMIT]
    return request
