"""Layer 4, requests and checkpoints as callers see them: tool requests to envelopes (run,
park, resume), checkpoint administration, migration, the compiler interface and the message
shapes. Imports the layers below."""
