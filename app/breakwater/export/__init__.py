"""`breakwater export`: a replay as one self-contained HTML page or as Markdown (SPEC §9 "Out").

`report` gathers what the page shows from the core (the simulation `simulate --json` prints, the
request at the chosen turn, the compactions and the facts they lost); `html` and `markdown` only
draw it. Nothing here recomputes compaction or counts.
"""
