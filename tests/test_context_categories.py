"""Context by category (as Claude Code's /context): computed in the core for a turn's request, the
categories and the unseen overhead add up to the request the gauge states (its `sent` figure), the
overhead is the accounting's fitted one; compacted results are counted."""

from breakwater.core.context_categories import categories, for_turn, memory_tokens, shared_out
from breakwater.core.log.message import Message
from pathlib import Path

from breakwater.core.policy import load_toml, preset
from breakwater.core.replay import Replay
from breakwater.formats import load_session
from support.transcripts import REAL

CLAUDE = REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl"


def replay_at(path, policy, turn=None):
    log = load_session(path)
    r = Replay(log, policy, counter="heuristic")
    turn = turn or log.turn_count()
    r.run(focus=turn)
    return r, r.detail(turn)


def test_the_categories_add_up_to_the_request_and_name_the_unseen_overhead():
    r, d = replay_at(CLAUDE, preset("breakwater").with_changes(window=200_000), turn=40)
    c = for_turn(r, d)
    # one accounting with the gauge: the same request size, the same overhead
    assert c.used == d.view.sent_tokens and c.overhead == d.calibration.overhead
    assert c.counted == d.view.sent_tokens - d.calibration.overhead
    assert c.results_n == sum(m.is_observation for m in d.view.messages) > 0
    # Claude Code's system prompt and tool schemas are not in its transcript: thousands of tokens
    assert c.overhead is not None and c.overhead > 5_000
    assert c.free == c.hard_limit - c.used and c.reserve == 200_000 - c.hard_limit
    assert "unseen" in c.line() and "free" in c.line()


def test_compacted_results_are_counted():
    r, d = replay_at(REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json",
                     load_toml(Path(__file__).resolve().parents[1] / "docs" / "policies" / "complexity-trap.toml"))
    c = for_turn(r, d)
    compacted = sum(1 for m in d.view.messages if m.is_observation
                    and {"snipped", "masked", "microcompacted", "truncated"} & set(d.kinds(m.id)))
    assert c.results_compacted == compacted > 0
    assert f"({compacted}/{c.results_n} compacted)" in c.line()
    assert compacted == c.results_n - 10   # the reference policy keeps the last ten whole


def test_memory_and_project_files_are_told_apart_from_the_prompt():
    agents_md = Message("a", "user", "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nRun make test.\n</INSTRUCTIONS>")
    claude = Message("b", "user", "<system-reminder>\nContents of /repo/CLAUDE.md (project instructions):\n"
                     + "Use tabs. " * 200 + "\n</system-reminder>\nFix the parser.")
    ours = Message("c", "system", "You are an agent.\n\n[Session]\nSession: ab\n\n[Project History]\n" + "- did x\n" * 100)
    assert memory_tokens(agents_md) > 0 and memory_tokens(claude) > 400 and memory_tokens(ours) > 150
    c = categories([ours, claude, agents_md], lambda _id: [], 128_000, 115_000)
    assert c.memory == memory_tokens(ours) + memory_tokens(claude) + memory_tokens(agents_md)
    assert c.user > 0 and c.system > 0 and c.overhead is None and c.tools is None
    scaled = categories([ours, claude, agents_md], lambda _id: [], 128_000, 115_000, sent_tokens=5_000, overhead=1_234)
    assert scaled.used == 5_000 and scaled.overhead == 1_234 and scaled.free == 110_000


def test_a_total_is_shared_out_in_whole_tokens_that_add_up():
    assert shared_out([1, 1, 1], 10) == [4, 3, 3]
    assert shared_out([0, 5, 0], 7) == [0, 7, 0]
    assert shared_out([0, 0], 3) == [3, 0]
    assert sum(shared_out([215, 61, 21_400, 2_700, 1_700], 25_804)) == 25_804


async def test_the_workbench_shows_the_line_and_the_full_view_on_x():
    from breakwater.ui.app import make_app
    from breakwater.ui.config import UISettings
    from breakwater.ui.screens.context import ContextScreen
    from ui_support import ready, screen_text

    log = load_session(CLAUDE)
    app = make_app(log, preset("breakwater").with_changes(window=200_000), counter="heuristic", settings=UISettings())
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        c = for_turn(app.replay, app.screen.detail)
        assert c.line() in screen_text(app)
        await pilot.press("x")
        assert isinstance(app.screen, ContextScreen)
        text = screen_text(app)
        for name in ("system prompt", "tool schemas", "memory / project files", "user messages", "assistant messages",
                     "tool results", "unseen overhead", "free space", "reserve"):
            assert name in text
        assert f"{c.overhead:,}" in text and f"{c.free:,}" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, ContextScreen)
