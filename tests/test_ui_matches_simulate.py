"""At every turn of two sample sessions, what the gauges and badges draw is what
`breakwater simulate --json` prints for that turn, and the timeline's wallet is its totals (a real
subprocess, the real screen)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pytest
from ui_support import app_for, ready, screen_text

from breakwater.cli.core import sample_path
from breakwater.ui.widgets.gauges import Gauges
from breakwater.ui.widgets.message_list import MessageList


@pytest.mark.parametrize("name", ["sanitizer-mess.jsonl", "npm-install-flood.jsonl"])
async def test_gauges_and_badges_equal_simulate_json(name):
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(sample_path(name)), "--json"],
                         capture_output=True, text=True, check=True, timeout=120)
    expected = json.loads(out.stdout)
    app = app_for(name)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        screen = app.screen
        gauges = screen.query_one(Gauges)
        lst = screen.query_one(MessageList)
        saved = 0
        for row in expected["turns"]:
            screen._go(row["turn"])
            await ready(pilot, row["turn"])
            drawn = gauges.draw().plain
            mark = "≈" if row["estimated"] else ""
            assert f"sent {mark}{row['sent_tokens']:,} of window {expected['window']:,}" in drawn, row
            assert f"without compaction ≈{row['raw_tokens']:,}" in drawn
            assert f"cache-stable prefix ≈{row['stable_prefix_tokens']:,}" in drawn
            saved += int(drawn.split("saved ≈")[1].split()[0].replace(",", ""))
            assert {"safe": "safe zone", "soft": "soft zone", "hard": "hard zone"}[row["zone"]] in drawn
            # the provider's figure: this request's own where recorded, else the latest before it (37.10)
            if "billed_tokens" in row:
                assert f"API {row['billed_tokens']:,} (recorded at this turn)" in drawn
            elif "api_tokens" in row:
                assert f"API {row['api_tokens']:,} (recorded at turn " in drawn
            badges = collections.Counter()
            detail = screen.detail
            for i in range(detail.history):      # one badge per kind on each message's row
                badges.update(detail.kinds(lst.messages[i].id))
            assert dict(badges) == row["edits"], row["turn"]
        # what each request saves, counted like for like, adds up to what the session saves
        totals = expected["totals"]
        assert saved == totals["saved"]
        with_ = ("≈" if totals["billed_sent_estimated"] else "") + f"{totals['billed_sent']:,}"
        assert (f"without compaction ≈{totals['billed_raw']:,} · with {with_} · "
                f"saved ≈{totals['saved']:,}") in screen_text(app)
        # what compaction made the provider write again in its cache, as simulate totals it (issue 36.7)
        assert totals["cache_rewritten"] > 0
        assert f"re-wrote {totals['cache_rewritten']:,} cached tokens" in screen_text(app)
