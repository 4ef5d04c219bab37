"""The last resort of the command line: an unexpected exception becomes one line on stderr
and a crash report file with the traceback, never a traceback on the terminal.

The report may hold text from the session or the server, so it passes through the same
redaction as the session log (the key from the environment and the config file).
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from datetime import datetime, timezone
from pathlib import Path

from breakwater import __version__


def crash_dir() -> Path:
    from breakwater.core.log.tokens import cache_dir

    return cache_dir().parent / "crash"  # beside the tokenizer cache: $BREAKWATER_CACHE_DIR or XDG's


def _redactor():
    from breakwater.agent.redact import Redactor

    key = os.environ.get("OPENAI_API_KEY")
    try:
        from breakwater.agent.config import config_path, read_file

        key = key or read_file(*config_path()).get("api_key")
    except Exception:  # noqa: BLE001 - an unreadable config cannot hold a key we must hide
        pass
    return Redactor(key)


def report_crash(exc: BaseException, argv: list[str]) -> str:
    """Write the report; return the one line for stderr (naming the report, if it could be written)."""
    redact = _redactor()
    summary = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(summary) > 200:
        summary = summary[:199] + "…"
    now = datetime.now(timezone.utc)
    text = (f"breakwater {__version__}, Python {sys.version.split()[0]}, {now:%Y-%m-%dT%H:%M:%SZ}\n"
            f"command: breakwater {' '.join(argv)}\n\n"
            + "".join(traceback.format_exception(exc)))
    text = redact(text).encode("utf-8", "backslashreplace").decode("utf-8")
    name = f"crash-{now:%Y%m%dT%H%M%SZ}-{os.getpid()}.txt"
    for directory in (crash_dir(), Path(tempfile.gettempdir())):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / name
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(text)
        except OSError:
            continue
        return redact(f"breakwater: internal error ({summary}); report written to {path}")
    return redact(f"breakwater: internal error ({summary}); no crash report could be written")
