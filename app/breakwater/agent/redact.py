"""Keep the API key out of everything the agent writes: the log, spill files and memory.

The key reaches the loop only through the client. Tools could still meet it: bash inherits
the process environment (OPENAI_API_KEY) and may `cat` a config file. So the environment the
tools inherit is scrubbed when a session starts, every text that enters the log passes
through `redact`, and a spill file that caught the key is rewritten without it.
"""

from __future__ import annotations

import os
import secrets
from typing import BinaryIO, Mapping

from breakwater.agent.config import NO_KEY
from breakwater.core.log.beneath import OwnedDir

MARK = "[redacted]"
MIN_SECRET_CHARS = 8   # shorter "keys" (placeholders like "x") would redact ordinary text
CHUNK = 1 << 20


def is_secret(key: str | None) -> bool:
    return bool(key) and key != NO_KEY and len(key) >= MIN_SECRET_CHARS


class Redactor:
    """Replaces one secret wherever it occurs; a no-op when there is no real secret."""

    def __init__(self, secret: str | None):
        self.secret = secret if is_secret(secret) else None

    def __call__(self, text: str) -> str:
        if self.secret is None or not text or self.secret not in text:
            return text
        return text.replace(self.secret, MARK)

    def tool_environment(self, environ: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
        """The environment tools get: this process's, minus variables holding the secret (and their names)."""
        environ = os.environ if environ is None else environ
        if self.secret is None:
            return dict(environ), []
        names = sorted(k for k, v in environ.items() if self.secret in v)
        return {k: v for k, v in environ.items() if k not in names}, names

    def scrub_file(self, folder: OwnedDir, name: str) -> int:
        """Rewrite `name` in `folder` with the secret replaced; returns how many were found (0: untouched).

        The spill folder is one the agent's commands can write in, so the file, its temporary
        copy and the folder are all opened with no symlink followed (issue 27).
        """
        if self.secret is None:
            return 0
        key = self.secret.encode()
        try:
            with folder.fd(create=False) as d:
                with os.fdopen(folder.open(name, os.O_RDONLY, dir_fd=d), "rb") as src:
                    if not _contains(src, key):
                        return 0
                    src.seek(0)
                    tmp = f"{name}.{secrets.token_hex(4)}.redact-tmp"
                    with os.fdopen(folder.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=d),
                                   "wb") as dst:
                        count = _copy_redacted(src, dst, key)
                try:
                    os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)
                except OSError:
                    os.unlink(tmp, dir_fd=d)
                    raise
            return count
        except FileNotFoundError:
            return 0


def _copy_redacted(src: BinaryIO, dst: BinaryIO, key: bytes) -> int:
    count = 0
    carry = b""
    while True:
        chunk = src.read(CHUNK)
        buf = carry + chunk
        pos = 0
        while (hit := buf.find(key, pos)) >= 0:
            dst.write(buf[pos:hit])
            dst.write(MARK.encode())
            pos = hit + len(key)
            count += 1
        rest = buf[pos:]
        if not chunk:
            dst.write(rest)
            return count
        # a match may straddle the chunk boundary: hold back what could be its start
        keep = min(len(rest), len(key) - 1)
        dst.write(rest[:len(rest) - keep])
        carry = rest[len(rest) - keep:]


def _contains(fh: BinaryIO, key: bytes) -> bool:
    tail = b""
    while chunk := fh.read(CHUNK):
        if key in tail + chunk[:len(key)] or key in chunk:
            return True
        tail = chunk[-(len(key) - 1):] if len(key) > 1 else b""
    return False
