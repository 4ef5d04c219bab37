"""Damaged transcripts: every real fixture with values of the wrong type put in at random places
and cut short at random points still imports (with warnings) or is refused with one clear
SessionLogError; no other exception escapes, and what imports simulates."""

import copy
import io
import json
import random

import pytest

from breakwater.core.policy import preset
from breakwater.core.log.session_log import SessionLogError
from breakwater.core.simulate import simulate
from breakwater.formats import load_sessions
from breakwater.cli.formats import write_native
from support.transcripts import REAL

WRONG = [None, 1, "x", [], {}, [1], {"type": 3}, True, [None], {"id": []}]
FILES = sorted(p for p in REAL.glob("*/*") if p.name != "SOURCES.md")


def damage(value, rnd, depth=0):
    """Replace one value somewhere inside `value` by one of the wrong type."""
    keys = list(value) if isinstance(value, dict) else list(range(len(value))) if isinstance(value, list) else []
    if not keys:
        return
    key = rnd.choice(keys)
    if depth > 6 or rnd.random() < 0.5:
        value[key] = copy.deepcopy(rnd.choice(WRONG))
    else:
        damage(value[key], rnd, depth + 1)


def damaged_copy(path, rnd):
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)      # one JSON document
    except ValueError:
        data = None                  # JSON lines
    if data is not None:
        for _ in range(5):
            damage(data, rnd)
        out = json.dumps(data)
    else:
        lines = text.splitlines()
        for _ in range(8):
            i = rnd.randrange(len(lines))
            obj = json.loads(lines[i])
            damage(obj, rnd)
            lines[i] = json.dumps(obj)
        out = "\n".join(lines)
    return out[:rnd.randrange(len(out))] if rnd.random() < 0.2 else out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_damaged_files_import_or_are_refused_cleanly(path, tmp_path):
    rnd = random.Random(path.name)
    for trial in range(12):
        copy = tmp_path / f"{trial}-{path.name}"
        copy.write_text(damaged_copy(path, rnd), encoding="utf-8")
        try:
            logs = load_sessions(copy)
        except SessionLogError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        for log in logs:
            write_native(log, io.StringIO())
            if len(log.entries) < 400:
                simulate(log, preset("breakwater").with_changes(window=16_000), counter="heuristic")
