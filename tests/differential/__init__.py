"""Differential tester: the same inputs through the original Lobster and ours, compared."""
