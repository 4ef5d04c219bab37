"""Giving back the pages of a loaded library that nothing reads any more.

rs-bpe's module carries its tokenizers serialized inside it (a 45 MB read-only segment of the .so).
Building one reads its part of that segment once, into tables on the heap; the file's pages it touched
stay mapped and resident after that (31 MB for o200k_base: a first `simulate` of the 5,000-message
OpenAI array peaked at 170 MB, the tokenizer 66 MB of it). `drop_clean_pages` tells the kernel they are
not needed (madvise MADV_DONTNEED): a clean page of a file mapping is dropped from the process and read
again from the page cache if it is ever touched, so this changes what the process holds, never what
it reads. Pages that are not clean (relocations made read-only after loading, data) are left alone:
dropping them would lose what was written there.
"""

from __future__ import annotations

import sys

MADV_DONTNEED = 4


def _mappings(part: str) -> list[tuple[int, int]]:
    """(start, end) of each mapping of a file whose path holds `part`, read-only data (not code) holding
    no page of its own (no dirty, no anonymous page): only the file's content, as it is on disk."""
    found: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    clean = False
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line.split(None, 5)
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):   # a mapping's first line
                if current is not None and clean:
                    found.append(current)
                current, clean = None, False
                if len(head) == 6 and part in head[5] and head[1] == "r--p":
                    start, end = head[0].split("-")
                    current, clean = (int(start, 16), int(end, 16)), True
            elif current is not None and head[0] in ("Private_Dirty:", "Shared_Dirty:", "Anonymous:") \
                    and head[1] != "0":
                clean = False
    if current is not None and clean:
        found.append(current)
    return found


def drop_clean_pages(part: str) -> int:
    """Drop the resident pages of the read-only, unmodified mappings of files whose path holds `part`;
    returns the bytes of the mappings told (0 where this is not Linux or cannot be asked)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        told = 0
        for start, end in _mappings(part):
            if madvise(start, end - start, MADV_DONTNEED) == 0:
                told += end - start
        return told
    except (OSError, AttributeError, ValueError):   # no /proc, no libc, no madvise: the pages stay
        return 0
