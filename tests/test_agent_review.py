"""A deep compaction is shown to the reviewer before it is sent: accept, edit or cancel.

Against the fake server in strict mode with the real openai client; every decision must
leave a log that replays into exactly the requests the server received.
"""

from __future__ import annotations

import asyncio

from agent_support import Script, agent_config, answered, events, load, replayed_requests, serve, strip_volatile
from support.fake_openai import Reply, ScriptedToolCall

from breakwater.agent import AgentSession
from breakwater.core.review import ACCEPT, CANCEL, SummaryDecision, SummaryProposal
from breakwater.core.stages.summarize import SUMMARY_HEADER

EDITED = "## Original goal\n- The user's own words: finish the scripted task.\n## Files read or changed\n- none"


def floods(n: int, lines: int = 300):
    return [Reply.calls(ScriptedToolCall("bash", {"command": f"seq {k * 100000} {k * 100000 + lines}"}))
            for k in range(1, n + 1)]


def summaries_in(messages) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user" and SUMMARY_HEADER in (m.get("content") or "")]


class Reviewer:
    def __init__(self, *decisions: SummaryDecision):
        self.decisions = list(decisions)
        self.proposals: list[SummaryProposal] = []

    async def __call__(self, proposal: SummaryProposal) -> SummaryDecision:
        self.proposals.append(proposal)
        await asyncio.sleep(0)
        return self.decisions.pop(0) if self.decisions else ACCEPT


def rounds(n: int = 4):
    """n user messages, each answered after three floods: every user message is a safe cut."""
    return [step for k in range(n) for step in (*floods(3), Reply(text=f"round {k} done"))]


async def run_reviewed(tmp_path, reviewer, window=4000, n=4):
    script = Script(rounds(n))
    with serve(script, window=window) as server:
        async with AgentSession(agent_config(server, tmp_path, window=window, preset="seed-000"),
                                review=reviewer) as agent:
            for k in range(n):
                answer = await agent.send(f"Task part {k}.")
            policy = agent.policy
        received = [strip_volatile(r.messages) for r in answered(server)]
        assert server.problems == [] and script.problems == []
    log = load(agent.path)
    assert [strip_volatile(r) for r in replayed_requests(log, policy)] == received
    return answer, log, received


async def test_an_automatic_compaction_waits_for_the_reviewer_and_sends_the_edited_summary(tmp_path):
    reviewer = Reviewer(SummaryDecision("edit", EDITED))
    answer, log, received = await run_reviewed(tmp_path, reviewer)
    assert answer == "round 3 done"
    first = reviewer.proposals[0]
    assert first.compaction.trigger == "auto" and first.summary
    assert first.covered and first.tokens_before > first.tokens_after > 0
    compactions = events(log, "compaction")
    assert compactions[0].get("summary") == EDITED and compactions[0].get("reviewed") == "edited"
    after = next(i for i, r in enumerate(received) if summaries_in(r))
    (sent,) = summaries_in(received[after])
    assert EDITED in sent and first.summary not in sent


async def test_a_declined_automatic_compaction_is_logged_with_its_undo_and_not_sent(tmp_path):
    reviewer = Reviewer(CANCEL)
    _, log, received = await run_reviewed(tmp_path, reviewer)
    declined = events(log, "compaction", reviewed="declined")
    assert len(declined) == 1
    (undo,) = [e for e in events(log, "undo") if e.get("target") == declined[0].id]
    assert undo.get("reason") == "the user declined the summary"
    # the request the declined summary was made for went out without any summary; the next
    # proposal (accepted) is what later requests carry
    entries = log.entries
    turn_after = sum(1 for e in entries[:entries.index(undo)] if getattr(e, "role", None) == "assistant") + 1
    assert not summaries_in(received[turn_after - 1])
    assert len(reviewer.proposals) > 1 and any(summaries_in(r) for r in received[turn_after:])


async def test_a_cancelled_manual_compaction_leaves_the_session_as_it_was(tmp_path):
    reviewer = Reviewer(CANCEL, SummaryDecision("edit", EDITED))
    script = Script([*floods(3), Reply(text="a"), Reply(text="b"), Reply(text="c")])
    with serve(script, window=6000) as server:
        async with AgentSession(agent_config(server, tmp_path, window=6000), review=reviewer) as agent:
            await agent.send("one")
            entries_before = len(agent.log.entries)
            assert await agent.compact_now() is None
            assert [e.type for e in agent.log.entries[entries_before:]] in ([], ["note"])
            await agent.send("two")
            assert not summaries_in(server.chat_requests[-1].messages)
            comp = await agent.compact_now()
            assert comp is not None and comp.summary == EDITED
            await agent.send("three")
            policy = agent.policy
        assert EDITED in summaries_in(server.chat_requests[-1].messages)[0]
        received = [strip_volatile(r.messages) for r in answered(server)]
    log = load(agent.path)
    assert [e.get("trigger") for e in events(log, "compaction")] == ["manual"]
    assert [strip_volatile(r) for r in replayed_requests(log, policy)] == received
    assert len(reviewer.proposals) == 2 and all(p.manual for p in reviewer.proposals)


async def test_a_broken_reviewer_does_not_lose_the_compaction(tmp_path):
    def broken(proposal):
        raise RuntimeError("dialog crashed")

    _, log, received = await run_reviewed(tmp_path, broken)
    assert events(log, "compaction") and not events(log, "compaction", reviewed="declined")
    assert any("the summary review failed" in (e.get("message") or "") for e in events(log, "error", kind="review"))
    assert any(summaries_in(r) for r in received)


async def test_a_manual_compaction_that_would_only_cover_the_kept_first_message_is_not_proposed(tmp_path):
    reviewer = Reviewer()
    script = Script([Reply(text="short answer")])
    with serve(script) as server:
        async with AgentSession(agent_config(server, tmp_path, window=32000), review=reviewer) as agent:
            await agent.send("A short question.")
            assert await agent.compact_now() is None
    assert reviewer.proposals == []
    assert not events(load(agent.path), "compaction")
