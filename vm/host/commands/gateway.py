"""`apus.invoke` (aliases `clawd.invoke`, `openclaw.invoke`): call a gateway tool over HTTP.

Ambient credentials (APUS_TOKEN, then CLAWD_TOKEN, then OPENCLAW_TOKEN) go only to a local
gateway; `--token` is sent anywhere. A dispatched call is never retried automatically.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import urljoin, urlsplit

from vm.core import json_read, json_write
from vm.host.commands.base import Args, CommandError, Context, timed_out

ENV_PREFIXES = ("APUS", "CLAWD", "OPENCLAW")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def from_env(ctx: Context, suffix: str) -> tuple[str | None, str | None]:
    for prefix in ENV_PREFIXES:
        value = (ctx.env.get(f"{prefix}_{suffix}") or "").strip()
        if value:
            return value, f"{prefix}_{suffix}"
    return None, None


SPECIAL_SCHEMES = ("http", "https", "ws", "wss", "ftp")
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def valid_url(url: str) -> bool:
    """Whether a URL parser of the WHATWG kind (the original's `new URL`) accepts `url`: it
    has a scheme, and an http(s)/ws(s)/ftp URL has a host and a numeric port, if any."""
    m = SCHEME.match(url)
    if not m:
        return False
    if m.group(0)[:-1].lower() not in SPECIAL_SCHEMES:
        return url[m.end():].startswith("/")  # `foo:bar` cannot be a base URL
    rest = url[m.end():].replace("\\", "/").lstrip("/")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    host, _, port = authority.rpartition(":") if not authority.endswith("]") else (authority, "", "")
    if not host or host == "[":
        host, port = authority, ""
    if port and (not port.isdigit() or int(port) > 65535):
        return False
    return bool(host) and not any(c in host for c in " <>^|%") or host.startswith("[")


def special_url(url: str) -> str:
    """`http:/h` and `http:\\\\h` as a WHATWG parser reads them: `http://h`."""
    m = SCHEME.match(url)
    if m and m.group(0)[:-1].lower() in SPECIAL_SCHEMES:
        return f"{m.group(0)}//{url[m.end():].replace(chr(92), '/').lstrip('/')}"
    return url


def invoke(name: str, args: Args, items: list, ctx: Context) -> list:
    url = args.get("url") if isinstance(args.get("url"), str) else from_env(ctx, "URL")[0]
    if not url:
        # the original's words under its own names; APUS_URL under ours (SPEC 9.8)
        env_name = "APUS_URL" if name == "apus.invoke" else "OPENCLAW_URL"
        raise CommandError(f"{name} requires --url or {env_name}")
    tool, action = args.get("tool"), args.get("action")
    if not isinstance(tool, str) or not isinstance(action, str):
        raise CommandError(f"{name} requires --tool and --action")
    # checked in the original's order: arguments, then the URL, then the credential
    base_args = {}
    if isinstance(args.get("args-json"), str):
        try:
            base_args = json.loads(args.get("args-json"))
        except ValueError:
            raise CommandError(f"{name} --args-json must be valid JSON") from None
    if args.get("each") is True and not isinstance(base_args, dict):
        raise CommandError(f"{name} --each requires --args-json to be an object")
    url = url.strip()
    if not valid_url(url):
        raise CommandError("Invalid URL")
    url = special_url(url)
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise CommandError(f"{name} requires an http(s) --url")
    token = args.get("token") if isinstance(args.get("token"), str) else None
    if token is None:
        token, variable = from_env(ctx, "TOKEN")
        if token and (parts.hostname or "") not in LOCAL_HOSTS:
            # the original's words under its own names; the variable under ours
            shown = variable if name == "apus.invoke" else "OPENCLAW_TOKEN/CLAWD_TOKEN"
            raise CommandError(f"{name} refuses to send {shown} to non-local --url; pass "
                               "--token explicitly for remote endpoints")
    body = {"tool": tool, "action": action}
    if isinstance(args.get("session-key"), str):
        body["sessionKey"] = args.get("session-key")
    if args.get("dry-run") is True:
        body["dryRun"] = True
    endpoint = urljoin(url, "/tools/invoke")
    if args.get("each") is True:
        key = args.get("item-key") if isinstance(args.get("item-key"), str) else "item"
        out: list = []
        for item in items:
            out.extend(_call(name, endpoint, {**body, "args": {**base_args, key: item}}, token, ctx))
        return out
    return _call(name, endpoint, {**body, "args": base_args}, token, ctx)


def _call(name: str, endpoint: str, body: dict, token: str | None, ctx: Context) -> list:
    data = post_json(name, endpoint, body, token, ctx)
    if isinstance(data, dict) and data.get("ok") is True and "result" in data:
        result = data["result"]
    elif isinstance(data, dict) and data.get("ok") is False:
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        raise CommandError(f"{name} tool error: {error.get('message') or 'Unknown error'}",
                           retryable=False)
    else:
        result = data
    return list(result) if isinstance(result, list) else [result]


MAX_SAFE_INTEGER = 2 ** 53 - 1


def http_response_limit(ctx: Context) -> int | None:
    """LOBSTER_MAX_HTTP_RESPONSE_BYTES: a positive integer of bytes, or None when unset."""
    raw = (ctx.env.get("LOBSTER_MAX_HTTP_RESPONSE_BYTES") or "").strip()
    if not raw:
        return None
    if not raw.isascii() or not raw.isdigit() or not 0 < int(raw) <= MAX_SAFE_INTEGER:
        raise CommandError("LOBSTER_MAX_HTTP_RESPONSE_BYTES must be a positive safe integer (bytes)",
                           retryable=False)
    return int(raw)


def _read_capped(response, limit: int | None, cap_prefix: str) -> bytes:
    """The body, refused as soon as it (or its declared length) is over `limit` bytes."""
    if limit is None:
        return response.read()
    declared = response.headers.get("content-length")
    body = b"" if declared is not None and declared.strip().isdigit() and int(declared) > limit \
        else response.read(limit + 1)
    if len(body) > limit or body == b"" and declared is not None and declared.strip().isdigit() \
            and int(declared) > limit:
        raise CommandError(f"{cap_prefix}HTTP response body exceeded {limit} bytes", retryable=False)
    return body


def post_json(name: str, endpoint: str, body: Any, token: str | None, ctx: Context,
              cap_prefix: str = "") -> Any:
    """POST `body` as JSON and decode the JSON answer. Every failure after the request may
    have reached the server is non-retryable; the run's deadline is the timeout. A body over
    LOBSTER_MAX_HTTP_RESPONSE_BYTES fails with `cap_prefix` before that message; with a
    `cap_prefix` (an LLM adapter) failures read as the original's adapter client words them
    and an empty body is null."""
    import socket
    import urllib.error
    import urllib.request

    limit = http_response_limit(ctx)

    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(endpoint, data=json_write.json_compact(body).encode("utf-8"),
                                     method="POST", headers=headers)
    timeout = None
    if ctx.deadline is not None:
        timeout = ctx.deadline - time.monotonic()
        if timeout <= 0:
            raise timed_out()
    # a credential goes to the URL's own host and nowhere else: no proxy, no redirect
    opener = _credential_opener() if token else urllib.request.build_opener()
    try:
        with opener.open(request, timeout=timeout) as response:
            text = _read_capped(response, limit, cap_prefix).decode("utf-8", "replace")
    except RedirectRefused as exc:
        raise CommandError(f"{name} refused to follow a redirect ({exc.status}) to "
                           f"{exc.host or 'an unnamed host'}: a request that carries a "
                           "credential follows no redirect", retryable=False) from None
    except urllib.error.HTTPError as exc:
        detail = _read_capped(exc, limit, cap_prefix).decode("utf-8", "replace")[:400]
        if cap_prefix:
            raise CommandError(f"{cap_prefix}{exc.code} {exc.reason}: {detail}", retryable=False) from None
        raise CommandError(f"{name} failed ({exc.code}): {detail}", retryable=False) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (socket.timeout, TimeoutError)) and ctx.deadline is not None \
                and time.monotonic() >= ctx.deadline - 0.01:
            raise timed_out(retryable=False) from None
        if cap_prefix:
            raise CommandError(f"{name} request failed: {reason}", retryable=False) from None
        raise CommandError("fetch failed", retryable=False) from None  # the original's words
    if cap_prefix and not text:
        return None
    try:
        return json_read.json_loads(text)
    except ValueError:
        if cap_prefix:
            raise CommandError(f"{cap_prefix}Response was not JSON", retryable=False) from None
        raise CommandError(f"{name} expected JSON response", retryable=False) from None


class RedirectRefused(Exception):
    """A response redirected a request that carries a credential; nothing was sent on."""

    def __init__(self, status: int, host: str) -> None:
        super().__init__(f"redirect ({status}) to {host}")
        self.status, self.host = status, host


def _credential_opener():
    """An opener for a request that carries a credential: it uses no proxy (HTTP_PROXY and
    the like are ignored) and follows no redirect (a 3xx answer is RedirectRefused)."""
    import urllib.request

    class RefuseRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            fp.close()
            try:
                host = urlsplit(newurl).hostname or ""
            except ValueError:
                host = ""
            raise RedirectRefused(code, host[:253])

    return urllib.request.build_opener(urllib.request.ProxyHandler({}), RefuseRedirects())
