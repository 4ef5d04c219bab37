"""The headless layers never import Textual (STYLE rule 1)."""

import subprocess
import sys

import pytest

MODULES = [
    "breakwater.core.fold.pipeline", "breakwater.core.simulate", "breakwater.cli.core", "breakwater.core.stages.prompt",
    "breakwater.core.stages.summarize", "breakwater.core.log.tokens", "breakwater.formats", "breakwater.cli",
    "breakwater.tools.spill_index", "breakwater.tools.spill_search",
    "breakwater.core.replay", "breakwater.cli.ui",
    "breakwater.cli.fidelity", "breakwater.fidelity.runner",
]


@pytest.mark.parametrize("module", MODULES)
def test_core_does_not_import_textual(module):
    code = f"import sys, {module}; bad = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
