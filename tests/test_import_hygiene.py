"""The headless layers never import Textual (STYLE rule 1)."""

import subprocess
import sys

import pytest

MODULES = [
    "breakwater.core.pipeline", "breakwater.core.simulate", "breakwater.core.commands", "breakwater.core.prompt",
    "breakwater.core.summarize", "breakwater.core.tokens", "breakwater.formats", "breakwater.cli",
    "breakwater.tools.spill_index", "breakwater.tools.spill_search",
    "breakwater.core.replay", "breakwater.ui.commands",
    "breakwater.fidelity.commands", "breakwater.fidelity.runner",
]


@pytest.mark.parametrize("module", MODULES)
def test_core_does_not_import_textual(module):
    code = f"import sys, {module}; bad = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
