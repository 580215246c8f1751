"""Targeted generators for the edges issue 20 names, one per area (`EDGES`). Each case carries
its area in `"area"` (the harness ignores it), so the survey can count examples per area.

`python -m tests.differential.survey N OUTDIR edges` draws from all of them;
`edges:NAME` from one."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from .generators import SCHEMAS, ANSWERS, sq

MODES = st.sampled_from(("tool", "human"))
RUN = {"action": "run"}
ECHO_ARGS = "#!/bin/sh\nfor a in \"$@\"; do printf '<%s>' \"$a\"; done\necho\n"


def _file(doc: dict, area: str, mode: str, steps: list, **more) -> dict:
    return {"area": area, "kind": "workflow", "file": "w.lobster", "mode": mode,
            "files": {"w.lobster": json.dumps(doc, indent=1), **more.pop("files", {})},
            "steps": steps, **more}


def _pipe(text: str, area: str, mode: str, steps: list | None = None, **more) -> dict:
    return {"area": area, "kind": "pipeline", "mode": mode, "pipeline": text,
            "steps": steps or [RUN], **more}


def _decision(draw, kind: str) -> dict:
    if kind == "approval":
        return {"action": "resume", "approve": draw(st.booleans())}
    return {"action": "resume", "responseJson": draw(st.sampled_from(ANSWERS))}


# 1. exec: what looks like a flag after the program word ----------------------------------------
FLAGGISH = st.sampled_from(("-n", "--json", "--shell", "x", "--stdin", "jsonl", "--", "-la", "--color",
                            "--n=2", "'a b'", "--json=false", "-"))


@st.composite
def exec_argv(draw) -> dict:
    words = " ".join(draw(st.lists(FLAGGISH, min_size=1, max_size=4)))
    before = draw(st.sampled_from(("", "--json ", "--stdin raw ", "--json --stdin jsonl ")))
    text = f"exec {before}bin/args {words}"
    if draw(st.booleans()):
        text = "exec --json --shell 'echo [1]' | " + text
    if draw(st.booleans()):
        return _pipe("x", "exec_argv", "tool", [{"action": "cli", "argv": ["run", "--dry-run", text]}],
                     files={"bin/args": ECHO_ARGS})
    return _pipe(text, "exec_argv", draw(MODES), files={"bin/args": ECHO_ARGS})


# 2. cost tracking: every billed call, unknown models, bad pricing, limits ------------------------
MODELS = st.sampled_from(("gpt-4o", "gpt-4o-mini", "claude-haiku-3-5", "mystery", "", "  ", None,
                          "constructor", "__proto__", "a\u001b[31mb\u0085c\u2028", "x\ny", 5))
USAGES = st.sampled_from(({"inputTokens": 1000, "outputTokens": 500}, {"prompt_tokens": 1000000},
                          {"input_tokens": 10, "output_tokens": "20"}, {"inputTokens": -5}, {},
                          {"inputTokens": 1.7, "outputTokens": 1e9}, None))
PRICING = st.sampled_from((None, "", " ", "{not-json", "[]", "null", '{"mystery":{"input":1,"output":2}}',
                           '{"mystery":{"input":1}}', '{"":{"input":1,"output":1}}',
                           '{"gpt-4o":{"input":0,"output":0}}', '{"mystery":{"input":-1,"output":1}}',
                           '{"mystery":{"input":"1","output":1}}'))


@st.composite
def cost(draw) -> dict:
    def result():
        r: dict = {}
        model = draw(MODELS)
        if model is not None:
            r["model"] = model
        usage = draw(USAGES)
        if usage is not None:
            r["usage"] = usage
        return r

    shape = draw(st.sampled_from(("steps", "loop", "pipeline")))
    if shape == "steps":
        body = [{"id": f"s{k}", "run": "printf '%s' " + sq(json.dumps([result()] if draw(st.booleans()) else result()))}
                for k in range(draw(st.integers(1, 3)))]
    elif shape == "loop":
        body = [{"id": "d", "run": "echo '[1,2]'"},
                {"id": "loop", "for_each": "$d.json", "steps": [
                    {"id": "call", "run": "printf '%s' " + sq(json.dumps(result()))}]}]
    else:
        body = [{"id": "p", "pipeline": "exec --json --shell " + sq("printf '%s' " + sq(json.dumps([result()])))}]
    body.append({"id": "after", "run": "echo done"})
    doc: dict = {"steps": body}
    if draw(st.booleans()):
        doc["cost_limit"] = {"max_usd": draw(st.sampled_from((0, 0.00001, 0.01, 100))),
                             "action": draw(st.sampled_from(("warn", "stop")))}
    env = {}
    pricing = draw(PRICING)
    if pricing is not None:
        env["LOBSTER_LLM_PRICING_JSON"] = pricing
    return _file(doc, "cost", draw(MODES), [RUN], env=env)


# 3. LOBSTER_MAX_* values ---------------------------------------------------------------------------
CAP_VALUES = st.sampled_from(("", "0", "-1", "1.5", "1e3", "abc", " 64 ", "64", "9007199254740991",
                              "9007199254740992", "99999999999999999999", "0x40", "+64", "Infinity", "true"))
CAP_NAMES = st.sampled_from(("LOBSTER_MAX_OUTPUT_BYTES", "LOBSTER_MAX_TOOL_ENVELOPE_BYTES",
                             "LOBSTER_MAX_HTTP_RESPONSE_BYTES"))


@st.composite
def max_values(draw) -> dict:
    name, value = draw(CAP_NAMES), draw(CAP_VALUES)
    big = "head -c 300 /dev/zero | tr '\\0' x"
    if name == "LOBSTER_MAX_HTTP_RESPONSE_BYTES":
        text = "openclaw.invoke --token= --tool t --action a"
        server = {"status": 200, "body": json.dumps({"ok": True, "result": "y" * 200})}
    else:
        text = f"exec --shell {sq(big)}" + draw(st.sampled_from(("", " | ask --subject-from-stdin",
                                                                    " | approve --preview-from-stdin")))
        server = None
    where = draw(st.sampled_from(("process", "step", "workflow")))
    more: dict = {"env": {"OPENCLAW_URL": "<server>"}} if server else {"env": {}}
    if server:
        more["server"] = server
    if where == "process":
        more["env"][name] = value
        return _pipe(text, "max_values", draw(MODES), **more)
    step = {"id": "a", "pipeline": text}
    doc: dict = {"steps": [step, {"id": "b", "run": "echo after"}]}
    (step if where == "step" else doc).setdefault("env", {})[name] = value
    return _file(doc, "max_values", draw(MODES), [RUN], **more)


# 4. damaged state files, for every state command ---------------------------------------------------
DAMAGE = st.sampled_from(('{"partial"', "", "null", "[]", "\u0000\u0001", "{}", '"text"', "1", "{\"a\":1}\n\n"))


@st.composite
def damaged_state(draw) -> dict:
    damage = draw(DAMAGE)
    kind = draw(st.sampled_from(("state.get", "diff.last", "state.set", "resume_id", "resume_token")))
    if kind in ("state.get", "diff.last", "state.set"):
        text = {"state.get": "state.get k", "diff.last": "exec --json --shell 'echo [1]' | diff.last --key k",
                "state.set": "exec --json --shell 'echo [1]' | state.set k"}[kind]
        return _pipe(text, "damaged_state", draw(MODES),
                     [RUN, {"action": "cli", "argv": ["run", "--mode", "tool", "state.get k"]}],
                     stateFiles={"k.json": damage})
    approval_id = "0a1b2c3d"
    steps = [{"action": "resume", "approvalId": approval_id, "approve": True}] if kind == "resume_id" else \
        [{"action": "resume", "token": draw(st.sampled_from(("", "x", "eyJ9", "e30", "!!!", "eyJwcm90b2NvbFZlcnNpb24iOjJ9"))),
          "approve": True}]
    return _pipe("x", "damaged_state", "tool", steps, stateFiles={f"approval_{approval_id}.json": damage})


# 5. ask and approve inside pipeline steps, parallel branches and for_each sub-steps -----------------
@st.composite
def gates_in_steps(draw) -> dict:
    schema = draw(st.sampled_from((None,) + SCHEMAS[:2]))
    ask = "ask --prompt Q" + (f" --schema {sq(json.dumps(schema))}" if schema else "")
    gate = draw(st.sampled_from((ask, ask + " --subject-from-stdin", "approve --prompt OK", "ask --emit")))
    text = draw(st.sampled_from(("", "exec --json --shell 'echo [1]' | "))) + gate + \
        draw(st.sampled_from(("", " | json", " | pick a")))
    where = draw(st.sampled_from(("pipeline", "parallel", "for_each")))
    if where == "pipeline":
        body = [{"id": "p", "pipeline": text}]
    elif where == "parallel":
        body = [{"id": "par", "parallel": {"branches": [{"id": "b1", "pipeline": text}, {"id": "b2", "run": "echo b2"}]}}]
    else:
        body = [{"id": "d", "run": "echo '[1]'"}, {"id": "loop", "for_each": "$d.json", "steps": [{"id": "s", "pipeline": text}]}]
    doc = {"steps": body + [{"id": "after", "run": "echo after"}]}
    kind = "approval" if gate.startswith("approve") else "input"
    return _file(doc, "gates_in_steps", draw(MODES), [RUN, _decision(draw, kind)])


# 6. dry-run plans ----------------------------------------------------------------------------------
@st.composite
def dry_runs(draw) -> dict:
    from .generators import stage, workflow_cases

    if draw(st.booleans()):
        text = " | ".join(draw(st.lists(stage(), min_size=1, max_size=3)))
        return _pipe("x", "dry_runs", "human", [{"action": "cli", "argv": ["run", "--dry-run", text]}])
    case = draw(workflow_cases())
    case = {**case, "area": "dry_runs", "steps": [{"action": "cli", "argv": ["run", "--dry-run"]
                                                   + (["--mode", "tool"] if draw(st.booleans()) else [])
                                                   + [case.get("file", "workflow.lobster")]}]}
    return case


# 7. human mode at every halt and error, on a pipe ---------------------------------------------------
@st.composite
def human_mode(draw) -> dict:
    from .generators import pipeline_cases, workflow_cases

    case = draw(st.one_of(pipeline_cases(), workflow_cases()))
    steps = [dict(s, mode="human") if s.get("action", "run") == "run" else s for s in case["steps"]]
    return {**case, "area": "human_mode", "mode": "human", "steps": steps}


# 8. LOBSTER_SHELL names ----------------------------------------------------------------------------
SHELL_NAMES = st.sampled_from(("pwsh", "PWSH.EXE", "mypwsh", "powershell", "powershell.exe", "WindowsPowerShell",
                               "pwsh7", "pwsh.exe.bak", "cmd", "CMD.EXE", "xcmd", "cmdx", "cmd.bat", "bash",
                               "sh", "zsh", "my shell", "shell.cmd"))


@st.composite
def lobster_shell(draw) -> dict:
    name = draw(SHELL_NAMES)
    where = draw(st.sampled_from(("exec", "workflow")))
    env = {"LOBSTER_SHELL": "<workdir>/bin/" + name}
    if draw(st.booleans()):
        env["LOBSTER_SHELL"] = " " + env["LOBSTER_SHELL"] + " "
    files = {f"bin/{name}": ECHO_ARGS}
    if where == "exec":
        return _pipe("exec --shell 'echo hi'", "lobster_shell", draw(MODES), env=env, files=files)
    return _file({"steps": [{"id": "a", "run": "echo hi"}]}, "lobster_shell", draw(MODES), [RUN], env=env, files=files)


# 9. reference paths into strings and arrays --------------------------------------------------------
PATHS = st.sampled_from(("$s.stdout.length", "$s.stdout.0", "$x.json.name.0", "$x.json.tags.1", "$x.json.tags.length",
                         "$x.json.name.length", "$x.json.0", "$x.json.missing.0", "$x.stdout", "$x.json.n.toString",
                         "$x.json.tags.-1", "$x.json.name.constructor"))


@st.composite
def ref_paths(draw) -> dict:
    ref = draw(PATHS)
    base = [{"id": "s", "run": "echo hello"},
            {"id": "x", "run": "printf '%s' " + sq(json.dumps({"name": "ab", "tags": ["t1", "t2"], "n": 5}))}]
    use = draw(st.sampled_from(("stdin", "when", "preview", "subject", "env")))
    if use == "stdin":
        step = {"id": "u", "run": "cat", "stdin": ref}
    elif use == "when":
        step = {"id": "u", "run": "echo ran", "when": draw(st.sampled_from((ref, f"{ref} == 2", f"{ref} == ab", f"!{ref}")))}
    elif use == "preview":
        step = {"id": "u", "approval": {"prompt": "ok?", "preview": ref}, "stdin": ref}
    elif use == "subject":
        step = {"id": "u", "input": {"prompt": "p", "responseSchema": {"type": "string"}}, "stdin": ref}
    else:
        step = {"id": "u", "run": "printf '[%s]' \"$V\"", "env": {"V": ref}}
    return _file({"steps": base + [step]}, "ref_paths", draw(MODES), [RUN])


# 10. pick of fields an item lacks, then a renderer -------------------------------------------------
@st.composite
def pick_missing(draw) -> dict:
    data = draw(st.sampled_from(([{"a": 1}, {"b": 2}], [{"a": None}], [1, "x"], [{}], [{"a": {"b": 1}}])))
    fields = draw(st.sampled_from(("a", "b", "a,b", "missing", "a.b", "a,missing")))
    render = draw(st.sampled_from(("", " | table", " | json", " | template --text '{{a}}-{{b}}'")))
    return _pipe(f"exec --json --shell {sq('printf %s ' + sq(json.dumps(data)))} | pick {fields}{render}",
                 "pick_missing", draw(MODES))


# 11. an ask after output, and two asks in one step --------------------------------------------------
@st.composite
def ask_after_output(draw) -> dict:
    parts = draw(st.lists(st.sampled_from(("ask --prompt A", "ask --prompt B", "json", "table", "approve --prompt C",
                                           "pick a", "ask --emit --prompt E")), min_size=1, max_size=3))
    text = "exec --json --shell 'echo [{\"a\":1}]' | " + " | ".join(parts)
    decisions = [{"action": "resume", "responseJson": {"decision": "approve"}}] * 2
    if draw(st.booleans()):
        return _file({"steps": [{"id": "p", "pipeline": text}]}, "ask_after_output", draw(MODES), [RUN] + decisions)
    return _pipe(text, "ask_after_output", draw(MODES), [RUN] + decisions)


# 12. JSON Schema refusals of workflow files ---------------------------------------------------------
BAD_FIELDS = st.sampled_from((
    ("name", 5), ("steps", {}), ("steps", []), ("args", []), ("env", {"A": 5}), ("env", "x"), ("cwd", 1),
    ("cost_limit", {"max_usd": "1"}), ("cost_limit", {"action": "halt", "max_usd": 1}), ("description", []),
    ("step.id", 5), ("step.run", ["echo"]), ("step.timeout_ms", "5"), ("step.retry", {"max": "2"}),
    ("step.when", 1), ("step.approval", 5), ("step.input", "x"), ("step.stdin", 5), ("step.env", []),
    ("step.on_error", 1), ("step.for_each", 5), ("step.parallel", []), ("step.workflow_args", 3),
))


@st.composite
def schema_refusals(draw) -> dict:
    field, value = draw(BAD_FIELDS)
    doc: dict = {"steps": [{"id": "a", "run": "echo hi"}]}
    if field.startswith("step."):
        doc["steps"][0][field[5:]] = value
    else:
        doc[field] = value
    return _file(doc, "schema_refusals", draw(MODES), [RUN])


EDGES = {"exec_argv": exec_argv(), "cost": cost(), "max_values": max_values(), "damaged_state": damaged_state(),
         "gates_in_steps": gates_in_steps(), "dry_runs": dry_runs(), "human_mode": human_mode(),
         "lobster_shell": lobster_shell(), "ref_paths": ref_paths(), "pick_missing": pick_missing(),
         "ask_after_output": ask_after_output(), "schema_refusals": schema_refusals()}
edge_cases = st.one_of(*EDGES.values())
