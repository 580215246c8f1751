"""`lobster graph` / `lobsterc graph` (reference §4.13, §8): nodes, edges, the three formats,
escaping, and the CLI's errors. Exact texts, in process and through the real executables."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from lobsterc.tools.graph import graph
from lobsterc.diagnostics import CompileError

from conftest import LOBSTERC


def write(tmp_path: Path, text: str, name: str = "wf.lobster") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


DEMO = """\
args:
  who: {default: world}
steps:
  - id: fetch
    run: echo hello ${who}
  - id: shape
    pipeline: "where 'a>1' | pick a"
    stdin: $fetch.json
  - id: review
    approval: Ship it?
    stdin: $shape.json
  - id: send
    when: $review.approved && $fetch.json.ok
    run: echo "$shape.stdout"
  - id: loop
    for_each: $shape.json
    steps:
      - {id: each, run: "echo $item.json"}
"""

DEMO_MERMAID = lines(
    "flowchart TD",
    '  fetch["fetch\\nrun: echo hello world"]',
    '  shape["shape\\npipeline: where \'a&gt;1\' &#124; pick a"]',
    '  review{"review\\napproval gate"}',
    '  send["send\\nrun: echo &quot;$shape.stdout&quot;"]',
    '  loop["loop\\nfor_each: $shape.json"]',
    "",
    "  fetch -->|next| shape",
    "  fetch -->|stdin| shape",
    "  shape -->|next| review",
    "  shape -->|stdin| review",
    "  review -->|next| send",
    "  review -->|when: $review.approved &amp;&amp; $fetch.json.ok| send",
    "  fetch -->|when: $review.approved &amp;&amp; $fetch.json.ok| send",
    "  send -->|next| loop",
    "  shape -->|for_each| loop",
)

DEMO_DOT = lines(
    "digraph workflow {",
    "  rankdir=TB;",
    '  "fetch" [shape=box,label="fetch\\\\nrun: echo hello world"];',
    '  "shape" [shape=box,label="shape\\\\npipeline: where \'a>1\' | pick a"];',
    '  "review" [shape=diamond,label="review\\\\napproval gate"];',
    '  "send" [shape=box,label="send\\\\nrun: echo \\"$shape.stdout\\""];',
    '  "loop" [shape=box,label="loop\\\\nfor_each: $shape.json"];',
    "",
    '  "fetch" -> "shape" [label="next"];',
    '  "fetch" -> "shape" [label="stdin"];',
    '  "shape" -> "review" [label="next"];',
    '  "shape" -> "review" [label="stdin"];',
    '  "review" -> "send" [label="next"];',
    '  "review" -> "send" [label="when: $review.approved && $fetch.json.ok"];',
    '  "fetch" -> "send" [label="when: $review.approved && $fetch.json.ok"];',
    '  "send" -> "loop" [label="next"];',
    '  "shape" -> "loop" [label="for_each"];',
    "}",
)

DEMO_ASCII = lines(
    "Workflow Graph",
    "",
    "Nodes:",
    "- fetch [run] (run: echo hello world)",
    "- shape [pipeline] (pipeline: where 'a>1' | pick a)",
    "- review [approval] (approval gate)",
    '- send [run] (run: echo "$shape.stdout")',
    "- loop [for_each] (for_each: $shape.json)",
    "", "Edges:",
    "- fetch -> shape (next)",
    "- fetch -> shape (stdin)",
    "- shape -> review (next)",
    "- shape -> review (stdin)",
    "- review -> send (next)",
    "- review -> send (when: $review.approved && $fetch.json.ok)",
    "- fetch -> send (when: $review.approved && $fetch.json.ok)",
    "- send -> loop (next)",
    "- shape -> loop (for_each)",
)


@pytest.mark.parametrize("fmt, expected", [("mermaid", DEMO_MERMAID), ("dot", DEMO_DOT),
                                           ("ascii", DEMO_ASCII)])
def test_demo_formats(tmp_path, fmt, expected):
    assert graph(write(tmp_path, DEMO), fmt) == expected


def test_mermaid_is_the_default(tmp_path):
    assert graph(write(tmp_path, DEMO)) == DEMO_MERMAID


LONG = "echo " + "x" * 100
# (workflow text, args, ascii graph)
ASCII = [
    pytest.param("steps:\n  - {id: only, run: echo hi}\n", None,
                 lines("Workflow Graph", "", "Nodes:", "- only [run] (run: echo hi)", "", "Edges:", "- (none)"),
                 id="single-step-no-edges"),
    pytest.param(
        """
        steps:
          - {id: a, run: "echo a"}
          - {id: b, approval: required}
          - {id: c, approval: {prompt: "Go on?"}}
          - {id: d, approval: true}
          - id: e
            input: {prompt: "Pick", responseSchema: {type: object}}
          - {id: f, workflow: child.lobster}
          - id: g
            parallel:
              branches: [{id: g1, run: x}, {id: g2, pipeline: sort}]
          - id: h
            parallel:
              wait: any
              branches: [{id: h1, run: x}]
          - {id: i, for_each: "$a.json", item_var: row, steps: [{id: s, run: x}]}
        """, None,
        lines("Workflow Graph", "", "Nodes:",
              "- a [run] (run: echo a)",
              "- b [approval] (approval gate)",
              "- c [approval] (approval gate)",
              "- d [approval] (approval gate)",
              "- e [input] (input request)",
              "- f [workflow] (workflow: child.lobster)",
              "- g [parallel] (parallel (all))",
              "- h [parallel] (parallel (any))",
              "- i [for_each] (for_each: $a.json)",
              "", "Edges:",
              "- a -> b (next)", "- b -> c (next)", "- c -> d (next)", "- d -> e (next)",
              "- e -> f (next)", "- f -> g (next)", "- g -> h (next)", "- h -> i (next)",
              "- a -> i (for_each)"),
        id="node-types"),
    pytest.param(
        f"""
        steps:
          - id: long
            run: {LONG}
          - id: multi
            run: |
              echo one
                 echo   two
        """, None,
        lines("Workflow Graph", "", "Nodes:",
              f"- long [run] ({('run: ' + LONG)[:79]}…)",
              "- multi [run] (run: echo one", "   echo   two", ")",
              "", "Edges:", "- long -> multi (next)"),
        id="truncate-80-and-one-line"),
    pytest.param(
        """
        args:
          who: {default: world}
          n: {default: 1}
        steps:
          - {id: a, run: "echo ${who} ${n} ${HOME}"}
        """, {"who": "moon"},
        lines("Workflow Graph", "", "Nodes:", "- a [run] (run: echo moon 1 ${HOME})", "", "Edges:",
              "- (none)"),
        id="args-over-defaults"),
    pytest.param(
        """
        steps:
          - {id: a, run: x}
          - {id: b, run: y, stdin: "$a.stdout $a.json $ghost.stdout $b.stdout"}
          - {id: c, run: z, when: "$a.json == '$b.json' || $a.skipped", stdin: $b.stdout}
          - {id: d, run: w, condition: "$c.approved", when: "$a.approved"}
          - {id: e, run: v, when: true, stdin: {ref: $a.json}}
        """, None,
        lines("Workflow Graph", "", "Nodes:",
              "- a [run] (run: x)", "- b [run] (run: y)", "- c [run] (run: z)", "- d [run] (run: w)",
              "- e [run] (run: v)",
              "", "Edges:",
              "- a -> b (next)", "- a -> b (stdin)", "- b -> b (stdin)",
              "- b -> c (next)", "- b -> c (stdin)",
              "- a -> c (when: $a.json == '$b.json' || $a.skipped)",
              "- b -> c (when: $a.json == '$b.json' || $a.skipped)",
              "- c -> d (next)", "- a -> d (when: $a.approved)",
              "- d -> e (next)", "- a -> e (stdin)"),
        id="edges-as-the-reference-scans-them"),
    pytest.param(
        """
        steps:
          - {id: a, run: x}
          - id: b
            run: y
            when: "$a.json.value == 'a very long string that goes on and on and on forever'"
        """, None,
        lines("Workflow Graph", "", "Nodes:", "- a [run] (run: x)", "- b [run] (run: y)", "", "Edges:",
              "- a -> b (next)",
              "- a -> b (when: $a.json.value == 'a very long string that goes on and on and "
              "on…)"),
        id="when-label-truncated-70"),
]


@pytest.mark.parametrize("text, args, expected", ASCII)
def test_ascii(tmp_path, text, args, expected):
    assert graph(write(tmp_path, text), "ascii", args) == expected


def test_when_label_is_70_characters(tmp_path):
    text = "steps:\n  - {id: a, run: x}\n  - {id: b, run: y, when: \"$a.json == '" + "z" * 90 + "'\"}\n"
    edge = graph(write(tmp_path, text), "ascii").splitlines()[-1]
    label = edge[len("- a -> b ("):-1]
    assert len(label) == 70 and label.endswith("…")


def test_mermaid_ids_escaping_and_collisions(tmp_path):
    text = """
    steps:
      - {id: my-step, run: 'echo "a" & b < c > d | e'}
      - {id: my_step, run: x}
      - {id: 1st, run: y, when: "$my-step.json.ok"}
      - {id: my.step, run: z, stdin: $my_step.stdout}
      - {id: gate, approval: "Ok <b>?"}
    """
    assert graph(write(tmp_path, text)) == lines(
        "flowchart TD",
        '  my_step["my-step\\nrun: echo &quot;a&quot; &amp; b &lt; c &gt; d &#124; e"]',
        '  my_step_2["my_step\\nrun: x"]',
        '  s_1st["1st\\nrun: y"]',
        '  my_step_3["my.step\\nrun: z"]',
        '  gate{"gate\\napproval gate"}',
        "",
        "  my_step -->|next| my_step_2",
        "  my_step_2 -->|next| s_1st",
        "  my_step -->|when: $my-step.json.ok| s_1st",
        "  s_1st -->|next| my_step_3",
        "  my_step_2 -->|stdin| my_step_3",
        "  my_step_3 -->|next| gate",
    )


def test_dot_escaping(tmp_path):
    text = r"""
    steps:
      - {id: 'q"id', run: 'printf "%s\n" \\x'}
      - {id: b, run: y, when: '$q.json == "\\"', stdin: 'x'}
    """
    assert graph(write(tmp_path, text), "dot") == lines(
        "digraph workflow {",
        "  rankdir=TB;",
        '  "q\\"id" [shape=box,label="q\\"id\\\\nrun: printf \\"%s\\\\n\\" \\\\\\\\x"];',
        '  "b" [shape=box,label="b\\\\nrun: y"];',
        "",
        '  "q\\"id" -> "b" [label="next"];',
        "}",
    )


def test_json_workflow(tmp_path):
    path = write(tmp_path, json.dumps({"steps": [{"id": "a", "pipeline": "sort"}]}), "wf.json")
    assert graph(path, "ascii") == lines("Workflow Graph", "", "Nodes:", "- a [pipeline] (pipeline: sort)",
                                         "", "Edges:", "- (none)")


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="^graph --format must be one of: mermaid, dot, ascii$"):
        graph(write(tmp_path, DEMO), "svg")
    with pytest.raises(CompileError) as info:
        graph(write(tmp_path, "steps: []\n"))
    assert info.value.first.message == "Workflow file requires a non-empty steps array"


# through the real executables -------------------------------------------------------------
@pytest.mark.parametrize("argv, expected", [
    (("graph", "wf.lobster"), DEMO_MERMAID),
    (("graph", "--file", "wf.lobster", "--format", "dot"), DEMO_DOT),
    (("graph", "--format=ascii", "--file=wf.lobster"), DEMO_ASCII),
    (("graph", "wf.lobster", "--format", "ascii", "--args-json", '{"who": "moon"}'),
     DEMO_ASCII.replace("hello world", "hello moon")),
])
def test_cli_graph(cli, argv, expected):
    (cli.work / "wf.lobster").write_text(DEMO, encoding="utf-8")
    proc = cli.run(*argv)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, expected, "")


@pytest.mark.parametrize("argv, code, stderr", [
    (("graph",), 2, "graph requires a workflow file path (use --file <path>)\n"),
    (("graph", "--file"), 2, "graph requires a workflow file path (use --file <path>)\n"),
    (("graph", "--format", "svg", "wf.lobster"), 2,
     "graph --format must be one of: mermaid, dot, ascii\n"),
    (("graph", "wf.lobster", "--args-json", "[1]"), 2, "graph --args-json must be a JSON object\n"),
    (("graph", "wf.lobster", "--args-json", "{"), 2, "graph --args-json must be valid JSON\n"),
    (("graph", "missing.lobster"), 1,
     "Error: ENOENT: no such file or directory, stat '{work}/missing.lobster'\n"),
    (("graph", "bad.lobster"), 1, "Error: Workflow file requires a non-empty steps array\n"),
    (("graph", "wf.txt"), 1, "Error: Workflow file must end in .lobster, .yaml, .yml, or .json\n"),
])
def test_cli_graph_errors(cli, argv, code, stderr):
    (cli.work / "wf.lobster").write_text(DEMO, encoding="utf-8")
    (cli.work / "bad.lobster").write_text("steps: []\n", encoding="utf-8")
    (cli.work / "wf.txt").write_text("steps: []\n", encoding="utf-8")
    proc = cli.run(*argv)
    assert (proc.returncode, proc.stdout, proc.stderr) == (code, "", stderr.format(work=cli.work))


def test_cli_graph_help(cli):
    proc = cli.run("graph", "-h")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: lobster graph [--file] FILE")


def test_lobsterc_graph_matches_lobster(cli):
    (cli.work / "wf.lobster").write_text(DEMO, encoding="utf-8")
    for fmt, expected in (("mermaid", DEMO_MERMAID), ("dot", DEMO_DOT), ("ascii", DEMO_ASCII)):
        proc = cli.run("graph", "wf.lobster", "--format", fmt, exe=LOBSTERC)
        assert (proc.returncode, proc.stdout) == (0, expected), proc.stderr
    proc = cli.run("graph", "wf.lobster", "--format", "svg", exe=LOBSTERC)
    assert (proc.returncode, proc.stderr) == (2, "graph --format must be one of: mermaid, dot, ascii\n")


def test_lobsterc_schema(cli):
    from lobsterc.load.fields import workflow_schema

    proc = cli.run("schema", exe=LOBSTERC)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == workflow_schema()
    assert proc.stdout.startswith("{\n  ")
