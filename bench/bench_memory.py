"""Tier-3 memory figures: BM25 retrieval speed on 10k entries, append and consolidation latency.

Run: python bench/bench_memory.py
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

from breakwater.memory.consolidate import consolidate
from breakwater.memory.entries import format_entry, format_header
from breakwater.memory.retrieval import MemoryIndex
from breakwater.memory.store import MemoryStore

WORDS = ("pool connection timeout cache config parser retry handler session token window summary "
         "compaction snapshot queue worker index query retrieval memory fragment lock append "
         "server client request response schema migration build deploy test fixture").split()
HAN = ("数据库 连接池 超时 缓存 配置 解析 重试 会话 令牌 窗口 摘要 压缩 快照 队列 索引 查询 检索 "
       "记忆 碎片 追加 服务 客户端 请求 响应 迁移 构建 部署 测试").split()
TAGS = ("FILE", "DECISION", "ERROR", "PROGRESS")


def synthetic_entry(rng: random.Random, turn: int) -> str:
    bullets = []
    for _ in range(rng.randint(1, 4)):
        tag = rng.choice(TAGS)
        words = rng.sample(WORDS, 5) + rng.sample(HAN, 2)
        path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}{rng.randint(0, 300)}.go"
        bullets.append(f"- [{tag}] {path}: {' '.join(words)}")
    return format_entry(format_header(turn, datetime(2026, 11, 29, 12, 0)), bullets)


def queries(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        out.append(" ".join(rng.sample(WORDS, 3)) + " " + rng.choice(HAN)
                   + f" {rng.choice(WORDS)}{rng.randint(0, 300)}.go")
    return out


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_retrieval(root: Path, entries: int = 10_000, n_queries: int = 500) -> None:
    rng = random.Random(7)
    store = MemoryStore(root, max_lines=10**9)
    store.root.mkdir(parents=True)
    store.memory_path.write_text("".join(synthetic_entry(rng, t) for t in range(entries)), encoding="utf-8")
    index = MemoryIndex(store)
    t0 = time.perf_counter()
    index.search("warm up")
    build = time.perf_counter() - t0
    qs = queries(rng, n_queries)
    lat = []
    for q in qs:
        t = time.perf_counter()
        index.search(q)
        lat.append(time.perf_counter() - t)
    med = statistics.median(lat)
    print(f"bm25 index build: {build:.2f} s for {entries} entries "
          f"({store.memory_path.stat().st_size / 1e6:.1f} MB MEMORY.md)")
    print(f"bm25 retrieval: {1 / med:,.0f} queries/s on {entries // 1000}k entries (median {med * 1000:.2f} ms, "
          f"p95 {sorted(lat)[int(0.95 * len(lat))] * 1000:.2f} ms, incl. the change check)")
    store.append("- [FILE] src/new.go: one more entry", entries)
    t0 = time.perf_counter()
    index.search("new.go")
    print(f"bm25 rebuild after one append: {time.perf_counter() - t0:.2f} s on {entries + 1} entries")


def bench_append(root: Path, n: int = 200) -> None:
    (root / "full").mkdir(parents=True)   # the workspaces: a store writes beneath one that exists
    store = MemoryStore(root, max_lines=10**9)
    lat = []
    for t in range(n):
        s = time.perf_counter()
        store.append(f"- [FILE] src/mod{t}.py: edited\n- [DECISION] keep {t}", t)
        lat.append(time.perf_counter() - s)
    print(f"append into MEMORY.md: median {median_ms(lat):.2f} ms (lock + read + write + fsync)")

    full = MemoryStore(root / "full", max_lines=3)
    full.append("- [FILE] first.py", 0)
    lat = []
    for t in range(n):
        s = time.perf_counter()
        full.append(f"- [FILE] src/mod{t}.py: edited", t)
        lat.append(time.perf_counter() - s)
    print(f"append as overflow fragment + pointer: median {median_ms(lat):.2f} ms")

    t0 = time.perf_counter()
    report = consolidate(full, force=True)
    print(f"consolidation of {report.fragments_removed} fragments: {time.perf_counter() - t0:.2f} s "
          f"({report.bullets_before} bullets -> {report.bullets_after})")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bench_retrieval(Path(tmp) / "retrieval")
        bench_append(Path(tmp) / "append")


if __name__ == "__main__":
    main()
