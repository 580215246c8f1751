"""Layer 2, the world outside the machine: child processes, the checkpoint store and its
lifecycle, resume tokens, the pipeline commands and built-in workflows. Imports `vm.core` and
`vm.isa`."""
