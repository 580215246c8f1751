"""Run-specific values become placeholders, and two step records are compared field by field.

What is noise (tokens, approval ids, temp paths, uuids, timestamps, the other engine's own
library texts) is decided here and nowhere else.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SERVER_RE = re.compile(r"http://127\.0\.0\.1:\d+")
ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")

# Messages whose tail is written by a library each engine has its own of: only the part
# before the tail is the contract. (JSON.parse's texts are not here: ours are V8's, from
# vm/core/json_errors.py, so `exec --json could not parse stdout as JSON: ...` and a JSON
# workflow file's message are compared whole.)
LIBRARY_TAILS = (
    # a JSON Schema that does not compile: Ajv's meta-schema report against jsonschema's
    re.compile(r"(Workflow step \S+ input\.responseSchema is invalid): .*", re.S),
)
# A whole message that is the YAML parser's report on a workflow file: ours is prefixed and
# worded by PyYAML/our scanner, the original passes the npm `yaml` package's text through bare.
WORKFLOW_PARSE = (
    re.compile(r"Workflow file parse error: .*", re.S),
    re.compile(r".* at line \d+, column \d+:\n.*", re.S),
)
# Lines of our diagnostic rendering in human mode (file:line:col, the excerpt, the caret,
# help): the same additive information as `error.location`.
OUR_RENDERING = re.compile(
    r"\S+:\d+:\d+: (error|warning)\[[A-Z]\d+\]: .*|\s*\d+ \| .*|\s+\|.*|  help: .*|  at \S+:\d+:\d+"
    # an error's detail (issue 21, item 6): a JSON position, an output excerpt, allowed values
    r"|  at line \d+, column \d+: .*|  output: .*|  at /\S*: allowed: .*|  reason: .*")
# (progress lines are not here: SPEC 9.19 allows them only on a terminal, which no case has;
# the resume command on stderr is allow-list entry A13)
VERSION_ARGV = (["version"], ["--version"], ["-v"])

COMPARED = ("exitCode", "stdoutJson", "stdout", "stderr")
# Additive error fields of ours (SPEC section 4; `checkpoint`: issue 24, a refused resume's
# checkpoint state; `detail`: issue 21, what helps fix the input); the original has none.
OURS_ONLY = ("code", "location", "checkpoint", "detail")


class Normaliser:
    """Replaces the values one run makes up (see the module docstring)."""

    def __init__(self, root: Path):
        self.root = root
        self.tokens: list[str] = []
        self.approval_ids: list[str] = []

    def learn(self, value) -> None:
        """Collect resume tokens and approval ids from an envelope."""
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "resumeToken" and isinstance(item, str):
                    if item not in self.tokens:
                        self.tokens.append(item)
                elif key == "approvalId" and isinstance(item, str):
                    if item not in self.approval_ids:
                        self.approval_ids.append(item)
                else:
                    self.learn(item)
        elif isinstance(value, list):
            for item in value:
                self.learn(item)

    def text(self, s: str) -> str:
        for tok in sorted(self.tokens, key=len, reverse=True):
            s = s.replace(tok, "<token>")
        for aid in sorted(self.approval_ids, key=len, reverse=True):
            s = s.replace(aid, "<approval_id>")
        root = str(self.root)
        real = os.path.realpath(root)
        for prefix in dict.fromkeys((real, root)):
            for sub, name in (("/work", "<workdir>"), ("/state", "<statedir>"),
                              ("/home", "<home>"), ("", "<tmp>")):
                s = s.replace(prefix + sub, name)
        s = SERVER_RE.sub("<server>", s)
        s = UUID_RE.sub("<uuid>", s)
        return ISO_RE.sub("<timestamp>", s)

    def value(self, v):
        if isinstance(v, dict):
            out = {}
            for key, item in v.items():
                if key == "resumeToken" and isinstance(item, str):
                    out[key] = "<token>"
                elif key == "approvalId" and isinstance(item, str):
                    out[key] = "<approval_id>"
                else:
                    out[key] = self.value(item)
            return out
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, str):
            return self.text(v)
        return v


def library_tail(message: str) -> str:
    """`message` with the text another engine's library wrote replaced by a placeholder."""
    for pattern in LIBRARY_TAILS:
        m = pattern.fullmatch(message)
        if m:
            return m.group(1) + ": <library message>"
    if any(p.fullmatch(message) for p in WORKFLOW_PARSE):
        return "<workflow file parse error>"
    return message


def comparable(step: dict) -> dict:
    """The fields of a step record that must agree, with our additive fields dropped."""
    out = {k: step[k] for k in COMPARED if k in step}
    env = out.get("stdoutJson")
    if isinstance(env, dict) and isinstance(env.get("error"), dict):
        error = {k: v for k, v in env["error"].items() if k not in OURS_ONLY}
        if isinstance(error.get("message"), str):
            error["message"] = library_tail(error["message"])
        out["stdoutJson"] = {**env, "error": error}
    if "stderr" in out:
        out["stderr"] = _stderr(out["stderr"])
    if (step.get("argv") or [None])[:1] in VERSION_ARGV and "stdout" in out:  # words after it are ignored
        out["stdout"] = "<version>\n"
    if step.get("argv", [None])[:1] == ["doctor"] and isinstance(env, dict):
        out["stdoutJson"] = {**env, "output": [{**o, "version": "<version>"} if isinstance(o, dict) and "version" in o
                                               else o for o in env.get("output", [])]}
    return out


def _stderr(text: str) -> str:
    """Our rendering lines dropped; an `Error: <message>` whose message came from a parsing
    library replaced as in envelopes."""
    lines = [ln for ln in text.split("\n") if not OUR_RENDERING.fullmatch(ln)]
    text = "\n".join(lines)
    m = re.search(r"^(Error|Parse error): (.*)", text, re.S | re.M)
    if m:
        return text[:m.start()] + f"{m.group(1)}: {library_tail(m.group(2).rstrip())}\n"
    return text


def differences(ref: dict, ours: dict) -> list[str]:
    """The compared fields that differ between two step records (empty when they agree)."""
    a, b = comparable(ref), comparable(ours)
    return [f for f in COMPARED if a.get(f) != b.get(f)]
