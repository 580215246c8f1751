"""Layer 1, the instruction set and its data: opcodes and payloads, the Program and the Frame,
their codec and load-time verifier, the disassembler and the cost ledger. Imports only
`vm.core`."""
