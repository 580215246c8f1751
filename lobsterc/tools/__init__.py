"""What users run on top of the compiler: the `lobsterc` command, diff, graph, dry-run plans,
SARIF output, migration checks and the language server."""
