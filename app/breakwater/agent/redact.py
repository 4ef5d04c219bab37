"""Keep the API key out of everything the agent writes: the log, spill files and memory.

The key reaches the loop only through the client. Tools could still meet it: bash inherits
the process environment (OPENAI_API_KEY) and may `cat` a config file. So the environment the
tools inherit is scrubbed when a session starts, every text that enters the log passes
through `redact`, and a spill file that caught the key is rewritten without it.

A model that may read a `.env` in the workspace can also print the key encoded (issue 35
item 2): `base64 -w0 .env`, `xxd -p .env`. So the key's base64 forms (standard and URL-safe,
for each of the three byte alignments it can have in the encoded text) and hex forms (lower and
upper case) are redacted as the plain key is, also where a line break cuts them (`base64`
wraps at 76 columns, `xxd -p` at 60).
"""

from __future__ import annotations

import base64
import os
import re
import secrets
from typing import BinaryIO, Mapping

from breakwater.agent.config import NO_KEY
from breakwater.core.log.beneath import OwnedDir

MARK = "[redacted]"
MIN_SECRET_CHARS = 8   # shorter "keys" (placeholders like "x") would redact ordinary text
CHUNK = 1 << 20
# what may stand between two characters of a form: a line break, raw or as JSON writes it
_BREAK = r"(?:\r\n|\r|\n|\\r\\n|\\r|\\n)?"
_BREAKS = ("\r", "\n", "\\r", "\\n")


def is_secret(key: str | None) -> bool:
    return bool(key) and key != NO_KEY and len(key) >= MIN_SECRET_CHARS


def encoded_forms(secret: str) -> tuple[str, ...]:
    """The key as base64 and hex may show it inside longer encoded text.

    In base64 the key's bytes start at offset 0, 1 or 2 of a 3-byte group, depending on what
    precedes them; for each, the characters made of the key's bits alone are the form (the first
    and last may mix in the neighbours' bits and are left out)."""
    key = secret.encode()
    forms = []
    for lead in range(3):
        text = base64.b64encode(b"\0" * lead + key).decode()
        start, end = -(-8 * lead // 6), (8 * lead + 8 * len(key)) // 6
        pure = text[start:end]
        forms += [pure, pure.translate(_URL_SAFE)]
    forms += [key.hex(), key.hex().upper()]
    return tuple(f for f in dict.fromkeys(forms) if f != secret)


_URL_SAFE = str.maketrans("+/", "-_")


def _unbroken(text):
    """`text` (str or bytes) without the line breaks a form may hold; `text` itself if it has none."""
    for mark in _BREAKS if isinstance(text, str) else _BYTE_BREAKS:
        if mark in text:
            text = text.replace(mark, text[:0])
    return text


_BYTE_BREAKS = (b"\r", b"\n")      # a spill holds raw output: no JSON escapes


class Redactor:
    """Replaces one secret, plain or encoded, wherever it occurs; a no-op when there is no real secret."""

    def __init__(self, secret: str | None):
        self.secret = secret if is_secret(secret) else None
        self.forms: tuple[str, ...] = (self.secret, *encoded_forms(self.secret)) if self.secret else ()
        longest_first = sorted(self.forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(_BREAK.join(map(re.escape, f)) for f in longest_first)) \
            if self.forms else None
        self._bytes_pattern = re.compile(self._pattern.pattern.encode()) if self._pattern else None
        self._byte_forms = tuple(f.encode() for f in self.forms)
        # the longest text one match can span: each gap may hold an escaped CRLF (4 characters)
        self.span = max((len(f) * 5 for f in self.forms), default=0)

    def found(self, text: str | None) -> bool:
        """Whether `text` holds the secret in any form."""
        if self.secret is None or not text:
            return False
        if any(f in text for f in self.forms):
            return True
        joined = _unbroken(text)
        return joined is not text and any(f in joined for f in self.forms)

    def __call__(self, text: str) -> str:
        if not self.found(text):
            return text
        return self._pattern.sub(MARK, text)

    def tool_environment(self, environ: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
        """The environment tools get: this process's, minus variables holding the secret (and their names)."""
        environ = os.environ if environ is None else environ
        if self.secret is None:
            return dict(environ), []
        names = sorted(k for k, v in environ.items() if self.secret in v)
        return {k: v for k, v in environ.items() if k not in names}, names

    def scrub_file(self, folder: OwnedDir, name: str) -> int:
        """Rewrite `name` in `folder` with the secret (in any form) replaced; returns how many were
        found (0: untouched).

        The spill folder is one the agent's commands can write in, so the file, its temporary
        copy and the folder are all opened with no symlink followed (issue 27).
        """
        if self.secret is None:
            return 0
        try:
            with folder.fd(create=False) as d:
                with os.fdopen(folder.open(name, os.O_RDONLY, dir_fd=d), "rb") as src:
                    if not self._file_holds(src):
                        return 0
                    src.seek(0)
                    tmp = f"{name}.{secrets.token_hex(4)}.redact-tmp"
                    with os.fdopen(folder.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=d),
                                   "wb") as dst:
                        count = self._copy_redacted(src, dst)
                try:
                    os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)
                except OSError:
                    os.unlink(tmp, dir_fd=d)
                    raise
            return count
        except FileNotFoundError:
            return 0

    def _file_holds(self, fh: BinaryIO) -> bool:
        tail = b""
        while chunk := fh.read(CHUNK):
            # a form may straddle two chunks: the last `span` bytes are looked at again
            # a form cut by a line break is whole once they are gone, and one that is not stays whole
            joined = _unbroken(tail + chunk)
            if any(f in joined for f in self._byte_forms):
                return True
            tail = chunk[-self.span:]
        return False

    def _copy_redacted(self, src: BinaryIO, dst: BinaryIO) -> int:
        count = 0
        carry = b""
        mark = MARK.encode()
        while True:
            chunk = src.read(CHUNK)
            buf = carry + chunk
            # a match may run past the end of this buffer: what could be its start waits for the next
            cut = len(buf) if not chunk else max(0, len(buf) - self.span)
            pos = 0
            for match in self._bytes_pattern.finditer(buf):
                if match.start() >= cut:
                    break
                dst.write(buf[pos:match.start()])
                dst.write(mark)
                pos = match.end()
                count += 1
            if not chunk:
                dst.write(buf[pos:])
                return count
            keep_from = max(pos, cut)
            dst.write(buf[pos:keep_from])
            carry = buf[keep_from:]
