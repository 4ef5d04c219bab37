"""Exact token counts kept on disk between runs (SPEC §2: "content-addressed, safe between processes"),
so that a reopened session counts nothing and its tokenizer need not load.

A count is found by the xxh3-128 digest of the text's UTF-8 (`xxhash`: ~0.01 s for the 31 MB bench
session, half of hashlib's blake2b, and 128 bits: no collision at any number of texts a machine holds)
within a namespace naming the encoding, the counting engine and its version, and how a long text is
cut into pieces (core/log/tokens.py `PIECE_CHARS`): a count is only ever found by the counter that would
have worked it out.

The store is stdlib `sqlite3` in WAL mode in the cache folder (core/log/tokens.py `cache_root`: `$BREAKWATER_CACHE_DIR`, else
`$XDG_CACHE_HOME/breakwater`, else `~/.cache/breakwater`): readers never wait, and the processes that
count (the workbench, a follow, an eval pool, a Dask worker) each add what they counted in one short
transaction now and then; one that finds the database busy past a timeout keeps its counts for the next
time. It is bounded: past `max_rows()` rows the least recently written or seen quarter goes. Every row carries a
check of its key and count; a file SQLite cannot read, of another layout, or with a row whose check fails
is moved aside and a new one started: a damaged cache is rebuilt, never trusted.
`BREAKWATER_COUNT_CACHE=off` turns it off.

Beside the counts it keeps records: a value of bytes by a key of the caller's, in the same namespace,
with the same check, bound (`max_records()`, their own) and eviction; core/fold/kept_measures.py keeps
there the exact figures of a plan's requests, so that a reopen does not sum them again.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import threading
import time
import zlib
from pathlib import Path
from typing import Callable

import xxhash

SCHEMA = 1
DEFAULT_MAX_ROWS = 1_000_000   # ~40 MB on disk: the texts of some thirty 20,000-message sessions
# records: core/fold/kept_measures.py's hold 64 plans each, ~20 KB (~145 for a 20,000-message session): ~40 MB
DEFAULT_MAX_RECORDS = 2_000
FLUSH_ROWS = 2048              # counts kept in memory before they are written
FLUSH_SECONDS = 2.0            # ... or for this long, whichever comes first
BUSY_MS = 2000                 # how long a writer waits for another before it gives up this once
# a row records the write (a store-wide generation, one per flush of any process) that last saw it; a
# row found that is older than this many writes is marked seen again, so that eviction keeps it (one
# UPDATE per row now and then, not one per reopen)
REFRESH_GENERATIONS = 64
# the lookups of a burst share one read transaction, ended this long after it began: each SELECT on its
# own took WAL's read lock and let it go again (10.7 µs a lookup, 4.8 µs inside one transaction: 0.12 s
# of a reopen of the 20k-message session), and a reader holding its snapshot for long would keep other
# processes' checkpoints from emptying the WAL
READ_SECONDS = 1.0


def _bound(variable: str, default: int) -> int:
    """The bound the environment `variable` sets (at least 16), else `default` (unset or not a number)."""
    try:
        return max(16, int(os.environ.get(variable, default)))
    except ValueError:
        return default


def max_rows() -> int:
    return _bound("BREAKWATER_COUNT_CACHE_ROWS", DEFAULT_MAX_ROWS)


def max_records() -> int:
    return _bound("BREAKWATER_COUNT_CACHE_RECORDS", DEFAULT_MAX_RECORDS)


key_of = xxhash.xxh3_128_digest   # the key of a text's UTF-8


def _check(key: bytes, n: int) -> int:
    # a row's check: a flipped bit of its key or count is seen (CRC-32 seeded with the count)
    return zlib.crc32(key, n & 0xFFFFFFFF)


def _record_check(key: bytes, value: bytes) -> int:
    return zlib.crc32(value, zlib.crc32(key))


class Damaged(Exception):
    """The store's file is not what this module wrote."""


class CountStore:
    """The counts of one namespace, in the file at `path`."""

    key_of = staticmethod(key_of)

    def __init__(self, path: Path, namespace: str):
        self.path = path
        self.namespace = namespace
        self._lock = threading.Lock()       # the workbench counts in a worker thread beside the main one
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._ns = 0
        self._pending: dict[bytes, int] = {}
        self._refresh: list[bytes] = []     # keys found that were last seen on an earlier day
        # records to write: key -> what makes the value's bytes, at the flush (a record may grow until then)
        self._pending_records: dict[bytes, Callable[[], bytes]] = {}
        self._refresh_records: list[bytes] = []
        self.record_writes = 0              # writes of records begun: a record put before one is put again
        self._since = 0.0                   # when the oldest pending count was added
        self._reading = 0                   # the serial of the open read transaction (0: none; see READ_SECONDS)
        self._reads = 0                     # read transactions begun
        self._stale_below = 0               # rows of an older generation than this are marked seen again
        self.broken = False                 # could not be opened at all: counts are worked out each time
        self.hits = self.misses = 0

    # -- the connection -------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:   # a forked child: the parent's connection and pending counts stay its own
            self._conn, self._pending, self._refresh, self._reading = None, {}, [], 0
            self._pending_records, self._refresh_records = {}, []
            self.record_writes += 1   # so that whoever put one puts it again (core/fold/kept_measures.py)
        if self.broken:
            return None
        try:
            self._conn = self._open()
        except (sqlite3.Error, Damaged, OSError):
            try:
                self._discard()
                self._conn = self._open()
            except (sqlite3.Error, Damaged, OSError):
                self.broken = True
                return None
        self._pid = os.getpid()
        clock = self._conn.execute("SELECT v FROM meta WHERE k = 'clock'").fetchone()[0]
        self._stale_below = clock - REFRESH_GENERATIONS
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
            if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
                raise Damaged("no WAL")
            conn.execute("PRAGMA synchronous=NORMAL")   # a crash may lose the last counts, never corrupt
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA,))
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('rows', 0)")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('clock', 0)")
                if conn.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()[0] != SCHEMA:
                    raise Damaged("another layout")
                conn.execute("CREATE TABLE IF NOT EXISTS namespaces (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)")
                conn.execute("CREATE TABLE IF NOT EXISTS counts (ns INTEGER NOT NULL, h BLOB NOT NULL, "
                             "n INTEGER NOT NULL, seen INTEGER NOT NULL, chk INTEGER NOT NULL, "
                             "PRIMARY KEY (ns, h)) WITHOUT ROWID")
                conn.execute("CREATE TABLE IF NOT EXISTS records (ns INTEGER NOT NULL, h BLOB NOT NULL, "
                             "v BLOB NOT NULL, seen INTEGER NOT NULL, chk INTEGER NOT NULL, "
                             "PRIMARY KEY (ns, h)) WITHOUT ROWID")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('records', 0)")
                conn.execute("INSERT OR IGNORE INTO namespaces (name) VALUES (?)", (self.namespace,))
                self._ns = conn.execute("SELECT id FROM namespaces WHERE name = ?", (self.namespace,)).fetchone()[0]
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _discard(self) -> None:
        """Move the damaged file aside (a process still reading it keeps its copy) and start anew."""
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
        self._reading = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(f"{self.path}{suffix}", f"{self.path}{suffix}.damaged")
            except FileNotFoundError:
                pass

    def _rebuild(self) -> None:
        """The file was found damaged in use: start a new one (counts not written yet are kept)."""
        try:
            self._discard()
        except OSError:   # it cannot even be moved aside: counts are worked out each time from here on
            self.broken = True
        self._connection()

    # -- counts ---------------------------------------------------------------------------------------
    def get(self, key: bytes) -> int | None:
        with self._lock:
            n = self._pending.get(key)
            if n is not None:
                return n
            row = self._row("SELECT n, seen, chk FROM counts WHERE ns = ? AND h = ?", key)
            if row is None:
                self.misses += 1
                return None
            if not row:
                return None
            n, seen, chk = row
            if chk != _check(key, n) or n < 0:
                self._rebuild()
                return None
            if seen < self._stale_below:
                self._refresh.append(key)
            self.hits += 1
            return n

    def get_record(self, key: bytes) -> bytes | None:
        """The record kept under `key`, or None (never written, evicted, or the store is unreadable)."""
        with self._lock:
            pending = self._pending_records.get(key)
            if pending is not None:
                return pending()
            row = self._row("SELECT v, seen, chk FROM records WHERE ns = ? AND h = ?", key)
            if not row:
                return None
            v, seen, chk = row
            if type(v) is not bytes or chk != _record_check(key, v):
                self._rebuild()
                return None
            if seen < self._stale_below:
                self._refresh_records.append(key)
            return v

    def _row(self, sql: str, key: bytes) -> tuple | None:
        """The row `sql` finds for `key`, in the read transaction lookups share; None when there is none,
        () when there is no store or the file could not be read (then moved aside). The lock is held."""
        conn = self._connection()
        if conn is None:
            return ()
        try:
            if not self._reading:
                self._begin_read(conn)
            return conn.execute(sql, (self._ns, key)).fetchone()
        except sqlite3.DatabaseError:
            self._rebuild()
            return ()

    def _begin_read(self, conn: sqlite3.Connection) -> None:
        """Start the read transaction the next lookups share, and its end READ_SECONDS from now."""
        conn.execute("BEGIN")   # deferred: it reads from the first SELECT on
        self._reads += 1
        self._reading = serial = self._reads
        timer = threading.Timer(READ_SECONDS, self._read_over, (serial,))
        timer.daemon = True
        timer.start()

    def _read_over(self, serial: int) -> None:
        with self._lock:
            if self._reading == serial and self._pid == os.getpid():
                self._end_read()

    def _end_read(self) -> None:
        """End the open read transaction (before a write, at its time, at close)."""
        self._reading = 0
        if self._conn is not None and self._conn.in_transaction:
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error:   # nothing was written in it: what ends it matters not
                pass

    def put(self, key: bytes, n: int) -> None:
        with self._lock:
            if not self._pending:
                self._since = time.monotonic()
            self._pending[key] = n
            if len(self._pending) >= FLUSH_ROWS or time.monotonic() - self._since >= FLUSH_SECONDS:
                self._flush()

    def put_record(self, key: bytes, value: Callable[[], bytes]) -> None:
        """Keep `value()` under `key` (replacing what was), worked out at the next write: a caller that adds
        to a record puts it again after each addition for the cost of a dict entry."""
        with self._lock:
            if not (self._pending or self._pending_records):
                self._since = time.monotonic()
            self._pending_records[key] = value
            if len(self._pending_records) >= FLUSH_ROWS or time.monotonic() - self._since >= FLUSH_SECONDS:
                self._flush()

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if not (self._pending or self._refresh or self._pending_records or self._refresh_records):
            return
        conn = self._connection()
        if conn is None:
            self._pending, self._refresh, self._pending_records, self._refresh_records = {}, [], {}, []
            return
        ns = self._ns
        if self._reading:
            self._end_read()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                clock = conn.execute("UPDATE meta SET v = v + 1 WHERE k = 'clock' RETURNING v").fetchone()[0]
                rows = [(ns, k, n, clock, _check(k, n)) for k, n in self._pending.items()]
                before = conn.total_changes
                conn.executemany("INSERT OR IGNORE INTO counts VALUES (?, ?, ?, ?, ?)", rows)
                added = conn.total_changes - before
                if self._refresh:
                    conn.executemany("UPDATE counts SET seen = ? WHERE ns = ? AND h = ?",
                                     [(clock, ns, k) for k in self._refresh])
                total = conn.execute("UPDATE meta SET v = v + ? WHERE k = 'rows' RETURNING v", (added,)).fetchone()[0]
                if total > max_rows():
                    self._evict(conn)
                if self._pending_records or self._refresh_records:
                    self._write_records(conn, ns, clock)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError:   # busy past the timeout, or the disk is full: another time
            return
        except sqlite3.DatabaseError:
            self._rebuild()
            return
        self._pending, self._refresh, self._pending_records, self._refresh_records = {}, [], {}, []

    def _write_records(self, conn: sqlite3.Connection, ns: int, clock: int) -> None:
        self.record_writes += 1
        rows = []
        for k, value in self._pending_records.items():
            try:
                v = value()
            except RuntimeError:   # its owner is adding to it in another thread: put again at its next addition
                continue
            rows.append((ns, k, v, clock, _record_check(k, v)))
        conn.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?)", rows)
        if self._refresh_records:
            conn.executemany("UPDATE records SET seen = ? WHERE ns = ? AND h = ?",
                             [(clock, ns, k) for k in self._refresh_records])
        # an upper bound (a record replaced is counted again), made exact when it says past the bound
        total = conn.execute("UPDATE meta SET v = v + ? WHERE k = 'records' RETURNING v", (len(rows),)).fetchone()[0]
        if total > max_records():
            total = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            if total > max_records():
                keep = max_records() * 3 // 4
                conn.execute("DELETE FROM records WHERE (ns, h) IN (SELECT ns, h FROM records ORDER BY seen LIMIT ?)",
                             (total - keep,))
                total = keep
            conn.execute("UPDATE meta SET v = ? WHERE k = 'records'", (total,))

    @staticmethod
    def _evict(conn: sqlite3.Connection) -> None:
        """Drop the least recently seen rows, down to three quarters of the bound (every namespace's)."""
        keep = max_rows() * 3 // 4
        total = conn.execute("SELECT count(*) FROM counts").fetchone()[0]
        if total > keep:
            conn.execute("DELETE FROM counts WHERE (ns, h) IN (SELECT ns, h FROM counts ORDER BY seen LIMIT ?)",
                         (total - keep,))
            total = keep
        conn.execute("UPDATE meta SET v = ? WHERE k = 'rows'", (total,))

    def close(self) -> None:
        with self._lock:
            self._flush()
            if self._conn is not None and self._pid == os.getpid():
                self._end_read()
                self._conn.close()
            self._conn = None


_stores: dict[tuple[str, str], CountStore] = {}
_stores_lock = threading.Lock()


def shared(namespace: str, path: Path) -> CountStore | None:
    """The process's store for `namespace` in the file at `path`, or None when turned off."""
    if os.environ.get("BREAKWATER_COUNT_CACHE", "").lower() in ("off", "0", "no"):
        return None
    with _stores_lock:
        store = _stores.get((str(path), namespace))
        if store is None:
            store = _stores[str(path), namespace] = CountStore(path, namespace)
        return store


def flush_all() -> None:
    """Write every store's pending counts (a command that ends its process without the interpreter's
    exit calls this first)."""
    with _stores_lock:
        stores = list(_stores.values())
    for store in stores:
        try:
            store.flush()
        except Exception:  # noqa: BLE001 - a cache that cannot be written costs a recount, nothing else
            pass


atexit.register(flush_all)
