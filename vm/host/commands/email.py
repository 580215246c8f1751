"""`email.triage`: sort the piped-in messages into needs-reply / needs-action / FYI.

Without `--llm`, or when no LLM provider is configured, the rules are fixed: a subject that
says "action required" or "urgent" needs action; an unread message from a person (not a
no-reply address) needs a reply; the rest is FYI. With `--llm` and a provider, `llm.invoke`
decides (with its cache and run-state reuse) and drafts replies; `--emit drafts` turns the
drafts into `{to, subject, body, emailId}` items ready for `gog.gmail.send`.
"""

from __future__ import annotations

import re
from typing import Any

from vm.core import js, json_write
from vm.host.commands.base import Args, Context

NO_REPLY_MARKS = ("no-reply", "noreply", "do-not-reply", "donotreply")
CATEGORIES = ("needs_reply", "needs_action", "fyi")

DECISIONS_SCHEMA = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "category": {"type": "string", "enum": list(CATEGORIES)},
                    "rationale": {"type": "string"},
                    "reply": {
                        "type": "object",
                        "properties": {"subject": {"type": "string"},
                                       "body": {"type": "string"}},
                        "required": ["body"],
                        "additionalProperties": False,
                    },
                },
                "required": ["id", "category"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["decisions"],
    "additionalProperties": False,
}

INSTRUCTIONS = (
    "Sort these email messages for their recipient and answer with JSON matching the schema.\n"
    "Give every message one category: needs_reply (a person is waiting for an answer), "
    "needs_action (something must be done, such as signing or paying), or fyi (nothing to do).\n"
    "For needs_reply, add a short, polite reply in plain text (no markdown).\n"
    "Automated senders (no-reply addresses) get no reply: they are fyi unless clearly urgent.\n\n"
    "Messages (JSON):\n"
)


def _field(raw: Any, *names: str) -> str:
    """The first of `names` that is not null/undefined, as trimmed text (`a ?? b ?? ""`)."""
    if isinstance(raw, dict):
        for name in names:
            value = raw.get(name)  # undefined: a field `pick` set that the message lacks
            if value is not None and value is not js.UNDEFINED:
                return js.js_trim(js.to_string(value))
    return ""


def normalise(raw: Any) -> dict:
    """One message as the triage sees it, whatever shape gog gave it."""
    ident = _field(raw, "id", "messageId")
    thread = _field(raw, "threadId", "thread_id") if isinstance(raw, dict) and any(
        raw.get(name) is not None and raw[name] is not js.UNDEFINED
        for name in ("threadId", "thread_id")) else ident
    labels = raw.get("labels") if isinstance(raw, dict) else None
    return {
        "id": ident,
        "threadId": thread or ident,
        "from": _field(raw, "from", "sender"),
        "subject": _field(raw, "subject"),
        "date": _field(raw, "date", "internalDate", "timestamp"),
        "snippet": _field(raw, "snippet", "bodyPreview"),
        "labels": [js.to_string(x) for x in labels] if isinstance(labels, list) else [],
    }


def no_reply(sender: str) -> bool:
    lowered = sender.lower()
    return any(mark in lowered for mark in NO_REPLY_MARKS)


def address_of(sender: str) -> str:
    """The address inside `<...>`, else the first address-like word, else ""."""
    m = re.search(r"<([^>]+)>", sender)
    if m and m.group(1):
        return js.js_trim(m.group(1))
    m = re.search(r"[A-Z0-9._%+-]+@[A-Z0-9.-]+\.[A-Z]{2,}", sender, re.I)
    return js.js_trim(m.group(0)) if m else ""


def reply_subject(subject: str) -> str:
    s = js.js_trim(subject)
    if not s:
        return "Re:"
    return s if re.match(r"re:", s, re.I) else f"Re: {s}"


def _summary(reply: int, action: int, fyi: int) -> str:
    return f"{reply} need replies, {action} need action, {fyi} FYI"


def rule_report(emails: list[dict]) -> dict:
    buckets: dict[str, list] = {"needsReply": [], "needsAction": [], "fyi": []}
    for e in emails:
        subject = e["subject"].lower()
        unread = any(label.upper() == "UNREAD" for label in e["labels"])
        if "action required" in subject or "urgent" in subject:
            buckets["needsAction"].append(e["id"])
        elif unread and not no_reply(e["from"]):
            buckets["needsReply"].append(e["id"])
        else:
            buckets["fyi"].append(e["id"])
    return {"summary": _summary(*(len(v) for v in buckets.values())), "buckets": buckets,
            "emails": emails, "mode": "deterministic"}


def has_provider(ctx: Context) -> bool:
    names = ("LOBSTER_LLM_PROVIDER", "LOBSTER_PI_LLM_ADAPTER_URL", "LOBSTER_LLM_ADAPTER_URL",
             "APUS_URL", "OPENCLAW_URL", "CLAWD_URL")
    return any(js.js_trim(ctx.env.get(name) or "") for name in names)


def _prompt(emails: list[dict]) -> str:
    shown = [{k: e[k] for k in ("id", "from", "subject", "date", "snippet", "labels")}
             for e in emails]
    return INSTRUCTIONS + json_write.json_pretty(shown)


def _decision(raw: Any) -> dict | None:
    raw = raw if isinstance(raw, dict) else {}
    ident = js.js_trim(js.to_string(raw.get("id") if raw.get("id") is not None else ""))
    if not ident:
        return None
    category = raw.get("category")
    decision: dict[str, Any] = {"id": ident,
                                "category": "fyi" if category is None else js.to_string(category)}
    if js.truthy(raw.get("rationale")):
        decision["rationale"] = js.to_string(raw["rationale"])
    reply = raw.get("reply")
    if isinstance(reply, (dict, list)):
        reply = reply if isinstance(reply, dict) else {}
        body = reply.get("body")
        decision["reply"] = {**({"subject": reply["subject"]} if "subject" in reply else {}),
                             "body": "" if body is None else js.to_string(body)}
    return decision


def _llm_report(args: Args, emails: list[dict], ctx: Context, emit: str) -> list:
    from vm.host.commands.llm import invoke

    flags: dict[str, Any] = {"prompt": _prompt(emails),
                             "output-schema": json_write.json_compact(DECISIONS_SCHEMA),
                             "schema-version": "email_triage.v1"}
    model = js.js_trim(js.to_string(args.get("model", "")))
    if model:
        flags["model"] = model
    for name in ("token", "temperature", "max-output-tokens", "state-key"):
        if args.get(name) is not None:
            flags[name] = args.get(name)
    answer = invoke("llm.invoke", Args(flags=flags), list(emails), ctx)
    first = answer[0] if answer else None
    output = first.get("output") if isinstance(first, dict) else None
    data = output.get("data") if isinstance(output, dict) else None
    raw = data.get("decisions") if isinstance(data, dict) else None
    decisions = [d for d in map(_decision, raw if isinstance(raw, list) else []) if d]

    by_id = {e["id"]: e for e in emails}
    buckets: dict[str, list] = {"needsReply": [], "needsAction": [], "fyi": []}
    drafts: list[dict] = []
    for d in decisions:
        bucket = {"needs_reply": "needsReply", "needs_action": "needsAction"}.get(d["category"],
                                                                                  "fyi")
        buckets[bucket].append(d["id"])
        reply = d.get("reply")
        if d["category"] != "needs_reply" or not reply or not reply["body"]:
            continue
        email = by_id.get(d["id"])
        to = address_of(email["from"]) if email else ""
        if to and not no_reply(email["from"] if email else ""):
            subject = reply.get("subject")
            drafts.append({"emailId": d["id"], "to": to,
                           "subject": js.to_string(subject) if js.truthy(subject)
                           else reply_subject(email["subject"] if email else ""),
                           "body": reply["body"]})
    if emit == "drafts":
        return [{"to": d["to"], "subject": d["subject"], "body": d["body"],
                 "emailId": d["emailId"]} for d in drafts]
    return [{"summary": _summary(*(len(v) for v in buckets.values())), "buckets": buckets,
             "emails": emails, "decisions": decisions, "drafts": drafts, "mode": "llm"}]


def triage(args: Args, items: list, ctx: Context) -> list:
    raw_limit = args.get("limit")
    limit = js.to_number(20 if raw_limit is None else raw_limit)
    emit = args.get("emit")
    emit = (js.js_trim(js.to_string(emit)) if emit is not None else "report") or "report"
    emails: list[dict] = []
    for item in items:
        emails.append(normalise(item))
        if len(emails) >= limit:  # NaN never stops; 0 still takes the first item
            break
    if not js.truthy(args.get("llm", False)) or not has_provider(ctx):
        return [] if emit == "drafts" else [rule_report(emails)]
    return _llm_report(args, emails, ctx, emit)
