"""Issue 27 in the chat workbench: what a hostile model or tool leaves cannot freeze or fool the screen."""

from __future__ import annotations

import os
import threading
import time

from agent_support import Script, agent_config, serve
from support.fake_openai import Reply, ScriptedToolCall
from textual.widgets import Input
from ui_support import until

from breakwater.ui.chat_app import ChatApp
from breakwater.ui.config import UISettings
from breakwater.ui.screens.dialogs import ApprovalScreen

SIZE = (160, 48)


async def say(pilot, text: str) -> None:
    chat = pilot.app.screen.query_one("#chat-input", Input)
    chat.focus()
    chat.value = text
    await pilot.press("enter")


def unblock_later(fifo, after_s: float) -> None:
    """Open the FIFO's other end after a while, so code that blocks on it gets going again and the
    test fails on the time it took instead of hanging for ever."""
    def run():
        time.sleep(after_s)
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:   # gone, or nobody is reading it (ENXIO): nothing is blocked on it
            return
        time.sleep(1)
        os.close(fd)
    threading.Thread(target=run, daemon=True).start()


async def test_a_fifo_at_a_write_target_does_not_freeze_the_approval(tmp_path):
    os.mkfifo(tmp_path / "notes.txt")
    unblock_later(tmp_path / "notes.txt", 15)
    write = Reply.calls(ScriptedToolCall("write_file", {"path": "notes.txt", "content": "new\n"}))
    with serve(Script([write, Reply(text="done")])) as server:
        app = ChatApp(agent_config(server, tmp_path, auto_approve=False), settings=UISettings(), counter="heuristic")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            started = time.monotonic()
            await say(pilot, "Edit the notes.")
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=30)
            assert time.monotonic() - started < 10
            await pilot.press("n")
            await pilot.press("ctrl+q")


def drawn(app) -> str:
    """Every segment the screen draws, modal dialogs and notifications included."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_escapes_from_the_model_are_drawn_not_obeyed(tmp_path):
    hidden = "echo harmless \x1b[8m; rm -rf ~/important\x1b[0m"
    call = Reply.calls(ScriptedToolCall("bash", {"command": hidden}))
    with serve(Script([call, Reply(text="\x1b[2J\x1b]0;pwned\x07 all done")])) as server:
        app = ChatApp(agent_config(server, tmp_path, auto_approve=False), settings=UISettings(), counter="heuristic")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: hasattr(app.screen, "agent"))
            await say(pilot, "Clean up.")
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            dialog = drawn(app)
            assert "\x1b" not in dialog and "echo harmless ␛[8m; rm -rf ~/important␛[0m" in dialog
            await pilot.press("n")
            await until(pilot, lambda: "all done" in drawn(app))
            reply = drawn(app)
            assert "\x1b" not in reply and "␛[2J␛]0;pwned␇ all done" in reply
            await pilot.press("ctrl+q")
