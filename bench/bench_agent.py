"""Agent benchmarks: the loop's own cost per step, and the pipeline's cost per request.

1. Loop overhead: a session of many steps against the fake server on 127.0.0.1, each step a
   streamed reply with one read_file call. From the assistant message being logged to the
   next request being sent is what the loop adds (the tool in a worker thread, log appends,
   the pipeline's view in a worker thread, events); the rest of a step is the server.
2. Pipeline per request on a long session: a 5,000-message session fed to the agent's
   pipeline (exact counting for gpt-4o), then one more step at a time: `view()` as the
   agent calls it before every request.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.fake_openai import FakeOpenAIServer, Reply, ScriptedToolCall  # noqa: E402
from synth import session_messages  # noqa: E402

from breakwater.agent import AgentConfig, run_agent  # noqa: E402
from breakwater.core.log.message import Message, ToolCall  # noqa: E402
from breakwater.core.fold.pipeline import Pipeline  # noqa: E402
from breakwater.core.policy import preset  # noqa: E402
from breakwater.core.log.tokens import TokenCounter  # noqa: E402

STEPS = 80
KEY = "sk-bench-0123456789"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def loop_overhead() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        (workspace / "small.txt").write_text("".join(f"line {i}\n" for i in range(1, 41)))
        served = [0]

        def responder(body):
            served[0] += 1
            if served[0] >= STEPS:
                return Reply(text="Finished reading.")
            return Reply.calls(ScriptedToolCall("read_file", {"path": "small.txt", "start_line": 1, "end_line": 20}),
                               text="Reading again.")

        marks: list[tuple[str, float]] = []

        def mark(ev) -> None:
            if ev.kind == "request" or (ev.kind == "message" and ev.message.role == "assistant"):
                marks.append((ev.kind, time.perf_counter()))

        with FakeOpenAIServer(responder=responder) as server:
            config = AgentConfig(base_url=server.base_url, api_key=KEY, model="fake-model", workspace=workspace,
                                 auto_approve=True, max_steps=STEPS + 1)
            started = time.perf_counter()
            await run_agent(config, "Read small.txt again and again.", max_steps=STEPS + 1, on_event=mark)
            total = time.perf_counter() - started
    requests = [t for kind, t in marks if kind == "request"]
    replies = [t for kind, t in marks if kind == "message"]
    steps = [b - a for a, b in zip(requests, requests[1:])]
    waiting = [r - q for q, r in zip(requests, replies)]
    between = [q - r for r, q in zip(replies, requests[1:])]
    print(f"agent loop, {len(requests)} steps against the fake server: {ms(statistics.median(steps))} per step "
          f"(median; whole run {total:.2f} s incl. session start and end)")
    print(f"  streaming the reply (request sent -> assistant message logged): {ms(statistics.median(waiting))}")
    print(f"  the loop's own work per step (tool in a thread, log appends, pipeline view, events): "
          f"{ms(statistics.median(between))} median, max {ms(max(between))}")


def pipeline_per_request() -> None:
    policy = preset("breakwater")
    msgs = session_messages(5000, avg_tool_chars=8000, seed=7)
    pipe = Pipeline(policy, TokenCounter.for_model("gpt-4o"), mode="exact")
    t0 = time.perf_counter()
    pipe.feed_all(msgs)
    pipe.view()
    warm = time.perf_counter() - t0
    samples, compactions = [], 0
    for k in range(200):
        call = ToolCall(f"bench_{k}", "bash", '{"command": "pytest -q"}')
        pipe.feed(Message(f"b{k}a", "assistant", "Running the tests again.", (call,), turn=pipe.turn + 1))
        pipe.feed(Message(f"b{k}t", "tool", "collected 212 items\n" + "." * 3000 + "\n212 passed",
                          tool_call_id=call.id, turn=pipe.turn + 1))
        t0 = time.perf_counter()
        view, comp = pipe.view()
        samples.append(time.perf_counter() - t0)
        compactions += comp is not None
    samples.sort()
    print(f"pipeline view() per request on a 5,000-message session (window {policy.window:,}, exact counts): "
          f"{ms(statistics.median(samples))} median, p95 {ms(samples[int(len(samples) * 0.95)])}, "
          f"max {ms(samples[-1])} ({compactions} deep compactions in 200 requests; first view with feeding "
          f"{warm:.2f} s)")


def main() -> None:
    asyncio.run(loop_overhead())
    pipeline_per_request()


if __name__ == "__main__":
    main()
