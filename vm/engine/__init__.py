"""Layer 3, running a program: the interpreter and its handlers, the machine that embedders
drive, outcomes, step results and references, run events. Imports the layers below."""
