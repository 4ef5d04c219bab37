"""Tier-1 tool benchmarks: rolling-buffer ingest speed and memory, bash and read_file at scale.

Prints figures, asserts nothing (STYLE §16). Targets: ingest with spill >= 200 MB/s,
peak memory growth on a 1 GB stream < 50 MB.

    python bench/bench_tools.py
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

try:
    import breakwater  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "app"))

from breakwater.tools import sandbox
from breakwater.tools.bash import DEFAULT_MAX_BYTES, run_bash
from breakwater.tools.read_file import read_file
from breakwater.tools.rolling_buffer import CHUNK_SIZE, RollingOutputBuffer
from breakwater.tools.workspace import Workspace

MB = 1_000_000
RUNS = 5
RUN_BYTES = 256 * 1024 * 1024
BIG_STREAM = 1024 * 1024 * 1024


def log_chunks(seed: int = 0, size: int = 8 * 1024 * 1024) -> list[bytes]:
    """64 KiB pieces of realistic build/server output, cut where a pipe would cut them (mid-line)."""
    rng = random.Random(seed)
    levels = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"]
    paths = ["/api/v1/items", "/api/v1/users/login", "/static/app.3f9c1e.js", "/healthz", "/api/v2/orders"]
    out: list[str] = []
    total = 0
    i = 0
    while total < size:
        i += 1
        kind = rng.random()
        if kind < 0.70:
            line = (f"2024-05-01T12:{i % 60:02d}:{(i * 7) % 60:02d}.{i % 1000:03d}Z {rng.choice(levels):5} "
                    f"[worker-{i % 8}] GET {rng.choice(paths)}/{rng.randint(1, 99999)} "
                    f"{rng.choice([200, 200, 200, 304, 404, 500])} {rng.randint(1, 900)}ms "
                    f"bytes={rng.randint(100, 99999)}")
        elif kind < 0.85:
            line = (f"npm http fetch GET 200 https://registry.npmjs.org/pkg-{rng.randint(1, 5000)}/-/"
                    f"pkg-{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}.tgz {rng.randint(5, 400)}ms")
        elif kind < 0.95:
            line = (f"    at Object.<anonymous> (/srv/app/node_modules/lib/module{rng.randint(1, 300)}.js:"
                    f"{rng.randint(1, 999)}:{rng.randint(1, 80)})")
        elif kind < 0.99:
            line = f"编译 模块 {rng.randint(1, 500)} 完成 — ✓ {rng.random():.4f}"
        else:
            line = "progress " + "#" * rng.randint(200, 3000)
        out.append(line + "\n")
        total += len(line) + 1
    blob = "".join(out).encode()
    return [blob[i:i + CHUNK_SIZE] for i in range(0, len(blob) - CHUNK_SIZE + 1, CHUNK_SIZE)]


def ingest(chunks: list[bytes], n_bytes: int, spill: Path | None) -> tuple[float, RollingOutputBuffer]:
    buf = RollingOutputBuffer(400, spill_path=spill, keep_spill="always", max_bytes=DEFAULT_MAX_BYTES)
    fed = 0
    started = time.perf_counter()
    while fed < n_bytes:
        for chunk in chunks:
            buf.write(chunk)
            fed += len(chunk)
            if fed >= n_bytes:
                break
    buf.close()
    return time.perf_counter() - started, buf


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    """Linux resets VmHWM to the current RSS when "5" is written to clear_refs."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def bench_ingest(chunks: list[bytes], tmp: Path) -> None:
    for label, spill in (("rolling_buffer ingest", tmp / "ingest.log"), ("rolling_buffer ingest (no spill)", None)):
        rates, cpu_rates = [], []
        for _ in range(RUNS):
            cpu = time.process_time()
            seconds, _ = ingest(chunks, RUN_BYTES, spill)
            cpu = time.process_time() - cpu
            rates.append(RUN_BYTES / seconds / MB)
            cpu_rates.append(RUN_BYTES / cpu / MB)
            if spill is not None:
                spill.unlink()
        # the machine may be shared: CPU time says what the buffer costs whatever else runs
        print(f"{label}: {statistics.median(rates):.0f} MB/s wall, {statistics.median(cpu_rates):.0f} MB/s "
              f"of CPU time (medians of {RUNS}; wall min {min(rates):.0f}, max {max(rates):.0f}; "
              f"{RUN_BYTES // 2**20} MiB of 64 KiB chunks, 400 lines / {DEFAULT_MAX_BYTES} bytes shown)")


def bench_big_stream(chunks: list[bytes], tmp: Path) -> None:
    spill = tmp / "big.log"
    rss_before = _status_kib("VmRSS")
    reset = _reset_peak_rss()
    hwm_before = _status_kib("VmHWM")
    seconds, buf = ingest(chunks, BIG_STREAM, spill)
    hwm_after = _status_kib("VmHWM")
    if rss_before is not None and hwm_after is not None:
        base = hwm_before if reset and hwm_before is not None else rss_before
        growth = (hwm_after - base) / 1024
        how = "VmHWM after clear_refs" if reset else "VmHWM - VmRSS before"
        print(f"rolling_buffer peak RSS growth on a 1 GiB stream: {growth:.1f} MB ({how}; "
              f"{BIG_STREAM / seconds / MB:.0f} MB/s with spill)")
    print(f"rolling_buffer 1 GiB stream: {buf.total_lines} lines, {buf.dropped_lines} dropped, "
          f"spill {spill.stat().st_size / MB:.0f} MB")

    ws = Workspace(tmp)
    started = time.perf_counter()
    r = read_file(ws, spill.name, start_line=buf.total_lines - 9)
    seconds = time.perf_counter() - started
    print(f"read_file last 10 lines of the 1 GiB spill: {seconds * 1000:.0f} ms "
          f"({spill.stat().st_size / seconds / MB:.0f} MB/s scanned; {r.meta.get('total_lines')} lines)")
    spill.unlink()

    # Past the page cache's dirty limit the disk sets the pace; this is the ceiling for the run above.
    raw = tmp / "raw.bin"
    started = time.perf_counter()
    with open(raw, "wb", buffering=0) as fh:
        for _ in range(BIG_STREAM // CHUNK_SIZE):
            fh.write(chunks[0])
    seconds = time.perf_counter() - started
    raw.unlink()
    print(f"disk baseline, plain 64 KiB writes of 1 GiB: {BIG_STREAM / seconds / MB:.0f} MB/s")

    tracemalloc.start()
    _, buf = ingest(chunks, 128 * 1024 * 1024, None)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"rolling_buffer tracemalloc peak over 128 MiB: {peak / MB:.2f} MB")


def bench_bash(tmp: Path) -> None:
    ws = Workspace(tmp)
    box = sandbox.resolve("auto")
    runs = [("direct", None)] + ([("in bubblewrap", box)] if box.kind == "bwrap" else [])
    if box.kind != "bwrap":
        print(f"bash in bubblewrap: not measured ({box.notice})")
    for label, where in runs:
        times = []
        for i in range(3):
            started = time.perf_counter()
            r = run_bash(ws, "seq 1 5000000", session_id="bench", tool_call_id=f"seq{i}", sandbox=where)
            times.append(time.perf_counter() - started)
            (tmp / r.meta["spill"]).unlink()
        size = r.meta["total_bytes"]
        print(f"bash 'seq 1 5000000' end to end, {label}: {statistics.median(times) * 1000:.0f} ms "
              f"({size / statistics.median(times) / MB:.0f} MB/s through pipe, buffer and spill; median of 3)")
        starts = []
        for _ in range(11):
            started = time.perf_counter()
            run_bash(ws, "true", sandbox=where)
            starts.append(time.perf_counter() - started)
        print(f"bash 'true' round trip, {label}: {statistics.median(starts) * 1000:.1f} ms (median of 11)")


def main() -> None:
    chunks = log_chunks()
    with tempfile.TemporaryDirectory(prefix="bench_tools_") as tmp:
        tmp_path = Path(tmp)
        bench_big_stream(chunks, tmp_path)   # first, so the peak RSS reflects it alone
        bench_ingest(chunks, tmp_path)
        bench_bash(tmp_path)


if __name__ == "__main__":
    main()
