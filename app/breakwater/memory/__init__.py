"""Tier 3: what the agent remembers beyond its context window (SPEC §6).

`extract` turns messages into bullets, `store` appends them within bounds, `scribe` does that
in the background, `consolidate` folds fragments back, `retrieval` finds entries for a query,
`project` keeps the cross-session history. Plain Python: no UI imports here.
"""
