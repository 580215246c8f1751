"""Code-scanning output of `lobsterc lint` and `lobsterc diff`: SARIF 2.1.0 (one run of the
`lobsterc` driver, its rules with help texts, results with stable partialFingerprints) and
GitHub workflow commands (`::error file=F,line=L,col=C,title=T::message`).

A fingerprint never contains a line number, so a finding keeps its identity when lines move:
lint hashes the code, the file, the message and the text of the source line (plus an
occurrence count for repeats); diff hashes its finding id (rule and subject).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lobsterc.tools.diff.model import Where
from lobsterc.tools.diff.rules import RULES
from vm import __version__
from vm.core.codes import CODES

SCHEMA_URI = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
              "sarif-schema-2.1.0.json")
FINGERPRINT_KEY = "lobsterc/v1"
_LEVEL = {"error": "error", "warning": "warning", "note": "note"}
_GITHUB = {"error": "error", "warning": "warning", "note": "notice"}


def _uri(path: str) -> dict[str, str]:
    """An artifactLocation: relative to the repository root (%SRCROOT%, where lobsterc ran)
    when the path is under it, else a file:// URI."""
    rel = os.path.normpath(os.path.relpath(path) if os.path.isabs(path) else path)
    if rel.startswith(".."):
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": rel.replace(os.sep, "/"), "uriBaseId": "%SRCROOT%"}


def _driver(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "lobsterc", "version": __version__, "semanticVersion": __version__,
            "rules": rules}


def _log(rules: list[dict[str, Any]], results: list[dict[str, Any]],
         properties: dict[str, Any] | None = None) -> str:
    run: dict[str, Any] = {"tool": {"driver": _driver(rules)}, "columnKind": "unicodeCodePoints",
                           "originalUriBaseIds": {"%SRCROOT%": {"description": {
                               "text": "The repository root (where lobsterc ran)."}}},
                           "results": results}
    if properties:
        run["properties"] = properties
    return json.dumps({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, indent=2,
                      ensure_ascii=False) + "\n"


def _rule(rule_id: str, name: str, title: str, help_text: str, level: str) -> dict[str, Any]:
    return {"id": rule_id, "name": name, "shortDescription": {"text": title},
            "fullDescription": {"text": help_text}, "help": {"text": help_text,
                                                             "markdown": help_text},
            "defaultConfiguration": {"level": level}}


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:32]


# lint ------------------------------------------------------------------------------------------

LINT_HELP = {
    "W301": "An `${arg}` in a `run:` line is pasted into shell code, so an arg value can run "
            "commands. Read the injected variable instead (\"$LOBSTER_ARG_NAME\"): the shell "
            "then sees the value as data.",
    "W302": "A shell step, an exec or gateway pipeline step, or a parallel step without "
            "`timeout_ms`: a command that hangs holds the run until the caller's timeoutMs. "
            "Add `timeout_ms`.",
    "W303": "An arg that no value, LOBSTER_ARG_<NAME> or LOBSTER_ARGS_JSON uses. Use it or "
            "remove it.",
    "W304": "A condition that references no step and is always true: the step always runs. "
            "Remove the condition.",
    "W305": "No path of the compiled program reaches this step (its condition is always false, "
            "or nothing leads to it). Remove it or fix the condition.",
    "W306": "The approval proof over the compiled control-flow graph found a path from the start "
            "to this side-effecting step that passes no approval gate. Put an approval step "
            "before it (a step's own `approval` is asked after the step has run).",
    "W307": "`effects:` takes write, read or none.",
    "W308": "Answers are validated as JSON Schema draft-07, which does not read this keyword: "
            "it constrains nothing. Use a draft-07 keyword.",
    "W309": "A `$step.path` reference in a `run:` line pastes a step's output into shell code. "
            "Pass it through the step's `env:` and read \"$VAR\" in the shell.",
    "W310": "An `${arg}` or `$step.path` in the shell text of a pipeline's exec stage is pasted "
            "into shell code. Pass it through `env:` and read \"$VAR\".",
}


def _lint_help(code: str) -> tuple[str, str]:
    """(title, help text) of a lint or compile code."""
    title = CODES[code].title if code in CODES else code
    if code in LINT_HELP:
        return title, LINT_HELP[code]
    return title, (f"{title[0].upper()}{title[1:]}: an error that stops the compile. The "
                   "message names what was found and what was expected; fix the source at "
                   "the marked place.")


def _rel(path: str) -> str:
    """A path as code scanning names it: relative to where lobsterc ran when under it."""
    rel = os.path.normpath(os.path.relpath(path) if os.path.isabs(path) else path)
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def _line_text(path: str, line: int, cache: dict[str, list[str]]) -> str:
    if path not in cache:
        try:
            with open(path, encoding="utf-8", newline="") as fh:
                cache[path] = fh.read().splitlines()
        except OSError:
            cache[path] = []
    lines = cache[path]
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def lint_sarif(found: Sequence[tuple[str, Any]]) -> str:
    """SARIF of `lobsterc lint` findings: (file linted, Diagnostic) pairs."""
    codes = sorted({d.code for _, d in found})
    rules = []
    for code in codes:
        title, text = _lint_help(code)
        level = "warning" if code.startswith("W") else "error"
        rules.append(_rule(code, "".join(w.capitalize() for w in title.split()[:6]), title,
                           text, level))
    index = {code: i for i, code in enumerate(codes)}
    results = []
    lines: dict[str, list[str]] = {}
    seen: dict[str, int] = {}
    for path, d in found:
        s = d.span
        file = s.source if s else path
        base = _hash(d.code, _uri(file)["uri"], d.message,  # the uri: never where CI checked out
                     _line_text(file, s.line, lines) if s else "")
        seen[base] = seen.get(base, 0) + 1
        location: dict[str, Any] = {"artifactLocation": _uri(file)}
        if s:
            location["region"] = {"startLine": s.line, "startColumn": s.col,
                                  "endLine": s.end_line, "endColumn": max(s.end_col, s.col + 1)
                                  if s.end_line == s.line else s.end_col}
        text = d.message + (f" (help: {d.help})" if d.help else "")
        results.append({"ruleId": d.code, "ruleIndex": index[d.code],
                        "level": "warning" if d.severity == "warning" else "error",
                        "message": {"text": text},
                        "locations": [{"physicalLocation": location}],
                        "partialFingerprints": {FINGERPRINT_KEY: f"{base}:{seen[base]}"}})
    return _log(rules, results)


def lint_github(found: Sequence[tuple[str, Any]]) -> str:
    out = []
    for path, d in found:
        s = d.span
        props = {"file": _rel(s.source if s else path)}
        if s:
            props.update(line=str(s.line), col=str(s.col), endLine=str(s.end_line),
                         endColumn=str(s.end_col))
        props["title"] = f"lobsterc {d.code}"
        text = d.message + (f" (help: {d.help})" if d.help else "")
        out.append(_command("warning" if d.severity == "warning" else "error", props, text))
    return "".join(out)


# diff ------------------------------------------------------------------------------------------

def _rev_path(where: Any, model: Any) -> str:
    """The repository path of a place in a version (a `REV:path` name loses its `REV:`)."""
    rev = getattr(model, "rev", None)
    file = where.file
    if rev and file.startswith(f"{rev}:"):
        return file[len(rev) + 1:]
    return file


def _diff_place(f: Any, report: Any) -> tuple[str, int, str]:
    """(file, line, extra words) of a diff finding: the new version's place, or for something
    that is gone, the new file with the old place named in the words."""
    if f.new is not None:
        return _rev_path(f.new, report.new), f.new.line or 1, ""
    file = _rev_path(Where(report.new.name), report.new)
    return file, 1, f" (old version: {f.old})" if f.old is not None else ""


def diff_sarif(report: Any) -> str:
    """SARIF of a `lobsterc diff` Report; accepted findings carry an external suppression."""
    used = sorted({f.rule for f in report.findings})
    rules = [_rule(r, RULES[r].name, RULES[r].title, RULES[r].help, RULES[r].level)
             for r in used]
    index = {r: i for i, r in enumerate(used)}
    results = []
    for f in report.findings:
        file, line, extra = _diff_place(f, report)
        result: dict[str, Any] = {
            "ruleId": f.rule, "ruleIndex": index[f.rule], "level": _LEVEL[f.severity],
            "message": {"text": f"{f.message}{extra} [id {f.id}]"},
            "locations": [{"physicalLocation": {"artifactLocation": _uri(file),
                                                "region": {"startLine": line}}}],
            "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
            "properties": {"findingId": f.id}}
        if f.accepted:
            result["suppressions"] = [{"kind": "external", "status": "accepted",
                                       "justification": "accepted after review (--accept or "
                                                        "x-reviewed)"}]
        results.append(result)
    props = {"oldProgramHash": report.old.program.hash, "newProgramHash": report.new.program.hash,
             "old": report.old.name, "new": report.new.name}
    return _log(rules, results, props)


def diff_github(report: Any) -> str:
    out = []
    for f in report.findings:
        file, line, extra = _diff_place(f, report)
        level = "notice" if f.accepted else _GITHUB[f.severity]
        title = f"lobsterc diff {f.rule}: {f.title}" + (" (accepted)" if f.accepted else "")
        out.append(_command(level, {"file": _rel(file), "line": str(line), "title": title},
                            f"{f.message}{extra} [id {f.id}]"))
    return "".join(out)


def _command(level: str, props: dict[str, str], message: str) -> str:
    """One GitHub workflow command, escaped as the runner reads it."""
    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    fields = ",".join(f"{k}={prop(v)}" for k, v in props.items())
    return f"::{level} {fields}::{data(message)}\n"
