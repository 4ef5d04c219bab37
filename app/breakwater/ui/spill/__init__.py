"""The spill pane: a session's spill files, tailed live, with jump to line and search."""

from breakwater.ui.spill.pane import SpillPane
from breakwater.ui.spill.view import SpillStatus, SpillView

__all__ = ["SpillPane", "SpillStatus", "SpillView"]
