"""Generators for what `generators.py` and `edges.py` do not draw (the inventory of the 04:20
session): flag spellings (`--flag=value`, repeated flags, camelCase aliases), number shapes for
numeric flags, template filters with quoted and odd arguments, CLI subcommand flags
(`doctor`, `-v`, `--file=`, `--format=`, resume's `--cancel=`), workflow fields no generator
wrote (`cwd`, `retry.max_delay_ms`, camelCase approval fields, a branch's own `stdin`/`env`,
`parallel.timeout_ms`, odd `batch_size`/`item_var`/`for_each` shapes), data with unicode, long
and deep values, the external-CLI commands through a fake CLI that echoes its argv, resume
arguments after real halts, `${x}` of every JSON type, the whole `when` grammar, state keys of
every shape and `for_each` over every JSON shape.

`python -m tests.differential.survey N OUTDIR more` draws from all of them; `more:NAME` from
one (`MORE`)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from .generators import _shq, sq, values

MODES = st.sampled_from(("tool", "human"))
RUN = {"action": "run"}
DATA = [{"a": 1, "name": "Bob", "tags": ["x", "y"], "n": 2.345, "when": 1700000000000},
        {"a": 3, "name": "ålice", "tags": [], "n": -1.5, "when": "2024-01-02T03:04:05Z"},
        {"a": "2", "name": "", "n": None, "when": "garbage"}, {"b": 1}]


def _src(data) -> tuple[str, dict]:
    return "exec --json --shell 'cat data.json'", {"data.json": json.dumps(data, ensure_ascii=False)}


def _pipe(text: str, area: str, mode: str, files: dict | None = None, steps: list | None = None, **more) -> dict:
    return {"area": area, "kind": "pipeline", "mode": mode, "pipeline": text, "files": files or {},
            "steps": steps or [RUN], **more}


def _wf(doc, area: str, mode: str, files: dict | None = None, steps: list | None = None, **more) -> dict:
    return {"area": area, "kind": "workflow", "file": "w.lobster", "mode": mode,
            "files": {"w.lobster": json.dumps(doc, indent=1, ensure_ascii=False), **(files or {})},
            "steps": steps or [RUN], **more}


# 1. flag spellings and number shapes ---------------------------------------------------------------
NUMS = ("0", "-1", "1.5", "1e2", "1e-1", "0x2", "0b1", "' 2 '", "''", "2abc", "Infinity", "-0", "+3",
        "NaN", "00003", "1_000", "９", "1e400")
STAGES_WITH_FLAGS = (
    "head --n={n}", "head --n {n}", "head --n 1 --n {n}", "head --n={n} --n=2",
    "sort --key=a", "sort --key a --key name", "sort --desc --key a", "sort --key=name --desc",
    "sort --key tags.0", "sort --key n --desc", "dedupe --key=a", "dedupe --key name --key a",
    "dedupe --key tags", "groupBy --key=a", "groupBy --key tags", "groupBy --key n",
    "map --wrap=v", "map --unwrap=name", "map a={{{{name}}}} a=again", "map 'k 1={{{{a}}}}'", "map x==y",
    "map x={{{{name | upper}}}}", "pick name,", "pick ' a , name '", "pick a,a", "pick tags.0",
    "pick 'ünï'", "template --text={{{{a}}}}", "template --text '{{{{a}}}}' --text '{{{{name}}}}'",
    "template {{{{a}}}} and {{{{name}}}}", "template --file t.txt", "template --file missing.txt",
    "template --file t.txt --text '{{{{a}}}}'", "template --text ''", "template --file ''",
    "exec --stdin=json --shell cat", "exec --stdin JSONL --shell cat", "exec --stdin=RAW --shell cat",
    "exec --json=1 --shell 'echo [5]'", "exec --shell='echo eq'", "exec --shell 'echo a' --shell 'echo b'",
    "exec --stdin '' --shell cat", "json", "table", "state.set=k", "state.set k extra",
    "state.get k | state.get k", "diff.last --key=d", "diff.last --key d --key e",
    "where a>={n}", "where 'a >= {n}'", "where n<{n}", "where name==ålice", "where name=='Bob'",
    "where tags.length>0", "where a==2", "where a===1", "where a=>1", "where 'name != '",
    "where missing==null", "where a!=1", "where 'a  ==  1'", "where name==Bob extra",
)
GATES_WITH_FLAGS = (
    "approve --preview-from-stdin --limit {n}", "approve --preview-from-stdin --preview-limit {n}",
    "approve --preview-from-stdin --previewLimit {n}", "approve --previewFromStdin",
    "approve --preview-from-stdin=false", "approve --prompt= ", "approve --prompt 'a' --prompt 'b'",
    "approve --prompt ''", "approve --emit --prompt ünï", "ask --subjectFromStdin", "ask --subject-from-stdin=1",
    "ask --prompt='p q'", "ask --schema '{{\"type\":\"string\",\"enum\":[]}}'", "ask --schema 'null'",
    "ask --schema '\"s\"'", "ask --schema '{{}}'", "ask --schema '{{\"type\":\"integer\"}}'",
)


@st.composite
def flags(draw) -> dict:
    text, files = _src(draw(st.sampled_from((DATA, DATA[:2], [1, "b", None], []))))
    files["t.txt"] = draw(st.sampled_from(("T {{a}}-{{name}}", "", "{{ . }}\n", "ünï {{n | round 1}}")))
    stages = [text]
    for _ in range(draw(st.integers(1, 3))):
        pattern = draw(st.sampled_from(STAGES_WITH_FLAGS))
        stages.append(pattern.format(n=draw(st.sampled_from(NUMS))))
    if draw(st.integers(0, 3)) == 0:
        stages.insert(draw(st.integers(1, len(stages))),
                      draw(st.sampled_from(GATES_WITH_FLAGS)).format(n=draw(st.sampled_from(NUMS))))
    steps = [RUN]
    if draw(st.integers(0, 2)) == 0:
        steps.append(draw(st.sampled_from(({"action": "resume", "approve": True},
                                           {"action": "resume", "responseJson": "ok"},
                                           {"action": "resume", "responseJson": 3}))))
    return _pipe(" | ".join(stages), "flags", draw(MODES), files, steps)


# 2. template filters -------------------------------------------------------------------------------
FILTER_EXPRS = (
    "a | round -1", "n | round 2", "n | round x", "n | round 1.9", "name | truncate 0", "name | truncate -1",
    "name | truncate abc", "name | truncate 2x", "name | truncate", "when | date", "when | date YYYY",
    "when | date 'HH:mm:ss DD/MM/YYYY'", "when | date YYYY-YYYY", "n | date", "a | date",
    "name | default 'a b'", "missing | default", "missing | default \"q\\\"t\"", "name | default x | upper",
    "name | replace 'o' ''", "name | replace", "name | replace b", "name | replace '' -",
    "name | split ''", "name | split", "name | split 'li'", "tags | join ' & '", "tags | join ''",
    "tags | join", "name | join", "tags | first | upper", "tags | last | length", "a | length",
    "tags | json", ". | json", ". | length", "a | ", "a || upper", "| upper", " ", "a|upper|lower|trim",
    "name | upper extra", "a | UPPER", "tags.0", "tags.5", "name.length", "tags.length", "a.b.c",
    "name | replace 'a|b' x", "name | split '|'", "'lit'", "name | default '{x}'", "n | string | length",
    "a | json | length", "when | date | date YYYY", "a | round | json", "missing | json",
    "missing | string", "missing | length", "missing | first", "missing | upper",
)


@st.composite
def templates(draw) -> dict:
    text, files = _src(draw(st.sampled_from((DATA, DATA[:1], [None, 5, "s", [1, 2]]))))
    parts = draw(st.lists(st.sampled_from(FILTER_EXPRS), min_size=1, max_size=3))
    joiner = draw(st.sampled_from(("", " ", "-", "\n")))
    body = joiner.join("{{" + p + "}}" for p in parts)
    body = draw(st.sampled_from(("{b}", "x{b}y", "{{{{{b}}}}}", "{b}}}", "{{{b}", "ü {b} ü"))).format(b=body)
    stage = draw(st.sampled_from(("template --text {t}", "template {t}", "map out={t}")))
    return _pipe(text + " | " + stage.format(t=sq(body)), "templates", draw(MODES), files)


# 3. CLI subcommands and their flags ---------------------------------------------------------------
WF = "args:\n  who:\n    default: you\nsteps:\n  - id: a\n    run: echo \"${who}\"\n"
CLI = (
    ["doctor"], ["doctor", "x", "y"], ["doctor", "--mode", "human"], ["-v"], ["--version", "x"], ["version", "--json"],
    ["run", "--file=w.lobster"], ["run", "--file=w.lobster", "--mode=tool"], ["run", "--file=", "--mode", "tool"],
    ["run", "--mode"], ["run", "--mode=", "exec --json --shell 'echo [1]'"],
    ["run", "--mode", "tool", "--mode", "human", "exec --json --shell 'echo [1]'"],
    ["run", "--mode", "tool", "--file", "w.lobster", "--args-json={\"who\":\"eq\"}"],
    ["run", "--mode", "tool", "--file", "w.lobster", "--args-json", "{\"who\":\"a\"}", "--args-json", "{\"who\":\"b\"}"],
    ["run", "--mode", "tool", "--file", "w.lobster", "--args-json", "{\"who\":5}"],
    ["run", "--mode", "tool", "--file", "w.lobster", "--args-json", "{\"who\":null}"],
    ["run", "--mode", "tool", "--file", "w.lobster", "--args-json", "{\"who\":\"ünï\\u2028\"}"],
    ["run", "--mode", "tool", "--file", "w.lobster", "--args-json", " {} "],
    ["run", "--mode", "tool", "--file", "w.lobster", "--file", "v.lobster"],
    ["run", "--mode", "tool", "w.lobster", "--dry-run"], ["run", "w.lobster", "--dry-run", "--mode", "tool"],
    ["run", "--mode", "tool", "--dry-run", "--dry-run", "--file", "w.lobster"],
    ["run", "--mode", "tool", "exec --json --shell 'echo [1]'", "--dry-run"],
    ["run", "--mode", "tool", "exec", "--json", "--shell", "'echo [2]'"],
    ["run", "--mode", "tool", "./w.lobster"], ["run", "--mode", "tool", "W.Lobster"],
    ["graph", "w.lobster"], ["graph", "w.lobster", "--format=dot"], ["graph", "--file=w.lobster", "--format="],
    ["graph", "--file", "w.lobster", "--format", "DOT"], ["graph", "--file", "w.lobster", "--args-json={\"who\":\"g\"}"],
    ["graph", "--file", "w.lobster", "--args-json", "null"], ["graph", "--file", "w.lobster", "--args-json", "{bad"],
    ["graph", "-h"], ["graph", "--file", "w.lobster", "--help"], ["graph", "v.lobster", "w.lobster"],
    ["graph", "--file", "w.lobster", "--format"], ["graph", "--format", "ascii", "w.lobster"],
    ["resume", "--token="], ["resume", "--token=x", "--cancel=true"], ["resume", "--token", "x", "--cancel=maybe"],
    ["resume", "--token", "x", "--cancel", "false"], ["resume", "--token", "x", "--cancel", "--approve", "yes"],
    ["resume", "--id="], ["resume", "--id=ab", "--approve=yes"], ["resume", "--token", "x", "--decision", "yes"],
    ["resume", "--token", "x", "--response-json="], ["resume", "--token", "x", "--approve"],
    ["resume", "--token"], ["resume", "--token", "x", "--approve", "yes", "--response-json", "1"],
    ["help", "head", "extra"], ["help", "template"], ["help", "map"], ["help", "HEAD"], ["help", ""],
    ["exec --json --shell 'echo [1]'"], ["exec", "--json", "--shell", "echo [1]"], ["json"], ["head", "--n", "1"],
)


@st.composite
def cli(draw) -> dict:
    return {"area": "cli", "kind": "pipeline", "files": {"w.lobster": WF, "v.lobster": "steps:\n  - id: v\n    run: echo v\n"},
            "steps": [{"action": "cli", "argv": list(draw(st.sampled_from(CLI)))}]}


# 4. workflow fields no generator wrote ------------------------------------------------------------
@st.composite
def wf_fields(draw) -> dict:
    files = {"sub/keep": "", "sub/f.txt": "in sub\n"}
    field = draw(st.sampled_from(("cwd", "cwd", "retry", "approval", "branch", "parallel_timeout", "loop",
                                  "args", "desc", "when", "stdin", "env")))
    steps: list = [{"id": "a", "run": "printf '%s' '[{\"x\":1},{\"x\":2}]'"}]
    doc: dict = {"steps": steps}
    if field == "cwd":
        where = draw(st.sampled_from(("doc", "step", "both", "branch", "loop")))
        cwd = draw(st.sampled_from(("sub", "./sub", "sub/", "${d}", "missing", "", "sub/f.txt")))
        doc["args"] = {"d": {"default": "sub"}}
        step = {"id": "b", "run": "pwd | sed 's#.*/##'; cat f.txt 2>/dev/null || echo none"}
        if where in ("doc", "both"):
            doc["cwd"] = cwd
        if where in ("step", "both"):
            step["cwd"] = draw(st.sampled_from(("sub", ".", "missing")))
        if where == "branch":
            step = {"id": "b", "parallel": {"branches": [{"id": "p", "cwd": cwd, "run": step["run"]}]}}
        if where == "loop":
            step = {"id": "b", "for_each": "$a.json", "cwd": cwd, "steps": [{"id": "i", "run": step["run"]}]}
        steps.append(step)
    elif field == "retry":
        steps.append({"id": "b", "run": "echo try; exit 3", "retry": draw(st.sampled_from((
            {"max": 2, "delay_ms": 1, "max_delay_ms": 1}, {"max": 2, "delay_ms": 5, "max_delay_ms": 0},
            {"max": 1.5, "delay_ms": 0}, {"max": -1}, {"max": "2"}, {"max": 2, "delay_ms": 0, "backoff": "EXPONENTIAL"},
            {"max": 2, "delay_ms": 0, "max_delay_ms": -5}, {}, {"max": 3, "delay_ms": 0, "jitter": False},
            2, True, None, [2])))})
    elif field == "approval":
        approval = draw(st.fixed_dictionaries({}, optional={
            "prompt": st.sampled_from(("OK?", "ünï\nline", 5)),
            "requiredApprover": st.sampled_from(("alice", "")), "requireDifferentApprover": st.sampled_from((True, "yes")),
            "initiatedBy": st.sampled_from(("bob", "")), "required_approver": st.just("carol"),
            "items": st.sampled_from(([{"k": 1}], "$a.json", [])), "preview": st.sampled_from(("$a.stdout", "p", None))}))
        steps.append({"id": "g", "approval": approval, **draw(st.sampled_from(({}, {"stdin": "$a.json"})))})
        steps.append({"id": "c", "run": "echo done", "when": "$g.approved"})
    elif field == "branch":
        steps.append({"id": "b", "parallel": {"branches": [
            {"id": "p1", "run": "cat", "stdin": draw(st.sampled_from(("$a.json", "$a.stdout", "lit", "$a.json.0")))},
            {"id": "p2", "run": "echo \"$V\"", "env": {"V": draw(st.sampled_from(("v", "$a.json", "${who}")))}},
            *draw(st.sampled_from(([], [{"id": "p3", "pipeline": "pick x", "stdin": "$a.json"}],
                                   [{"id": "p3", "command": "echo cmd"}])))]}})
        doc["args"] = {"who": {"default": "w"}}
        steps.append({"id": "c", "run": "cat", "stdin": "$b.json"})
    elif field == "parallel_timeout":
        steps.append({"id": "b", "parallel": {"timeout_ms": draw(st.sampled_from((5000, 0, -1, "100", 1.5))),
                                              "wait": draw(st.sampled_from(("all", "ALL", "first", ""))),
                                              "branches": [{"id": "p1", "run": "echo one"}]}})
    elif field == "loop":
        steps.append({"id": "b", "for_each": draw(st.sampled_from(("$a.json", "$a.stdout", "$a.json.0", "[]", "{\"k\":1}",
                                                                     "3", "abc", "$a.json.0.x"))),
                      "steps": [{"id": "i", "run": "echo \"$item.json|$index.json\""}],
                      **draw(st.sampled_from(({"batch_size": 2}, {"batch_size": 1.5}, {"batch_size": -1},
                                              {"batch_size": "2"}, {"pause_ms": -1}, {"pause_ms": "5"},
                                              {"item_var": "item-x"}, {"item_var": ""}, {"index_var": "item"},
                                              {"item_var": "a"}, {})))})
    elif field == "args":
        doc["args"] = draw(st.sampled_from((
            {"who": {"default": "d", "description": "the name"}}, {"who": {}}, {"who": {"default": None}},
            {"who": {"default": ["x", 1]}}, {"who": {"default": {"k": "v"}}}, {"who": "plain"}, {"who": 5},
            {"who": {"default": "a", "required": True}}, {"": {"default": "e"}}, {"w-x": {"default": "dash"}})))
        steps.append({"id": "b", "run": "echo \"${who}|${w-x}|$LOBSTER_ARG_WHO\""})
    elif field == "desc":
        doc.update(draw(st.sampled_from(({"description": "d"}, {"name": "ünï"}, {"name": ""}, {"version": 1},
                                         {"description": "x", "name": "n"}))))
        steps.append({"id": "b", "run": "echo ok", "description": draw(st.sampled_from(("step d", 5)))})
    elif field == "when":
        steps.append({"id": "b", "run": "echo ran", "when": draw(st.sampled_from((
            "$a.json.0.x == 1", "$a.json.length == 2", "$a.json.0.x >= '1'", "!($a.json.0.x == 2)",
            "$a.json.0.x == 1 || $a.json.0.x == 2 && false", "!!true", "TRUE", "  true  ", "", "0", "null",
            "$a.stdout == '[{\"x\":1},{\"x\":2}]'", "$a.json.0.x in [1]", "$a.skipped == false")))})
    elif field == "stdin":
        steps.append({"id": "b", "run": "cat", "stdin": draw(st.sampled_from((
            5, True, None, ["x"], {"k": "$a.json"}, "$a.json $a.stdout", "${who}", "$$a.json", "$a.json\n", "")))})
    else:
        steps.append({"id": "b", "run": "echo \"[$E]\"", "env": draw(st.sampled_from((
            {"E": ""}, {"E": "ünï"}, {"E": "$a.json"}, {"E": "${who}", "who": "x"}, {"": "x"}, {"E=1": "x"},
            {"PATH": ""}, {"E": "a\nb"}, {"E": 1.5})))})
    mode = draw(MODES)
    runs = [RUN] + ([{"action": "resume", "approve": draw(st.booleans())}] if field == "approval" else [])
    if draw(st.integers(0, 4)) == 0:
        runs = [{"action": "cli", "argv": draw(st.sampled_from((["run", "--dry-run", "--file", "w.lobster"],
                                                                 ["graph", "--file", "w.lobster", "--format", "ascii"])))}]
    return _wf(doc, "wf_fields", mode, files, runs)


# 5. data: unicode, long, deep, odd numbers --------------------------------------------------------
ODD = st.sampled_from(("ünï", "日本語", "😀", "e\u0301", "\u200b", "\t", "a\u2028b", "x" * 300, "-0", "1e21",
                       "１", "\u00a0", "İ", "ß", "ﬁ", "Σ"))
ODD_NUMS = st.sampled_from((0, -0.0, 1e21, 1e-7, 123456789012345680000, 0.1, 2 ** 53, 2 ** 53 + 1, -1e300, 5e-324))


@st.composite
def data(draw) -> dict:
    leaf = st.one_of(ODD, ODD_NUMS, values)
    rows = draw(st.lists(st.one_of(st.dictionaries(st.sampled_from(("a", "name", "ü", "k k", "")), leaf, max_size=3),
                                   leaf), max_size=5))
    if draw(st.integers(0, 5)) == 0:
        deep: object = 1
        for _ in range(draw(st.integers(5, 40))):
            deep = {"a": deep}
        rows.append(deep)
    text, files = _src(rows)
    stage = draw(st.sampled_from(("sort", "sort --key a", "sort --key name --desc", "dedupe", "dedupe --key a",
                                  "groupBy --key a", "json", "table", "pick a,name", "template --text '{{name | upper}}'",
                                  "template --text '{{name | lower | length}}'", "where name==ünï", "where a>0",
                                  "map --wrap v", "head --n 2", "state.set k | state.get k",
                                  "exec --stdin jsonl --shell cat", "exec --stdin raw --shell cat",
                                  "template --text '{{a | round 2}}'", "template --text '{{name | truncate 3}}'")))
    more = draw(st.sampled_from(("", "", " | json", " | table", " | sort")))
    return _pipe(f"{text} | {stage}{more}", "data", draw(MODES), files)


# 6. the commands that call an external CLI (openclaw, gog) and email.triage -------------------------
# A fake CLI that answers with its argv as JSON (or FAKE_OUT, or fails when FAKE_FAIL is set).
ARGV_JSON = ("#!/usr/bin/node\nconst e = process.env;\n"
             "if (e.FAKE_FAIL) { process.stderr.write('fake failure\\n'); process.exit(3); }\n"
             "if (e.FAKE_OUT !== undefined) { process.stdout.write(e.FAKE_OUT); process.exit(0); }\n"
             "process.stdout.write(JSON.stringify({threads: [{argv: process.argv.slice(2)}]}) + '\\n');\n")
EMAILS = [{"id": "m1", "from": "Ann <ann@x.io>", "subject": "Lunch?", "snippet": "are you free", "labels": ["INBOX"]},
          {"messageId": "m2", "sender": "no-reply@svc.com", "subject": "Receipt", "date": "2024-01-02"},
          {"id": "m3", "from": "bob@y.org", "subject": "URGENT: deploy", "snippet": "asap", "thread_id": "t3"},
          {"id": "", "subject": "ünï"}, {}]
AGENT_FLAGS = ("--agent ops", "--agent ''", "--agent=ops", "--session-key k1", "--sessionKey k2", "--session-id=s1",
               "--model m1", "--thinking high", "--timeout 0", "--timeout -1", "--timeout 1.5", "--timeout 1e1",
               "--timeout abc", "--timeout ''", "--local", "--local=true", "--prompt ''", "--message hi", "words here",
               "--prompt 'say \"q\"'", "--agent ops --agent dev")
GOG_FLAGS = ("", "--query 'from:ann'", "--query=is:unread", "--max 0", "--max -1", "--max 1.5", "--max abc", "--limit 5",
             "--max 2 --limit 9", "--query ''", "--max 1e1")
FAKE_OUTS = (None, None, None, '{"a":1}', "[1,2]", "", "null", "not json", '[{"threads":[{"id":1}]},{"id":2}]',
             '{"threads":"x"}', '{"threads":[]}', "  {\"k\": \"v\"}  ")


@st.composite
def externals(draw) -> dict:
    kind = draw(st.sampled_from(("agent", "agent", "search", "search", "send", "triage", "triage")))
    env = {"LOBSTER_OPENCLAW_BIN": "<workdir>/bin/openclaw", "GOG_BIN": "<workdir>/bin/gog"}
    out = draw(st.sampled_from(FAKE_OUTS))
    if out is not None:
        env["FAKE_OUT"] = out
    if draw(st.integers(0, 6)) == 0:
        env["FAKE_FAIL"] = "1"
    src, files = _src(draw(st.sampled_from(([], [{"a": 1}], ["x", 2], EMAILS[:2]))))
    files.update({"bin/openclaw": ARGV_JSON, "bin/gog": ARGV_JSON})
    if kind == "agent":
        flags_ = " ".join(draw(st.lists(st.sampled_from(AGENT_FLAGS), min_size=1, max_size=3)))
        text = draw(st.sampled_from(("", src + " | "))) + "openclaw.agent " + flags_
    elif kind == "search":
        text = "gog.gmail.search " + draw(st.sampled_from(GOG_FLAGS)) + draw(st.sampled_from(("", " | pick argv", " | json")))
    elif kind == "send":
        drafts = draw(st.sampled_from(([{"to": "a@x.io", "subject": "S", "body": "B"}], [{"to": " ", "subject": "s"}],
                                       [{"to": "b@y", "body": "ünï\nline"}, "str"], [], [{"to": 5, "subject": None}])))
        src, more = _src(drafts)
        files.update(more)
        text = src + " | gog.gmail.send" + draw(st.sampled_from(("", " --dry-run", " --dryRun", " --dry-run=false",
                                                                   " --dryRun false", " --dry-run 1")))
    else:
        src, more = _src(draw(st.sampled_from((EMAILS, EMAILS[:1], [], [1, "s", None]))))
        files.update(more)
        text = src + " | email.triage" + draw(st.sampled_from((
            "", " --limit 0", " --limit -1", " --limit 1.5", " --limit abc", " --limit 1e1", " --limit 2",
            " --emit drafts", " --emit summary", " --emit ' '", " --emit=report", " --llm", " --llm --emit drafts")))
        if draw(st.booleans()):
            text += " | json"
    return _pipe(text, "externals", draw(MODES), files, env=env)


# 7. resume arguments after a real halt ----------------------------------------------------------------
APPROVE_WORDS = ("yes", "no", "YES", "No", "y", "n", "true", "false", "1", "0", "approve", "reject", " yes", "")
RESPONSES = ('{"count": 2}', '  {"count": 2}  ', '{"count": 2, "count": 3}', '{"count": 1e0}', '{"count": 2.0}',
             '{"count": 1e400}', '{"count": -0}', '"ünï"', '"\\u00e9"', '[]', '{}', 'null', 'true', '"ok"',
             '{"env": "prod"}', '{"env": "prod", "__proto__": 1}', '{"decision": "approve", "feedback": "ünï"}',
             '[[[[[[1]]]]]]', '{"count": "2"}', "'single'", "{count: 2}", '{"count": 2}x', '{"count": 2} ')
EXTRA = ([], [], ["--cancel", "false"], ["--cancel=false"], ["--cancel=true"], ["--cancel", "true"], ["--cancel", "no"],
         ["--cancel=1"], ["--cancel", "--approve", "yes"], ["--approve", "yes"], ["--response-json", "1"])


@st.composite
def resumes(draw) -> dict:
    gate = draw(st.sampled_from(("approve --prompt ok", "ask --prompt n", "ask --schema " + sq(json.dumps(
        {"type": "object", "properties": {"count": {"type": "integer"}}})), "ask --schema " + sq(json.dumps(
            {"type": "string"})), "approve --preview-from-stdin --limit 1")))
    where = draw(st.sampled_from(("pipeline", "workflow", "step_input", "step_approval")))
    steps = [RUN]
    for _ in range(draw(st.integers(1, 2))):
        step: dict = {"action": "resume", "extraArgv": list(draw(st.sampled_from(EXTRA)))}
        kind = draw(st.sampled_from(("approve", "response", "none", "cancel")))
        if kind == "approve":
            step["approveRaw"] = draw(st.sampled_from(APPROVE_WORDS))
        elif kind == "response":
            step["responseJsonRaw"] = draw(st.sampled_from(RESPONSES))
        elif kind == "cancel":
            step["cancel"] = True
        if draw(st.integers(0, 4)) == 0:
            step["approvalId"] = True
        steps.append(step)
    if where == "pipeline":
        return _pipe("exec --json --shell 'echo [{\"a\":1}]' | " + gate + " | json", "resumes", "tool", steps=steps)
    if where == "workflow":
        doc = {"steps": [{"id": "p", "pipeline": "exec --json --shell 'echo [1]' | " + gate}, {"id": "c", "run": "echo done"}]}
    elif where == "step_input":
        doc = {"steps": [{"id": "q", "input": {"prompt": "n?", "responseSchema": draw(st.sampled_from((
            {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}, {"type": "string"},
            {"enum": ["prod", {"env": "prod"}]}, {})))}}, {"id": "c", "run": "cat", "stdin": "$q.json"}]}
    else:
        doc = {"steps": [{"id": "a", "run": "echo '[1]'"}, {"id": "g", "approval": "ok?", "stdin": "$a.json"},
                         {"id": "c", "run": "echo \"$g.approved\"", "when": "$g.approved"}]}
    return _wf(doc, "resumes", "tool", steps=steps)


# 8. workflow args of every JSON type, where `${x}` lands ----------------------------------------------
ARG_VALUES = ("s", "", "ünï", "a b", "it's", 'q"t', "$HOME", "${other}", "a\nb", 0, -1, 1.5, 1e21, True, False, None,
              [], [1, "a"], {}, {"k": "v"}, "x" * 200)


@st.composite
def args(draw) -> dict:
    place = draw(st.sampled_from(("run", "env", "stdin", "pipeline", "when", "for_each", "workflow_args", "approval")))
    x = "${x}"
    step: dict
    if place == "run":
        step = {"id": "b", "run": f"printf '[%s]' \"{x}\""}
    elif place == "env":
        step = {"id": "b", "run": "printf '[%s]' \"$V\"", "env": {"V": x}}
    elif place == "stdin":
        step = {"id": "b", "run": "cat", "stdin": x}
    elif place == "pipeline":
        step = {"id": "b", "pipeline": f"exec --json --shell 'echo [1]' | template --text '<{x}>'"}
    elif place == "when":
        step = {"id": "b", "run": "echo ran", "when": draw(st.sampled_from((x, f"{x} == 1", f"'{x}' == s", f"!{x}")))}
    elif place == "for_each":
        step = {"id": "b", "for_each": x, "steps": [{"id": "i", "run": "echo \"$item.json\""}]}
    elif place == "workflow_args":
        step = {"id": "b", "workflow": "sub.lobster", "workflow_args": {"y": x}}
    else:
        step = {"id": "b", "approval": {"prompt": f"ok {x}?"}}
    doc: dict = {"args": {"x": draw(st.sampled_from(({}, {"default": "d"}, {"default": 5})))}, "steps": [step]}
    if draw(st.booleans()):
        doc["args"]["other"] = {"default": "o"}
    files = {"sub.lobster": "args:\n  y: {}\nsteps:\n  - id: s\n    run: printf '%s' \"${y}\"\n"}
    case = _wf(doc, "args", draw(MODES), files)
    value = draw(st.sampled_from(ARG_VALUES + ("ABSENT",)))
    if value != "ABSENT":
        case["args"] = {"x": value}
    return case


# 9. conditions: the whole grammar (or, and, comparisons, !, parentheses, literals, bare words) -------
ATOMS = st.sampled_from(("$a.json.n", "$a.json.s", "$a.json.z", "$a.json.arr", "$a.json.obj", "$a.json.missing",
                         "$a.json", "$a.stdout", "$a.approved", "$a.skipped", "$a.json.arr.0", "$a.json.obj.k",
                         "1", "0", "-1", "1.5", "1e2", ".5", "'1'", '"1"', "'a b'", "'it\\'s'", "''", "true",
                         "false", "null", "abc", "TRUE", "Null", "01", "0x1", "'ünï'"))
OPS = st.sampled_from(("==", "!=", "<", "<=", ">", ">=", "===", "=", "<>"))


@st.composite
def condition(draw, depth: int = 0) -> str:
    kind = draw(st.sampled_from(("atom", "cmp", "cmp", "not", "and", "or", "paren") if depth < 2 else ("atom", "cmp")))
    if kind == "atom":
        return draw(ATOMS)
    if kind == "cmp":
        sp = draw(st.sampled_from((" ", "", "  ")))
        return f"{draw(ATOMS)}{sp}{draw(OPS)}{sp}{draw(ATOMS)}"
    if kind == "not":
        return "!" + draw(st.sampled_from(("", " "))) + draw(condition(depth + 1))
    if kind == "paren":
        return "(" + draw(condition(depth + 1)) + ")"
    return f"{draw(condition(depth + 1))} {'&&' if kind == 'and' else '||'} {draw(condition(depth + 1))}"


A_OUTPUTS = ({"n": 2, "s": "2", "z": 0, "arr": [1, 2], "obj": {"k": "v"}}, {"n": "10", "s": "9", "z": "", "arr": []},
             {"n": None, "s": "ünï", "z": False, "obj": {}}, [1, 2], "text", 5, None)


@st.composite
def conditions(draw) -> dict:
    out = draw(st.sampled_from(A_OUTPUTS))
    doc = {"steps": [{"id": "a", "run": "printf '%s' " + _shq(json.dumps(out, ensure_ascii=False))},
                     {"id": "b", "run": "echo ran", "when": draw(condition())},
                     {"id": "c", "run": "echo \"$b.skipped\""}]}
    return _wf(doc, "conditions", draw(MODES))


# 10. state keys and values ---------------------------------------------------------------------------
STATE_KEYS = ("k", "K", "a/b", "../x", "ünï", "'a b'", "x" * 120, ".", "''", "k.json", "-k", "a\\\\b", "_Demo KEY_",
              "a:b", "%2e%2e", "k k k")


@st.composite
def state(draw) -> dict:
    key, other = draw(st.sampled_from(STATE_KEYS)), draw(st.sampled_from(STATE_KEYS))
    text, files = _src(draw(st.sampled_from(([1, 2], [], [{"a": 1}], ["ünï"], [None]))))
    pipeline = draw(st.sampled_from((
        f"{text} | state.set {key} | state.get {other}", f"{text} | state.set {key}", f"state.get {key}",
        f"{text} | diff.last --key {key} | json", f"{text} | diff.last {key}", f"{text} | state.set {key} | diff.last --key {other}",
        f"state.get {key} | state.set {other} | state.get {other}")))
    steps = [RUN, {"action": "run", "pipeline": draw(st.sampled_from((pipeline, f"state.get {other}",
                                                                      f"{text} | diff.last --key {other}")))}]
    return _pipe(pipeline, "state", draw(MODES), files, steps)


# 11. for_each over every shape, with its variables in every place ------------------------------------
LOOP_SOURCES = ("[1,2]", "[]", "[[1],[2]]", '[{"x":1},{"x":"ü"}]', "{\"k\":1}", "5", "\"str\"", "null", "true",
                "$a.json", "$a.json.list", "$a.json.obj", "$a.stdout", "$a.json.list.0", "  [1]  ", "[1,2", "$a.json.none")
LOOP_USES = ("echo \"[$item.json]\"", "echo \"$index.json\"", "echo \"$item.json.x|$item.stdout\"",
             "printf '%s' \"$item.json.0\"", "echo '{\"y\": 1}'", "echo \"$it.json-$ix.json\"")


@st.composite
def loops(draw) -> dict:
    out = draw(st.sampled_from(({"list": [1, {"x": 2}], "obj": {"k": "v"}}, [3, 4], "plain")))
    sub = [{"id": "i", "run": draw(st.sampled_from(LOOP_USES))}]
    if draw(st.booleans()):
        sub.append({"id": "j", "run": "cat", "stdin": draw(st.sampled_from(("$i.stdout", "$item.json", "$i.json", "$index.json")))})
    if draw(st.integers(0, 3)) == 0:
        sub[0]["when"] = draw(st.sampled_from(("$index.json > 0", "$item.json == 1", "$item.json.x == 2", "!$item.json")))
    step = {"id": "l", "for_each": draw(st.sampled_from(LOOP_SOURCES)), "steps": sub}
    step.update(draw(st.sampled_from(({}, {}, {"item_var": "it", "index_var": "ix"}, {"batch_size": 1}, {"batch_size": 3},
                                      {"pause_ms": 0}, {"item_var": "it"}))))
    doc = {"steps": [{"id": "a", "run": "printf '%s' " + _shq(json.dumps(out))}, step,
                     {"id": "c", "run": "cat", "stdin": draw(st.sampled_from(("$l.json", "$l.stdout", "$l.json.0")))}]}
    return _wf(doc, "loops", draw(MODES))


MORE = {"flags": flags(), "templates": templates(), "cli": cli(), "wf_fields": wf_fields(), "data": data(),
        "externals": externals(), "resumes": resumes(), "args": args(),
        "conditions": conditions(), "state": state(), "loops": loops()}
more_cases = st.one_of(*MORE.values())
