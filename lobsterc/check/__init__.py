"""What a tree means: the checker, the workflow format rules and schema. Lint and the effect
analysis need the compiled program, so they live with the tools (lobsterc.tools)."""
