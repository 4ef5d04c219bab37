"""Issue 35 items 3 and 4: what Breakwater appends is a whole line or nothing, on a real full disk (a
tmpfs, root only as CI runs); what it opens by name is a regular file, or refused in one line, never
a FIFO that blocks or a link to /dev/zero that reads without end.

Everything that would hang or grow without bound if the guard regressed runs in a child process with
a deadline and a memory limit, so a regression fails the test instead of the machine."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from breakwater.core.log.beneath import AppendError
from breakwater.core.log.session_log import Event, SessionLog, load_native
from breakwater.core.overlay import OverlayFile
from breakwater.memory.ledger import Ledger
from breakwater.memory.store import MemoryStore
from support.small_disk import small_disk

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "sample_sessions" / "npm-install-flood.jsonl"
LINE = 10_000   # bytes of payload per append: more than the page a nearly full tmpfs has left


# -- item 3: the four append-only writers, one driver each ---------------------------------------------
class Overlay:
    def __init__(self, root: Path):
        self.path = root / "rec.jsonl.overlay.jsonl"

    def append(self, n: int) -> None:
        OverlayFile(self.path).add("pin", n, message_id=f"m{n:05d}" + "x" * LINE)

    def count(self) -> int:
        return len(OverlayFile(self.path).events)


class Log:
    def __init__(self, root: Path):
        self.path = root / "session.jsonl"
        self.log = SessionLog.create(self.path, {"model": "gpt-4o"})

    def append(self, n: int) -> None:
        self.log.append(Event("note", self.log.next_event_id(), {"text": f"{n} " + "x" * LINE}))

    def count(self) -> int:
        loaded = load_native(self.path)
        assert loaded.issues == [], [str(i) for i in loaded.issues]
        return len(loaded.entries)


class LedgerFile:
    def __init__(self, root: Path):
        self.root = root

    def append(self, n: int) -> None:   # 300 records of 40 bytes, written in one append
        Ledger(self.root).record([f"entry {n}.{k}" for k in range(300)], "scribe")

    def count(self) -> int:
        return len(Ledger(self.root).writers()) // 300


class Memory:
    def __init__(self, root: Path):
        self.store = MemoryStore(root)

    def append(self, n: int) -> None:
        self.store.append(f"- fact {n} " + "x" * LINE, n)

    def count(self) -> int:
        return len(MemoryStore(self.store.workspace).snapshot().entries)


WRITERS = [Overlay, Log, LedgerFile, Memory]
IDS = ["overlay", "session-log", "ledger", "memory"]


def fill(disk: Path) -> Path:
    """Fill the tmpfs, then free one page: the next long line can only be written in part."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                fh.write(b"\0" * 512)
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - 4096))
    return filler


def files_of(disk: Path) -> dict[str, bytes]:
    return {str(p.relative_to(disk)): p.read_bytes() for p in sorted(disk.rglob("*"))
            if p.is_file() and p.name != "filler" and not p.name.endswith(".lock")}


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_an_append_on_a_full_disk_is_whole_or_nothing_and_the_next_survives(tmp_path, writer):
    with small_disk(tmp_path / "disk", "512k") as disk:
        w = writer(disk)
        w.append(1)
        before = files_of(disk)
        filler = fill(disk)
        with pytest.raises(OSError, match="disk is full") as failed:
            w.append(2)
        assert "Traceback" not in str(failed.value)
        after = files_of(disk)
        # no half line anywhere: every file Breakwater appends to is as it was (or, new, whole lines)
        for name, data in after.items():
            # (the memory's ledger takes its record before the entry is written: one whole line more)
            grew = writer is Memory and name.endswith("memory-writers") and data.startswith(before[name])
            assert data == before.get(name, data) or grew, f"{name} changed on a failed append"
            assert not data or data.endswith(b"\n"), f"{name} ends with half a line"
        filler.unlink()   # space is back: the next edit is saved, and survives a reload
        w.append(3)
        assert w.count() == 2


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_torn_last_line_is_set_aside_never_extended(tmp_path, writer):
    w = writer(tmp_path)
    w.append(1)
    target = {Overlay: lambda: w.path, Log: lambda: w.path, LedgerFile: lambda: tmp_path / ".agent/state/memory-writers",
              Memory: lambda: tmp_path / ".agent/MEMORY.md"}[writer]()
    torn = b'{"type": "pin", "id": "o9", "at": 0, "mess'   # a crash in the middle of a line
    with open(target, "ab") as fh:
        fh.write(torn)
    w.append(2)
    kept = sorted(target.parent.glob(target.name + ".torn-*"))
    assert [k.read_bytes() for k in kept] == [torn]
    data = target.read_bytes()
    assert data.endswith(b"\n")
    if writer is Memory:   # a text a person edits: the line stays where it was, ended, and a copy is kept
        assert torn + b"\n---\n" in data
    else:
        assert torn not in data
    assert w.count() == 2


def test_a_torn_line_on_a_full_disk_stops_the_append_and_loses_nothing(tmp_path):
    with small_disk(tmp_path / "disk", "512k") as disk:
        w = Overlay(disk)
        w.append(1)
        with open(w.path, "ab") as fh:
            fh.write(b'{"type": "pin", "half')
        before = w.path.read_bytes()
        filler = fill(disk)
        with open(filler, "ab", buffering=0) as fh:   # not even a page left for the copy
            try:
                while True:
                    fh.write(b"\0" * 512)
            except OSError:
                pass
        with pytest.raises(AppendError, match="could not be set aside"):
            w.append(2)
        assert w.path.read_bytes() == before and not list(disk.glob("*.torn-*"))
        filler.unlink()
        w.append(3)
        assert w.count() == 2 and len(list(disk.glob("*.torn-*"))) == 1


def test_a_failed_overlay_edit_in_the_workbench_says_why_and_keeps_the_file(tmp_path):
    with small_disk(tmp_path / "disk", "512k") as disk:
        w = Overlay(disk)
        w.append(1)
        fill(disk)
        with pytest.raises(OSError) as failed:
            w.append(2)
        assert str(failed.value).startswith(f"cannot append to {w.path}: the disk is full; nothing of it was written")


# -- item 4: special files where Breakwater reads by name ----------------------------------------------
def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def breakwater(*args: str, home: Path, env: dict | None = None, timeout: float = 60):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    environ.update(HOME=str(home), NO_COLOR="1", XDG_STATE_HOME=str(home / "state"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True,
                          timeout=timeout, env=environ, preexec_fn=limited)


def python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limited)


@pytest.fixture(params=["fifo", "dev-zero"])
def special(request, tmp_path):
    """A FIFO, or a link to /dev/zero, and what the refusal says it is."""
    def make(path: Path) -> str:
        if request.param == "fifo":
            os.mkfifo(path)
            return "is a FIFO, not a regular file"
        os.symlink("/dev/zero", path)
        return "(a symbolic link to /dev/zero) is a character device, not a regular file"
    return make


def one_line(out: subprocess.CompletedProcess, said: str) -> None:
    assert out.returncode not in (0, 70), out.stderr   # refused, and not an internal error
    assert said in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_simulate_refuses_a_special_overlay_policy_or_transcript(tmp_path, special):
    said = special(tmp_path / "x.overlay.jsonl")
    one_line(breakwater("simulate", str(SESSION), "--overlay", str(tmp_path / "x.overlay.jsonl"), home=tmp_path), said)
    said = special(tmp_path / "policy.toml")
    one_line(breakwater("simulate", str(SESSION), "--policy", str(tmp_path / "policy.toml"), home=tmp_path), said)
    said = special(tmp_path / "t.jsonl")
    for command in (["simulate"], ["import"], ["tokens"]):
        out = breakwater(*command, str(tmp_path / "t.jsonl"), home=tmp_path)
        assert said in out.stderr and "Traceback" not in out.stderr, (command, out.stderr)
        assert out.returncode not in (0, 70), (command, out.stderr)
    out = breakwater("eval", str(tmp_path / "t.jsonl"), home=tmp_path)   # its corpus lists regular files only
    assert out.returncode not in (0, 70) and "no session files to evaluate" in out.stderr, out.stderr


def test_a_special_config_file_is_refused_in_one_line(tmp_path, special):
    said = special(tmp_path / "config.toml")
    out = breakwater("eval", str(SESSION), "--judge", home=tmp_path,
                     env={"BREAKWATER_CONFIG": str(tmp_path / "config.toml")})
    one_line(out, said)


def test_an_overlay_beside_a_recording_is_reported_not_read(tmp_path, special):
    """replay loads the overlay beside its recording without asking: a FIFO or /dev/zero there is an
    issue shown with the recording, which still opens."""
    said = special(tmp_path / "rec.jsonl.overlay.jsonl")
    out = python(f"""
        from breakwater.core.overlay import OverlayFile
        o = OverlayFile({str(tmp_path / "rec.jsonl.overlay.jsonl")!r})
        print(len(o.events), [str(i) for i in o.issues])
        try:
            o.add("pin", 0, message_id="m00001")
        except OSError as exc:
            print("refused:", exc)
    """)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.startswith("0 [") and said in first and "the overlay's edits are not applied" in first
    assert second.startswith("refused:")


def test_browse_lists_no_special_file_and_does_not_hang(tmp_path, special):
    project = tmp_path / ".claude" / "projects" / "-work-app"
    project.mkdir(parents=True)
    (project / "good.jsonl").write_bytes(SESSION.read_bytes())
    special(project / "bad.jsonl")
    out = python(f"""
        from breakwater.formats.sessions import find_sessions
        print([s.path.name for s in find_sessions(home={str(tmp_path)!r}, workspace={str(tmp_path)!r})])
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['good.jsonl']"


FOLLOW = """
import json, os, sys, time
from pathlib import Path
from breakwater.formats.follow import Follower

path = Path(sys.argv[1])
follower = Follower(path)
def step():
    started = time.monotonic()
    log = follower.read()
    took = time.monotonic() - started
    return {"entries": None if log is None else len(log.entries), "took": took,
            "changes": [[c.kind, c.message] for c in follower.changes()]}
for line in sys.stdin:
    print(json.dumps(step()), flush=True)
"""


class Follow:
    """A Follower in a child process (a deadline and a memory limit), stepped one read at a time."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", FOLLOW, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, preexec_fn=limited)

    def read(self, timeout: float = 20) -> dict:
        import select

        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "the follower blocked"
        line = self.proc.stdout.readline()
        assert line, "the follower died"
        return json.loads(line)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_follow_says_when_its_file_is_replaced_truncated_or_turned_special(tmp_path):
    lines = SESSION.read_bytes().splitlines(keepends=True)
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(lines[:10]))
    follow = Follow(path)
    try:
        first = follow.read()
        assert first["entries"] == 9 and first["changes"] == []
        with open(path, "ab") as fh:
            fh.write(b"".join(lines[10:20]))
        assert follow.read()["entries"] == 19
        # replaced (os.replace: another inode) by a shorter transcript
        (tmp_path / "new.jsonl").write_bytes(b"".join(lines[:5]))
        os.replace(tmp_path / "new.jsonl", path)
        got = follow.read()
        assert got["entries"] == 4 and [c[0] for c in got["changes"]] == ["replaced"]
        assert "live.jsonl was replaced by another file" in got["changes"][0][1]
        # truncated in place
        with open(path, "ab") as fh:
            fh.write(b"".join(lines[5:15]))
        assert follow.read()["entries"] == 14
        os.truncate(path, len(b"".join(lines[:3])))
        got = follow.read()
        assert got["entries"] == 2 and [c[0] for c in got["changes"]] == ["truncated"]
        # a link to /dev/zero, then a FIFO: said once each, never read, never blocking
        os.unlink(path)
        os.symlink("/dev/zero", path)
        got = follow.read()
        assert got["entries"] is None and [c[0] for c in got["changes"]] == ["refused"]
        assert "/dev/zero) is a character device, not a regular file" in got["changes"][0][1]
        assert got["took"] < 2
        assert follow.read()["changes"] == []
        os.unlink(path)
        os.mkfifo(path)
        got = follow.read()
        assert got["entries"] is None and "is a FIFO, not a regular file" in got["changes"][0][1]
        # a regular file again: read from its start
        os.unlink(path)
        path.write_bytes(b"".join(lines[:8]))
        got = follow.read()
        assert got["entries"] == 7 and [c[0] for c in got["changes"]] == ["replaced"]
    finally:
        follow.close()


def test_follow_of_a_special_file_from_the_start_is_one_line(tmp_path, special):
    said = special(tmp_path / "live.jsonl")
    out = breakwater("replay", str(tmp_path / "live.jsonl"), "--follow", home=tmp_path, timeout=60)
    one_line(out, said)


# -- item 8: what a killed import leaves; tokens of a big text file --------------------------------------
def test_import_removes_only_the_temporary_files_killed_imports_left(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "60"])
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    try:
        left = {f".x.jsonl.{gone.pid}.0123456789ab.tmp": "killed import", ".y.jsonl.5a5a5a5a5a5a.tmp": "old, no pid"}
        kept = {f".x.jsonl.{alive.pid}.0123456789ab.tmp": "running import", ".z.jsonl.bbbbbbbbbbbb.tmp": "fresh, no pid",
                "notes.tmp": "not ours", f".w.jsonl.{gone.pid}.cccccccccccc.tmp": "another user's"}
        for name, text in {**left, **kept}.items():
            (out / name).write_text(text)
        os.chown(out / f".w.jsonl.{gone.pid}.cccccccccccc.tmp", 65534, 65534)
        os.utime(out / ".y.jsonl.5a5a5a5a5a5a.tmp", (time.time() - 3600,) * 2)
        link = out / f".v.jsonl.{gone.pid}.dddddddddddd.tmp"
        link.symlink_to(outside)   # never followed, never removed
        done = breakwater("import", str(SESSION), "-o", str(out / "x.jsonl"), home=tmp_path)
    finally:
        alive.kill()
        alive.wait()
    assert done.returncode == 0, done.stderr
    assert "removed 2 temporary files a killed import left in" in done.stderr
    names = {p.name for p in out.iterdir()}
    assert not names & set(left) and set(kept) <= names and link.is_symlink()
    assert outside.read_text() == "keep me\n" and (out / "x.jsonl").exists()
    assert not [n for n in names if n.startswith(".x.jsonl.") and n not in kept]   # its own temp renamed


def test_tokens_of_a_big_text_counts_as_the_whole_text_in_chunks(tmp_path):
    from breakwater.core.log.tokens import TokenCounter, heuristic_text

    # ~9 MB: three chunks, a multibyte character astride each boundary, long runs without spaces
    unit = "word " * 1000 + "é日本語\n" + "x" * 70_000 + "\n"
    text = unit * (9_000_000 // len(unit.encode()))
    path = tmp_path / "notes.txt"
    path.write_text(text)
    out = breakwater("tokens", str(path), "--json", home=tmp_path, env={"BREAKWATER_CACHE_DIR": str(tmp_path / "c")})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["kind"] == "text" and got["heuristic"] == heuristic_text(text)
    assert got["exact"] == TokenCounter("o200k_base").exact_text(text)


def test_tokens_shows_progress_on_a_terminal_only(tmp_path):
    import pty

    path = tmp_path / "notes.txt"
    path.write_text("some words here\n" * 1_000_000)
    main, side = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BREAKWATER_")}
    env.update(HOME=str(tmp_path), BREAKWATER_CACHE_DIR=str(tmp_path / "c"), TERM="xterm", COLUMNS="100")
    proc = subprocess.Popen([sys.executable, "-m", "breakwater", "tokens", str(path)], stdout=subprocess.PIPE,
                            stderr=side, env=env, preexec_fn=limited)
    os.close(side)
    stdout, _ = proc.communicate(timeout=120)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    assert proc.returncode == 0 and b"16,000,000 chars" in stdout
    assert b"counting" in seen and b"MB" in seen
    plain = breakwater("tokens", str(path), home=tmp_path, env={"BREAKWATER_CACHE_DIR": str(tmp_path / "c")})
    assert plain.stderr == ""
