"""`github.pr.monitor` and `github.pr.monitor.notify`: a pull request read with
`gh pr view --json`, compared with the snapshot stored by the previous run."""

from __future__ import annotations

import re
from typing import Any

from vm.core import js, json_read, json_write
from vm.host.commands.base import CommandError, Context
from vm.host.commands.external import after_terminator, glued, run_cli

VIEW_FIELDS = ("number", "title", "url", "state", "isDraft", "mergeable", "reviewDecision",
               "author", "baseRefName", "headRefName", "updatedAt")
COMPARED = ("number", "title", "url", "state", "isDraft", "mergeable", "reviewDecision",
            "updatedAt", "baseRefName", "headRefName")
SHOWN = ("number", "title", "url", "state", "updatedAt")
_ABSENT = js.UNDEFINED  # a field the snapshot does not have (left out of JSON)


def _is_object(value: Any) -> bool:
    return isinstance(value, (dict, list))


def _get(snapshot: Any, name: str) -> Any:
    return snapshot.get(name, _ABSENT) if isinstance(snapshot, dict) else _ABSENT


def _json(value: Any) -> str | None:
    return None if value is _ABSENT else json_write.json_compact(value)


def _change(before: Any, after: Any) -> dict:
    out = {}
    if before is not _ABSENT:
        out["from"] = before
    if after is not _ABSENT:
        out["to"] = after
    return out


def change_summary(before: Any, after: Any) -> dict:
    """Which compared fields differ between two snapshots, with their old and new values.
    Without a previous snapshot every compared field counts as changed (from null)."""
    if not js.truthy(after) or not _is_object(after):
        return {"changedFields": [], "changes": {}}
    if not js.truthy(before) or not _is_object(before):
        return {"changedFields": list(COMPARED),
                "changes": {k: _change(None, _get(after, k)) for k in COMPARED}}
    changes = {k: _change(_get(before, k), _get(after, k)) for k in COMPARED
               if _json(_get(before, k)) != _json(_get(after, k))}
    return {"changedFields": list(changes), "changes": changes}


def change_message(repo: Any, pr: Any, fields: list, info: dict) -> str:
    listed = f" ({', '.join(js.to_string(f) for f in fields)})" if fields else ""
    title = f": {js.to_string(info['title'])}" if js.truthy(info.get("title")) else ""
    url = f" {js.to_string(info['url'])}" if js.truthy(info.get("url")) else ""
    text = f"PR updated: {js.to_string(repo)}#{js.format_number(pr)}{title}{listed}.{url}"
    return js.js_trim(re.sub(js.WS_CLASS + "+", " ", text))


PR_NUMBER = re.compile(r"[1-9][0-9]*")


def pr_number(pr: Any) -> str:
    """`pr` as gh's argument: a positive integer (a JSON number or a string of digits),
    else T413. gh would also take a URL or a branch here, or read `--web` as a flag."""
    text = None
    if isinstance(pr, str):
        text = pr
    elif isinstance(pr, (int, float)) and not isinstance(pr, bool):
        text = js.format_number(pr)
    if text is None or not PR_NUMBER.fullmatch(text):
        shown = json_write.json_compact(pr)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise CommandError(f"github.pr.monitor args.pr must be a positive integer (got {shown})",
                           code="T413", retryable=False)
    return text


def _view(repo: Any, pr: Any, ctx: Context) -> Any:
    argv = ["gh", "pr", "view", glued("repo", js.to_string(repo)),
            glued("json", ",".join(VIEW_FIELDS)), *after_terminator(pr_number(pr))]
    result = run_cli(argv, ctx, not_found="gh not found on PATH (install GitHub CLI)")
    if result.code != 0:
        detail = js.js_trim(result.stderr) or js.js_trim(result.stdout)
        raise CommandError(f"gh failed ({result.code}): {detail}", code="T410")
    try:
        return json_read.json_loads(js.js_trim(result.stdout))
    except ValueError:
        raise CommandError("gh returned non-JSON output") from None


def _stable(value: Any) -> str:
    from vm.host.commands.state_cmds import _key_sorted

    return _key_sorted(value)


def monitor(args: dict, ctx: Context) -> dict:
    repo, pr = args.get("repo"), args.get("pr")
    if not js.truthy(repo) or not js.truthy(pr):
        raise CommandError("github.pr.monitor requires args.repo and args.pr")
    pr_number(pr)
    key = args.get("key")
    key = js.to_string(key) if key is not None else \
        f"github.pr:{js.to_string(repo)}#{js.to_string(pr)}"
    current = _view(repo, pr, ctx)
    from vm.host.store import StoreError

    try:
        before = ctx.store.get_value(key)
        ctx.store.set_value(key, current)
    except StoreError as exc:
        raise CommandError(str(exc), code="T450") from None
    changed = _stable(before) != _stable(current)
    head = {"kind": "github.pr.monitor", "repo": repo, "prNumber": js.to_number(pr), "key": key}
    if js.truthy(args.get("changesOnly")) and not changed:
        return {**head, "changed": False, "suppressed": True}
    summary = change_summary(before, current)
    if js.truthy(args.get("summaryOnly")):
        shown = {k: v for k in SHOWN if (v := _get(current, k)) is not _ABSENT}
        return {**head, "changed": changed, "summary": summary, "pr": shown}
    return {**head, "changed": changed, "summary": summary, "prSnapshot": current}


def monitor_notify(args: dict, ctx: Context) -> dict:
    base = monitor({**args, "changesOnly": True, "summaryOnly": True}, ctx)
    if base.get("suppressed"):
        return {"kind": "github.pr.monitor.notify", "suppressed": True}
    info = base.get("pr") or {}
    fields = base["summary"]["changedFields"]
    pr = js.to_number(args.get("pr"))
    return {"kind": "github.pr.monitor.notify", "changed": bool(base["changed"]),
            "repo": args.get("repo"), "prNumber": pr,
            "message": change_message(args.get("repo"), pr, fields, info),
            "pr": info, "summary": base["summary"]}


RUNNERS = {"github.pr.monitor": monitor, "github.pr.monitor.notify": monitor_notify}
