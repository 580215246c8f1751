"""Layer 0, the vocabulary every layer shares: JavaScript value semantics (js), compiled
conditions, the JSON Schema dialect of input gates, sources and spans, error codes, bounds.
Imports nothing else from `vm`."""
