"""What `lobster help [COMMAND]` prints: the texts users of the original Lobster read (its
observed output, kept so scripts and people that read it see the same; DIVERGENCES D07).
A command only we have gets a text made from its signature (vm.cli)."""

from __future__ import annotations

COMMAND_HELP: dict[str, str] = {
    'exec': (
        'exec — run an OS command\n'
        '\n'
        'Usage:\n'
        '  exec <command...>\n'
        '  exec --stdin raw|json|jsonl <command...>\n'
        '  exec --json <command...>\n'
        '  exec --shell "<command line>"\n'
        '\n'
        'Notes:\n'
        '  - With --json, parses stdout as JSON (single value).\n'
        '  - With --stdin, writes pipeline input to stdin.\n'
        '  - With --shell (or a single arg containing spaces), runs via the system shell.\n'
    ),
    'head': (
        'head — take first N items\n'
        '\n'
        'Usage:\n'
        '  head --n 10\n'
    ),
    'json': (
        'json — render pipeline output as JSON\n'
        '\n'
        'Usage:\n'
        '  ... | json\n'
    ),
    'pick': (
        'pick — project fields from objects\n'
        '\n'
        'Usage:\n'
        '  ... | pick id,subject,from\n'
    ),
    'table': (
        'table — render items as a simple table\n'
        '\n'
        'Usage:\n'
        '  ... | table\n'
        '\n'
        'Notes:\n'
        '  - If items are objects, columns are union of keys (first 20 items).\n'
    ),
    'where': (
        'where — filter objects by a simple predicate\n'
        '\n'
        'Usage:\n'
        '  ... | where unread=true\n'
        '  ... | where minutes>=30\n'
        '  ... | where sender.domain==example.com\n'
    ),
    'approve': (
        'approve — require confirmation to continue\n'
        '\n'
        'Usage:\n'
        '  ... | approve --prompt "Send these emails?"\n'
        '  ... | approve --emit --prompt "Send these emails?"\n'
        '  ... | approve --emit --preview-from-stdin --limit 5 --prompt "Proceed?"\n'
        '\n'
        'Modes:\n'
        '  - Interactive (default): prompts on TTY and passes items through if approved.\n'
        '  - Emit (--emit): returns an approval request object and stops the pipeline.\n'
        '\n'
        'Notes:\n'
        '  - In tool mode (or non-interactive), this emits an approval request and halts.\n'
    ),
    'ask': (
        'ask — pause and request structured input from the user\n'
        '\n'
        'Usage:\n'
        '  ... | ask --prompt "Approve, reject, or send feedback:"\n'
        '  ... | ask --prompt "Feedback?" --schema \'{"type":"object","properties":{"decision":{"type":"string"},"feedback":{"type":"string"}},"required":["decision"]}\'\n'
        '  ... | ask --subject-from-stdin --prompt "Review this draft:"\n'
        '\n'
        'Notes:\n'
        '  - In tool mode (or non-interactive), emits a needs_input envelope and halts.\n'
        '  - Use --schema to constrain the response shape (JSON Schema).\n'
        '  - Use --subject-from-stdin to embed the current pipeline value as preview text.'
    ),
    'openclaw.invoke': (
        'openclaw.invoke — call a local OpenClaw tool endpoint\n'
        '\n'
        'Usage:\n'
        '  openclaw.invoke --tool message --action send --args-json \'{"provider":"telegram","to":"...","message":"..."}\'\n'
        "  openclaw.invoke --tool message --action send --args-json '{...}' --dry-run\n"
        '  ... | openclaw.invoke --tool message --action send --each --item-key message --args-json \'{"provider":"telegram","to":"..."}\'\n'
        '\n'
        'Config:\n'
        '  - Uses OPENCLAW_URL env var by default (or pass --url).\n'
        '  - Backward compatible: CLAWD_URL is also supported.\n'
        '  - Optional Bearer token via OPENCLAW_TOKEN env var (or pass --token).\n'
        '  - Backward compatible: CLAWD_TOKEN is also supported.\n'
        '  - Optional attribution via --session-key <sessionKey>.\n'
        '\n'
        'Notes:\n'
        '  - This is a thin transport bridge. Lobster should not own OAuth/secrets.\n'
    ),
    'clawd.invoke': (
        'clawd.invoke — call a local OpenClaw tool endpoint\n'
        '\n'
        'Usage:\n'
        '  clawd.invoke --tool message --action send --args-json \'{"provider":"telegram","to":"...","message":"..."}\'\n'
        "  clawd.invoke --tool message --action send --args-json '{...}' --dry-run\n"
        '  ... | clawd.invoke --tool message --action send --each --item-key message --args-json \'{"provider":"telegram","to":"..."}\'\n'
        '\n'
        'Config:\n'
        '  - Uses OPENCLAW_URL env var by default (or pass --url).\n'
        '  - Backward compatible: CLAWD_URL is also supported.\n'
        '  - Optional Bearer token via OPENCLAW_TOKEN env var (or pass --token).\n'
        '  - Backward compatible: CLAWD_TOKEN is also supported.\n'
        '  - Optional attribution via --session-key <sessionKey>.\n'
        '\n'
        'Notes:\n'
        '  - This is a thin transport bridge. Lobster should not own OAuth/secrets.\n'
    ),
    'llm.invoke': (
        'llm.invoke — call a configured LLM adapter with caching and schema validation\n'
        '\n'
        'Usage:\n'
        "  llm.invoke --prompt 'Write summary'\n"
        "  llm.invoke --provider openclaw --model claude-3-sonnet --prompt 'Write summary'\n"
        "  cat artifacts.json | llm.invoke --provider pi --prompt 'Score each item'\n"
        '  ... | llm.invoke --prompt \'Plan next steps\' --output-schema \'{"type":"object"}\'\n'
        '\n'
        'Features:\n'
        '  - Typed payload validation before invoking the adapter.\n'
        '  - Run-state + file cache so resumes do not re-call the LLM.\n'
        '  - Optional JSON-schema enforcement, retried at most --max-validation-retries times\n'
        '    after the first call.\n'
        '\n'
        'Config:\n'
        '  - Provider resolution order: --provider, LOBSTER_LLM_PROVIDER, then environment auto-detect.\n'
        '  - Built-in providers: openclaw, pi, http.\n'
        '  - OpenClaw provider uses OPENCLAW_URL (CLAWD_URL also supported) and OPENCLAW_TOKEN.\n'
        '  - Pi provider uses LOBSTER_PI_LLM_ADAPTER_URL and is intended to be supplied by a Pi extension.\n'
        '  - Generic http provider uses LOBSTER_LLM_ADAPTER_URL and optional LOBSTER_LLM_ADAPTER_TOKEN.\n'
    ),
    'llm_task.invoke': (
        'llm_task.invoke — backward-compatible alias for llm.invoke using OpenClaw\n'
        '\n'
        'Usage:\n'
        "  llm_task.invoke --prompt 'Write summary'\n"
        "  llm_task.invoke --model claude-3-sonnet --prompt 'Write summary'\n"
        "  cat artifacts.json | llm_task.invoke --prompt 'Score each item'\n"
        '\n'
        'Features:\n'
        '  - Typed payload validation before invoking the adapter.\n'
        '  - Run-state + file cache so resumes do not re-call the LLM.\n'
        '  - Optional JSON-schema enforcement, retried at most --max-validation-retries times\n'
        '    after the first call.\n'
        '\n'
        'Config:\n'
        '  - Requires OPENCLAW_URL (or CLAWD_URL) and optionally OPENCLAW_TOKEN.\n'
        '  - Use llm.invoke for new workflows and non-OpenClaw adapters.\n'
    ),
    'state.get': (
        'state.get — read a JSON value from Lobster state\n'
        '\n'
        'Usage:\n'
        '  state.get <key>\n'
        '\n'
        'Env:\n'
        '  LOBSTER_STATE_DIR overrides storage directory\n'
    ),
    'state.set': (
        'state.set — write a JSON value to Lobster state\n'
        '\n'
        'Usage:\n'
        '  <value> | state.set <key>\n'
        '\n'
        'Notes:\n'
        '  - Consumes the entire input stream; stores a single JSON value.\n'
    ),
    'diff.last': (
        'diff.last — compare current items to last stored snapshot\n'
        '\n'
        'Usage:\n'
        '  <items> | diff.last --key <stateKey>\n'
        '\n'
        'Output:\n'
        '  { changed, key, before, after }\n'
    ),
    'commands.list': (
        'commands.list — list available Lobster pipeline commands\n'
        '\n'
        'Usage:\n'
        '  commands.list\n'
        '\n'
        'Notes:\n'
        '  - Intended for agents (e.g. OpenClaw) to discover available pipeline stages dynamically.\n'
        '  - Output includes name/description plus optional metadata (argsSchema/examples/sideEffects) when provided by commands.\n'
    ),
    'sort': (
        'sort — sort items (stable) by a key\n'
        '\n'
        'Usage:\n'
        '  ... | sort\n'
        '  ... | sort --key updatedAt\n'
        '  ... | sort --key prNumber --desc\n'
        '\n'
        'Notes:\n'
        '  - Sorting is stable (preserves order for equal keys).\n'
        '  - undefined/null keys sort last.\n'
    ),
    'dedupe': (
        'dedupe — remove duplicate items (stable)\n'
        '\n'
        'Usage:\n'
        '  ... | dedupe\n'
        '  ... | dedupe --key id\n'
        '\n'
        'Notes:\n'
        '  - Keeps the first occurrence.\n'
    ),
    'groupBy': (
        'groupBy — group items by a key\n'
        '\n'
        'Usage:\n'
        '  ... | groupBy --key from\n'
        '\n'
        'Output:\n'
        '  Stream of { key, items, count } objects\n'
        '\n'
        'Notes:\n'
        '  - Group order is stable (order of first appearance).\n'
    ),
    'map': (
        'map — transform items\n'
        '\n'
        'Usage:\n'
        '  ... | map --wrap item\n'
        '  ... | map --unwrap item\n'
        '  ... | map foo=bar id={{id}}\n'
        '\n'
        'Notes:\n'
        '  - Assignments are added to an object item (preserves existing fields).\n'
        '  - Assignment values support template placeholders like {{id}} and {{nested.field}}.\n'
    ),
    'template': (
        'template — render a simple template against each item\n'
        '\n'
        'Usage:\n'
        "  ... | template --text 'PR {{number}}: {{title}}'\n"
        '  ... | template --file ./draft.txt\n'
        '\n'
        'Template syntax:\n'
        '  - {{field}} or {{nested.field}}\n'
        '  - {{.}} for the whole item\n'
        '  - {{field | filter}} with pipe-based filters\n'
        '  - Missing values render as empty string\n'
        '\n'
        'Filters:\n'
        '  upper, lower, trim, truncate N, replace "from" "to", split sep\n'
        '  first, last, length, join sep\n'
        '  json, string, default val, round N, date fmt\n'
    ),
}

# `lobster`, `lobster help`, `lobster --help`: the original's layout, with our own `tool`
# subcommand and our command list (SPEC section 9.8).
USAGE_HEAD = """\
lobster — OpenClaw-native typed shell

Usage:
  lobster '<pipeline>'
  lobster run --mode tool '<pipeline>'
  lobster run path/to/workflow.lobster
  lobster run --file path/to/workflow.lobster --args-json '{...}'
  lobster run --dry-run --file path/to/workflow.lobster
  lobster run --dry-run '<pipeline>'
  lobster graph --file path/to/workflow.lobster --format mermaid
  lobster graph --file path/to/workflow.lobster --format dot
  lobster graph --file path/to/workflow.lobster --format ascii
  lobster resume --token <token> --approve yes|no
  lobster resume --token <token> --response-json '{...}'
  lobster resume --token <token> --cancel
  lobster tool '<request json>'
  lobster doctor
  lobster version
  lobster help <command>

Flags:
  --dry-run  Validate and print the execution plan without running anything

Modes:
  - human (default): renderers can write to stdout
  - tool: prints a single JSON envelope for easy integration

Examples:
  lobster 'exec --json "echo [1,2,3]" | json'
  lobster run --mode tool 'exec --json "echo [1]" | approve --prompt "ok?"'

Commands:
"""


def usage(command_names: list[str]) -> str:
    """The top-level help: the usage lines, then the pipeline commands on one line."""
    return USAGE_HEAD + "  " + ", ".join(command_names) + "\n"
