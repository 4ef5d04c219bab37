"""A real Codex rollout with usage on every request (issue 36 item 5): the real Codex CLI (tests/agents,
scripts/install_agents.sh) runs two user turns offline against the scripted provider on 127.0.0.1 (its
Responses wire; every reply leads with a reasoning item whose content is encrypted, as OpenAI's reasoning
models return it). The provider bills a quarter of the bytes of each request it received, so the rollout's
usage says exactly what Codex sent, and what it sends that its rollout shows in another form (its
instructions, tool schemas, the encrypted reasoning it sends back) is in the bill.

Writes the rollout to tests/fixtures/agent-runs/ and prints, per request, which reasoning items of
the earlier replies Codex sent back (the question left open last round: are they dropped at the next user
message?).

    .venv/bin/python scripts/make_codex_rollout.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.proxy_run import AGENTS, agent_missing  # noqa: E402
from support.scripted_provider import ScriptedProvider, Step  # noqa: E402
from test_proxy_agents import KEY, _env, _finished, _workspace, codex_config  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "agent-runs" / "codex-0.171.0-two-turns-reasoning.jsonl"


def _turn(commands: list[str], answer: str) -> list[Step]:
    return [Step("exec_command", {"cmd": c}, reasoning=f"Next I run `{c}`.") for c in commands] + \
        [Step(None, text=answer, reasoning="Everything asked is done.")]


STEPS = _turn(["seq 1 400", "ls -la", "seq 1 2500", "printf 'a%.0s' $(seq 1 3000)", "echo done > result.txt"],
              "All done.") + \
    _turn(["wc -l result.txt", "seq 1 900", "cat result.txt", "seq 1 60"], "Checked: result.txt holds done.")


def make(out: Path) -> list[dict]:
    """Run the two turns, copy the rollout to `out`; per main request, the ids of the reasoning items it sent."""
    with tempfile.TemporaryDirectory() as tmp, ScriptedProvider(STEPS) as provider:
        root = Path(tmp)
        ws = _workspace(root)
        home = Path(_env(root)["HOME"]) / ".codex"
        codex_config(home, provider.url)
        env = _env(root, CODEX_HOME=str(home), SCRIPTED_API_KEY=KEY)
        codex = str(AGENTS / "codex")
        flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        _finished([codex, "exec", *flags, "count to four hundred, list the folder, then write result.txt"], ws, env)
        _finished([codex, "exec", "resume", "--last", *flags, "now check result.txt and count to nine hundred"], ws, env)
        rollouts = sorted(home.glob("sessions/*/*/*/rollout-*.jsonl"))
        assert len(rollouts) == 1, rollouts
        out.parent.mkdir(parents=True, exist_ok=True)
        text = rollouts[0].read_text()
        text = text.replace(str(root), "/tmp/codex-run")   # the run's temporary folder, not this machine's
        out.write_text(text)
        sent = []
        for r in provider.main_requests():
            items = r.json.get("input", [])
            sent.append({"reasoning_sent": [i.get("id") or i.get("encrypted_content", "")[:8] for i in items
                                            if i.get("type") == "reasoning"],
                         "users": sum(1 for i in items if i.get("role") == "user"), "bytes": len(r.body),
                         "asks": {k: r.json.get(k) for k in ("reasoning", "include", "store")}})
        return sent


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    why = agent_missing("codex") or (None if shutil.which("node") else "node is not installed")
    if why:
        sys.exit(f"make_codex_rollout: {why}")
    for i, r in enumerate(make(args.out), 1):
        print(f"request {i:2d}: {r['bytes']:7d} bytes, user messages {r['users']}, reasoning items sent back "
              f"{len(r['reasoning_sent'])}; asks {json.dumps(r['asks'])}")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
