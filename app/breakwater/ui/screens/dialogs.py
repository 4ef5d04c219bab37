"""The two questions the workbench asks: may this tool call run, and is this summary right.

Each is a modal that dismisses with the answer; the live agent awaits it (the agent never waits
on a prompt nobody can see). Keys work as well as the buttons.
"""

from __future__ import annotations

import difflib
import json
from typing import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static, TextArea

from breakwater.core.log.visible import visible
from breakwater.core.log.json_lines import checked_loads
from breakwater.core.review import SummaryDecision, SummaryProposal
from breakwater.core.log.message import ToolCall
from breakwater.core.log.words import plural
from breakwater.fidelity.probes import Probe
from breakwater.ui.widgets.would_lose import WouldLose

DIFF_LINES = 400
ONCE, SESSION, DENY = "once", "session", "deny"


def write_diff(old: str | None, new: str, path: str) -> Text:
    """A unified diff of what write_file would change, coloured; a new file shows as all added."""
    lines = difflib.unified_diff((old or "").splitlines(), new.splitlines(), "a/" + path if old is not None
                                 else "/dev/null", "b/" + path, lineterm="", n=2)
    out = Text()
    for k, line in enumerate(lines):
        if k >= DIFF_LINES:
            out.append("… (diff cut here)\n", style="dim")
            break
        style = ("green" if line.startswith("+") and not line.startswith("+++") else
                 "red" if line.startswith("-") and not line.startswith("---") else
                 "cyan" if line.startswith("@@") else "dim" if line.startswith(("+++", "---")) else "")
        out.append(visible(line) + "\n", style=style)
    return out if out else Text("(no change)", style="dim")


class ApprovalScreen(ModalScreen[str]):
    """`bash` or `write_file` wants to run: allow once, allow this tool for the session, or deny."""

    BINDINGS = [
        Binding("y", "answer('once')", "Allow once", id="approve.once", tooltip="Run this call"),
        Binding("a", "answer('session')", "Allow for session", id="approve.session",
                tooltip="Run this and every later call of this tool in this session without asking"),
        Binding("n,escape", "answer('deny')", "Deny", id="approve.deny",
                tooltip="Do not run it; the model is told it was declined"),
    ]

    def __init__(self, call: ToolCall, old_content: str | None = None):
        super().__init__()
        self.call = call
        self.old_content = old_content

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Static(self._what(), id="dialog-what")
            with VerticalScroll(id="dialog-body"):
                yield Static(self._body(), id="dialog-detail")
            with Horizontal(id="dialog-buttons"):
                yield Button("Allow once (y)", id="once", variant="success")
                yield Button(f"Allow {self.call.name} for this session (a)", id="session", variant="primary")
                yield Button("Deny (n)", id="deny", variant="error")

    def on_mount(self) -> None:
        self.query_one("#dialog").border_title = visible(f"The agent wants to run {self.call.name}")
        self.query_one("#once", Button).focus()

    def _args(self) -> dict:
        try:
            args = checked_loads(self.call.arguments or "{}")
        except ValueError:
            return {}
        return args if isinstance(args, dict) else {}

    def _what(self) -> Text:
        args = self._args()
        if self.call.name == "bash" and isinstance(args.get("command"), str):
            return Text.assemble(("$ ", "bold"), (visible(args["command"]), "bold"))
        if self.call.name == "write_file" and isinstance(args.get("path"), str):
            verb = "create" if self.old_content is None else "overwrite"
            return Text.assemble((f"{verb} ", "bold"), (visible(args["path"]), "bold"))
        return Text(visible(f"{self.call.name}({self.call.arguments[:500]})"))

    def _body(self) -> Text:
        args = self._args()
        if self.call.name == "write_file" and isinstance(args.get("content"), str):
            return write_diff(self.old_content, args["content"], str(args.get("path")))
        return Text(visible(json.dumps(args, indent=2, ensure_ascii=False)[:20000] if args
                            else self.call.arguments[:20000]))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer)


class SummaryReviewScreen(ModalScreen[SummaryDecision]):
    """A deep compaction before it is sent: the summary (editable), what it replaces, the saving,
    and the facts it would lose (updated as the text is edited)."""

    BINDINGS = [
        Binding("ctrl+s", "accept", "Accept", id="review.accept",
                tooltip="Send this summary (with your edits, if you made any)"),
        Binding("escape", "cancel", "Cancel", id="review.cancel",
                tooltip="No compaction: the session stays as it was"),
    ]

    def __init__(self, proposal: SummaryProposal, at_risk: Sequence[Probe] | None = None):
        super().__init__()
        self.proposal = proposal
        self.at_risk = at_risk   # the facts only the replaced messages carry (None: not measured)

    def compose(self) -> ComposeResult:
        p = self.proposal
        with Vertical(id="dialog", classes="dialog review"):
            yield Static(self._what(), id="dialog-what")
            if self.at_risk is not None:
                yield WouldLose(self.at_risk, p.summary, id="review-lost")
            yield TextArea(p.summary, id="review-text", soft_wrap=True, show_line_numbers=False)
            with Horizontal(id="dialog-buttons"):
                yield Button("Accept (ctrl+s)", id="accept", variant="success")
                yield Button("Cancel (esc)", id="cancel", variant="error")

    def on_mount(self) -> None:
        p = self.proposal
        who = "manual" if p.manual else p.compaction.trigger
        self.query_one("#dialog").border_title = f"Deep compaction ({who}) — review the summary before it is sent"
        self.query_one("#review-text", TextArea).focus()

    def _what(self) -> Text:
        p = self.proposal
        covered = p.covered
        span = f"{covered[0]} … {covered[-1]}" if len(covered) > 1 else (covered[0] if covered else "—")
        saved = p.tokens_before - p.tokens_after
        return Text.assemble(
            ("Replaces ", ""), (plural(len(covered), "message"), "bold"), (f" ({span})", "dim"),
            ("   request ", ""), (f"{p.tokens_before:,} → {p.tokens_after:,} tokens", "bold"),
            (f"  (−{saved:,})" if saved > 0 else "", "green"),
            ("\nThe request as it will be sent once accepted. Edit the text if it misses something; what you "
             "accept is what is logged and sent.", "dim"))

    @on(TextArea.Changed, "#review-text")
    def _edited(self, event: TextArea.Changed) -> None:
        if self.at_risk is not None:
            self.query_one(WouldLose).check(event.text_area.text)

    def decision(self) -> SummaryDecision | None:
        text = self.query_one("#review-text", TextArea).text
        if not text.strip():
            return None
        if text.strip() == self.proposal.summary.strip():
            return SummaryDecision("accept")
        return SummaryDecision("edit", text)

    @on(Button.Pressed, "#accept")
    def action_accept(self) -> None:
        decision = self.decision()
        if decision is None:
            self.notify("An empty summary cannot be sent: write one, or cancel.", severity="warning")
            return
        self.dismiss(decision)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(SummaryDecision("cancel"))
