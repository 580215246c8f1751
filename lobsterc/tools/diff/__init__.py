"""`lobsterc diff`: the safety diff of two versions of a workflow or pipeline, read from the two
compiled programs and their effect analysis (lobsterc.tools.effects), never from the text. It
imports no command line: `run_diff` and `load_version` take the compile function as a parameter.

A version is summarised as a `Model`: its gates (every HALT_APPROVE / HALT_INPUT site, keyed by
step label and kind), its effects (every side-effecting thing a step does, keyed by step label
and effect kind), which gates dominate each effect on the compiled control-flow graph (every
path from the start to the effect passes the gate), and the plain facts of each step
(condition, policy, env, cwd, what it runs) and of the program (arg defaults, cost limit,
checkpoint TTL). Steps whose label changed but whose content did not are matched as renames
first, so a rename reports nothing. `compare` then yields Findings; RULES names each kind.

Severity: `error` is a weakened safety property (exit 1 unless accepted), `warning` a change a
reviewer should read, `note` a strengthening or neutral fact. A finding has a stable id
(`RULE:subject...`); `--accept ID` or the NEW file's top-level `x-reviewed:` list accepts it.

The modules, in the order a diff runs: versions.py reads each version (a file, or a file at a
git revision) and model.py summarises it; renames.py matches renamed steps; compare.py yields
the findings (rules.py names their kinds; schemas.py judges input schemas); render.py and
../sarif.py write the report; command.py is `lobsterc diff` itself.
"""
