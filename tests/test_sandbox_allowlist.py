"""The sandbox as an allowlist (issue 35 item 1): a `tool bash` call reads none of the credentials
a populated $HOME holds, and the usual tools still run, with an empty and with a populated $HOME.

Real bwrap, real `breakwater tool bash` processes. Each credential file holds a marker of its own;
the probe reads every file by name and greps the folders a denylist left open, and a control run
without the sandbox finds every marker, so the probe is known to look in the right places.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from breakwater.tools import sandbox

BWRAP = sandbox.resolve("auto")
pytestmark = pytest.mark.skipif(BWRAP.kind != "bwrap", reason=f"bubblewrap cannot run here: {BWRAP.notice}")

# every place the attack of issue 35 read a credential from (relative to $HOME)
CREDENTIALS = (
    ".codex/auth.json", ".pi/agent/auth.json", ".claude/.credentials.json", ".claude.json",
    ".local/share/keyrings/login.keyring", ".password-store/email/work.gpg", ".cargo/credentials.toml",
    ".cargo/config.toml", ".terraform.d/credentials.tfrc.json", ".cache/huggingface/token", ".huggingface/token",
    ".pgpass", ".my.cnf", ".s3cfg", ".boto", ".vault-token", ".env", ".m2/settings.xml",
    ".gradle/gradle.properties", ".bash_history", ".zsh_history", ".python_history", ".node_repl_history",
    ".psql_history", ".mysql_history", ".sqlite_history", ".lesshst", ".ssh/id_ed25519", ".aws/credentials",
    ".netrc", ".npmrc", ".git-credentials", ".gitconfig", ".docker/config.json", ".kube/config",
    ".config/gh/hosts.yml", ".config/breakwater/config.toml", ".config/breakwater/config.toml~",
    ".bashrc", ".profile", "projects/.env", ".gnupg/private-keys-v1.d/key.key",
    "conf/bw.toml", "conf/bw.toml~", "conf/bw.toml.bak", "conf/.bw.toml.swp",
)


def marker(rel: str) -> str:
    return f"MARK{abs(hash(rel)) % 10**8:08d}"


@pytest.fixture
def machine():
    """A $HOME outside /tmp (which the sandbox replaces anyway) with the workspace in it."""
    root = Path(tempfile.mkdtemp(prefix="bw-allow-", dir="/var/tmp"))
    home = root / "home"
    ws = home / "projects" / "app"
    ws.mkdir(parents=True)
    yield home, ws
    shutil.rmtree(root)


def populate(home: Path) -> None:
    for rel in CREDENTIALS:
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'token = "{marker(rel)}"\n')
    # toolchains in $HOME, on PATH: their programs run, the rest of their dot-folders stays hidden
    for rel, text in ((".cargo/bin/hello-cargo", "from-cargo-bin"), (".local/bin/hello-local", "from-local-bin")):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"#!/bin/sh\necho {text}\n")
        (home / rel).chmod(0o755)


def tool_bash(home: Path, ws: Path, command: str, *extra: str, sandbox_mode: str = "bwrap",
              config: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    config = config or home / "conf" / "bw.toml"
    if config.exists():         # an empty $HOME has none
        env["BREAKWATER_CONFIG"] = str(config)
    env.update(HOME=str(home), PATH=f"{home}/.cargo/bin:{home}/.local/bin:{Path(sys.executable).parent}:{env['PATH']}")
    done = subprocess.run([sys.executable, "-m", "breakwater", "tool", "bash", "--workspace", str(ws),
                           "--sandbox", sandbox_mode, "--max-lines", "2000", "--max-bytes", "200000", *extra,
                           "--", command], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def probe(home: Path) -> str:
    names = " ".join(f'"{home / rel}"' for rel in CREDENTIALS)
    return (f"for f in {names}; do cat \"$f\" 2>/dev/null; base64 -w0 \"$f\" 2>/dev/null | base64 -d 2>/dev/null; done; "
            f"grep -rsa MARK {home} /var /root /home /srv /mnt /run /tmp 2>/dev/null; echo probe-done")


def test_a_tool_call_reads_no_credential_of_a_populated_home(machine):
    home, ws = machine
    populate(home)
    (ws / ".env").write_text("WORKSPACE_TOKEN=visible-in-the-workspace\n")     # the workspace's own: shown
    control = tool_bash(home, ws, probe(home), sandbox_mode="none")
    assert all(marker(rel) in control for rel in CREDENTIALS)        # the probe finds each, unsandboxed
    shutil.rmtree(ws / ".agent" / "spill")                           # which the control's spill holds
    out = tool_bash(home, ws, probe(home) + "; cat .env; ls -A ~; ls -A ~/.cargo ~/.local ~/projects")
    assert "probe-done" in out and "visible-in-the-workspace" in out
    found = [rel for rel in CREDENTIALS if marker(rel) in out]
    assert found == [], out
    listing = out.split("visible-in-the-workspace\n", 1)[1]
    # $HOME shows the way to the workspace and the PATH's bin folders, nothing else
    assert listing.split("\n\n")[0].split() == [".cargo", ".local", "projects", f"{home}/.cargo:", "bin"], listing


def test_the_config_and_its_backups_stay_hidden_inside_the_workspace_and_read_paths(machine):
    home, ws = machine
    populate(home)
    for name in ("bw.toml", "bw.toml~", "bw.toml.bak", "notes.txt"):
        (home / "conf" / name).write_text(f'name = "{marker(name)}"\n')
    out = tool_bash(home, ws, f"cat {home}/conf/* {home}/conf/.bw* 2>&1; echo; ls ~/conf", "--read-path", "~/conf")
    assert marker("notes.txt") in out                                           # the read path is shown
    assert not any(marker(n) in out for n in ("bw.toml", "bw.toml~", "bw.toml.bak")), out
    assert out.count("Permission denied") == 4          # bw.toml, bw.toml~, bw.toml.bak, .bw.toml.swp
    (home / "conf" / "bw.toml").rename(ws / "bw.toml")      # the config in the workspace itself
    (ws / "bw.toml.orig").write_text(f"backup {marker('orig')}\n")
    out = tool_bash(home, ws, "cat bw.toml bw.toml.orig 2>&1; echo written > other.txt; cat other.txt",
                    config=ws / "bw.toml")
    assert marker("bw.toml") not in out and marker("orig") not in out and "written" in out, out


@pytest.mark.parametrize("populated", [False, True])
def test_the_usual_tools_run_inside(machine, populated):
    home, ws = machine
    if populated:
        populate(home)
    (ws / "hello.c").write_text('#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n')
    command = ("python3 -c 'import sys, ssl, sqlite3; print(\"python\", sys.version_info[0])'; "
               f"{Path(sys.executable).name} -c 'print(\"venv-python\")'; "
               "git init -q . && git add hello.c && git -c user.name=t -c user.email=t@t commit -qm c && git log --format=%s; "
               "node -e 'console.log(\"node\", 6 * 7)'; "
               "cc hello.c -o hello && ./hello; gcc --version | head -1 | cut -c1-3; "
               "echo scratch > /tmp/x && cat /tmp/x; echo late > /var/tmp/y && cat /var/tmp/y")
    if populated:
        command += "; hello-cargo; hello-local"
    out = tool_bash(home, ws, command)
    lines = out.splitlines()
    for expected in ("python 3", "venv-python", "c", "node 42", "compiled", "gcc", "scratch", "late"):
        assert expected in lines, out
    if populated:
        assert "from-cargo-bin" in lines and "from-local-bin" in lines, out


def test_home_as_the_workspace_is_refused_in_one_line(machine):
    home, _ = machine
    populate(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    env.update(HOME=str(home), BREAKWATER_CONFIG=str(home / "conf" / "bw.toml"))
    for ws in (home, home.parent):
        done = subprocess.run([sys.executable, "-m", "breakwater", "tool", "bash", "--workspace", str(ws),
                               "--sandbox", "bwrap", "--", "cat .pgpass"], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and marker(".pgpass") not in done.stdout
        what = "is your home folder" if ws == home else "holds your home folder"
        assert done.stderr.splitlines() == [
            f"breakwater tool bash: the workspace {ws} {what} ($HOME): every credential in it would be open "
            "to the model's commands; use a project folder"]


def test_what_the_sandbox_shows_is_computed_from_path_and_home(tmp_path):
    from breakwater.tools.allowlist import toolchains

    home = tmp_path / "home"
    for rel in (".pyenv/shims", ".pyenv/versions/3.12/bin", ".cargo/bin", ".rustup/toolchains", ".local/bin",
                ".nvm/versions/node/v20/bin", "bin", ".cargo-like", "venv/bin", ".local/pipx/venvs/black/bin"):
        (home / rel).mkdir(parents=True)
    (home / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (home / ".local/pipx/venvs/black/bin/black").write_text("#!/bin/sh\n")
    (home / ".local/pipx/venvs/black/pyvenv.cfg").write_text("home = /usr/bin\n")
    (home / ".local/bin/black").symlink_to(home / ".local/pipx/venvs/black/bin/black")
    path = ":".join(str(home / rel) for rel in (".pyenv/shims", ".cargo/bin", ".local/bin", ".nvm/versions/node/v20/bin",
                                                "bin", ".cargo-like", "venv/bin"))
    shown = toolchains(f"{path}:/usr/bin:relative/bin::{home}:/", home)
    assert [p.relative_to(home).as_posix() for p in shown] == [
        ".pyenv", ".cargo/bin", ".rustup", ".local/bin", ".local/pipx/venvs/black", ".nvm", "bin", "venv"]


def test_a_missing_read_path_is_skipped_and_a_relative_one_refused(tmp_path):
    from breakwater.agent.config import ConfigError, load_config

    config = tmp_path / "c.toml"
    config.write_text('tool_read_paths = ["relative/cache"]\n')
    with pytest.raises(ConfigError, match="tool_read_paths: 'relative/cache' must be an absolute path"):
        load_config({"workspace": tmp_path}, env={"BREAKWATER_CONFIG": str(config), "HOME": str(tmp_path)})
    box = sandbox.resolve("bwrap", read_paths=[tmp_path / "missing", "~/there"], environ={"HOME": str(tmp_path), "PATH": ""})
    assert box.read_only == ()
    (tmp_path / "there").mkdir()
    box = sandbox.resolve("bwrap", read_paths=["~/there"], environ={"HOME": str(tmp_path), "PATH": ""})
    assert box.read_only == (tmp_path / "there",)


def test_the_session_log_says_what_the_sandbox_shows(machine):
    box = sandbox.resolve("bwrap", environ={"HOME": str(machine[0]), "PATH": "/usr/bin"})
    shown = box.shown(machine[1])
    assert shown["read-write"][0] == str(machine[1]) and shown["empty"] == [str(machine[0])]
    assert "/usr" in shown["read-only"] and "/etc/shadow" in shown["hidden"]


def test_the_etc_walk_hides_what_only_root_may_read(tmp_path):
    from breakwater.tools.allowlist import etc_secrets

    etc = tmp_path / "etc"
    (etc / "ssh").mkdir(parents=True)
    (etc / "ssh" / "ssh_host_ed25519_key").write_text("k")
    (etc / "ssh" / "ssh_host_ed25519_key").chmod(0o600)
    (etc / "ssh" / "ssh_config").write_text("c")
    (etc / "shadow").write_text("s")                # loosened: hidden by name all the same
    (etc / "sudoers.d").mkdir()
    (etc / "private").mkdir(mode=0o700)
    files, dirs = etc_secrets(etc)
    assert files == (etc / "shadow", etc / "ssh" / "ssh_host_ed25519_key")
    assert dirs == (etc / "private", etc / "sudoers.d")
