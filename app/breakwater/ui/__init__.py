"""The Textual workbench (SPEC §10)."""
