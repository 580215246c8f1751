"""Hypothesis strategies for differential cases, valid and invalid: pipelines, workflow files,
run/resume decisions, CLI misuse. Nothing generated depends on time or randomness at run time
(data and fake commands are files written into the case's directory)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from .allowlist import ORIGINAL_COMMANDS

KEYS = ("a", "b", "name", "n", "tags")
WORDS = ("x", "y", "Alpha", "beta", "", " pad ", "a,b", "it's", 'q"t', "ünï", "multi\nline")

scalars = st.one_of(
    st.integers(-3, 12),
    st.sampled_from((1.5, -0.5, 2.0, 0.1, 1e21, 100.0)),
    st.sampled_from(WORDS),
    st.booleans(),
    st.none(),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)), max_leaves=6)
records = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)
items = st.lists(st.one_of(records, records, records, scalars), max_size=6)


def sq(text: str) -> str:
    """A pipeline token quoted with the tokenizer's single quotes (`\\'` escapes a quote)."""
    return "'" + text.replace("'", "\\'") + "'"


FIELD = st.sampled_from(KEYS + ("a.b", "name.x", "missing"))
FIELDS = st.lists(st.sampled_from(KEYS + ("missing",)), min_size=1, max_size=3).map(",".join)
NUMBERISH = st.sampled_from(("1", "0", "-1", "2.5", "1e3", "0x10", "Infinity", "abc", "", "true",
                             "null", "false", "x", "'x'", '"x"'))
TEMPLATES = st.sampled_from((
    "{{a}}", "{{ name | upper }}", "{{name|lower}}-{{n}}", "{{ . }}", "{{this}}", "{{tags | join}}",
    "{{tags | join '+'}}", "{{tags|first}}", "{{tags|last}}", "{{tags | length}}", "{{name|length}}",
    "{{name | truncate 2}}", "{{name|replace a o}}", "{{name | split ,}}", "{{a | json}}",
    "{{missing | default none}}", "{{n | round 1}}", "{{n|round}}", "{{ a | trim }}",
    "{{n | date YYYY-MM-DD}}", "{{a|string}}", "{{a | nosuch}}", "{{ a.b }}", "plain text",
    "{{a}} and {{b}}", "{{ name | upper | truncate 3 }}",
))
SCHEMAS = (
    {"type": "object", "properties": {"count": {"type": "integer", "minimum": 1}}, "required": ["count"]},
    {"type": "object", "properties": {"env": {"enum": ["prod", "staging"]}}, "required": ["env"],
     "additionalProperties": False},
    {"type": "string", "minLength": 2},
    {"type": "array", "items": {"type": "number"}, "maxItems": 2},
    {"type": "boolean"},
)
ANSWERS = ({"count": 2}, {"count": 0}, {"count": "2"}, {}, {"env": "prod"}, {"env": "prd"},
           {"env": "prod", "x": 1}, "ok", "o", [1, 2], [1, "a"], [1, 2, 3], True, None,
           {"decision": "approve"}, {"decision": "nope"}, {"decision": "reject", "feedback": "f"})


def data_source(data: list) -> tuple[str, dict]:
    """A first stage that emits `data` as items, and the files it needs."""
    return "exec --json --shell 'cat data.json'", {"data.json": json.dumps(data)}


@st.composite
def stage(draw) -> str:
    kind = draw(st.sampled_from((
        "where", "where", "pick", "head", "sort", "dedupe", "groupBy", "map", "template",
        "exec_stdin", "state", "diff", "misc", "email", "bad")))
    if kind == "where":
        op = draw(st.sampled_from(("==", "=", "!=", "<", "<=", ">", ">=")))
        expr = f"{draw(FIELD)}{draw(st.sampled_from(('', ' ')))}{op}{draw(NUMBERISH) or '1'}"
        return "where " + sq(expr) if " " in expr or "'" in expr or '"' in expr else "where " + expr
    if kind == "pick":
        return "pick " + draw(FIELDS)
    if kind == "head":
        return draw(st.sampled_from(("head", "head --n 2", "head --n 0", "head --n=1", "head --n -1",
                                     "head --n abc", "head 3", "head --n 1.5")))
    if kind == "sort":
        return "sort" + draw(st.sampled_from(("", " --key " + draw(FIELD)))) + draw(
            st.sampled_from(("", " --desc")))
    if kind == "dedupe":
        return "dedupe" + draw(st.sampled_from(("", " --key " + draw(FIELD))))
    if kind == "groupBy":
        return draw(st.sampled_from(("groupBy", "group_by"))) + draw(
            st.sampled_from((" --key " + draw(FIELD), " --key " + draw(FIELD), "")))
    if kind == "map":
        return draw(st.sampled_from((
            "map --wrap v", "map --unwrap a", "map --unwrap name", "map --wrap v --unwrap a",
            "map x={{a}}", "map x={{name}} y=lit", "map novalue", "map =z", "map t={{tags}}")))
    if kind == "template":
        return "template --text " + sq(draw(TEMPLATES))
    if kind == "exec_stdin":
        mode = draw(st.sampled_from(("json", "jsonl", "raw", "JSON", "bogus")))
        return f"exec --stdin {mode} --shell 'cat'" + draw(st.sampled_from(("", " | exec --json --shell 'cat'")))
    if kind == "state":
        key = draw(st.sampled_from(("k", "My Key", "_Demo KEY_", "a/b")))
        return draw(st.sampled_from((f"state.set {sq(key)}", f"state.get {sq(key)}", "state.get")))
    if kind == "diff":
        return draw(st.sampled_from(("diff.last --key d", "diff.last d", "diff.last")))
    if kind == "email":  # the commands that need no external CLI, or not with these flags
        return draw(st.sampled_from((
            "email.triage", "email.triage --limit 2", "email.triage --limit 0",
            "email.triage --emit drafts", "email.triage --llm", "map to={{name}} body={{a}} | "
            "gog.gmail.send --dry-run", "gog.gmail.send --dryRun", "workflows.run --name nope",
            "workflows.run --name github.pr.monitor --args-json '{}'")))
    if kind == "misc":
        return draw(st.sampled_from(("json", "table", "commands.list | pick name", "exec --shell 'echo hi'",
                                     "exec echo one two", "exec --shell 'exit 3'", "exec --json --shell 'echo nope'",
                                     "exec --json --shell 'printf \"\"'", "exec ./bin/emit",
                                     "exec --json ./bin/emit")))
    return draw(st.sampled_from((
        "nosuch", "where", "where a", "pick", "template", "exec", "head --n", "sort --key",
        "map --wrap", "groupBy --key", "ask --schema '{bad'", "ask --schema '[1]'",
        "exec --stdin raw", "where 'a b == 1'", "json --pretty", "pick ,,")))


@st.composite
def gate(draw) -> str:
    if draw(st.booleans()):
        prompt = draw(st.sampled_from(("", " --prompt 'Go on?'", " --prompt=Ship")))
        extra = draw(st.sampled_from(("", " --preview-from-stdin", " --preview-from-stdin --limit 1",
                                      " --emit", " --preview-from-stdin --limit x")))
        return "approve" + prompt + extra
    schema = draw(st.sampled_from((None,) + SCHEMAS))
    text = "ask" + draw(st.sampled_from(("", " --prompt 'How many?'")))
    if schema is not None:
        text += " --schema " + sq(json.dumps(schema))
    return text + draw(st.sampled_from(("", " --subject-from-stdin", " --emit")))


@st.composite
def decisions(draw, max_size: int = 3) -> list[dict]:
    """Resume steps: answers valid and invalid, cancels, replays of a spent token, approval ids."""
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        kind = draw(st.sampled_from(("yes", "yes", "no", "cancel", "answer", "answer", "raw", "replay",
                                     "id", "bad_id", "garbage", "approve_bad")))
        if kind == "yes":
            out.append({"action": "resume", "approve": True})
        elif kind == "no":
            out.append({"action": "resume", "approve": False})
        elif kind == "cancel":
            out.append({"action": "resume", "cancel": True})
        elif kind == "answer":
            out.append({"action": "resume", "responseJson": draw(st.sampled_from(ANSWERS))})
        elif kind == "raw":
            out.append({"action": "resume", "responseJsonRaw": draw(st.sampled_from(("{not json", "", "1", "\"s\"")))})
        elif kind == "replay":
            out.append({"action": "resume", "tokenFromStep": 0,
                        **draw(st.sampled_from(({"approve": True}, {"responseJson": {"count": 2}},
                                                {"cancel": True})))})
        elif kind == "id":
            out.append({"action": "resume", "approvalId": True, "approve": draw(st.booleans())})
        elif kind == "bad_id":
            out.append({"action": "resume", "approvalId": draw(st.sampled_from(("deadbeef", "XYZ", "0"))),
                        "approve": True})
        elif kind == "garbage":
            out.append({"action": "resume", "token": draw(st.sampled_from(("garbage", "", "eyJ2IjoxfQ"))),
                        "approve": True})
        else:
            out.append({"action": "resume", "approveRaw": draw(st.sampled_from(("maybe", "Y", "NO", "")))})
    return out


FAKE_EMIT = "#!/bin/sh\nprintf '%s\\n' '[{\"a\":1,\"name\":\"x\"},{\"a\":2,\"name\":\"y\"}]'\n"


@st.composite
def pipeline_cases(draw) -> dict:
    data = draw(items)
    source, files = data_source(data)
    stages = [source] + draw(st.lists(stage(), max_size=3))
    if draw(st.integers(0, 3)) == 0:
        stages.insert(draw(st.integers(1, len(stages))), draw(gate()))
    if draw(st.integers(0, 4)) == 0:
        stages.append(draw(st.sampled_from(("json", "table"))))
    files["bin/emit"] = FAKE_EMIT
    mode = draw(st.sampled_from(("tool", "tool", "human")))
    steps = [{"action": "run"}] + draw(decisions())
    case = {"kind": "pipeline", "pipeline": " | ".join(stages), "mode": mode, "files": files,
            "steps": steps}
    if draw(st.integers(0, 6)) == 0:
        case["env"] = draw(ENVIRONMENTS)
    if draw(st.integers(0, 8)) == 0:
        steps.insert(0, {"action": "cli", "argv": ["run", "--dry-run", case["pipeline"]]})
    return case


ENVIRONMENTS = st.sampled_from((
    {"LOBSTER_MAX_OUTPUT_BYTES": "40"}, {"LOBSTER_MAX_TOOL_ENVELOPE_BYTES": "1500"},
    {"LOBSTER_SHELL": "/bin/bash"}, {"LOBSTER_APPROVAL_INITIATED_BY": "bob"},
    {"LOBSTER_APPROVAL_REQUIRED_APPROVER": "alice", "LOBSTER_APPROVAL_APPROVED_BY": "alice"},
))


TOKENIZER_BITS = st.sampled_from((
    "a", "'a b'", '"a b"', "ab'cd ef'gh", "''", '""', "'it\\'s'", '"q\\"t"', '"a\\nb"', "'a\\\\nb'",
    "a\\|b", "'|'", "--x=", "--=v", "-n", "--flag", "$HOME", "'${x}'", "\"tab\there\""))


@st.composite
def tokenizer_cases(draw) -> dict:
    """Quoting, escapes and splitting, echoed back through `exec` and `template`."""
    parts = draw(st.lists(TOKENIZER_BITS, min_size=1, max_size=4))
    shape = draw(st.sampled_from(("template", "exec", "pipes", "empty")))
    if shape == "template":
        text = "exec --json --shell 'echo [1]' | template " + " ".join(parts)
    elif shape == "exec":
        text = "exec ./bin/args " + " ".join(parts)
    elif shape == "pipes":
        text = draw(st.sampled_from(("", " ", "|", "a |", "| a", "exec --shell 'echo 1' | | json",
                                     "exec --shell 'echo 1' |", "exec --shell 'echo \"unclosed", "'")))
    else:
        text = "exec --json --shell ./bin/emit | map " + " ".join(parts)
    files = {"bin/emit": FAKE_EMIT, "bin/args": "#!/bin/sh\nfor a in \"$@\"; do printf '<%s>\\n' \"$a\"; done\n"}
    return {"kind": "pipeline", "pipeline": text, "mode": draw(st.sampled_from(("tool", "human"))),
            "files": files, "steps": [{"action": "run"}]}


# ---------------------------------------------------------------- workflow files

def yaml_dump(value, indent: int = 0) -> str:
    """Block-style YAML with JSON scalars (valid YAML 1.2), so both loaders read the same tree."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return pad + "{}\n"
        out = []
        for key, item in value.items():
            k = json.dumps(key) if not str(key).replace("_", "").isalnum() else key
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{k}:\n{yaml_dump(item, indent + 2)}")
            else:
                out.append(f"{pad}{k}: {_scalar(item)}\n")
        return "".join(out)
    if isinstance(value, list):
        if not value:
            return pad + "[]\n"
        out = []
        for item in value:
            if isinstance(item, (dict, list)) and item:
                body = yaml_dump(item, indent + 2)
                out.append(f"{pad}- {body[indent + 2:]}")
            else:
                out.append(f"{pad}- {_scalar(item)}\n")
        return "".join(out)
    return pad + _scalar(value) + "\n"


def _scalar(value) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, str) and value in ("yes", "no", "on", "off", "y", "n"):
        return value
    return json.dumps(value, ensure_ascii=False)


CONDITIONS = (
    "true", "false", "$s0.approved", "!$s0.skipped", "$s0.json.a == 1", "$s0.json.a > 0",
    "$s0.json.name == 'x'", "$s0.json.a != 2 && true", "$s0.json.a < 'b'", "$s1.json == null",
    "$gate.approved", "$ask.response.decision == approve", "$nope.json", "$s0.json.a ==",
    "(false || $s0.json.a >= 1)", "$s0.stdout", "1 == 1", "approve == $s0.json.name",
)


@st.composite
def run_step(draw, sid: str, earlier: list[str]) -> dict:
    kind = draw(st.sampled_from(("echo", "echo", "emit", "args", "fail", "pipeline", "pipeline",
                                 "stdin", "envvar")))
    if kind == "echo":
        payload = json.dumps(draw(st.one_of(items, records, scalars)), ensure_ascii=False)
        step = {"id": sid, "run": "printf '%s\\n' " + _shq(payload)}
    elif kind == "emit":
        step = {"id": sid, draw(st.sampled_from(("run", "command"))): "./bin/emit"}
    elif kind == "args":
        step = {"id": sid, "run": "echo \"${who}\" \"$LOBSTER_ARG_WHO\" $LOBSTER_ARGS_JSON"}
    elif kind == "fail":
        step = {"id": sid, "run": draw(st.sampled_from(("exit 2", "echo oops >&2; exit 1", "echo out; exit 4")))}
    elif kind == "pipeline":
        data = draw(items)
        step = {"id": sid, "pipeline": "exec --json --shell " + sq("printf '%s' " + _shq(json.dumps(data)))
                + draw(st.sampled_from(("", " | pick a,name", " | sort --key a", " | head --n 1",
                                        " | template --text '{{name}}'", " | json", " | table",
                                        " | approve", " | ask --emit", " | nosuch")))}
    elif kind == "stdin":
        ref = draw(st.sampled_from(earlier)) if earlier else "s0"
        step = {"id": sid, "run": "cat", "stdin": draw(st.sampled_from((
            f"${ref}.stdout", f"${ref}.json", f"${ref}.json.a", f"prefix $" + ref + ".json",
            "literal text", f"${ref}.approved", "$unknown.json")))}
        if draw(st.booleans()):
            step = {"id": sid, "pipeline": "pick a", "stdin": step["stdin"]}
    else:
        step = {"id": sid, "run": "echo \"$GREETING-$STEPVAR\"",
                "env": {"STEPVAR": draw(st.sampled_from(("s", "${who}", "$s0.stdout")))}}
    return step


def _shq(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@st.composite
def decorate(draw, step: dict, earlier: list[str]) -> dict:
    """Optional fields on an executing step: when, retry, timeout_ms, on_error, approval."""
    if draw(st.integers(0, 3)) == 0:
        step[draw(st.sampled_from(("when", "condition")))] = draw(st.one_of(
            st.sampled_from(CONDITIONS), st.booleans(), st.sampled_from((1, None, "yes"))))
    if draw(st.integers(0, 4)) == 0:
        step["retry"] = draw(st.sampled_from((
            {"max": 2, "delay_ms": 0}, {"max": 3, "delay_ms": 0, "backoff": "exponential"},
            {"max": 0}, {"max": 2, "backoff": "linear", "delay_ms": 0}, {"max": 2, "delay_ms": -1},
            {"max": 2, "delay_ms": 0, "jitter": "yes"}, "3")))
    if draw(st.integers(0, 5)) == 0:
        step["timeout_ms"] = draw(st.sampled_from((5000, 0, -1, 1.5, "100", 2147483648)))
    if draw(st.integers(0, 4)) == 0:
        step["on_error"] = draw(st.sampled_from(("stop", "continue", "skip_rest", "ignore")))
    if draw(st.integers(0, 5)) == 0:
        step["approval"] = draw(approval_field())
    return step


@st.composite
def approval_field(draw):
    return draw(st.one_of(
        st.sampled_from((True, False, "required", "Ship it?", "", [], "yes")),
        st.fixed_dictionaries({}, optional={
            "prompt": st.sampled_from(("Deploy?", "")),
            "items": st.sampled_from(([1, 2], [], "x")),
            "preview": st.sampled_from(("pv", 3)),
            "initiated_by": st.sampled_from(("bob", 5)),
            "required_approver": st.sampled_from(("alice", True)),
            "require_different_approver": st.sampled_from((True, False, "true")),
        })))


@st.composite
def workflow_steps(draw) -> tuple[list, dict]:
    steps: list = []
    files: dict = {"bin/emit": FAKE_EMIT}
    count = draw(st.integers(1, 4))
    for i in range(count):
        sid = f"s{i}"
        earlier = [s["id"] for s in steps if isinstance(s, dict) and "id" in s]
        kind = draw(st.sampled_from(("run", "run", "run", "gate", "input", "for_each", "parallel",
                                     "workflow", "bad")))
        if kind == "run":
            step = draw(decorate(draw(run_step(sid, earlier)), earlier))
        elif kind == "gate":
            step = {"id": "gate" if "gate" not in earlier else sid, "approval": draw(approval_field())}
            if draw(st.booleans()) and earlier:
                step["stdin"] = f"${earlier[-1]}.json"
        elif kind == "input":
            step = {"id": "ask" if "ask" not in earlier else sid,
                    "input": draw(st.fixed_dictionaries(
                        {"prompt": st.sampled_from(("Pick one", 5)),
                         "responseSchema": st.sampled_from(SCHEMAS + ({"type": "nonsense"}, "str"))},
                        optional={"defaults": st.sampled_from(({"count": 1}, "d"))}))}
        elif kind == "for_each":
            src = earlier[-1] if earlier else "s0"
            sub = [{"id": "inner", "run": "echo \"$item.json-$index.json\""}]
            if draw(st.booleans()):
                sub.append({"id": "p", "pipeline": "exec --json --shell 'echo 1'",
                            "when": draw(st.sampled_from(("true", "$index.json > 0", "$item.json.a == 1")))})
            step = {"id": sid, "for_each": draw(st.sampled_from((f"${src}.json", f"${src}.stdout", "[1,2]"))),
                    "steps": sub}
            if draw(st.integers(0, 3)) == 0:
                step.update(draw(st.sampled_from(({"item_var": "it", "index_var": "ix"}, {"batch_size": 1, "pause_ms": 0},
                                                   {"item_var": "x", "index_var": "x"}, {"batch_size": 0}))))
                if step.get("item_var") == "it":
                    sub[0]["run"] = "echo \"$it.json-$ix.json\""
            if draw(st.integers(0, 4)) == 0:
                sub.append({"id": "g", "approval": True})
        elif kind == "parallel":
            step = {"id": sid, "parallel": {
                # not `any`: which branch wins is a race, in either engine (noise N6)
                "wait": draw(st.sampled_from(("all", "all", "some"))),
                "branches": [{"id": f"b{i}a", "run": "echo '{\"x\":1}'"},
                             draw(st.sampled_from(({"id": f"b{i}b", "pipeline": "exec --json --shell 'echo [2]'"},
                                                   {"id": f"b{i}b", "run": "exit 5"},
                                                   {"id": f"b{i}b"}, {"id": sid, "run": "true"})))]}}
        elif kind == "workflow":
            files["sub.lobster"] = yaml_dump({"args": {"x": {"default": "dx"}}, "steps": [
                {"id": "c0", "run": "echo \"sub ${x}\""},
                *draw(st.sampled_from(([], [{"id": "c1", "approval": True}],
                                       [{"id": "c1", "pipeline": "exec --json --shell 'echo [7]'"}])))]})
            step = {"id": sid, "workflow": draw(st.sampled_from(("sub.lobster", "missing.lobster", "", 3))),
                    **draw(st.sampled_from(({}, {"workflow_args": {"x": "${who}"}}, {"workflow_args": "bad"})))}
        else:
            step = draw(st.sampled_from((
                {"run": "echo no id"}, {"id": "", "run": "true"}, {"id": "s0", "run": "true"},
                {"id": sid}, {"id": sid, "run": "true", "pipeline": "json"}, {"id": sid, "run": 5},
                {"id": sid, "input": {"prompt": "p", "responseSchema": {}}, "run": "true"},
                {"id": sid, "approval": True, "input": {"prompt": "p", "responseSchema": {}}},
                {"id": sid, "run": "true", "unknown_key": 1}, "not a step",
                {"id": sid, "for_each": 5, "steps": []}, {"id": sid, "parallel": {"branches": []}},
                {"id": sid, "run": "true", "depends_on": ["s0"]})))
        steps.append(step)
    return steps, files


@st.composite
def workflow_cases(draw) -> dict:
    steps, files = draw(workflow_steps())
    doc: dict = {}
    if draw(st.booleans()):
        doc["name"] = "diff"
    if draw(st.booleans()):
        doc["args"] = {"who": {"default": draw(st.sampled_from(("world", "it's", "a b", 3)))}}
    if draw(st.integers(0, 2)) == 0:
        doc["env"] = {"GREETING": draw(st.sampled_from(("hi", "${who}", 5)))}
    if draw(st.integers(0, 6)) == 0:
        doc["cost_limit"] = draw(st.sampled_from(({"max_usd": 1}, {"max_usd": -1}, "x", {"max_usd": 1, "action": "halt"})))
    doc["steps"] = steps
    if draw(st.integers(0, 12)) == 0:
        doc = draw(st.sampled_from(({"steps": []}, {"name": "x"}, [1, 2], "text", {"steps": "s"})))
    ext = draw(st.sampled_from(("lobster", "lobster", "yaml", "json")))
    text = json.dumps(doc, indent=1) if ext == "json" else yaml_dump(doc)
    if draw(st.integers(0, 15)) == 0:
        text = draw(st.sampled_from(("steps: [", "{]", "steps:\n  - id: a\n   run: x\n", "")))
    files[f"workflow.{ext}"] = text
    case = {"kind": "workflow", "file": f"workflow.{ext}", "files": files,
            "mode": draw(st.sampled_from(("tool", "tool", "human"))),
            "steps": [{"action": "run"}] + draw(decisions())}
    args = draw(st.sampled_from((None, None, {"who": "caller"}, {"other": 1}, "RAW{bad", "RAW[1]")))
    if isinstance(args, str):
        case["argsJsonRaw"] = args[3:]
    elif args is not None:
        case["args"] = args
    if draw(st.integers(0, 8)) == 0:
        case["steps"].insert(0, {"action": "cli", "argv": draw(st.sampled_from((
            ["run", "--dry-run", "--file", case["file"]], ["graph", "--file", case["file"]],
            ["graph", "--file", case["file"], "--format", "ascii"],
            ["graph", "--file", case["file"], "--format", "dot"])))})
    if draw(st.integers(0, 5)) == 0:
        case["env"] = draw(st.sampled_from(({"LOBSTER_APPROVAL_APPROVED_BY": "alice"},
                                            {"LOBSTER_APPROVAL_APPROVED_BY": "bob"},
                                            {"LOBSTER_APPROVAL_INITIATED_BY": "bob",
                                             "LOBSTER_APPROVAL_REQUIRE_DIFFERENT_APPROVER": "1"})))
    return case


# ---------------------------------------------------------------- CLI misuse

CLI_ARGV = (
    [], ["help"], ["help", "exec"], ["help", "nosuch"], ["help", "where"], ["version"], ["--version"],
    ["run"], ["run", "--mode", "tool"], ["run", "--mode", "tool", "--args-json", "{x", "exec --shell 'echo 1'"],
    ["run", "--mode", "bogus", "exec --json --shell 'echo [1]'"], ["run", "--file", "nope.lobster"],
    ["run", "--mode", "tool", "--file", "nope.lobster"], ["run", "--mode", "tool", "--file", "data.txt"],
    ["run", "--mode", "tool", "--dry-run", "exec --shell 'echo 1' | json"],
    ["run", "--mode", "tool", "exec", "--shell", "echo hi"], ["resume"], ["resume", "--token", "x"],
    ["resume", "--token", "x", "--approve", "maybe"], ["resume", "--approve", "yes"],
    ["resume", "--token", "x", "--approve", "yes", "--cancel"], ["resume", "--token", "x", "--cancel", "maybe"],
    ["resume", "--token", "x", "--response-json", "{bad"], ["resume", "--id", "zz", "--approve", "yes"],
    ["resume", "--token=x", "--decision=no"], ["graph"], ["graph", "--file", "nope.lobster"],
    ["graph", "--file", "w.lobster", "--format", "svg"], ["graph", "--file", "w.lobster", "--format", "ascii"],
    ["graph", "--file", "w.lobster", "--format", "dot"], ["graph", "--file", "w.lobster"],
    ["graph", "--file", "w.lobster", "--args-json", "[1]"], ["nosuch"], ["--mode", "tool"],
    ["run", "--mode", "tool", "w.lobster"], ["run", "--mode", "tool", "--dry-run", "--file", "w.lobster"],
    ["run", "--dry-run", "--file", "w.lobster"], ["run", "--mode=tool", "exec --json --shell 'echo [3]'"],
)
SMALL_WORKFLOW = ("args:\n  who:\n    default: you\nsteps:\n  - id: a\n    run: echo \"${who}\"\n"
                  "  - id: b\n    approval: Go?\n    stdin: $a.stdout\n  - id: c\n    when: $b.approved\n"
                  "    pipeline: exec --json --shell 'echo [1]'\n")


@st.composite
def cli_cases(draw) -> dict:
    argv = draw(st.sampled_from(CLI_ARGV))
    return {"kind": "pipeline", "files": {"w.lobster": SMALL_WORKFLOW, "data.txt": "x"},
            "steps": [{"action": "cli", "argv": list(argv)}]}




# ---------------------------------------------------------------- areas of issue 11 item 2
# Each strategy aims at one area where the two engines were known to part; `area_cases`
# draws from all of them.

MODES = st.sampled_from(("tool", "human"))
BIG_OUTPUT = st.sampled_from(("seq 1 40", "printf '%s' 0123456789012345678901234567890123456789",
                              "echo short", "printf '[1,2,3]'", "seq 1 400 >&2; echo ok"))
CAP_VALUES = st.sampled_from(("40", "10", "0", "-1", "abc", "1e3", " 64 ", "100000", "", "12.5", "0x20", "007"))


@st.composite
def output_cap_cases(draw) -> dict:
    """LOBSTER_MAX_OUTPUT_BYTES from the environment, a workflow's env or a step's own env."""
    value, line = draw(CAP_VALUES), draw(BIG_OUTPUT)
    where = draw(st.sampled_from(("process", "process", "workflow", "step", "pipeline_step")))
    json_flag = draw(st.sampled_from(("", "--json ")))
    if where == "process":
        return {"kind": "pipeline", "mode": draw(MODES), "env": {"LOBSTER_MAX_OUTPUT_BYTES": value},
                "pipeline": f"exec {json_flag}--shell {sq(line)}" + draw(st.sampled_from(("", " | head --n 1"))),
                "steps": [{"action": "run"}]}
    step: dict = {"id": "a"}
    if where == "pipeline_step":
        step["pipeline"] = f"exec {json_flag}--shell {sq(line)}"
    else:
        step["run"] = line
    doc: dict = {"steps": [step, {"id": "b", "run": "echo after"}]}
    if where == "workflow":
        doc["env"] = {"LOBSTER_MAX_OUTPUT_BYTES": value}
    else:
        step["env"] = {"LOBSTER_MAX_OUTPUT_BYTES": value}
    return {"kind": "workflow", "file": "w.lobster", "files": {"w.lobster": yaml_dump(doc)},
            "mode": draw(MODES), "steps": [{"action": "run"}]}


@st.composite
def envelope_cap_cases(draw) -> dict:
    """LOBSTER_MAX_TOOL_ENVELOPE_BYTES against a big input subject."""
    value = draw(st.sampled_from(("1500", "10", "abc", "0", "1024", "2000", "600000", "-3", "")))
    size = draw(st.sampled_from((10, 3000, 250000)))
    if draw(st.booleans()):
        doc = {"steps": [{"id": "a", "run": f"head -c {size} /dev/zero | tr '\\\\0' x; echo"},
                         {"id": "q", "input": {"prompt": "p", "responseSchema": {"type": "string"}},
                          "stdin": draw(st.sampled_from(("$a.stdout", "$a.json")))}]}
        return {"kind": "workflow", "file": "w.lobster", "files": {"w.lobster": yaml_dump(doc)},
                "mode": "tool", "env": {"LOBSTER_MAX_TOOL_ENVELOPE_BYTES": value},
                "steps": [{"action": "run"}] + draw(decisions(1))}
    return {"kind": "pipeline", "mode": "tool", "env": {"LOBSTER_MAX_TOOL_ENVELOPE_BYTES": value},
            "pipeline": f"exec --shell \"head -c {size} /dev/zero | tr '\\\\\\\\0' y\" | "
                        + draw(st.sampled_from(("ask --subject-from-stdin", "approve --preview-from-stdin",
                                                "ask --emit"))),
            "steps": [{"action": "run"}]}


LLM_MODELS = st.sampled_from(("gpt-4o", "gpt-4o-mini", "mystery-model", "bad\u001b[31mmodel\nx", None))


def _llm_reply(draw) -> dict:
    model = draw(LLM_MODELS)
    result: dict = {"output": draw(st.sampled_from(({"text": "hello"}, {"data": {"a": 1}}, {})))}
    if model is not None:
        result["model"] = model
    if draw(st.booleans()):
        result["usage"] = draw(st.sampled_from(({"input_tokens": 200000, "output_tokens": 100000},
                                                {"prompt_tokens": 10, "completion_tokens": 5},
                                                {"inputTokens": -1}, {})))
    body = json.dumps(draw(st.sampled_from(({"ok": True, "result": result}, result,
                                            {"ok": False, "error": {"message": "down"}}))))
    body = draw(st.sampled_from((body, body, "not json", "")))
    return {"status": draw(st.sampled_from((200, 200, 200, 500))), "body": body,
            "chunked": draw(st.booleans())}


@st.composite
def http_cases(draw) -> dict:
    """llm.invoke against a real server on 127.0.0.1: the response cap, cost warnings and
    cost_limit, pricing from the environment."""
    env = {"LOBSTER_LLM_PROVIDER": "http", "LOBSTER_LLM_ADAPTER_URL": "<server>"}
    if draw(st.booleans()):
        env["LOBSTER_MAX_HTTP_RESPONSE_BYTES"] = draw(st.sampled_from(("10", "100000", "abc", "0", "-5", " 20 ", "")))
    if draw(st.integers(0, 3)) == 0:
        env["LOBSTER_LLM_PRICING_JSON"] = draw(st.sampled_from((
            "x", '{"mystery-model": {"input": 1, "output": 2}}', '{"m": {"input": -1}}', "[]")))
    stage = "llm.invoke --prompt hi" + draw(st.sampled_from(("", " --model gpt-4o", " --model mystery-model",
                                                             " --provider nosuch")))
    case = {"server": _llm_reply(draw), "env": env}
    if draw(st.booleans()):
        return {**case, "kind": "pipeline", "mode": draw(MODES), "pipeline": stage + draw(st.sampled_from(("", " | pick model"))),
                "steps": [{"action": "run"}]}
    doc: dict = {"steps": [{"id": "a", "pipeline": stage}, {"id": "b", "run": "echo done"}]}
    if draw(st.booleans()):
        doc["cost_limit"] = draw(st.sampled_from(({"max_usd": 0.5}, {"max_usd": 0.5, "action": "stop"},
                                                  {"max_usd": 100}, {"max_usd": 0, "action": "warn"})))
    return {**case, "kind": "workflow", "file": "w.lobster", "files": {"w.lobster": yaml_dump(doc)},
            "mode": draw(MODES), "steps": [{"action": "run"}]}


@st.composite
def load_failure_cases(draw) -> dict:
    """Workflow files that cannot be loaded, named every way the CLI takes a file."""
    name = draw(st.sampled_from(("missing.lobster", "wfdir.lobster", "w.txt", "w.yml", "W.LOBSTER", "w.json",
                                 "wfdir", "sub/missing.yaml", "empty.lobster", "w.lobster")))
    argv = draw(st.sampled_from((
        ["run", "--mode", "tool", "--file", name], ["run", "--file", name], ["run", "--mode", "tool", name],
        ["run", name], ["run", "--dry-run", "--file", name], ["graph", "--file", name],
        ["run", "--mode", "tool", "--dry-run", "--file", name])))
    files = {"w.txt": "steps: []\n", "w.yml": "steps:\n  - id: a\n    run: echo yml\n",
             "W.LOBSTER": "steps:\n  - id: a\n    run: echo up\n", "w.json": '{"steps": [{"id": "a", "run": "echo j"}]}',
             "wfdir.lobster/keep": "", "wfdir/keep": "", "empty.lobster": "",
             "w.lobster": "steps:\n  - id: a\n    run: echo ok\n"}
    return {"kind": "pipeline", "files": files, "steps": [{"action": "cli", "argv": argv}]}


REF_PLACES = ("stdin", "env", "run", "when", "for_each", "workflow_args", "pipeline")


@st.composite
def unknown_reference_cases(draw) -> dict:
    """A reference to a step that does not exist (or not yet), in every place one can stand."""
    ref = draw(st.sampled_from(("$nope.json", "$nope.stdout", "$b.json", "$a.nosuch", "$a.json.x.y",
                                "$nope", "$a.approved", "$A.json", "$a-b.json")))
    place = draw(st.sampled_from(REF_PLACES))
    b: dict = {"id": "b", "run": "echo b"}
    if place == "stdin":
        b = {"id": "b", "run": "cat", "stdin": ref}
    elif place == "env":
        b = {"id": "b", "run": "echo \"$X\"", "env": {"X": ref}}
    elif place == "run":
        b = {"id": "b", "run": f"echo {ref}"}
    elif place == "when":
        b = {"id": "b", "run": "echo b", "when": ref}
    elif place == "for_each":
        b = {"id": "b", "for_each": ref, "steps": [{"id": "i", "run": "echo $item.json"}]}
    elif place == "workflow_args":
        b = {"id": "b", "workflow": "sub.lobster", "workflow_args": {"x": ref}}
    else:
        b = {"id": "b", "pipeline": f"exec --shell 'echo {ref}'"}
    doc = {"steps": [{"id": "a", "run": "echo '{\"x\":{\"y\":1}}'"}, b, {"id": "c", "run": "echo c"}]}
    files = {"w.lobster": yaml_dump(doc), "sub.lobster": "args:\n  x: {}\nsteps:\n  - id: s\n    run: echo \"${x}\"\n"}
    argv = draw(st.sampled_from((None, None, ["run", "--dry-run", "--file", "w.lobster"], ["graph", "--file", "w.lobster"])))
    steps = [{"action": "cli", "argv": argv}] if argv else [{"action": "run"}]
    return {"kind": "workflow", "file": "w.lobster", "files": files, "mode": draw(MODES), "steps": steps}


BRANCHES = (
    {"run": "echo text"}, {"run": "printf 'a\\nb'"}, {"run": "echo '{\"x\":1}'"}, {"run": "echo '[1,2]'"},
    {"run": "true"}, {"pipeline": "exec --json --shell 'echo [2]'"}, {"pipeline": "exec --shell 'echo plain'"},
    {"run": "echo 5"}, {"run": "echo '\"s\"'"}, {"run": "printf '{bad'"},
)


@st.composite
def parallel_merge_cases(draw) -> dict:
    """How a parallel step merges branches, JSON or not, and what later steps see."""
    chosen = draw(st.lists(st.sampled_from(BRANCHES), min_size=1, max_size=3))
    branches = [{"id": f"b{k}", **b} for k, b in enumerate(chosen)]
    par: dict = {"id": "p", "parallel": {"branches": branches}}
    if draw(st.booleans()):
        par["parallel"]["wait"] = "all"   # `any` is a race (noise N6)
    after = draw(st.sampled_from(({"id": "c", "run": "cat", "stdin": "$p.json"}, {"id": "c", "run": "cat", "stdin": "$p.stdout"},
                                  {"id": "c", "run": "echo \"$p.json.b0\""}, {"id": "c", "pipeline": "json", "stdin": "$p.json"})))
    doc = {"steps": [par, after]}
    return {"kind": "workflow", "file": "w.lobster", "files": {"w.lobster": yaml_dump(doc)},
            "mode": draw(MODES), "steps": [{"action": "run"}]}


@st.composite
def loop_env_cases(draw) -> dict:
    """A for_each or parallel step's own env: does it reach the sub-steps?"""
    kind = draw(st.sampled_from(("for_each", "parallel")))
    env = {"X": draw(st.sampled_from(("loop", "${who}", "$a.stdout")))}
    sub = [{"id": "i", "run": "echo \"$X-$Y\"", **draw(st.sampled_from(({}, {"env": {"Y": "inner"}}, {"env": {"X": "own"}})))}]
    if kind == "for_each":
        step = {"id": "l", "for_each": "$a.json", "steps": sub, "env": env}
    else:
        step = {"id": "l", "parallel": {"branches": sub}, "env": env}
    doc: dict = {"args": {"who": {"default": "w"}}, "steps": [{"id": "a", "run": "echo '[1,2]'"}, step]}
    if draw(st.booleans()):
        doc["env"] = {"Y": "top", "X": "top"}
    return {"kind": "workflow", "file": "w.lobster", "files": {"w.lobster": yaml_dump(doc)},
            "mode": draw(MODES), "steps": [{"action": "run"}]}


@st.composite
def nested_ask_cases(draw) -> dict:
    """`ask` (and `approve`) inside workflow pipeline: steps, parallel branches, for_each sub-steps."""
    gate_text = draw(st.sampled_from(("ask --prompt q", "ask --emit", "ask --schema '{\"type\":\"string\"}'",
                                      "approve --prompt ok", "ask --subject-from-stdin")))
    line = "exec --json --shell 'echo [1]' | " + gate_text
    where = draw(st.sampled_from(("pipeline", "parallel", "for_each")))
    if where == "pipeline":
        step = {"id": "s", "pipeline": line}
    elif where == "parallel":
        step = {"id": "s", "parallel": {"branches": [{"id": "b0", "pipeline": line}, {"id": "b1", "run": "echo x"}]}}
    else:
        step = {"id": "s", "for_each": "[1,2]", "steps": [{"id": "i", "pipeline": line}]}
    doc = {"steps": [{"id": "a", "run": "echo a"}, step, {"id": "c", "run": "echo \"$s.json\""}]}
    return {"kind": "workflow", "file": "w.lobster", "files": {"w.lobster": yaml_dump(doc)},
            "mode": draw(MODES), "steps": [{"action": "run"}] + draw(decisions(2))}


@st.composite
def human_halt_cases(draw) -> dict:
    """What human mode prints at a halt, and resumes from it."""
    if draw(st.booleans()):
        return {"kind": "pipeline", "mode": "human",
                "pipeline": "exec --json --shell 'echo [1,2]' | " + draw(gate()) + draw(st.sampled_from(("", " | json", " | table"))),
                "steps": [{"action": "run"}] + draw(decisions(1))}
    gate_step = draw(st.sampled_from(({"id": "g", "approval": "Ship it?"}, {"id": "g", "approval": True},
                                      {"id": "g", "input": {"prompt": "How many?", "responseSchema": SCHEMAS[0]}})))
    doc = {"steps": [{"id": "a", "run": "echo '[1]'"}, {**gate_step, "stdin": "$a.json"}, {"id": "c", "run": "echo done"}]}
    return {"kind": "workflow", "file": "w.lobster", "files": {"w.lobster": yaml_dump(doc)}, "mode": "human",
            "steps": [{"action": "run"}] + draw(decisions(2))}


@st.composite
def argv_order_cases(draw) -> dict:
    """The options of `run` in every order (`run FILE --args-json J --dry-run`), some left out."""
    options = [("W",), ("--args-json", "J"), ("--dry-run",), ("--mode", "tool")]
    parts = [p for p in draw(st.permutations(options)) if p == ("W",) or draw(st.integers(0, 3)) > 0]
    if draw(st.booleans()):
        parts = [("--file", "W") if p == ("W",) else p for p in parts]
    argv = ["run"] + [word for p in parts for word in p]
    if draw(st.integers(0, 4)) == 0:
        argv.insert(draw(st.integers(1, len(argv))),
                    draw(st.sampled_from(("--dry-run", "--mode=tool", "--args-json={}", "--bogus"))))
    j = json.dumps(draw(st.sampled_from(({"who": "cli"}, {}, {"n": 1}))))
    argv = ["w.lobster" if a == "W" else j if a == "J" else a for a in argv]
    return {"kind": "pipeline", "files": {"w.lobster": SMALL_WORKFLOW},
            "steps": [{"action": "cli", "argv": argv}]}


DAMAGED = ("{bad", "", "null", "[1", '"s"', "1", "[1,2]", '{"a":1}', "\u0000", "true\n\n")


@st.composite
def state_cases(draw) -> dict:
    """state.get and diff.last over a value on disk that is damaged or odd."""
    text = draw(st.sampled_from(DAMAGED))
    key = draw(st.sampled_from(("k", "K", "_k_")))
    pipeline = draw(st.sampled_from((f"state.get {key}", f"state.get {key} | json", f"state.get {key} | pick a",
                                     f"exec --json --shell 'echo [3]' | diff.last --key {key}",
                                     f"exec --json --shell 'echo [3]' | state.set {key} | state.get {key}")))
    return {"kind": "pipeline", "mode": draw(MODES), "pipeline": pipeline, "stateFiles": {"k.json": text},
            "steps": [{"action": "run"}]}


SHELL_NAMES = ("pwsh", "powershell", "powershell.exe", "pwsh.exe", "cmd", "cmd.exe", "CMD.EXE", "PowerShell", "bash", "fish")
FAKE_SHELL = "#!/bin/sh\nfor a in \"$@\"; do printf '<%s>' \"$a\"; done; echo\n"


@st.composite
def shell_cases(draw) -> dict:
    """LOBSTER_SHELL naming PowerShell, cmd or another shell: the arguments it is given."""
    name = draw(st.sampled_from(SHELL_NAMES))
    value = draw(st.sampled_from((f"<workdir>/bin/{name}", f"<workdir>/bin/{name}", name, f" <workdir>/bin/{name} ")))
    files = {f"bin/{name}": FAKE_SHELL}
    if draw(st.booleans()):
        return {"kind": "pipeline", "mode": draw(MODES), "files": files, "env": {"LOBSTER_SHELL": value},
                "pipeline": "exec --shell 'echo hi there'" + draw(st.sampled_from(("", " | json"))),
                "steps": [{"action": "run"}]}
    doc = {"steps": [{"id": "a", "run": "echo \"a b\""}, {"id": "b", "command": "echo c"}]}
    return {"kind": "workflow", "file": "w.lobster", "files": {**files, "w.lobster": yaml_dump(doc)},
            "mode": draw(MODES), "env": {"LOBSTER_SHELL": value}, "steps": [{"action": "run"}]}


ALL_COMMANDS = sorted(ORIGINAL_COMMANDS)


@st.composite
def help_cases(draw) -> dict:
    name = draw(st.sampled_from(ALL_COMMANDS + ["run", "resume", "graph", "help", "nosuch", "group_by"]))
    argv = draw(st.sampled_from((["help", name], [name, "--help"], ["help", name, "extra"], ["--help"], ["-h"])))
    return {"kind": "pipeline", "steps": [{"action": "cli", "argv": argv}]}


PLAN_STEPS = (
    {"id": "m", "run": "echo one\necho two"}, {"id": "l", "run": "cat", "stdin": "literal text"},
    {"id": "p", "pipeline": "exec --json --shell 'echo [1]' | pick a", "timeout_ms": 500, "on_error": "continue"},
    {"id": "r", "run": "true", "retry": {"max": 3, "delay_ms": 10, "backoff": "exponential", "jitter": True}},
    {"id": "g", "approval": "Ship?"}, {"id": "q", "input": {"prompt": "n?", "responseSchema": {"type": "string"}}},
    {"id": "f", "for_each": "[1,2]", "steps": [{"id": "i", "run": "echo $item.json"}]},
    {"id": "w", "workflow": "sub.lobster", "workflow_args": {"x": "${who}"}},
    {"id": "par", "parallel": {"wait": "any", "branches": [{"id": "b0", "run": "echo 0"}, {"id": "b1", "run": "echo 1"}]}},
    {"id": "s", "run": "cat", "stdin": "$m.stdout"}, {"id": "c", "run": "echo c", "when": "$g.approved"},
    {"id": "k", "run": "echo k", "when": "false"}, {"id": "e", "run": "echo \"${who}\" $m.json"},
    {"id": "n", "pipeline": "exec --shell 'echo ${who}' | nosuch"}, {"id": "z"},
    {"id": "long", "run": "echo " + "x" * 120}, {"id": "h", "run": "echo '<a href=\"x\">&|</a>'"},
    {"id": "1st", "run": "echo digit"}, {"id": "a-b", "run": "echo dash", "stdin": "$q.response"},
)


@st.composite
def plan_cases(draw) -> dict:
    """--dry-run plans and graphs (mermaid, dot, ascii) of varied workflows."""
    chosen = draw(st.lists(st.sampled_from(PLAN_STEPS), min_size=1, max_size=5, unique_by=lambda s: s["id"]))
    doc: dict = {"steps": chosen}
    if draw(st.booleans()):
        doc["args"] = {"who": {"default": draw(st.sampled_from(("world", "a&b", "<x>")))}}
    if draw(st.integers(0, 3)) == 0:
        doc["name"] = "plan"
    files = {"w.lobster": yaml_dump(doc), "sub.lobster": "args:\n  x: {}\nsteps:\n  - id: s\n    run: echo \"${x}\"\n"}
    argv = draw(st.sampled_from((
        ["run", "--dry-run", "--file", "w.lobster"], ["run", "--mode", "tool", "--dry-run", "--file", "w.lobster"],
        ["graph", "--file", "w.lobster"], ["graph", "--file", "w.lobster", "--format", "dot"],
        ["graph", "--file", "w.lobster", "--format", "ascii"], ["graph", "--file", "w.lobster", "--format", "mermaid"],
        ["graph", "--file", "w.lobster", "--args-json", '{"who": "cli"}'],
        ["graph", "--file", "w.lobster", "--format", "ascii", "--args-json", '{"who": "cli"}'],
        ["run", "--dry-run", "--file", "w.lobster", "--args-json", '{"who": "cli"}'])))
    return {"kind": "workflow", "file": "w.lobster", "files": files, "steps": [{"action": "cli", "argv": argv}]}


area_cases = st.one_of(output_cap_cases(), envelope_cap_cases(), http_cases(), load_failure_cases(),
                       unknown_reference_cases(), parallel_merge_cases(), loop_env_cases(), nested_ask_cases(),
                       human_halt_cases(), argv_order_cases(), state_cases(), shell_cases(), help_cases(),
                       plan_cases(), plan_cases())
any_case = st.one_of(pipeline_cases(), pipeline_cases(), tokenizer_cases(), workflow_cases(),
                     workflow_cases(), workflow_cases(), cli_cases(), area_cases, area_cases, area_cases)
