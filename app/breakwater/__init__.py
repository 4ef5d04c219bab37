"""Breakwater: run an agent's context-compaction pipeline and see every decision."""

__version__ = "0.1.0"
