"""Text to trees: the grammars, the pipeline parser, conditions, shell words, the AST."""
