"""`workflows.list` and `workflows.run`: the built-in named workflows (vm/workflows)."""

from __future__ import annotations

from vm.core import js, json_read
from vm.host.commands.base import Args, CommandError, Context


def list_workflows(args: Args, items: list, ctx: Context) -> list:
    from vm.host.workflows import listing

    return listing()


def run_workflow(args: Args, items: list, ctx: Context) -> list:
    from vm.host.workflows import WORKFLOWS
    from vm.host.workflows.github_pr import RUNNERS

    name = args.get("name")
    if name is None and args.positionals:
        name = args.positionals[0]
    if not js.truthy(name):
        raise CommandError("workflows.run requires --name")
    name = js.to_string(name)
    if name not in WORKFLOWS:
        raise CommandError(f"Unknown workflow: {name}")
    workflow_args = {}
    raw = args.get("args-json")
    if js.truthy(raw):
        try:
            workflow_args = json_read.json_loads(js.to_string(raw))
        except ValueError:
            raise CommandError("workflows.run --args-json must be valid JSON") from None
    if not isinstance(workflow_args, dict):
        workflow_args = {}
    return [RUNNERS[name](workflow_args, ctx)]
