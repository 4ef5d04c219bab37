"""Fidelity (issue 12): what compaction keeps, as well as what it saves.

`probes` extracts a session's checkable facts (their words read by `terms`, an agent's text
actions by `text_actions`), `scoring` finds which of them a request still carries, `runner`
replays sessions (locally in parallel, or on Dask) and `results` holds what was found (`FidelityRun.recall_at`, `lost_at` for the workbench's gauge); `loops` flags
compaction loops; `commands` is `breakwater eval`. No Textual here. Nothing is imported at
package level, so `breakwater --help` does not pay for the replay machinery.
"""
