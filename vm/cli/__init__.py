"""Layer 5, the front doors: the `lobster` command line (one module per subcommand) and the MCP
server. Nothing in `vm` imports this package."""
