"""A parent directory swapped for a symlink while the file tools run never carries them outside.

One thread keeps replacing `ws/a` (a real directory) with a symlink to a directory
outside the workspace and back, as fast as it can, while thousands of reads and writes
go through `a/`. Each call must answer with the inside file or an error result: never
the outside file, never a write or a temporary file outside, never an exception.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import pytest

from breakwater.tools.read_file import read_file
from breakwater.tools.workspace import Workspace
from breakwater.tools.write_file import write_file
from support.fixtures import resolver  # noqa: F401 - the fixture

CALLS = 3000
AT_FDCWD = -100
RENAME_EXCHANGE = 2


def _exchanger():
    """renameat2(RENAME_EXCHANGE): swaps two names atomically, so `a` is never missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("renameat2 is not available")

    def exchange(x: Path, y: Path) -> None:
        if libc.renameat2(AT_FDCWD, os.fsencode(x), AT_FDCWD, os.fsencode(y), RENAME_EXCHANGE) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    return exchange


@pytest.fixture
def swapped(tmp_path):
    """(workspace, outside dir, swap count); `ws/a` flips between the real directory and a symlink."""
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    (root / "a" / "f.txt").write_text("inside\n")
    (outside / "f.txt").write_text("OUTSIDE\n")
    (root / "a_link").symlink_to(outside)
    exchange = _exchanger()
    stop = threading.Event()
    swaps = [0]

    def swap():
        while not stop.is_set():
            exchange(root / "a", root / "a_link")
            swaps[0] += 1

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    yield Workspace(root), outside, swaps
    stop.set()
    thread.join()


def test_reads_never_return_the_outside_file(resolver, swapped):
    ws, outside, swaps = swapped
    seen = {"inside": 0, "error": 0}
    for _ in range(CALLS):
        r = read_file(ws, "a/f.txt")
        assert "OUTSIDE" not in r.content
        seen["error" if r.is_error else "inside"] += 1
        if not r.is_error:
            assert r.content == "[a/f.txt: lines 1-1 of 1]\ninside"
    assert swaps[0] > 100, "the swapper barely ran; the race was not exercised"
    assert seen["inside"] > 0


def test_writes_never_land_outside(resolver, swapped):
    ws, outside, swaps = swapped
    for i in range(CALLS):
        r = write_file(ws, "a/f.txt", f"write {i}\n")
        assert r.content.startswith(("Replaced a/f.txt", "Created a/f.txt", "Error: ")), r.content
    assert swaps[0] > 100
    assert (outside / "f.txt").read_text() == "OUTSIDE\n"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
