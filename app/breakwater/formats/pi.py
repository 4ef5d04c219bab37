"""pi coding-agent sessions (`~/.pi/agent/sessions/--<cwd>--/<ts>_<uuid>.jsonl`), v1 to v3.

v1 is a flat list of entries (a compaction names its first kept entry by
index); v2 and v3 are a tree (`id`/`parentId`) whose active context is the
path from the last entry back to the root, and a compaction names its first
kept entry by id. Branches off that path are sessions of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

from breakwater.core.log.json_lines import iter_json_lines
from breakwater.core.log.session_log import LoadIssue, SessionLog
from breakwater.formats.builder import SessionBuilder, blocks_text, positive_sum, ref

FORMAT = "pi"
METADATA_TYPES = frozenset(("model_change", "thinking_level_change", "label", "session_info", "custom"))


def prompt_tokens(usage: Any) -> int | None:
    """A request's prompt as pi's usage counts it: fresh input + cache reads + cache writes.
    The reader and the session list (formats/sessions.py) both take it from here: one figure on both screens (37.10)."""
    return positive_sum(usage, ("input", "cacheRead", "cacheWrite"))


class _Path:
    """Feeds one root-to-leaf path of entries to a builder."""

    def __init__(self, path: Path, session_id: str, header: dict[str, Any], index: Mapping[int, int]):
        self.b = SessionBuilder(path, FORMAT, session_id, header)
        self.index = index              # v1: entry index in the file -> its position on this path
        self.nodes: dict[int, Any] = {}   # position on the path -> first message node made from it
        self.unknown_blocks: set[str | None] = set()

    def feed(self, pos: int, line: int, e: Mapping[str, Any], id_pos: Mapping[str, int]) -> None:
        kind = ref(e.get("type"))
        if kind == "message":
            self._message(pos, line, e)
        elif kind == "compaction":
            self._compaction(pos, line, e, id_pos)
        elif kind == "branch_summary":
            self.nodes.setdefault(pos, self.b.user(str(e.get("summary") or ""), line,
                                                   {"ts": e.get("timestamp"), "kind": "branch_summary"}))
        elif kind == "custom_message":
            counts: dict[str, int] = {}
            self.nodes.setdefault(pos, self.b.user(blocks_text(e.get("content"), counts), line,
                                                   {"ts": e.get("timestamp"), "kind": "custom_message", **counts}))
        elif kind == "model_change" and isinstance(e.get("modelId"), str):
            self.b.header["model"] = e["modelId"]
            self.b.skip(kind, line)
        elif isinstance(kind, str):
            self.b.skip(kind, line, known=kind in METADATA_TYPES)
        else:
            self.b.warn(line, "entry has no \"type\", skipped")

    def _message(self, pos: int, line: int, e: Mapping[str, Any]) -> None:
        m = e.get("message")
        if not isinstance(m, dict):
            self.b.warn(line, "message entry without a message, skipped")
            return
        role = ref(m.get("role"))
        ts = e.get("timestamp")
        counts: dict[str, int] = {}
        if role == "assistant":
            turn = self.b.assistant(line, meta={"ts": ts, "model": m.get("model"), "stop_reason": m.get("stopReason"),
                                                "error": m.get("errorMessage")})
            self.nodes.setdefault(pos, turn.node)
            for block in m.get("content") if isinstance(m.get("content"), list) else ():
                if isinstance(block, dict) and not turn.add_block(block, line, "toolCall", "arguments"):
                    self._unknown_block(line, ref(block.get("type")))
            usage = m.get("usage") if isinstance(m.get("usage"), dict) else {}
            ints = {k: v for k, v in usage.items() if isinstance(v, int)}
            prompt = prompt_tokens(usage)
            extra = {"cached_tokens": ints["cacheRead"]} if ints.get("cacheRead") else {}
            if ints.get("cacheWrite"):   # the cache model is checked against it (core/cache.py)
                extra["cache_write_tokens"] = ints["cacheWrite"]
            turn.set_usage(prompt, ints.get("output"), line, **extra)
        elif role == "toolResult":
            meta = {"ts": ts, "is_error": True if m.get("isError") else None}
            text = blocks_text(m.get("content"), meta)
            self.b.tool_result(m.get("toolCallId"), text, line, meta, name=m.get("toolName"))
        elif role == "bashExecution":   # the user ran `!cmd`; pi shows it to the model unless excluded
            if m.get("excludeFromContext"):
                self.b.skip("message/bashExecution-excluded", line)
                return
            text = f"$ {m.get('command') or ''}\n{m.get('output') or ''}"
            self.nodes.setdefault(pos, self.b.user(text, line, {"ts": ts, "kind": "bash_execution",
                                                                "exit_code": m.get("exitCode")}))
        elif role in ("user", "custom", "branchSummary", "compactionSummary", "hookMessage"):
            text = blocks_text(m.get("content") if "content" in m else m.get("summary"), counts)
            meta = {"ts": ts, **counts, **({"kind": role} if role != "user" else {})}
            self.nodes.setdefault(pos, self.b.user(text, line, meta))
        else:
            self.b.skip(f"message/{role}", line, known=False)

    def _unknown_block(self, line: int, kind: str | None) -> None:
        if kind not in self.unknown_blocks:
            self.unknown_blocks.add(kind)
            self.b.warn(line, f"content block of unknown type {kind!r} skipped")

    def _compaction(self, pos: int, line: int, e: Mapping[str, Any], id_pos: Mapping[str, int]) -> None:
        first: int | None = None
        if e.get("firstKeptEntryId") is not None:
            first = id_pos.get(ref(e["firstKeptEntryId"]))
        elif isinstance(e.get("firstKeptEntryIndex"), int):
            first = self.index.get(e["firstKeptEntryIndex"])
        if first is None and ("firstKeptEntryId" in e or "firstKeptEntryIndex" in e):
            self.b.warn(line, "compaction names a first kept entry this path does not hold; all before it is replaced")
        cut = None
        if first is not None:
            cut = next((self.nodes[p] for p in sorted(self.nodes) if first <= p < pos), None)
        data: dict[str, Any] = {"original_trigger": "hook" if e.get("fromHook") else "auto"}
        if isinstance(e.get("tokensBefore"), int):
            data["tokens_before"] = e["tokensBefore"]
        self.b.compaction(str(e.get("summary") or ""), line, cut=cut, **data)


def _paths(entries: list[tuple[int, Mapping[str, Any]]]) -> list[list[int]]:
    """Positions (into `entries`) of each root-to-leaf path; the active one (ending at the last
    entry) first. Entries without ids (v1) form one linear path."""
    if not any(isinstance(e.get("id"), str) for _, e in entries):
        return [list(range(len(entries)))]
    pos_of = {ref(e.get("id")): i for i, (_, e) in enumerate(entries) if ref(e.get("id"))}
    parent: dict[int, int | None] = {}
    has_child: set[int] = set()
    for i, (_, e) in enumerate(entries):
        p = pos_of.get(ref(e.get("parentId")))
        parent[i] = p if p is not None and p != i else None
        if parent[i] is not None:
            has_child.add(parent[i])
    leaves = [i for i in range(len(entries)) if i not in has_child]
    leaves.sort(key=lambda i: i != len(entries) - 1)
    out = []
    for leaf in leaves:
        chain, seen, cur = [], set(), leaf
        while cur is not None and cur not in seen:
            seen.add(cur)
            chain.append(cur)
            cur = parent[cur]
        out.append(chain[::-1])
    return out


def load_pi(path: Path) -> list[SessionLog]:
    path = Path(path)
    return _load_one_path(path) or _load_tree(path)


def _objects(path: Path, issues: list[LoadIssue]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's JSON objects with their line numbers; what is not one goes to `issues`."""
    for lineno, obj, problem in iter_json_lines(path):
        if problem:
            issues.append(LoadIssue(str(path), lineno, problem))
        if isinstance(obj, dict):
            yield lineno, obj
        elif obj is not None:
            issues.append(LoadIssue(str(path), lineno, f"expected a JSON object, got {type(obj).__name__}"))


def _header(path: Path, header_obj: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    base_id = str(header_obj.get("id") or path.stem)
    header: dict[str, Any] = {"source": str(path), "pi_version": header_obj.get("version", 1)}
    for src, dst in (("cwd", "cwd"), ("timestamp", "created"), ("modelId", "model"), ("provider", "provider")):
        if isinstance(header_obj.get(src), str):
            header[dst] = header_obj[src]
    return base_id, header


def _load_one_path(path: Path) -> list[SessionLog] | None:
    """The session of a file that is one path (every entry the child of the one before, or v1's flat
    list), fed to the builder as each line is read: what the tree's walk gives, without holding every
    decoded entry until the tree is known (a 67 MB session peaked at 295 MB, 2.6× native JSONL).
    None as soon as the file is not one path, or a compaction names an entry not read yet: the
    tree's walk then reads the file again."""
    header_obj: Mapping[str, Any] = {}
    issues: list[LoadIssue] = []
    walker: _Path | None = None
    index: dict[int, int] = {}     # v1 index of each entry -> its position (the walker's, filled as read)
    id_pos: dict[str, int] = {}
    tree = False
    last_id: str | None = None
    n = j = 0
    for lineno, obj in _objects(path, issues):
        if obj.get("type") == "session" and not header_obj:
            if walker is not None:
                return None   # a header after entries: the tree's walk makes it the header of them all
            header_obj = obj
            n += 1
            continue
        eid = obj.get("id")
        if walker is None:
            tree = isinstance(eid, str)
            base_id, header = _header(path, header_obj)
            walker = _Path(path, base_id, dict(header), index)
        if tree:
            parent = ref(obj.get("parentId"))
            if not isinstance(eid, str) or not eid or eid in id_pos \
                    or (parent != last_id if j else parent is not None and parent != eid):
                return None
            id_pos[eid], last_id = j, eid
        elif isinstance(eid, str):
            return None
        if obj.get("type") == "compaction":
            first_id, first_index = obj.get("firstKeptEntryId"), obj.get("firstKeptEntryIndex")
            if (first_id is not None and ref(first_id) not in id_pos) or (first_id is None and isinstance(
                    first_index, int) and first_index >= n):
                return None
        index[n] = j
        walker.feed(j, lineno, obj, id_pos)
        n += 1
        j += 1
    if walker is None:
        base_id, header = _header(path, header_obj)
        walker = _Path(path, base_id, dict(header), index)
    builder = walker.b
    del walker, index, id_pos   # what found the nodes goes before they are built
    log = builder.build()
    log.issues[:0] = issues
    return [log]


def _load_tree(path: Path) -> list[SessionLog]:
    header_obj: Mapping[str, Any] = {}
    entries: list[tuple[int, Mapping[str, Any]]] = []
    file_index: list[int] = []      # v1 index of each entry (the header is index 0)
    issues: list[LoadIssue] = []
    n = 0
    for lineno, obj in _objects(path, issues):
        if obj.get("type") == "session" and not header_obj:
            header_obj = obj
            n += 1
            continue
        entries.append((lineno, obj))
        file_index.append(n)
        n += 1
    base_id, header = _header(path, header_obj)
    logs = []
    for k, chain in enumerate(_paths(entries)):
        on_path = {file_index[p]: j for j, p in enumerate(chain)}
        sid = base_id if k == 0 else f"{base_id}/branch-{entries[chain[-1]][1].get('id')}"
        walker = _Path(path, sid, dict(header, **({"branch_of": base_id} if k else {})), on_path)
        id_pos = {ref(entries[p][1].get("id")): j for j, p in enumerate(chain) if ref(entries[p][1].get("id"))}
        for j, p in enumerate(chain):
            lineno, e = entries[p]
            walker.feed(j, lineno, e, id_pos)
        builder = walker.b
        del walker, id_pos   # as in `_load_one_path`
        logs.append(builder.build())
    if not logs:
        logs.append(SessionBuilder(path, FORMAT, base_id, header).build())
    logs[0].issues[:0] = issues
    return logs
