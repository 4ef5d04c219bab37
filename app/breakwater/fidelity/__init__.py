"""Fidelity (issue 12): what compaction keeps, as well as what it saves.

`probes` extracts a session's checkable facts, `scoring` finds which of them a request still
carries, `runner` replays sessions (locally in parallel, or on Dask) and `results` holds what
was found; `commands` is `breakwater eval`. No Textual here: the workbench draws `FidelityRun`.
"""

from breakwater.fidelity.probes import CATEGORIES, Probe, extract
from breakwater.fidelity.results import FidelityRun
from breakwater.fidelity.runner import evaluate_path, replay

__all__ = ["CATEGORIES", "Probe", "extract", "FidelityRun", "evaluate_path", "replay"]
