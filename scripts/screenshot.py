"""Save the README's screenshot: the workbench on the bundled sample, drawn by the app itself.

    make screenshot        # writes docs/workbench.svg (and docs/workbench-light.svg)
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from ui_support import app_for, ready  # noqa: E402

from breakwater.ui.config import UISettings  # noqa: E402

SIZE = (160, 48)


async def shoot(theme: str, out: Path) -> None:
    app = app_for("long-refactor.jsonl", turn=150, settings=UISettings(theme=theme))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("down", "down", "down")
        await pilot.pause(0.3)
        app.save_screenshot(str(out.name), path=str(out.parent))
    print(out.relative_to(ROOT))


def main() -> None:
    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    asyncio.run(shoot("breakwater-dark", docs / "workbench.svg"))
    asyncio.run(shoot("breakwater-light", docs / "workbench-light.svg"))


if __name__ == "__main__":
    main()
