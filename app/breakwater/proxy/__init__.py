"""`breakwater proxy` (SPEC §9 "In the loop"): between an agent and its provider, recording each
conversation as a session and, unless observing, sending each request as the pipeline's view of it.

The wires it speaks, one module each (a new wire is a module and a line here)."""

from breakwater.proxy import anthropic, chat, responses

WIRES = (anthropic, chat, responses)
