"""What `breakwater proxy --observe` (and compacting, `--preset breakwater`) adds to a request: the time from sending a request to the last byte of
its reply, and to the first streamed byte, straight to a local upstream and through the proxy, alternating
(the same connection kept alive on each side, as an agent's client keeps it).

Fresh processes: the upstream (the tests' scripted provider, answering a streamed Anthropic reply at
once) and the proxy are each started in a process of their own by this script. The requests are a Claude Code-sized conversation (a
60 KB frame of system and tools, a history that grows by a tool exchange of 2 KB each request), so the
proxy's recording (the request parsed, the session matched, the new messages and the bytes kept) is
the real work. Prints figures; asserts nothing.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.scripted_provider import ScriptedProvider, Step  # noqa: E402

REQUESTS = 120
STEPS = [Step("Bash", {"command": "ls"})] * (REQUESTS + 2) + [Step(None, text="done")]


def _bodies(n: int) -> list[bytes]:
    tools = [{"name": f"Tool{k}", "description": "d" * 2000, "input_schema": {"type": "object"}} for k in range(24)]
    system = [{"type": "text", "text": "You are a coding agent. " * 250}]
    messages: list[dict] = [{"role": "user", "content": "fix the failing test"}]
    out = []
    for k in range(n):
        out.append(json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True, "system": system,
                               "tools": tools, "messages": messages, "metadata": {"user_id": "session_bench"}}).encode())
        messages = messages + [
            {"role": "assistant", "content": [{"type": "text", "text": "Working on it."},
                                              {"type": "tool_use", "id": f"toolu_call_{k}", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_call_{k}", "content": f"file{k}.py\n" * 200}]}]
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(conn: http.client.HTTPConnection, body: bytes) -> tuple[float, float]:
    """(seconds to the first byte of the reply's body, to its last)."""
    start = time.perf_counter()
    conn.request("POST", os.environ.get("BENCH_PROXY_PATH", "/v1/messages"), body, {"content-type": "application/json", "x-api-key": "sk-bench-0123456789"})
    resp = resp_ = conn.getresponse()
    first = resp_.read1(1)
    t_first = time.perf_counter() - start
    while resp.read1(65536):
        pass
    assert first
    return t_first, time.perf_counter() - start


def main() -> None:
    measure("--observe")
    measure("--observe", pace=0.02)
    measure("--preset", "breakwater")


def serve_upstream() -> None:
    """The upstream in a process of its own (in a thread of this one it would share the client's GIL)."""
    with ScriptedProvider(STEPS) as upstream:
        print(upstream.port, flush=True)
        sys.stdin.read()


def measure(*mode: str, pace: float = 0.0) -> None:
    """`pace`: seconds between one reply and the next request (an agent runs its tools there; 0: back to
    back, so the proxy's recording of the last reply, done after it went through, is still running)."""
    upstream = subprocess.Popen([sys.executable, __file__, "--upstream"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
    up_port = int(upstream.stdout.readline())
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_STATE_HOME=f"{tmp}/state", HOME=tmp)
        proxy = subprocess.Popen([sys.executable, "-m", "breakwater", "proxy", *mode, "--port", "0", "--upstream",
                                  f"http://127.0.0.1:{up_port}", "--sessions", f"{tmp}/sessions"], env=env,
                                 stderr=subprocess.PIPE, text=True)
        try:
            port = int(re.search(r":(\d+) ->", proxy.stderr.readline()).group(1))
            direct = http.client.HTTPConnection("127.0.0.1", up_port)
            proxied = http.client.HTTPConnection("127.0.0.1", port)
            bodies = _bodies(REQUESTS)
            for b in bodies[:5]:   # warm both paths (imports, connections)
                _timed(direct, b)
            d_first, d_last, p_first, p_last = [], [], [], []
            cpu = _cpu_seconds(proxy.pid)
            for k, b in enumerate(bodies):
                order = (direct, proxied) if k % 2 else (proxied, direct)
                for conn in order:
                    time.sleep(pace)
                    f, last = _timed(conn, b)
                    (d_first if conn is direct else p_first).append(f)
                    (d_last if conn is direct else p_last).append(last)
            cpu = _cpu_seconds(proxy.pid) - cpu
        finally:
            proxy.terminate()
            proxy.wait(10)
            upstream.stdin.close()
            upstream.wait(10)
    size = statistics.median(len(b) for b in bodies) / 1024
    added = [p - d for p, d in zip(p_last, d_last)]
    added_first = [p - d for p, d in zip(p_first, d_first)]
    paced = f"{pace * 1000:.0f} ms between requests" if pace else "back to back"
    print(f"proxy {' '.join(mode)}, {REQUESTS} streamed Anthropic requests of a growing session (median {size:.0f} KB), "
          f"{paced}, load {os.getloadavg()[0]:.2f}")
    print(f"  direct: median {statistics.median(d_last) * 1000:.2f} ms to the last byte, "
          f"{statistics.median(d_first) * 1000:.2f} ms to the first")
    print(f"  proxied: median {statistics.median(p_last) * 1000:.2f} ms to the last byte, "
          f"{statistics.median(p_first) * 1000:.2f} ms to the first")
    print(f"  added by the proxy: median {statistics.median(added) * 1000:.2f} ms per request "
          f"(p90 {sorted(added)[int(len(added) * 0.9)] * 1000:.2f} ms), to the first byte "
          f"{statistics.median(added_first) * 1000:.2f} ms; the proxy's CPU {cpu / REQUESTS * 1000:.1f} ms a request "
          f"(its recording, after the reply, included)" + (" (target: <= 5 ms)" if "--observe" in mode else
                                                               " (compacting: the pipeline's turn, under the soft limit here)"))


if __name__ == "__main__":
    serve_upstream() if sys.argv[1:] == ["--upstream"] else main()
