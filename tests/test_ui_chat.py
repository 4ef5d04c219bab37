"""`breakwater chat` driven by keys against the project's fake OpenAI server (strict checks):
prompts, approvals, cancel, controls by hand, the summary preview; and the same screen again
from the recorded file with `replay`."""

from __future__ import annotations

import asyncio

from agent_support import Script, agent_config, answered, events, load, replayed_requests, serve, strip_volatile
from support.fake_openai import Reply, ScriptedToolCall
from textual.widgets import Input
from ui_support import ready, screen_text, until

from breakwater.core.stages.summarize import SUMMARY_HEADER
from breakwater.ui.app import make_app
from breakwater.ui.chat_app import ChatApp
from breakwater.ui.config import UISettings
from breakwater.ui.screens.dialogs import ApprovalScreen, SummaryReviewScreen
from breakwater.ui.widgets.would_lose import WouldLose
from breakwater.ui.widgets.gauges import Gauges
from breakwater.ui.widgets.message_list import MessageList

SIZE = (160, 48)


def bash(command: str) -> Reply:
    return Reply.calls(ScriptedToolCall("bash", {"command": command}))


def chat_app(server, tmp_path, **kw) -> ChatApp:
    return ChatApp(agent_config(server, tmp_path, **kw), settings=UISettings(), counter="heuristic")


async def say(pilot, text: str) -> None:
    chat = pilot.app.screen.query_one("#chat-input", Input)
    chat.focus()
    chat.value = text
    await pilot.press("enter")


async def idle(pilot) -> None:
    screen = pilot.app.screen
    await until(pilot, lambda: not screen._busy and screen.detail is not None
                and screen.detail.view.turn == screen.replay.turns + 1)


async def chatted(pilot, rounds: int) -> None:
    """Once the agent is up, `rounds` prompts, each answered before the next."""
    await until(pilot, lambda: hasattr(pilot.app.screen, "agent"))
    for k in range(rounds):
        await say(pilot, f"part {k}")
        await idle(pilot)


async def test_a_prompt_streams_runs_an_approved_tool_and_the_replay_shows_the_same(tmp_path):
    script = Script([bash("echo hello-from-bash"), Reply(text="All done: hello.")])
    with serve(script) as server:
        app = chat_app(server, tmp_path, auto_approve=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            await say(pilot, "Say hello with bash.")
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            assert "echo hello-from-bash" in screen_text(app)
            await pilot.press("y")
            screen = app.screen_stack[1]
            await until(pilot, lambda: not isinstance(app.screen, ApprovalScreen))
            await idle(pilot)
            text = screen_text(app)
            assert "All done: hello." in text
            live = (screen.detail.view, screen.query_one(Gauges).render().plain)
            path = app.agent.path
            policy = app.agent.policy
            await pilot.press("ctrl+q")
        assert server.problems == [] and script.problems == []
        tool = next(m for m in load(path).messages if m.role == "tool")
        assert "hello-from-bash" in tool.content
    replay = make_app(load(path), policy, counter="heuristic", settings=UISettings())
    async with replay.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: replay.replay.simulation is not None)
        await pilot.press("end", "right")   # the next request, as the live screen showed it
        await ready(pilot, replay.replay.turns + 1)
        assert replay.screen.detail.view == live[0]
        assert replay.screen.query_one(Gauges).render().plain == live[1]


async def test_deny_and_allow_for_the_session(tmp_path):
    script = Script([bash("echo one"), bash("echo two"), bash("echo three"), Reply(text="ok")])
    with serve(script) as server:
        app = chat_app(server, tmp_path, auto_approve=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            await say(pilot, "Run three commands.")
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            await pilot.press("n")                       # deny the first
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and "echo two" in screen_text(app))
            await pilot.press("a")                       # allow bash for the session
            await idle(pilot)
            path = app.agent.path
            await pilot.press("ctrl+q")
    tools = [m.content for m in load(path).messages if m.role == "tool"]
    assert tools[0].startswith("Denied:") and "two" in tools[1] and "three" in tools[2]
    assert server.problems == []


async def test_cancel_a_long_request_and_the_next_one_plans_again(tmp_path):
    slow = Reply(text="this reply is slow " * 50, chunk_delay=0.2)
    script = Script([slow, Reply(text="second answer")])
    with serve(script) as server:
        app = chat_app(server, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            await say(pilot, "Take your time.")
            await until(pilot, lambda: "assistant ▸" in screen_text(app))
            app.screen.query_one(MessageList).focus()
            await pilot.press("ctrl+x")
            await until(pilot, lambda: not app.screen._busy)
            await say(pilot, "Again, quickly.")
            await idle(pilot)
            assert "second answer" in screen_text(app)
            path, policy = app.agent.path, app.agent.policy
            await pilot.press("ctrl+q")
        received = [strip_volatile(r.messages) for r in answered(server)]
    log = load(path)
    assert any((m.meta or {}).get("partial") for m in log.messages)
    assert [strip_volatile(r) for r in replayed_requests(log, policy)] == received
    assert server.problems == []


async def test_controls_by_hand_preview_and_edit_a_summary_undo_and_pin(tmp_path):
    # commands told apart by a word of their own: a fact of the first is carried by its messages only
    steps = [step for k, word in enumerate(("apple", "banana", "cherry"))
             for step in (bash(f"echo {word}; seq {k} 400"), Reply(text=f"round {k}"))]
    script = Script([*steps, Reply(text="after the edit"), Reply(text="after undo"), Reply(text="after pin")])
    with serve(script, window=4000) as server:   # the kept tail leaves history to summarize
        app = chat_app(server, tmp_path, window=4000)
        async with app.run_test(size=SIZE) as pilot:
            await chatted(pilot, 3)
            screen = app.screen
            screen.query_one(MessageList).focus()
            before = screen.detail.view.sent_tokens
            await pilot.press("M")                     # mask now: logged, the gauge moves at once
            await until(pilot, lambda: events(app.agent.log, "trigger", stage="mask"))
            await idle(pilot)
            assert screen.detail.view.sent_tokens < before
            await pilot.press("D")                     # deep compaction: the preview comes first
            await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))
            dialog = app.screen
            assert "Replaces" in screen_text(app) and "tokens" in screen_text(app)
            assert dialog.at_risk                      # the commands whose output the summary replaces
            area = dialog.query_one("#review-text")
            area.text = "## Original goal\n- EDITED BY THE USER"
            # the user's text keeps none of them: the list says so before it is accepted
            await until(pilot, lambda: len(dialog.query_one(WouldLose).lost) == len(dialog.at_risk))
            n = len(dialog.at_risk)
            assert f"Would lose {n} of {n} fact{'' if n == 1 else 's'}" in screen_text(app)
            await pilot.press("ctrl+s")
            await until(pilot, lambda: events(app.agent.log, "compaction"))
            await idle(pilot)
            await say(pilot, "continue")
            await idle(pilot)
            last = server.chat_requests[-1].messages
            assert any("EDITED BY THE USER" in (m.get("content") or "") for m in last)
            screen.query_one(MessageList).focus()
            await pilot.press("u")                     # undo the latest: the compaction
            await until(pilot, lambda: events(app.agent.log, "undo"))
            await idle(pilot)
            await say(pilot, "without it")
            await idle(pilot)
            assert not any(SUMMARY_HEADER in (m.get("content") or "") for m in server.chat_requests[-1].messages)
            lst = screen.query_one(MessageList)
            lst.focus()
            first_tool = next(i for i, m in enumerate(lst.messages) if m.role == "tool")
            lst.select_index(first_tool)
            await pilot.press("P")
            await until(pilot, lambda: events(app.agent.log, "pin"))
            await idle(pilot)
            assert lst.messages[first_tool].id in lst.pins
            await say(pilot, "pinned")
            await idle(pilot)
            pinned = lst.messages[first_tool].content
            assert any(m.get("content") == pinned for m in server.chat_requests[-1].messages)
            await pilot.press("ctrl+q")
    assert server.problems == [] and script.problems == []
    for r in server.chat_requests:
        assert r.reply is not None and not r.reply.is_error


async def test_without_a_model_the_chat_says_how_to_configure_and_the_rest_works(tmp_path, monkeypatch):
    monkeypatch.setenv("BREAKWATER_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    from breakwater.agent.config import load_config

    app = ChatApp(load_config({"workspace": tmp_path}, env={"BREAKWATER_CONFIG": str(tmp_path / "none.toml")}),
                  configured=False, settings=UISettings())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: hasattr(app.screen, "agent") and app.screen.detail is not None)
        text = screen_text(app)
        assert "No model is configured" in text and "--base-url" in text
        screen = app.screen
        chat = screen.query_one("#chat-input", Input)
        turn, shown = screen.turn, screen_text(app)
        # typing goes into the input, not to the shortcuts behind it (h steps back, e filters, D compacts)
        for key in "hello Done":
            await pilot.press("space" if key == " " else key)
        await pilot.pause()
        assert chat.value == "hello Done" and app.focused is chat
        assert screen.turn == turn and screen.query_one(MessageList).filter.kind is None
        assert not isinstance(app.screen, SummaryReviewScreen)
        await pilot.press("enter")                  # says how to configure a model, and keeps the text
        await until(pilot, lambda: sum("No model is configured" in str(n.message) for n in app._notifications) >= 2)
        assert chat.value == "hello Done"
        assert shown.splitlines()[0] == screen_text(app).splitlines()[0]
        chat.value = ""
        screen.query_one(MessageList).focus()
        await pilot.press("f1")
        await until(pilot, lambda: "keys and colours" in screen_text(app))
        await asyncio.sleep(0)


async def test_a_write_is_approved_from_its_diff(tmp_path):
    (tmp_path / "notes.txt").write_text("old line\nkept line\n")
    write = Reply.calls(ScriptedToolCall("write_file", {"path": "notes.txt", "content": "new line\nkept line\n"}))
    script = Script([write, Reply(text="written")])
    with serve(script) as server:
        app = chat_app(server, tmp_path, auto_approve=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            await say(pilot, "Edit the notes.")
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            text = screen_text(app)
            assert "overwrite notes.txt" in text and "-old line" in text and "+new line" in text
            await pilot.press("y")
            await until(pilot, lambda: not isinstance(app.screen, ApprovalScreen))
            await idle(pilot)
            await pilot.press("ctrl+q")
    assert (tmp_path / "notes.txt").read_text() == "new line\nkept line\n"


async def test_errors_are_notifications_and_the_app_goes_on(tmp_path):
    script = Script([Reply.rate_limit(retry_after=0), Reply(text="after the retry"),
                     Reply(status=401, error={"message": "Incorrect API key provided", "type": "invalid_request_error",
                                              "param": None, "code": "invalid_api_key"})])
    with serve(script) as server:
        app = chat_app(server, tmp_path)
        seen = []
        app.notify = lambda message, **kw: seen.append((kw.get("title"), str(message)))  # what the user is told
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            await say(pilot, "one")
            await idle(pilot)
            assert any(title == "Request failed" and "retrying" in text for title, text in seen)
            await say(pilot, "two")
            await until(pilot, lambda: any(title == "The agent stopped" for title, _ in seen))
            assert app.is_running
            assert "after the retry" in screen_text(app)
            await pilot.press("ctrl+q")


async def test_a_deep_compaction_undone_before_the_next_request_is_not_counted(tmp_path):
    steps = [step for k in range(3) for step in (bash(f"seq {k} 400"), Reply(text=f"round {k}"))]
    with serve(Script(steps), window=4000) as server:
        app = chat_app(server, tmp_path, window=4000)
        async with app.run_test(size=SIZE) as pilot:
            await chatted(pilot, 3)
            screen = app.screen
            counted = [line for line in screen_text(app).splitlines() if "deep compaction" in line and "▼" in line]
            screen.query_one(MessageList).focus()
            await pilot.press("D")
            await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))
            await pilot.press("ctrl+s")
            await until(pilot, lambda: events(app.agent.log, "compaction"))
            await idle(pilot)
            await pilot.press("u")
            await until(pilot, lambda: events(app.agent.log, "undo"))
            await until(pilot, lambda: screen.replay.log.events[-1].type == "undo")
            await idle(pilot)
            await until(pilot, lambda: not screen.replay.simulation.recorded)
            assert [line for line in screen_text(app).splitlines()
                    if "deep compaction" in line and "▼" in line] == counted
            assert "recorded in the transcript" not in screen_text(app)
            await pilot.press("ctrl+q")


async def test_a_smaller_provider_window_is_learnt_said_and_shown(tmp_path):
    from test_agent_loop import SmallerProvider, tool_steps

    provider = SmallerProvider(5000, [*tool_steps(14, 300), Reply(text="Fits now.")])
    with serve(provider) as server:
        app = chat_app(server, tmp_path)
        said = []
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            screen = app.screen
            show = screen._show_stream
            screen._show_stream = lambda text, style="": (said.append(text), show(text, style))
            await say(pilot, "go")
            await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))   # the forced compaction
            await pilot.press("ctrl+s")
            await until(pilot, lambda: app.screen is screen)
            await idle(pilot)
            assert len(provider.rejected) == 1
            assert any("context window is 5,000 tokens, not 128,000" in line for line in said)
            # the status line moved on to the retried request, and the gauge shows the window kept to
            retry = next(k for k, line in enumerate(said) if "5,000 tokens, not 128,000" in line)
            assert any("sending" in line for line in said[retry:])
            assert "of window 5,000" in screen_text(app)
            await pilot.press("ctrl+q")


async def test_without_a_model_q_and_esc_type_and_the_footer_says_how_to_leave(tmp_path, monkeypatch):
    monkeypatch.setenv("BREAKWATER_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    from breakwater.agent.config import load_config

    app = ChatApp(load_config({"workspace": tmp_path}, env={"BREAKWATER_CONFIG": str(tmp_path / "none.toml")}),
                  configured=False, settings=UISettings())
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: hasattr(app.screen, "agent") and app.screen.detail is not None)
        chat = app.screen.query_one("#chat-input", Input)
        await pilot.press("q")
        assert chat.value == "q" and app.is_running        # q is a letter in the input
        assert "^q Quit" in screen_text(app).splitlines()[-1]   # and the footer says how to leave
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_code in (0, None)
