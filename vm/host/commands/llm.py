"""`llm.invoke` and `llm_task.invoke`: one JSON-only LLM call through a configured adapter.

Providers: `apus` (alias `openclaw`, `clawd`) posts `{tool:"llm-task", action:"invoke", args}`
to the gateway's `/tools/invoke`; `pi` and `http` post the payload itself to an adapter URL.
The input items (and `--artifacts-json`) travel as artifacts. An answer can be checked
against `--output-schema`, with bounded re-asks. Answers are reused from run state
(`--state-key`) and from a file cache, so a repeated or resumed run does not pay twice.

Once a request was sent nothing here is retried by a workflow `retry:`; every error raised
after dispatch is `retryable=False`.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from vm.core import js, json_read, json_write
from vm.host.commands.base import Args, CommandError, Context, timed_out
from vm.host.commands.gateway import LOCAL_HOSTS, from_env, post_json

# `openclaw` is the original's name for the gateway provider, and the one its cache keys and
# sources carry; `apus` is ours (SPEC 9.8), chosen by name or when APUS_URL is the gateway URL
PROVIDERS = {"apus": "apus", "openclaw": "openclaw", "clawd": "openclaw", "pi": "pi", "http": "http"}
GATEWAY = ("apus", "openclaw")
DEFAULT_PROVIDER = {"llm.invoke": None, "llm_task.invoke": "openclaw"}
DEFAULT_VALIDATION_RETRIES = 1
CACHE_KEY_VERSION = 2
STATE_VERSION = 1
LIVE_SOURCES = ("apus", "openclaw", "clawd", "pi", "http")


# arguments ----------------------------------------------------------------------------------
def _text(args: Args, name: str) -> str | None:
    value = args.get(name)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _first_env(ctx: Context, *names: str) -> str | None:
    for name in names:
        value = (ctx.env.get(name) or "").strip()
        if value:
            return value
    return None


def _flag_on(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "false", "0", "no"):
        return False
    return True


def _number(name: str, args: Args, flag: str) -> float | int | None:
    raw = args.get(flag)
    if raw is None:
        return None
    value = js.to_number(raw) if isinstance(raw, str) and raw.strip() else math.nan
    if not math.isfinite(value):
        raise CommandError(f"{name} --{flag} must be a number")
    return value


def _json_arg(name: str, args: Args, flag: str, want: type, what: str):
    raw = args.get(flag)
    if raw is None or raw == "":
        return None
    try:
        value = json_read.json_loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    if not isinstance(value, want):
        raise CommandError(f"{name} --{flag} must be a JSON {what}")
    return value


def resolve_provider(name: str, args: Args, ctx: Context) -> str:
    explicit = _text(args, "provider") or _first_env(ctx, "LOBSTER_LLM_PROVIDER")
    if explicit:
        provider = PROVIDERS.get(explicit.lower())
        if provider is None:
            raise CommandError(f"Unsupported llm provider: {explicit.lower()}")
        return provider
    gateway_url, variable = from_env(ctx, "URL")
    gateway = "apus" if variable == "APUS_URL" else "openclaw"
    if DEFAULT_PROVIDER.get(name):
        return gateway
    if _first_env(ctx, "LOBSTER_PI_LLM_ADAPTER_URL"):
        return "pi"
    if gateway_url:
        return gateway
    if _first_env(ctx, "LOBSTER_LLM_ADAPTER_URL"):
        return "http"
    raise CommandError("llm.invoke could not resolve a provider. Set --provider or "
                       "LOBSTER_LLM_PROVIDER")


def _normalize_artifact(raw: Any) -> Any:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        return {"kind": "text", "text": raw}
    if isinstance(raw, (bool, int, float)):
        return {"kind": "text", "text": js.to_string(raw)}
    return {"kind": "json", "data": raw}


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k])
                for k in sorted(value, key=lambda k: str(k).encode("utf-16-be"))}
    if isinstance(value, (list, tuple)):
        return [_sorted_keys(v) for v in value]
    return value


def stable_hash(value: Any) -> str:
    """sha256 (hex) of the key-sorted compact JSON text of `value`."""
    import hashlib

    return hashlib.sha256(json_write.json_compact(_sorted_keys(value)).encode("utf-8")).hexdigest()


# the adapter --------------------------------------------------------------------------------
class _Adapter:
    def __init__(self, name: str, provider: str, args: Args, ctx: Context) -> None:
        self.name, self.provider = name, provider
        token = args.get("token") if isinstance(args.get("token"), str) and args.get("token") \
            else None
        if provider in GATEWAY:
            url, url_var = from_env(ctx, "URL")
            if not url:
                raise CommandError(f"{name} requires APUS_URL (or CLAWD_URL, OPENCLAW_URL) "
                                   "for provider=apus" if provider == "apus" else
                                   f"{name} requires OPENCLAW_URL (or CLAWD_URL) for "
                                   "provider=openclaw")
            parts = self._http_parts(url, url_var)
            if token is None:
                token, variable = from_env(ctx, "TOKEN")
                if token and (parts.hostname or "") not in LOCAL_HOSTS:
                    raise CommandError(f"{name} refuses to send {variable} to non-local "
                                       f"{url_var}; pass --token explicitly for remote endpoints")
            self.endpoint = urljoin(url, "/tools/invoke")
        else:
            url_var = "LOBSTER_PI_LLM_ADAPTER_URL" if provider == "pi" else "LOBSTER_LLM_ADAPTER_URL"
            url = _first_env(ctx, url_var)
            if not url:
                raise CommandError(f"{name} requires {url_var} for provider={provider}")
            parts = self._http_parts(url, url_var)
            if parts.path in ("", "/"):
                parts = parts._replace(path="/invoke")
            self.endpoint = urlunsplit(parts)
            if token is None:
                token = _first_env(ctx, "LOBSTER_PI_LLM_ADAPTER_TOKEN" if provider == "pi"
                                   else "LOBSTER_LLM_ADAPTER_TOKEN")
        self.token = token

    def _http_parts(self, url: str, variable: str):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CommandError(f"{self.name} requires an http(s) URL in {variable}")
        return parts

    def invoke(self, payload: dict, ctx: Context) -> Any:
        """One request. Returns the response envelope (not yet checked)."""
        name = self.name
        body = {"tool": "llm-task", "action": "invoke", "args": payload} \
            if self.provider in GATEWAY else payload
        data = post_json(name, self.endpoint, body, self.token, ctx, cap_prefix=f"{name} request failed: ")
        if not (isinstance(data, dict) and "ok" in data):
            return {"ok": True, "result": data}
        if self.provider not in GATEWAY:
            return data
        if data.get("ok") is not True:
            error = data.get("error") if isinstance(data.get("error"), dict) else {}
            raise CommandError(f"{name} tool error: {error.get('message') or 'Unknown error'}",
                               retryable=False)
        inner = data.get("result")
        if isinstance(inner, dict) and "ok" in inner:
            return inner
        return {"ok": True, "result": inner}


_OPTIONAL_FIELDS = (("runId", str, "string"), ("model", str, "string"),
                    ("prompt", str, "string"), ("status", str, "string"),
                    ("usage", dict, "object"), ("metadata", dict, "object"),
                    ("diagnostics", dict, "object"))


def envelope_problem(envelope: Any) -> str | None:
    """What is wrong with an adapter's response envelope, or None. Optional fields may be
    null; `result.output` must be an object when a result is present."""
    if not isinstance(envelope, dict):
        return "/ must be object"
    if not isinstance(envelope.get("ok"), bool):
        return "/ok must be boolean" if "ok" in envelope else "/ must have required property 'ok'"
    if envelope.get("error") is not None and not isinstance(envelope["error"], dict):
        return "/error must be object"
    if "result" not in envelope or (envelope["result"] is None and not envelope["ok"]):
        return None if not envelope["ok"] else "/ must have required property 'result'"
    result = envelope["result"]
    if not isinstance(result, dict):
        return "/result must be object"
    if not isinstance(result.get("output"), dict):
        return ("/result/output must be object" if "output" in result
                else "/result must have required property 'output'")
    output = result["output"]
    for key, kind, label in (("text", str, "string"), ("format", str, "string")):
        if output.get(key) is not None and not isinstance(output[key], kind):
            return f"/result/output/{key} must be {label}"
    for key, kind, label in _OPTIONAL_FIELDS:
        if result.get(key) is not None and not isinstance(result[key], kind):
            return f"/result/{key} must be {label}"
    warnings = result.get("warnings")
    if warnings is not None and not (isinstance(warnings, list)
                                     and all(isinstance(w, str) for w in warnings)):
        return "/result/warnings must be array of strings"
    return None


def iso_now() -> str:
    """`new Date().toISOString()`."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


def _item(name: str, envelope: dict, request: dict, source: str, attempt: int) -> dict:
    result = envelope.get("result") or {}
    output = result.get("output") or {}
    data = output.get("data")
    fmt = output.get("format")
    if fmt is None:
        fmt = "json" if data is not None and js.truthy(data) else "text"
    return {
        "kind": name,
        "runId": result.get("runId"),
        "prompt": result.get("prompt"),
        "model": result.get("model"),
        "schemaVersion": request["schemaVersion"],
        "status": js.to_string(result["status"]) if result.get("status") is not None
        else "completed",
        "cacheKey": request["cacheKey"],
        "artifactHashes": request["artifactHashes"],
        "output": {"format": fmt, "text": output.get("text"), "data": data},
        "usage": result.get("usage"),
        "metadata": result.get("metadata"),
        "warnings": result.get("warnings"),
        "diagnostics": result.get("diagnostics"),
        "createdAt": iso_now(),
        "source": source,
        "cached": source not in LIVE_SOURCES,
        "attemptCount": attempt,
    }


# reuse: run state and the file cache --------------------------------------------------------
def cache_path(name: str, cache_key: str, ctx: Context) -> Path:
    configured = (ctx.env.get("LOBSTER_CACHE_DIR") or "").strip()
    root = os.path.join(ctx.cwd, configured) if configured else os.path.join(ctx.cwd,
                                                                              ".lobster-cache")
    return Path(root) / name / f"{cache_key}.json"


def _valid_items(items: Any) -> bool:
    return isinstance(items, list) and bool(items) and all(isinstance(i, dict) for i in items)


def read_cache(name: str, cache_key: str, ctx: Context) -> list | None:
    """The cached items, or None: a missing, unreadable or corrupt entry is a miss."""
    try:
        entry = json_read.json_loads(cache_path(name, cache_key, ctx).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(entry, dict) or entry.get("cacheKey") != cache_key:
        return None
    items = entry.get("items")
    return items if _valid_items(items) else None


def write_cache(name: str, cache_key: str, items: list, ctx: Context) -> None:
    from vm.host.store import atomic_write

    entry = {"cacheKeyVersion": CACHE_KEY_VERSION, "items": items, "cacheKey": cache_key,
             "storedAt": iso_now()}
    try:
        atomic_write(cache_path(name, cache_key, ctx),
                     json_write.json_pretty(entry).encode("utf-8"))
    except OSError:
        pass  # a read-only or full cache never fails a call that already has its answer


def read_run_state(name: str, state_key: str, cache_key: str, ctx: Context) -> list | None:
    from vm.host.store import StoreError

    try:
        stored = ctx.store.get_value(state_key)
    except (StoreError, OSError):
        return None
    if not isinstance(stored, dict) or stored.get("type") != name \
            or stored.get("cacheKey") != cache_key:
        return None
    items = stored.get("items")
    return items if _valid_items(items) else None


def write_run_state(name: str, state_key: str, cache_key: str, items: list, ctx: Context) -> None:
    from vm.host.store import StoreError

    record = {"type": name, "version": STATE_VERSION, "cacheKey": cache_key, "items": items,
              "storedAt": iso_now()}
    try:
        ctx.store.set_value(state_key, record)
    except (StoreError, OSError):
        pass


def _replayed(items: list, source: str) -> list:
    from vm.isa.cost import mark_replay  # billing knows a replay by this mark, not by its fields

    return [mark_replay({**item, "source": source, "cached": True, "replayed": True})
            for item in items]


# the command --------------------------------------------------------------------------------
def invoke(name: str, args: Args, items: list, ctx: Context) -> list:
    provider = resolve_provider(name, args, ctx)
    adapter = _Adapter(name, provider, args, ctx)
    prompt = args.get("prompt") if isinstance(args.get("prompt"), str) and args.get("prompt") \
        else " ".join(args.positionals)
    if not prompt:
        raise CommandError(f"{name} requires --prompt or positional text")
    model = _text(args, "model") or _first_env(ctx, "LOBSTER_LLM_MODEL", "LLM_TASK_MODEL") or ""
    schema_version = (_text(args, "schema-version")
                      or _first_env(ctx, "LOBSTER_LLM_SCHEMA_VERSION", "LLM_TASK_SCHEMA_VERSION")
                      or "v1")
    max_output_tokens = _number(name, args, "max-output-tokens")
    temperature = _number(name, args, "temperature")
    provided = _json_arg(name, args, "artifacts-json", list, "array") or []
    metadata = _json_arg(name, args, "metadata-json", dict, "object")
    output_schema = _json_arg(name, args, "output-schema", dict, "object")
    if output_schema is not None:
        from vm.core.schema import schema_error

        problem = schema_error(output_schema, keeps_schemas=True)  # its own Ajv
        if problem:
            raise CommandError(f"{name} --output-schema is not a valid JSON schema: {problem}")
    retries = 0
    if output_schema is not None:
        raw = args.get("max-validation-retries")
        if not isinstance(raw, str):
            raw = _first_env(ctx, "LOBSTER_LLM_VALIDATION_RETRIES", "LLM_TASK_VALIDATION_RETRIES")
        value = js.to_number(raw) if isinstance(raw, str) and raw.strip() else math.nan
        retries = max(0, math.floor(value)) if math.isfinite(value) else DEFAULT_VALIDATION_RETRIES
    disable_cache = args.get("disable-cache") is True
    refresh = args.get("refresh") is True or _flag_on(
        _first_env(ctx, "LOBSTER_LLM_FORCE_REFRESH", "LLM_TASK_FORCE_REFRESH"))
    state_key = _text(args, "state-key") or _first_env(ctx, "LOBSTER_RUN_STATE_KEY")

    artifacts = [_normalize_artifact(item) for item in [*items, *provided]]
    hashes = [stable_hash(a) for a in artifacts]
    cache_key = stable_hash({
        "cacheKeyVersion": CACHE_KEY_VERSION, "provider": provider, "prompt": prompt,
        "model": model or f"{provider}-default", "schemaVersion": schema_version,
        "artifactHashes": hashes, "outputSchema": output_schema,
        "temperature": temperature, "maxOutputTokens": max_output_tokens,
    })

    if state_key and not refresh:
        reused = read_run_state(name, state_key, cache_key, ctx)
        if reused is not None:
            return _replayed(reused, "run_state")
    if not disable_cache and not refresh:
        cached = read_cache(name, cache_key, ctx)
        if cached is not None:
            return _replayed(cached, "cache")

    payload: dict[str, Any] = {"prompt": prompt}
    if model:
        payload["model"] = model
    payload["artifacts"] = artifacts
    payload["artifactHashes"] = hashes
    if metadata is not None:
        payload["metadata"] = metadata
    if output_schema is not None:
        payload["outputSchema"] = output_schema
    payload["schemaVersion"] = schema_version
    if max_output_tokens is not None:
        payload["maxOutputTokens"] = max_output_tokens
    if temperature is not None:
        payload["temperature"] = temperature
    request = {"prompt": prompt, "model": model, "schemaVersion": schema_version,
               "cacheKey": cache_key, "artifactHashes": hashes}

    attempt = 0
    errors: list[str] = []
    while True:
        attempt += 1
        if attempt > 1:
            if ctx.deadline is not None and time.monotonic() >= ctx.deadline:
                raise timed_out(retryable=False)
            payload["retryContext"] = {"attempt": attempt,
                                       **({"validationErrors": errors} if errors else {})}
        envelope = adapter.invoke(payload, ctx)
        problem = envelope_problem(envelope)
        if problem:
            raise CommandError(f"{name} received invalid response envelope",  # the original's
                               retryable=False, detail={"reason": problem})  # what was wrong
        if envelope["ok"] is not True:
            error = envelope.get("error") or {}
            message = error.get("message") or "llm adapter returned an error"
            raise CommandError(f"{name} remote error: {message}", retryable=False)
        # llm_task.invoke's results say `clawd` whatever the provider, as the original's do
        source = "clawd" if name == "llm_task.invoke" and provider != "apus" else provider
        out = [_item(name, envelope, request, source, attempt)]
        from vm.isa.cost import mark_live  # paid for now, even if validation asks again

        mark_live(out[0], cache_key, ctx.scope)
        if output_schema is not None:
            from vm.core.schema_errors import SchemaRecursion, all_errors

            try:
                found = all_errors(output_schema, out[0]["output"]["data"])
            except SchemaRecursion as exc:  # the original's message, as its stack overflows
                raise CommandError(str(exc), retryable=False) from None
            if found:
                errors = [f"{pointer} {message}" for pointer, message in found]
                if attempt >= retries + 1:
                    raise CommandError(f"{name} output failed schema validation: "
                                       f"{'; '.join(errors)}", retryable=False)
                continue
        if state_key:
            write_run_state(name, state_key, cache_key, out, ctx)
        if not disable_cache:
            write_cache(name, cache_key, out, ctx)
        return out
