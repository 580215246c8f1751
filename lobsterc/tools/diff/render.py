"""The diff report as text, JSON or Markdown (SARIF and GitHub workflow commands are
lobsterc/tools/sarif.py)."""

from __future__ import annotations

from typing import Any

from lobsterc.tools.diff.compare import Report
from lobsterc.tools.diff.model import Where
from lobsterc.tools.diff.rules import SEVERITIES, Finding


def _where_pair(f: Finding) -> str:
    parts = []
    if f.old is not None:
        parts.append(f"old {f.old}")
    if f.new is not None:
        parts.append(f"new {f.new}")
    return ", ".join(parts)


def _tally(report: Report) -> str:
    counts = {s: sum(f.severity == s for f in report.findings) for s in SEVERITIES}
    accepted = sum(f.accepted for f in report.findings)
    text = (f"{counts['error']} weakened, {counts['warning']} changed, "
            f"{counts['note']} strengthened or neutral")
    return text + (f" ({accepted} accepted after review)" if accepted else "")


def render_text(report: Report) -> str:
    old, new = report.old, report.new
    lines = [f"lobsterc diff {old.name} -> {new.name}",
             f"program sha256:{old.program.hash} -> sha256:{new.program.hash}"
             if old.program.hash != new.program.hash else
             f"program sha256:{new.program.hash} (unchanged)"]
    if report.renames:
        lines.append("renamed: " + ", ".join(f"{o} -> {n}" for o, n in report.renames.items()))
    for f in report.findings:
        mark = " (accepted)" if f.accepted else ""
        lines.append(f"{f.severity}[{f.rule}]{mark}: {f.message}")
        lines.append(f"  at {_where_pair(f)}")
        lines.append(f"  id {f.id}")
    if not report.findings:
        lines.append("no safety-relevant change")
    else:
        lines.append(_tally(report))
    return "\n".join(lines) + "\n"


def as_dict(f: Finding) -> dict[str, Any]:
    def place(w: Where | None) -> dict[str, Any] | None:
        return None if w is None else {"file": w.file, "line": w.line or None}

    return {"id": f.id, "rule": f.rule, "title": f.title, "severity": f.severity,
            "accepted": f.accepted, "message": f.message, "old": place(f.old),
            "new": place(f.new), "fingerprint": f.fingerprint}


def render_json(report: Report) -> str:
    import json

    doc = {"old": {"name": report.old.name, "programHash": report.old.program.hash},
           "new": {"name": report.new.name, "programHash": report.new.program.hash},
           "renamed": report.renames, "weakened": bool(report.weakened),
           "findings": [as_dict(f) for f in report.findings]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def render_markdown(report: Report) -> str:
    old, new = report.old, report.new
    icon = {"error": "**weakened**", "warning": "changed", "note": "note"}
    out = [f"### Workflow safety diff: `{old.name}` → `{new.name}`", ""]
    if report.weakened:
        out.append(f"**{len(report.weakened)} safety propert"
                   f"{'y' if len(report.weakened) == 1 else 'ies'} weakened.** Review each; "
                   "accept a reviewed one with `--accept ID` or `x-reviewed:` in the file.")
    elif report.findings:
        out.append("No safety property weakened (or every weakening was accepted).")
    else:
        out.append("No safety-relevant change.")
    out += ["", f"Program `{old.program.hash[:12]}` → `{new.program.hash[:12]}`"]
    if report.renames:
        out.append("Renamed: " + ", ".join(f"`{o}` → `{n}`" for o, n in report.renames.items()))
    if report.findings:
        out += ["", "| | rule | finding | old | new | id |", "|---|---|---|---|---|---|"]
        for f in report.findings:
            state = icon[f.severity] + (" (accepted)" if f.accepted else "")
            cells = [state, f"{f.rule} {f.title}", f.message.replace("|", "\\|"),
                     f"`{f.old}`" if f.old else "", f"`{f.new}`" if f.new else "", f"`{f.id}`"]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown}
