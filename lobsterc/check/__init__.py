"""What a tree means: the checker, the workflow format rules and schema, lint, the effect
analysis."""
