"""The workbench (SPEC §10): a Textual app drawing what the core returns. Only this package imports Textual."""
