"""`breakwater memory add|search|show|consolidate` (SPEC §11)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from breakwater.core.log.visible import json_safe, visible
from breakwater.core.policy import Policy

_POLICY = Policy()



def line_count(n: int) -> str:
    return f"{n} line{'' if n == 1 else 's'}"

def register(sub) -> None:
    parser = sub.add_parser("memory", help="read and write the workspace's session memory",
                            description="Read and write the session memory under WORKSPACE/.agent/.")
    parser.set_defaults(func=lambda args: _usage(parser))
    # --workspace works before or after the action (`memory --workspace W add` or `memory add ... --workspace W`)
    parser.add_argument("--workspace", metavar="DIR", type=Path, default=Path.cwd(),
                        help="the agent's workspace (default: the current directory)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workspace", metavar="DIR", type=Path, default=argparse.SUPPRESS,
                        help="the agent's workspace (default: the current directory)")
    actions = parser.add_subparsers(dest="memory_command", metavar="ACTION")

    add = actions.add_parser("add", parents=[common], help="append an entry (bounded append)")
    add.add_argument("text", metavar="TEXT", help="the bullets, e.g. '[DECISION] use BM25'; one per line")
    add.add_argument("--turn", type=int, default=0, help="the turn the entry is about (default 0)")
    add.set_defaults(func=_add)

    search = actions.add_parser("search", parents=[common], help="BM25 search over the memory entries")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("-k", type=int, default=_POLICY.retrieval_top_k, help="how many hits (default 5)")
    search.add_argument("--json", action="store_true", help="print one JSON object")
    search.set_defaults(func=_search)

    show = actions.add_parser("show", parents=[common], help="print MEMORY.md and list the other memory files")
    show.set_defaults(func=_show)

    consolidate = actions.add_parser("consolidate", parents=[common],
                                     help="merge fragments into MEMORY.md when due (or --force)")
    consolidate.add_argument("--force", action="store_true", help="ignore the fragment count and the cool-down")
    consolidate.set_defaults(func=_consolidate)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    print("breakwater memory: choose an action: add, search, show or consolidate", file=sys.stderr)
    return 2


def _guarded(run):
    """Expected failures (a locked store, an unreadable file, empty input) end in one line."""
    def wrapper(args) -> int:
        from breakwater.memory.store import MemoryLockTimeout

        try:
            return run(args)
        except (OSError, ValueError, MemoryLockTimeout) as exc:
            print(f"breakwater memory {args.memory_command}: {exc}", file=sys.stderr)
            return 1
    return wrapper


def _store(args):
    from breakwater.memory.store import MemoryStore

    if not args.workspace.is_dir():
        raise OSError(f"workspace {args.workspace} is not a directory")
    return MemoryStore(args.workspace, max_lines=_POLICY.memory_max_lines)


@_guarded
def _add(args) -> int:
    lines = [ln.strip() for ln in args.text.splitlines() if ln.strip()]
    bullets = "\n".join(ln if ln.startswith("- ") else f"- {ln}" for ln in lines)
    from breakwater.memory.ledger import USER

    result = _store(args).append(bullets, args.turn, writer=USER)
    for aside in result.set_aside:
        print(f"breakwater: warning: {visible(str(aside))}", file=sys.stderr)
    if result.overflow:
        print(f"MEMORY.md is full ({line_count(result.memory_lines)}): entry written to {result.path.name}, "
              f"pointer added")
    else:
        print(f"entry appended to MEMORY.md ({line_count(result.memory_lines)})")
    return 0


@_guarded
def _search(args) -> int:
    from breakwater.memory.ledger import describe
    from breakwater.memory.retrieval import MemoryIndex

    hits = MemoryIndex(_store(args)).search(args.query, max(1, args.k))
    if args.json:
        print(json_safe(json.dumps({"query": args.query,
                          "hits": [{"score": round(h.score, 4), "source": h.source, "writer": h.writer,
                                    "text": h.text} for h in hits]},
                         ensure_ascii=False)))
        return 0
    if not hits:
        print("no matching memory")
    for n, hit in enumerate(hits, 1):
        print(f"#{n}  score {hit.score:.3f}  {visible(hit.source)}  written by {describe(hit.writer)}")
        for line in visible(hit.text).splitlines():
            print(f"    {line}")
    return 0


@_guarded
def _show(args) -> int:
    from breakwater.core.log.words import plural
    from breakwater.memory.ledger import OTHER, describe
    from breakwater.memory.project import project_memory_path, read_sessions

    store = _store(args)
    text = store.read_memory()
    print(f"== {store.memory_path}")
    print(visible(text.rstrip("\n")) if text else "(empty)")
    fragments = store.fragment_paths()
    print(f"== fragments: {len(fragments)}")
    for path in fragments:
        print(f"  {visible(path.name)}")
    snap = store.snapshot()
    print(f"== who wrote the {plural(len(snap.entries), 'entry', 'entries')}")
    for entry in snap.entries:
        what = entry.header or f"(no header) {entry.lines[0]}"
        print(f"  {visible(what)[:80]}  {visible(entry.source)}: {describe(snap.writer_of(entry))}")
    sessions = read_sessions(args.workspace)
    others = sum(1 for s in sessions if s.writer == OTHER)
    print(f"== {project_memory_path(args.workspace)}: {len(sessions)} session entries"
          + (f" ({others} not written by Breakwater: a tool, the model or an edit by hand)" if others else ""))
    return 0


@_guarded
def _consolidate(args) -> int:
    from breakwater.memory.consolidate import consolidate

    report = consolidate(_store(args), force=args.force, threshold=_POLICY.memory_fragments_threshold,
                         cooldown_days=_POLICY.memory_gc_cooldown_days)
    print(report.describe())
    return 0
