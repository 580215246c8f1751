"""Sources and spans: they live in vm/core/source.py (the machine prints runtime traps with the same
excerpts); the compiler's modules keep importing them from here."""

from vm.core.source import Source, Span, excerpt, read_source

__all__ = ["Source", "Span", "excerpt", "read_source"]
