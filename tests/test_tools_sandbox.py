"""bash in bubblewrap: the key is nowhere a tool can look, the workspace is the only place it writes.

The probing command is what an attacker's tool call would run: breakwater's own
environment through /proc/$PPID/environ, every /proc/*/environ, the config file and
$OPENAI_API_KEY. It knows the key only reversed (so the text of the command never
contains it and redaction cannot hide a find) and prints FOUND for each hit.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from agent_support import KEY, Script, load, serve
from support.fake_openai import Reply, ScriptedToolCall

from breakwater.tools import sandbox
from breakwater.tools.bash import run_bash
from breakwater.tools.workspace import Workspace

def probe(key: str) -> str:
    return (f'needle=$(printf %s {key[::-1]} | rev); '
            'for f in /proc/$PPID/environ /proc/*/environ "$BREAKWATER_CONFIG" "$HOME/.config/breakwater/config.toml"; do '
            '  grep -q -a -e "$needle" "$f" 2>/dev/null && echo "FOUND in $f"; done; '
            '[ -n "$OPENAI_API_KEY" ] && echo "FOUND in \\$OPENAI_API_KEY"; '
            'env | grep -q -e "$needle" && echo "FOUND in env"; '
            'echo "probed from pid $$, parent $PPID"')


PROBE = probe(KEY)
BWRAP = sandbox.resolve("auto")
needs_bwrap = pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"bubblewrap cannot run here: {BWRAP.notice}")


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    env.update(HOME=str(home), BREAKWATER_CONFIG=str(home / "config.toml"), **extra)
    return env


@pytest.fixture
def dirs(tmp_path):
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    (home / ".config" / "breakwater").mkdir(parents=True)
    config = f'model = "fake-model"\nretry_base_s = 0.01\napi_key = "{KEY}"\n'
    (home / "config.toml").write_text(config)
    (home / ".config" / "breakwater" / "config.toml").write_text(config)
    return workspace, home


# -- the key (issue 8 items 1 and 2) ------------------------------------------------------------------
@needs_bwrap
def test_the_agents_bash_finds_the_key_nowhere(dirs):
    workspace, home = dirs
    script = Script([Reply.calls(ScriptedToolCall("bash", {"command": PROBE})), Reply(text="probed")])
    with serve(script) as server:
        done = subprocess.run([sys.executable, "-m", "breakwater", "run", "--prompt", "probe", "--workspace",
                               str(workspace), "--base-url", server.base_url, "--yes"],
                              env=cli_env(home, OPENAI_API_KEY=KEY), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    log = load(Path(done.stdout.strip().splitlines()[-1].removeprefix("session: ")))
    (result,) = [m for m in log.messages if m.role == "tool"]
    assert "probed from pid 2, parent 1" in result.content          # its own PID namespace
    assert "FOUND" not in result.content, result.content
    assert result.meta["source"]["sandbox"] == "bwrap"
    note = next(e.data for e in log.entries if getattr(e, "type", None) == "note" and e.data.get("kind") == "sandbox")
    assert note["sandbox"] == "bwrap" and str(home / "config.toml") in note["hidden"]


@needs_bwrap
def test_tool_bash_runs_like_the_agents_bash(dirs):
    workspace, home = dirs
    done = subprocess.run([sys.executable, "-m", "breakwater", "tool", "bash", "--workspace", str(workspace),
                           "--", PROBE + "; seq 1 100000"],
                          env=cli_env(home, OPENAI_API_KEY=KEY), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "FOUND" not in done.stdout and KEY not in done.stdout
    spills = list((workspace / ".agent" / "spill").rglob("*.log"))
    assert len(spills) == 1 and KEY.encode() not in spills[0].read_bytes()
    assert "probed from pid 2, parent 1" in spills[0].read_text()


def test_tool_bash_without_a_sandbox_still_gets_no_key_in_its_environment(dirs):
    workspace, home = dirs
    done = subprocess.run([sys.executable, "-m", "breakwater", "tool", "bash", "--sandbox", "none",
                           "--workspace", str(workspace), "--", 'echo "key=[$OPENAI_API_KEY]"; env | grep -c sk-test'],
                          env=cli_env(home, OPENAI_API_KEY=KEY), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("key=[]\n0\n")


def test_without_bubblewrap_breakwater_is_not_dumpable():
    """The fallback, as an ordinary user: a same-user tool cannot read /proc/<breakwater>/environ.

    Run as root the test becomes `nobody` first (root reads any environ); the control run
    shows the probe finds the key when breakwater stays dumpable.
    """
    with tempfile.TemporaryDirectory(prefix="bw-undumpable-") as tmp:
        os.chmod(tmp, 0o777)
        _undumpable_runs(Path(tmp), f"sk-test-{uuid.uuid4().hex}")


def _undumpable_runs(tmp_path: Path, key: str) -> None:
    """`key` is this run's own: the probe scans every /proc/*/environ it may read, and other
    runs of this test on the machine hold theirs in dumpable processes."""
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    code = f"""
import ctypes, os, sys
from breakwater.tools import sandbox
from breakwater.tools.bash import run_bash
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)          # dumpable, as an ordinary process is
box = sandbox.resolve("auto") if sys.argv[1] == "fallback" else sandbox.Sandbox("none")
r = run_bash({str(ws)!r}, {probe(key)!r}, sandbox=box, env={{"PATH": os.environ["PATH"]}})
print(box.notice)
print(r.content)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["OPENAI_API_KEY"] = key
    # bwrap lives in /usr/bin: leave it off PATH, and keep bash and the probe's tools reachable
    (tmp_path / "bin").mkdir()
    for tool in ("bash", "grep", "rev", "env", "printf", "cat"):
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if found.startswith("/"):
            os.symlink(found, tmp_path / "bin" / tool)
    env["PATH"] = f"{tmp_path / 'bin'}:/nonexistent-bin-dir"
    runs = {}
    for mode in ("control", "fallback"):
        done = subprocess.run([sys.executable, "-c", code, mode], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        runs[mode] = done.stdout
    assert "FOUND in /proc/" in runs["control"]
    assert "FOUND" not in runs["fallback"], runs["fallback"]
    assert "bubblewrap is not usable here (bwrap is not installed)" in runs["fallback"]


# -- what the sandbox lets a command do ------------------------------------------------------------
@needs_bwrap
def test_workspace_is_writable_and_the_rest_read_only(tmp_path):
    ws = Workspace(tmp_path)
    outside = Path.home() / f"breakwater-probe-{os.getpid()}.txt"
    scratch = f"breakwater-probe-{os.getpid()}"
    r = run_bash(ws, f"echo in > inside.txt && cat inside.txt; (echo x > {outside}) 2>/dev/null || echo refused; "
                     "touch /usr/breakwater-probe 2>&1 | grep -c Read-only; "
                     f"echo t > /tmp/{scratch} && cat /tmp/{scratch}", sandbox=BWRAP)
    assert r.content.split("\n")[:4] == ["in", "refused", "1", "t"], r.content
    assert (tmp_path / "inside.txt").read_text() == "in\n"
    assert not outside.exists() and not Path("/tmp", scratch).exists()       # /tmp was the sandbox's own


@needs_bwrap
@pytest.mark.parametrize("network", [False, True])
def test_network_is_off_unless_allowed(tmp_path, network):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        box = sandbox.resolve("bwrap", network=network)
        r = run_bash(Workspace(tmp_path), f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected "
                                          "|| echo no-network", sandbox=box)
    assert r.content.split("\n")[0] == ("connected" if network else "no-network")


def leftovers(pattern: str, within: float = 3.0) -> list[str]:
    """Processes whose command line matches, once they had `within` seconds to die."""
    end = time.monotonic() + within
    while True:
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.05)


@needs_bwrap
def test_timeout_and_leftovers_die_with_the_sandbox(tmp_path):
    ws = Workspace(tmp_path)
    # a duration no other test on this machine uses, so pgrep sees only ours
    mine = f"300.{os.getpid()}{time.monotonic_ns() % 100000}"
    r = run_bash(ws, f"sleep {mine} & echo started; sleep {mine}", timeout_s=1, kill_grace_s=0.5, sandbox=BWRAP)
    assert r.meta["timed_out"] is True and r.content.startswith("started")
    assert leftovers(f"sleep {mine}") == []
    # a background job outlives neither its shell nor the namespace
    r = run_bash(ws, f"sleep {mine}1 & echo $!", sandbox=BWRAP)
    assert r.meta["exit_code"] == 0
    assert leftovers(f"sleep {mine}1") == []


# -- choosing -----------------------------------------------------------------------------------------
def test_bwrap_demanded_where_it_cannot_run_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent-bin-dir")
    with pytest.raises(sandbox.SandboxError, match="sandbox = bwrap, but bubblewrap cannot run here: bwrap is not installed"):
        sandbox.resolve("bwrap")
    with pytest.raises(sandbox.SandboxError, match="sandbox must be one of auto, bwrap, none"):
        sandbox.resolve("docker")


def test_auto_falls_back_when_the_trial_run_fails(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    box = sandbox.resolve("auto")
    assert box.kind == "none"
    assert "a trial run failed: bwrap: No permissions to creating new namespace" in box.notice
    sandbox.say_once(box)
    sandbox.say_once(box)
    assert capsys.readouterr().err.count("bubblewrap is not usable here") == 1


@needs_bwrap
def test_hidden_files_are_unreadable_inside(tmp_path):
    secret = tmp_path / "ws" / "config.toml"
    secret.parent.mkdir()
    secret.write_text(f'api_key = "{KEY}"\n')
    (tmp_path / "link.toml").symlink_to(secret)
    box = sandbox.resolve("bwrap", hide=[tmp_path / "link.toml", tmp_path / "missing.toml"], read_paths=[tmp_path])
    assert box.hide[:2] == (tmp_path / "link.toml", secret)
    r = run_bash(Workspace(tmp_path / "ws"), "cat config.toml; cat ../link.toml", sandbox=box)
    assert KEY not in r.content and r.content.count("Permission denied") == 2


@pytest.mark.parametrize("command,rest", [(["run"], ["--prompt", "hi", "--base-url", "http://127.0.0.1:9/v1"]),
                                          (["tool", "bash"], ["--", "true"])])
def test_sandbox_flag_demanding_bwrap_fails_in_one_line_where_it_cannot_run(dirs, command, rest):
    workspace, home = dirs
    env = cli_env(home, PATH="/nonexistent-bin-dir")
    done = subprocess.run([sys.executable, "-m", "breakwater", *command, "--workspace", str(workspace),
                           "--sandbox", "bwrap", *rest], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"breakwater {' '.join(command)}: sandbox = bwrap, but bubblewrap cannot run here: bwrap is not installed"]


# -- issue 27: what even root cannot do inside -------------------------------------------------------
@needs_bwrap
def test_proc_sys_is_read_only_inside_even_as_root(tmp_path):
    # a real value in core_pattern would make the kernel run a workspace file as root at the next crash
    r = run_bash(Workspace(tmp_path), "for f in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches; do "
                                      "(cat $f > $f) 2>/dev/null && echo WROTE $f || echo refused; done; "
                                      "(echo h > /proc/sysrq-trigger) 2>/dev/null && echo WROTE sysrq || echo refused",
                 sandbox=BWRAP)
    assert r.content.split("\n")[:3] == ["refused"] * 3, r.content


UNIX_CLIENT = ("import socket,sys\n"
               "try:\n s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'hi'); print('ANSWER', s.recv(9).decode())\n"
               "except OSError as e: print('refused', e.errno)\n")


@needs_bwrap
@pytest.mark.parametrize("network", [False, True])
def test_host_unix_sockets_are_unreachable_without_network(tmp_path, network):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "client.py").write_text(UNIX_CLIENT)
    # a host folder outside the workspace and outside /tmp (which the sandbox replaces)
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))
    path = str(folder / "s")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        server.settimeout(30)

        def answer():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"host:" + conn.recv(9))

        import threading
        t = threading.Thread(target=answer, daemon=True)
        t.start()
        box = sandbox.resolve("bwrap", network=network, read_paths=[folder])   # shown, so only the filter stops it
        r = run_bash(Workspace(ws), f"python3 client.py {path}; python3 -c 'import socket; "
                                    "a,b=socket.socketpair(); a.send(b\"p\"); print(\"pair\", b.recv(1))'",
                     sandbox=box)
        server.close()
    os.unlink(path)
    folder.rmdir()
    first, second = r.content.split("\n")[:2]
    assert first == ("ANSWER host:hi" if network else "refused 13"), r.content
    assert second == "pair b'p'"        # a socket pair between the command's own processes still works


# -- issue 27 item 4: what one call may take ------------------------------------------------------------
from breakwater.tools.bounds import MB, Bounds  # noqa: E402

SMALL = Bounds(max_procs=40, max_memory_mb=256, max_file_mb=8)


@needs_bwrap
def test_processes_are_bounded_and_the_result_says_so(tmp_path):
    fork = ("import os, time\nn = 0\ntry:\n while n < 300:\n  if os.fork() == 0:\n   time.sleep(3); os._exit(0)\n"
            "  n += 1\nexcept OSError as e:\n print('refused', e.errno)\nprint('started', n)\n")
    (tmp_path / "fork.py").write_text(fork)
    r = run_bash(Workspace(tmp_path), "python3 fork.py", sandbox=BWRAP, bounds=SMALL, timeout_s=60)
    started = int(r.content.split("started ")[1].split()[0])
    assert started < 40, r.content
    assert "ran into the process bound (tool_max_procs = 40)" in r.content
    assert r.meta["bounds_hit"] == ["the process bound (tool_max_procs = 40)"]


@needs_bwrap
def test_memory_is_bounded_and_the_result_says_so(tmp_path):
    r = run_bash(Workspace(tmp_path), "python3 -c 'x = bytearray(1024 * 1024 * 1024); print(len(x))'; echo after",
                 sandbox=BWRAP, bounds=SMALL, timeout_s=60)
    assert "1073741824" not in r.content and "after" in r.content
    assert "the memory bound (tool_max_memory_mb = 256)" in r.content, r.content


@needs_bwrap
def test_file_size_and_the_sandbox_tmp_are_bounded(tmp_path):
    r = run_bash(Workspace(tmp_path), "head -c 50M /dev/zero > big; ls -l big | cut -d' ' -f5; "
                                      "head -c 50M /dev/zero > /tmp/big 2>&1 | tail -1; du -k /tmp/big | cut -f1",
                 sandbox=BWRAP, bounds=SMALL, timeout_s=60)
    assert (tmp_path / "big").stat().st_size <= 8 * MB
    assert "the file size bound (tool_max_file_mb = 8)" in r.content, r.content


def test_the_spill_and_the_timeout_asked_for_are_bounded(tmp_path):
    r = run_bash(Workspace(tmp_path), "head -c 20M /dev/zero | tr '\\0' a | fold -w 100; sleep 0.1",
                 timeout_s=3600, max_timeout_s=30, max_spill_bytes=2 * MB)
    spill = tmp_path / r.meta["spill"]
    assert spill.stat().st_size == 2 * MB and r.meta["total_bytes"] > 20 * MB
    assert "[the spill file is incomplete: it holds the first 2,097,152 bytes only (tool_max_spill_mb)]" in r.content
    assert "[the timeout asked for, 3600s, was cut to 30s (tool_timeout_s)]" in r.content


def test_the_bounds_come_from_the_policy(tmp_path):
    from dataclasses import replace

    from breakwater.core.policy import Policy
    from breakwater.tools.registry import ToolContext, execute_tool

    policy = replace(Policy(), tool_timeout_s=5.0, tool_max_spill_mb=1, tool_max_procs=40)
    ctx = ToolContext.from_policy(Workspace(tmp_path), "s", policy, sandbox=BWRAP)
    assert ctx.bounds == Bounds(40, 4096, 1024) and ctx.max_spill_bytes == MB
    r = execute_tool("bash", '{"command": "sleep 20", "timeout_s": 3600}', ctx)
    assert r.meta["timed_out"] and r.meta["duration_s"] < 15


@needs_bwrap
def test_home_is_hidden_unless_the_policy_shows_it_and_the_config_stays_hidden(dirs):
    import shutil

    from breakwater.agent.config import load_config, resolve_sandbox

    workspace, _ = dirs
    home = Path(tempfile.mkdtemp(dir="/var/tmp"))       # outside /tmp, which the sandbox replaces
    (home / ".config" / "breakwater").mkdir(parents=True)
    (home / ".config" / "breakwater" / "config.toml").write_text(f'api_key = "{KEY}"\n')
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".bashrc").write_text("export TOKEN=rc-secret\n")
    (home / ".netrc").write_text("machine x password netrc-secret\n")
    env = cli_env(home)
    env["BREAKWATER_CONFIG"] = str(home / ".config" / "breakwater" / "config.toml")
    config = load_config({"workspace": workspace}, env=env)
    look = f"cat {home}/.ssh/id_ed25519 {home}/.bashrc {home}/.netrc {home}/.config/breakwater/config.toml 2>&1"
    hidden = run_bash(Workspace(workspace), look, sandbox=resolve_sandbox(config, env=env))
    shown = run_bash(Workspace(workspace), look, sandbox=resolve_sandbox(config, env=env, show_home=True))
    for secret in ("PRIVATE KEY", "rc-secret", "netrc-secret", KEY):
        assert secret not in hidden.content, hidden.content
    shutil.rmtree(home)
    assert "PRIVATE KEY" in shown.content and "rc-secret" in shown.content and KEY not in shown.content


# -- issue 27 item 8: Breakwater's own state is read-only inside, even before it exists -------------
@needs_bwrap
def test_the_agents_state_is_read_only_inside_even_in_a_fresh_workspace(tmp_path):
    # in a workspace with no .agent yet, the folders and locks used to be made by the command itself
    ws = Workspace(tmp_path)
    r = run_bash(ws, "for d in .agent/sessions .agent/spill .agent/state; do mkdir -p $d; echo forged > $d/x.jsonl; done; "
                     "ln -s /etc/passwd .agent/memory.lock; ln -s /etc/passwd .agent/project_memory.lock; "
                     "echo forged >> .agent/memory.lock; ls .agent/sessions; echo end", sandbox=BWRAP)
    assert r.content.count("Read-only file system") == 4, r.content
    assert not list(tmp_path.glob(".agent/*/x.jsonl"))
    for lock in ("memory.lock", "project_memory.lock"):
        path = tmp_path / ".agent" / lock
        assert path.is_file() and not path.is_symlink() and path.read_bytes() == b""


@needs_bwrap
def test_the_agent_folder_cannot_be_moved_away_and_replaced_by_a_link_inside(tmp_path):
    # the state folders were read-only, but .agent itself could be renamed and a link to a folder
    # outside put in its place: every later write of Breakwater's was then refused (or lost)
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    r = run_bash(Workspace(ws), f"mv .agent .agent-old; ln -s {out} .agent; echo x > .agent/MEMORY.md; echo end",
                 sandbox=BWRAP)
    assert "Device or resource busy" in r.content, r.content
    assert (ws / ".agent").is_dir() and not (ws / ".agent").is_symlink() and not (ws / ".agent-old").exists()
    assert (ws / ".agent" / "MEMORY.md").read_text() == "x\n" and not list(out.iterdir())   # notes stay writable


# -- issue 35 item 8: the spill files of one session are bounded together ------------------------------
def test_the_spill_files_of_a_session_are_bounded_together_and_the_result_says_so(tmp_path):
    from dataclasses import replace

    from breakwater.core.policy import Policy
    from breakwater.tools.registry import ToolContext, execute_tool

    policy = replace(Policy(), tool_max_spill_mb=2, tool_max_session_spill_mb=3)
    ctx = ToolContext.from_policy(Workspace(tmp_path), "s", policy)
    big = json_command("yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789 | head -c 4M")
    first, second, third = (execute_tool("bash", big, ctx, f"call{n}") for n in range(3))
    sizes = [(tmp_path / r.meta["spill"]).stat().st_size if r.meta["spill"] else None for r in (first, second, third)]
    assert sizes == [2 * MB, 1 * MB, None]
    assert "it holds the first 2,097,152 bytes only (tool_max_spill_mb)" in first.content
    assert ("it holds the first 1,048,576 bytes only (this session's spill files reached their bound, "
            "tool_max_session_spill_mb = 3 MiB)") in second.content
    assert ("[the lines cut from this result are not kept anywhere: this session's spill files reached their "
            "bound, tool_max_session_spill_mb = 3 MiB; send long output to a file in the workspace") in third.content
    assert "saved to" not in third.content          # no spill file is promised
    small = execute_tool("bash", json_command("seq 1 5"), ctx, "call3")
    assert small.content.startswith("1\n2\n3\n4\n5") and "not kept" not in small.content   # nothing was cut
    # a context made later for the same session (tool bash --session-id, a resumed run) counts what is on disk
    later = ToolContext.from_policy(Workspace(tmp_path), "s", policy)
    assert later.spill_budget.used == 3 * MB
    fresh = ToolContext.from_policy(Workspace(tmp_path), "other", policy)
    assert fresh.spill_budget.used == 0


def json_command(command: str) -> str:
    import json

    return json.dumps({"command": command})
