#!/usr/bin/env python3
"""Write the bundled sample sessions (native JSONL) into sample_sessions/.

Deterministic: every session draws from its own seeded `random.Random`, timestamps come
from a fixed start plus seeded gaps, and nothing reads the clock, the network or the
environment, so two runs give byte-identical files. Stdlib only.

    python scripts/make_samples.py [--out DIR] [--only NAME ...]

Each session shows one mechanism of the pipeline plainly (SPEC §12):

  npm-install-flood.jsonl  a tool result cut at the source (head 80 + tail 320 lines, spill
                           notice, meta.source) plus one big uncut result for snip
  nginx-error-log.jsonl    a 20,000-line error log read in one call (no tier 1)
  long-refactor.jsonl      ~460 messages; the raw history passes the hard limit of a 32k
                           window many times over, so the view is snipped, masked and
                           deep-compacted again and again
  sanitizer-mess.jsonl     legacy placeholders, orphan calls and results, same-role runs and
                           friendly-error replies (seed 003 §4)
  mixed-zh-en.jsonl        Chinese and English, CJK-heavy tool output, a 16k window

The `usage` event after each assistant message carries what a compacting agent would have
been billed (`prompt_tokens`, ~3.6 ASCII chars a token) and the heuristic `estimate` of the
same request, so calibration has real pairs. While the history fits that request is the
history so far; once it would not, it is a crudely compacted view (`ViewSim`): a recorded
`prompt_tokens` above the window would be a request no API accepts.

read_file results are shaped as Breakwater's tool shapes them (a `[path: lines a-b of N]`
header, at most 400 lines, a pointer to the next slice), except in nginx-error-log, which
records an agent without tier 1. bash results end with `[exit code: N]`.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import textwrap
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "sample_sessions"

SYSTEM_PROMPT = """You are a coding agent working inside the user's repository at {workspace}.

Tools:
- bash(command): run a shell command in the workspace. Output is streamed through a rolling buffer: \
long output keeps its first and last lines, and the full stream is saved under .agent/spill/.
- read_file(path, start_line?, end_line?): read a file, or a range of lines of it. Use ranges for \
big files and for spill files.
- write_file(path, content): create or overwrite a file with the full new content.

Rules:
- Read before you write. Keep changes minimal and explain why.
- Never run destructive commands (rm -rf, git push --force, DROP TABLE) without asking.
- Prefer running the project's own test and lint commands to check your work.
- When a tool result was truncated, read the spill file in ranges instead of re-running the command."""


# -- token arithmetic ------------------------------------------------------------------------
def api_tokens(text: str) -> float:
    """Roughly what a BPE tokenizer bills: ~3.6 ASCII chars a token, CJK ~0.75 token a char."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars / 3.6 + (len(text) - ascii_chars) * 0.75


def limits(window: int) -> tuple[int, int]:
    """(soft, hard) exactly as SPEC §4 defines them."""
    soft = int(0.70 * window)
    buffer = 13_000 if soft < window - 13_000 else int(0.15 * window)
    return soft, window - buffer


def heuristic(text: str) -> int:
    """SPEC §2: ascii // 4 + non-ascii // 2 + 1 per text."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars // 4 + (len(text) - ascii_chars) // 2 + 1


@dataclass
class _Row:
    role: str
    chars: int
    tokens: float      # what the provider bills for the content
    estimate: float    # our heuristic for the content
    call_tokens: float = 0.0
    call_estimate: float = 0.0

    def scaled(self, tokens: float, estimate: float) -> "_Row":
        return _Row(self.role, self.chars, tokens, estimate, self.call_tokens, self.call_estimate)


class ViewSim:
    """A crude stand-in for a compacting agent, used only to make `usage` figures plausible.

    Snip, then mask, then a deep summary that keeps a quarter of the window; the cut of a deep
    summary is kept for later requests, as a real agent would persist it. Each request is
    measured twice: as billed (`prompt_tokens`) and by the heuristic (`estimate`).
    """

    TOOL_SCHEMAS = 420.0  # the three tool definitions
    SUMMARY = _Row("user", 3600, 900.0, 900.0)

    def __init__(self, window: int) -> None:
        self.window = window
        self.soft, self.hard = limits(window)
        self.items: list[_Row] = []
        self.cut = 0

    def add(self, role: str, content: str, calls: list[tuple[str, str]]) -> None:
        self.items.append(_Row(role, len(content), api_tokens(content), heuristic(content) + 4,
                               sum(api_tokens(n + a) + 8 for n, a in calls),
                               sum(heuristic(n + a) + 10 for n, a in calls)))

    def _view(self) -> list[_Row]:
        if not self.cut:
            return list(self.items)
        head = self.items[:1]
        first_user = next((r for r in self.items[1:self.cut] if r.role == "user"), None)
        if first_user:
            head.append(first_user)
        return head + [self.SUMMARY] + self.items[self.cut:]

    @staticmethod
    def _billed(rows: list[_Row]) -> float:
        return ViewSim.TOOL_SCHEMAS + sum(r.tokens + r.call_tokens + 4 for r in rows)

    @staticmethod
    def _estimated(rows: list[_Row]) -> float:
        return sum(r.estimate + r.call_estimate for r in rows)

    def request(self) -> tuple[int, int]:
        """(tokens billed, heuristic estimate) of the next request."""
        rows = self._view()
        for _ in range(3):
            if self._billed(rows) <= self.soft:
                break
            # snip: big tool results keep 2,500 chars
            rows = [r.scaled(r.tokens * 2560 / r.chars, r.estimate * 2560 / r.chars)
                    if r.role == "tool" and r.chars > 3000 else r for r in rows]
            if self._billed(rows) <= self.soft:
                break
            # mask: far tool results become a one-line marker, far assistant prose is folded
            far = len(rows) - 6
            rows = [r.scaled(18.0, 22.0) if i < far and r.role == "tool" and r.chars > 200 else
                    r.scaled(40.0, 45.0) if i < far and r.role == "assistant" and r.chars > 200 else r
                    for i, r in enumerate(rows)]
            if self._billed(rows) <= self.hard:
                break
            self._deep_compact()
            rows = self._view()
        return int(self._billed(rows)), int(self._estimated(rows))

    def _deep_compact(self) -> None:
        keep, cut = 0.0, len(self.items)
        while cut > self.cut + 1:
            it = self.items[cut - 1]
            if keep + it.tokens + it.call_tokens > 0.25 * self.window:
                break
            keep += it.tokens + it.call_tokens
            cut -= 1
        while cut < len(self.items) and self.items[cut].role == "tool":
            cut += 1
        self.cut = max(cut, self.cut + 1)


# -- the recorder ----------------------------------------------------------------------------
class Recorder:
    """Builds one session: ids, turns, timestamps and usage events are kept consistent here."""

    def __init__(self, *, seed: int, title: str, created: str, model: str, window: int,
                 workspace: str, tier1: bool = True, existing: Iterable[str] = ()) -> None:
        self.rng = random.Random(seed)
        self.sid = f"{self.rng.getrandbits(128):032x}"
        self.header = {"type": "session", "version": 1, "id": self.sid, "created": created,
                       "model": model, "window": window, "title": title, "workspace": workspace}
        self.workspace = workspace
        self.tier1 = tier1  # read_file pages files (header + at most 400 lines) as Breakwater's tool does
        self.files = set(existing)  # paths known to exist, for "Created" vs "Replaced"
        self.records: list[dict[str, Any]] = []
        self.clock = datetime.fromisoformat(created)
        self.n_msg = self.n_evt = self.n_asst = 0
        self.sim = ViewSim(window)
        self._call_ids: set[str] = set()
        self._note = ""
        self.calibration = self.rng.uniform(0.96, 1.04)  # this provider's tokenizer vs. our estimate

    # time
    def _tick(self, lo: float, hi: float) -> str:
        self.clock += timedelta(milliseconds=int(self.rng.uniform(lo, hi) * 1000))
        return self.clock.isoformat(timespec="seconds")

    def call_id(self) -> str:
        alphabet = string.ascii_letters + string.digits
        while True:
            cid = "call_" + "".join(self.rng.choice(alphabet) for _ in range(24))
            if cid not in self._call_ids:
                self._call_ids.add(cid)
                return cid

    def _message(self, role: str, content: str, turn: int, meta: dict[str, Any], *,
                 tool_calls: list[dict[str, Any]] | None = None, tool_call_id: str | None = None,
                 has_call_id: bool = True) -> dict[str, Any]:
        rec: dict[str, Any] = {"type": "message", "id": f"m{self.n_msg:05d}", "turn": turn, "role": role,
                               "content": content}
        if tool_calls:
            rec["tool_calls"] = tool_calls
        if role == "tool" and has_call_id:
            rec["tool_call_id"] = tool_call_id
        rec["meta"] = meta
        self.n_msg += 1
        self.records.append(rec)
        self.sim.add(role, content, [(c["function"]["name"], c["function"]["arguments"]) for c in tool_calls or ()])
        return rec

    def event(self, kind: str, **data: Any) -> None:
        rec = {"type": kind, "id": f"e{self.n_evt:05d}"}
        rec.update(data)
        self.n_evt += 1
        self.records.append(rec)

    def system(self, content: str | None = None) -> None:
        text = content if content is not None else SYSTEM_PROMPT.format(workspace=self.workspace)
        self._message("system", text, 0, {"ts": self.clock.isoformat(timespec="seconds")})

    def user(self, content: str, gap: tuple[float, float] = (20, 180)) -> None:
        self._message("user", content, self.n_asst + 1, {"ts": self._tick(*gap)})

    def note(self, text: str) -> None:
        """Prose the agent says before its next action, in the same assistant message."""
        self._note = text

    def assistant(self, content: str = "", calls: Iterable[tuple[str, dict[str, Any]]] = (), *,
                  think: tuple[float, float] = (2, 14), usage: bool = True,
                  meta: dict[str, Any] | None = None) -> list[str]:
        if self._note:
            content = self._note + ("\n\n" + content if content else "")
            self._note = ""
        prompt, estimate = self.sim.request()
        ids, tool_calls = [], []
        for name, args in calls:
            cid = self.call_id()
            ids.append(cid)
            tool_calls.append({"id": cid, "type": "function",
                               "function": {"name": name,
                                            "arguments": json.dumps(args, ensure_ascii=False,
                                                                    separators=(",", ":"))}})
        self.n_asst += 1
        turn = self.n_asst
        m = {"ts": self._tick(*think), "finish_reason": "tool_calls" if tool_calls else "stop"}
        m.update(meta or {})
        self._message("assistant", content, turn, m, tool_calls=tool_calls)
        if usage:
            produced = api_tokens(content) + sum(api_tokens(c["function"]["arguments"]) + 8
                                                 for c in tool_calls)
            self.event("usage", turn=turn, prompt_tokens=int(prompt * self.calibration),
                       completion_tokens=max(1, int(produced * self.calibration) + 3), estimate=estimate)
        return ids

    def tool(self, call_id: str | None, content: str, *, source: dict[str, Any] | None = None,
             took: tuple[float, float] = (0.2, 3.0), exit_code: int | None = None) -> None:
        m: dict[str, Any] = {"ts": self._tick(*took)}
        if exit_code is not None:
            m["exit_code"] = exit_code
        if source is not None:
            m["source"] = source
        self._message("tool", content, self.n_asst + 1, m, tool_call_id=call_id,
                      has_call_id=call_id is not None)

    def write_result(self, path: str, content: str) -> str:
        """What write_file reports, as Breakwater's tool words it."""
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        verb = "Replaced" if path in self.files else "Created"
        self.files.add(path)
        return f"{verb} {path}: {len(content.encode('utf-8'))} bytes, {lines} lines."

    def shown(self, name: str, args: dict[str, Any], result: str) -> str:
        """A read_file result is given as the whole file; the tool shows the slice asked for."""
        if name == "write_file":
            return self.write_result(args["path"], args["content"])
        if name == "read_file":
            self.files.add(args["path"])
            if self.tier1:
                return read_file_result(args["path"], result, args.get("start_line"), args.get("end_line"))
        return result

    def call(self, content: str, name: str, args: dict[str, Any], result: str, **kw: Any) -> None:
        """One assistant message with one tool call, answered at once."""
        (cid,) = self.assistant(content, [(name, args)], think=kw.pop("think", (2, 14)))
        self.tool(cid, self.shown(name, args, result), **kw)

    def parallel(self, content: str, calls: list[tuple[str, dict[str, Any], str]],
                 took: tuple[float, float] = (0.2, 3.0)) -> None:
        ids = self.assistant(content, [(n, a) for n, a, _ in calls])
        for cid, (name, args, result) in zip(ids, calls):
            self.tool(cid, self.shown(name, args, result), took=took)

    def dumps(self) -> str:
        lines = [json.dumps(self.header, ensure_ascii=False)]
        lines += [json.dumps(r, ensure_ascii=False) for r in self.records]
        return "\n".join(lines) + "\n"


# -- tool result shapes shared by the sessions -----------------------------------------------
def bash_result(output: str, exit_code: int = 0) -> str:
    """What the bash tool returns for output that fit: the output, then the exit code."""
    output = output.rstrip("\n")
    return f"{output or '(no output)'}\n\n[exit code: {exit_code}]"


READ_MAX_LINES = 400


def read_file_result(path: str, text: str, start: int | None = None, end: int | None = None) -> str:
    """What read_file(path, start_line, end_line) returns: a header, the lines (at most 400),
    and, when lines remain, how to read the next slice."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    first = start or 1
    last = min(total, first + READ_MAX_LINES - 1 if end is None else min(end, first + READ_MAX_LINES - 1))
    out = [f"[{path}: lines {first}-{last} of {total}]", *lines[first - 1:last]]
    if last < total:
        cap = f"capped at {READ_MAX_LINES} lines per call; " if end is not None and end > last else ""
        out.append(f"[{cap}{total - last} more lines after line {last}; next: "
                   f'read_file(path="{path}", start_line={last + 1}, end_line={min(total, last + READ_MAX_LINES)})]')
    return "\n".join(out)


def edit(text: str, *changes: tuple[str, str]) -> str:
    """Apply replacements that must each match: a silent no-op would make a sample lie."""
    for old, new in changes:
        if old not in text:
            raise ValueError(f"edit target not found: {old[:70]!r}")
        text = text.replace(old, new)
    return text


# A write_file result is filled in by the recorder, which knows whether the file existed.
WROTE = "<write_file result>"


def cut_at_source(lines: list[str], *, session_id: str, call_id: str, exit_code: int, duration_s: float,
                  max_lines: int = 400) -> tuple[str, dict[str, Any]]:
    """The tier-1 rolling buffer and spill notice (SPEC §3): head = max(max_lines // 5, 50) lines,
    tail = the rest, the full stream teed to .agent/spill/<session>/<call>.log."""
    head_n = min(max(max_lines // 5, 50), max_lines)
    tail_n = max_lines - head_n
    dropped = len(lines) - max_lines
    spill = f".agent/spill/{session_id}/{call_id}.log"
    total_bytes = sum(len(s.encode("utf-8")) + 1 for s in lines)
    first_dropped = head_n + 1
    notice = (f"[Full output ({len(lines)} lines, {total_bytes} bytes) saved to {spill}; {dropped} lines were "
              f"truncated above (lines {first_dropped}-{first_dropped + dropped - 1}). Read any range of it with "
              f'read_file(path="{spill}", start_line={first_dropped}, end_line={first_dropped + READ_MAX_LINES - 1}) '
              f"— up to {READ_MAX_LINES} lines per call.]")
    text = ("\n".join(lines[:head_n]) + f"\n\n... [{dropped} lines truncated for context efficiency] ...\n\n"
            + "\n".join(lines[-tail_n:]) + f"\n\n[exit code: {exit_code}]\n" + notice)
    source = {"tool": "bash", "exit_code": exit_code, "timed_out": False, "total_lines": len(lines),
              "dropped_lines": dropped, "cut_lines": 0, "total_bytes": total_bytes, "truncated_at_source": True,
              "spill": spill, "duration_s": round(duration_s, 3)}
    return text, source


def pick(rng: random.Random, seq):
    return seq[rng.randrange(len(seq))]


# ==========================================================================================
# 1. npm-install-flood
# ==========================================================================================
NPM_TOP = """\
@babel/core@7.24.0 @babel/code-frame@7.23.5 @babel/generator@7.23.6 @babel/parser@7.24.0
@babel/traverse@7.24.0 @babel/types@7.24.0 @babel/template@7.24.0 @babel/helpers@7.24.0
@babel/helper-compilation-targets@7.23.6 @babel/helper-module-transforms@7.23.3
@babel/helper-plugin-utils@7.24.0 @babel/helper-validator-identifier@7.22.20
@babel/helper-string-parser@7.23.4 @babel/highlight@7.23.4 @babel/runtime@7.24.0
@babel/preset-env@7.24.0 @babel/preset-react@7.23.3 @babel/preset-typescript@7.23.3
@babel/plugin-transform-runtime@7.24.0 @babel/plugin-transform-react-jsx@7.23.4
@babel/plugin-transform-typescript@7.23.6 @babel/plugin-transform-classes@7.23.8
@babel/plugin-transform-destructuring@7.23.3 @babel/plugin-transform-spread@7.23.3
@babel/plugin-transform-async-to-generator@7.23.3 @babel/plugin-transform-modules-commonjs@7.23.3
@babel/plugin-syntax-jsx@7.23.3 @babel/plugin-syntax-typescript@7.23.3 @babel/compat-data@7.23.5
@babel/plugin-proposal-private-property-in-object@7.21.11 @babel/plugin-proposal-class-properties@7.18.6
@babel/plugin-proposal-nullish-coalescing-operator@7.18.6 @babel/plugin-proposal-optional-chaining@7.21.0
@babel/plugin-proposal-numeric-separator@7.18.6 @babel/plugin-proposal-private-methods@7.18.6
@babel/plugin-proposal-decorators@7.24.0 @babel/eslint-parser@7.23.10
@emotion/react@11.11.4 @emotion/styled@11.11.0 @emotion/cache@11.11.0 @emotion/serialize@1.1.3
@emotion/utils@1.2.1 @emotion/hash@0.9.1 @emotion/memoize@0.8.1 @emotion/is-prop-valid@1.2.2
@mui/material@5.15.12 @mui/system@5.15.12 @mui/base@5.0.0-beta.38 @mui/utils@5.15.12
@mui/icons-material@5.15.12 @mui/private-theming@5.15.12 @mui/styled-engine@5.15.11
@popperjs/core@2.11.8 @reduxjs/toolkit@1.9.7 @remix-run/router@1.15.3
@testing-library/react@12.1.5 @testing-library/jest-dom@5.17.0 @testing-library/user-event@14.5.2
@testing-library/dom@8.20.1 @types/react@17.0.76 @types/react-dom@17.0.25 @types/node@18.19.22
@types/jest@29.5.12 @types/prop-types@15.7.11 @types/scheduler@0.16.8 @types/lodash@4.14.202
@types/express@4.17.21 @types/express-serve-static-core@4.17.43 @types/babel__core@7.20.5
@types/estree@1.0.5 @types/json-schema@7.0.15 @types/istanbul-lib-coverage@2.0.6
@types/yargs@17.0.32 @types/yargs-parser@21.0.3 @types/eslint@8.56.5 @types/ws@8.5.10
@typescript-eslint/eslint-plugin@5.62.0 @typescript-eslint/parser@5.62.0
@typescript-eslint/typescript-estree@5.62.0 @typescript-eslint/utils@5.62.0
@typescript-eslint/scope-manager@5.62.0 @typescript-eslint/types@5.62.0
@typescript-eslint/visitor-keys@5.62.0 @typescript-eslint/type-utils@5.62.0
@jest/core@27.5.1 @jest/environment@27.5.1 @jest/fake-timers@27.5.1 @jest/transform@27.5.1
@jest/types@27.5.1 @jest/reporters@27.5.1 @jest/test-result@27.5.1 @jest/console@27.5.1
@jridgewell/gen-mapping@0.3.5 @jridgewell/trace-mapping@0.3.25 @jridgewell/sourcemap-codec@1.4.15
@jridgewell/resolve-uri@3.1.2 @jridgewell/set-array@1.2.1 @eslint/eslintrc@2.1.4 @eslint/js@8.57.0
@humanwhocodes/config-array@0.11.14 @humanwhocodes/object-schema@2.0.2 @humanwhocodes/module-importer@1.0.1
@nodelib/fs.scandir@2.1.5 @nodelib/fs.stat@2.0.5 @nodelib/fs.walk@1.2.8
@pmmmwh/react-refresh-webpack-plugin@0.5.11 @svgr/webpack@5.5.0 @svgr/core@5.5.0
@svgr/plugin-jsx@5.5.0 @svgr/plugin-svgo@5.5.0 @rollup/plugin-babel@5.3.1 @rollup/plugin-node-resolve@11.2.1
@rollup/plugin-replace@2.4.2 @rollup/pluginutils@3.1.0 @sinclair/typebox@0.24.51
@webassemblyjs/ast@1.11.6 @webassemblyjs/wasm-parser@1.11.6 @webassemblyjs/helper-wasm-bytecode@1.11.6
@webassemblyjs/wasm-edit@1.11.6 @webassemblyjs/leb128@1.11.6 @webassemblyjs/utf8@1.11.6
@xtuc/ieee754@1.2.0 @xtuc/long@4.2.2 @sentry/react@7.105.0 @sentry/browser@7.105.0 @sentry/core@7.105.0
abab@2.0.6 accepts@1.3.8 acorn@8.11.3 acorn-jsx@5.3.2 acorn-walk@7.2.0 address@1.2.2
adjust-sourcemap-loader@4.0.0 agent-base@6.0.2 ajv@8.12.0 ajv-keywords@5.1.0 ansi-escapes@4.3.2
ansi-html-community@0.0.8 ansi-regex@5.0.1 ansi-styles@4.3.0 anymatch@3.1.3 arg@5.0.2 argparse@2.0.1
aria-query@5.3.0 array-includes@3.1.7 array-union@2.1.0 array.prototype.flat@1.3.2 asap@2.0.6
ast-types-flow@0.0.8 async@3.2.5 asynckit@0.4.0 at-least-node@1.0.0 autoprefixer@10.4.18
axe-core@4.7.0 axios@1.6.7 axobject-query@3.2.1 babel-jest@27.5.1 babel-loader@8.3.0
babel-plugin-istanbul@6.1.1 babel-plugin-macros@3.1.0 babel-preset-react-app@10.0.1
balanced-match@1.0.2 batch@0.6.1 bfj@7.1.0 big.js@5.2.2 binary-extensions@2.2.0 bluebird@3.7.2
body-parser@1.20.2 bonjour-service@1.2.1 boolbase@1.0.0 brace-expansion@1.1.11 braces@3.0.2
browserslist@4.23.0 bser@2.1.1 buffer-from@1.1.2 bytes@3.1.2 call-bind@1.0.7 callsites@3.1.0
camel-case@4.1.2 camelcase@6.3.0 caniuse-lite@1.0.30001597 case-sensitive-paths-webpack-plugin@2.4.0
chalk@4.1.2 char-regex@1.0.2 check-types@11.2.3 chokidar@3.6.0 chrome-trace-event@1.0.3
ci-info@3.9.0 cjs-module-lexer@1.2.3 clean-css@5.3.3 cliui@7.0.4 clsx@2.1.0 co@4.6.0
collect-v8-coverage@1.0.2 color-convert@2.0.1 color-name@1.1.4 colord@2.9.3 colorette@2.0.20
combined-stream@1.0.8 commander@8.3.0 common-tags@1.8.2 commondir@1.0.1 compressible@2.0.18
compression@1.7.4 concat-map@0.0.1 confusing-browser-globals@1.0.11 connect-history-api-fallback@2.0.0
content-disposition@0.5.4 content-type@1.0.5 convert-source-map@1.9.0 cookie@0.5.0
cookie-signature@1.0.6 core-js@3.36.0 core-js-compat@3.36.0 core-js-pure@3.36.0
core-util-is@1.0.3 cosmiconfig@7.1.0 cross-spawn@7.0.3 crypto-random-string@2.0.0
css-blank-pseudo@3.0.3 css-declaration-sorter@6.4.1 css-loader@6.10.0 css-minimizer-webpack-plugin@3.4.1
css-select@4.3.0 css-tree@1.1.3 css-what@6.1.0 cssdb@7.11.1 cssesc@3.0.0 cssnano@5.1.15
csso@4.2.0 cssom@0.4.4 cssstyle@2.3.0 csstype@3.1.3 damerau-levenshtein@1.0.8 data-urls@2.0.0
date-fns@2.30.0 debug@4.3.4 decimal.js@10.4.3 dedent@0.7.0 deep-is@0.1.4 deepmerge@4.3.1
default-gateway@6.0.3 define-lazy-prop@2.0.0 delayed-stream@1.0.0 depd@2.0.0 destroy@1.2.0
detect-newline@3.1.0 detect-node@2.1.0 detect-port-alt@1.1.6 didyoumean@1.2.2 diff-sequences@27.5.1
dir-glob@3.0.1 dlv@1.1.3 dns-packet@5.6.1 doctrine@3.0.0 dom-accessibility-api@0.5.16
dom-converter@0.2.0 dom-helpers@5.2.1 dom-serializer@1.4.1 domelementtype@2.3.0 domexception@2.0.1
domhandler@4.3.1 domutils@2.8.0 dot-case@3.0.4 dotenv@10.0.0 dotenv-expand@5.1.0 duplexer@0.1.2
ee-first@1.1.1 ejs@3.1.9 electron-to-chromium@1.4.699 emittery@0.8.1 emoji-regex@9.2.2
emojis-list@3.0.0 encodeurl@1.0.2 enhanced-resolve@5.15.1 entities@2.2.0 error-ex@1.3.2
error-stack-parser@2.1.4 es-abstract@1.22.5 es-module-lexer@1.4.1 escalade@3.1.2 escape-html@1.0.3
escape-string-regexp@4.0.0 escodegen@2.1.0 eslint@8.57.0 eslint-config-react-app@7.0.1
eslint-import-resolver-node@0.3.9 eslint-module-utils@2.8.1 eslint-plugin-flowtype@8.0.3
eslint-plugin-import@2.29.1 eslint-plugin-jest@25.7.0 eslint-plugin-jsx-a11y@6.8.0
eslint-plugin-react@7.34.0 eslint-plugin-react-hooks@4.6.0 eslint-plugin-testing-library@5.11.1
eslint-scope@7.2.2 eslint-visitor-keys@3.4.3 eslint-webpack-plugin@3.2.0 espree@9.6.1 esprima@4.0.1
esquery@1.5.0 esrecurse@4.3.0 estraverse@5.3.0 estree-walker@1.0.1 esutils@2.0.3 etag@1.8.1
eventemitter3@4.0.7 events@3.3.0 execa@5.1.1 exit@0.1.2 expect@27.5.1 express@4.18.3
fast-deep-equal@3.1.3 fast-glob@3.3.2 fast-json-stable-stringify@2.1.0 fast-levenshtein@2.0.6
fastq@1.17.1 faye-websocket@0.11.4 fb-watchman@2.0.2 file-entry-cache@6.0.1 file-loader@6.2.0
filelist@1.0.4 filesize@8.0.7 fill-range@7.0.1 finalhandler@1.2.0 find-cache-dir@3.3.2 find-up@5.0.0
flat-cache@3.2.0 flatted@3.3.1 follow-redirects@1.15.5 for-each@0.3.3 fork-ts-checker-webpack-plugin@6.5.3
form-data@4.0.0 forwarded@0.2.0 fraction.js@4.3.7 fresh@0.5.2 fs-extra@10.1.0 fs-monkey@1.0.5
fs.realpath@1.0.0 function-bind@1.1.2 gensync@1.0.0-beta.2 get-caller-file@2.0.5 get-intrinsic@1.2.4
get-package-type@0.1.0 get-stream@6.0.1 glob@7.2.3 glob-parent@6.0.2 glob-to-regexp@0.4.1
global-modules@2.0.0 global-prefix@3.0.0 globals@13.24.0 globby@11.1.0 gopd@1.0.1 graceful-fs@4.2.11
graphemer@1.4.0 gzip-size@6.0.0 handle-thing@2.0.1 harmony-reflect@1.6.2 has-flag@4.0.0
hasown@2.0.1 he@1.2.0 history@5.3.0 hoist-non-react-statics@3.3.2 hoopy@0.1.4 hpack.js@2.1.6
html-encoding-sniffer@2.0.1 html-entities@2.5.2 html-escaper@2.0.2 html-minifier-terser@6.1.0
html-webpack-plugin@5.6.0 htmlparser2@6.1.0 http-deceiver@1.2.7 http-errors@2.0.0
http-parser-js@0.5.8 http-proxy@1.18.1 http-proxy-agent@4.0.1 http-proxy-middleware@2.0.6
https-proxy-agent@5.0.1 human-signals@2.1.0 iconv-lite@0.6.3 icss-utils@5.1.0 idb@7.1.1
identity-obj-proxy@3.0.0 ignore@5.3.1 immer@9.0.21 import-fresh@3.3.0 import-local@3.1.0
imurmurhash@0.1.4 inflight@1.0.6 inherits@2.0.4 ipaddr.js@2.1.0 is-arrayish@0.2.1
is-binary-path@2.1.0 is-core-module@2.13.1 is-docker@2.2.1 is-extglob@2.1.1
is-fullwidth-code-point@3.0.0 is-generator-fn@2.1.0 is-glob@4.0.3 is-number@7.0.0
is-plain-obj@3.0.0 is-potential-custom-element-name@1.0.1 is-root@2.1.0 is-stream@2.0.1
is-typedarray@1.0.0 is-wsl@2.2.0 isarray@1.0.0 isexe@2.0.0 istanbul-lib-coverage@3.2.2
istanbul-lib-instrument@5.2.1 istanbul-lib-report@3.0.1 istanbul-lib-source-maps@4.0.1
istanbul-reports@3.1.7 jake@10.8.7 jest@27.5.1 jest-circus@27.5.1 jest-cli@27.5.1
jest-config@27.5.1 jest-diff@27.5.1 jest-environment-jsdom@27.5.1 jest-haste-map@27.5.1
jest-jasmine2@27.5.1 jest-matcher-utils@27.5.1 jest-message-util@27.5.1 jest-resolve@27.5.1
jest-runner@27.5.1 jest-runtime@27.5.1 jest-snapshot@27.5.1 jest-util@27.5.1
jest-watch-typeahead@1.1.0 jest-worker@27.5.1 jiti@1.21.0 js-tokens@4.0.0 js-yaml@4.1.0
jsdom@16.7.0 jsesc@2.5.2 json-parse-even-better-errors@2.3.1 json-schema-traverse@1.0.0
json-stable-stringify-without-jsonify@1.0.1 json5@2.2.3 jsonfile@6.1.0 jsonpointer@5.0.1
jsx-ast-utils@3.3.5 kind-of@6.0.3 kleur@3.0.3 klona@2.0.6 language-subtag-registry@0.3.22
launch-editor@2.6.1 leven@3.1.0 levn@0.4.1 lilconfig@2.1.0 lines-and-columns@1.2.4
loader-runner@4.3.0 loader-utils@2.0.4 locate-path@6.0.0 lodash@4.17.21 lodash.debounce@4.0.8
lodash.memoize@4.1.2 lodash.merge@4.6.2 lodash.sortby@4.7.0 lodash.uniq@4.5.0 loose-envify@1.4.0
lower-case@2.0.2 lru-cache@5.1.1 lz-string@1.5.0 magic-string@0.25.9 make-dir@3.1.0 makeerror@1.0.12
mdn-data@2.0.14 media-typer@0.3.0 memfs@3.5.3 merge-descriptors@1.0.1 merge-stream@2.0.0
merge2@1.4.1 methods@1.1.2 micromatch@4.0.5 mime@1.6.0 mime-db@1.52.0 mime-types@2.1.35
mimic-fn@2.1.0 mini-css-extract-plugin@2.8.1 minimalistic-assert@1.0.1 minimatch@3.1.2
minimist@1.2.8 mkdirp@0.5.6 ms@2.1.2 multicast-dns@7.2.5 nanoid@3.3.7 natural-compare@1.4.0
negotiator@0.6.3 neo-async@2.6.2 no-case@3.0.4 node-forge@1.3.1 node-int64@0.4.0
node-releases@2.0.14 normalize-path@3.0.0 normalize-range@0.1.2 npm-run-path@4.0.1 nth-check@2.1.1
nwsapi@2.2.7 object-assign@4.1.1 object-hash@3.0.0 object-inspect@1.13.1 object-keys@1.1.1
obuf@1.1.2 on-finished@2.4.1 on-headers@1.0.2 once@1.4.0 onetime@5.1.2 open@8.4.2
optionator@0.9.3 p-limit@3.1.0 p-locate@5.0.0 p-retry@4.6.2 p-try@2.2.0 param-case@3.0.4
parent-module@1.0.1 parse-json@5.2.0 parse5@6.0.1 parseurl@1.3.3 pascal-case@3.1.2
path-exists@4.0.0 path-is-absolute@1.0.1 path-key@3.1.1 path-parse@1.0.7 path-to-regexp@0.1.7
path-type@4.0.0 performance-now@2.1.0 picocolors@1.0.0 picomatch@2.3.1 pify@2.3.0 pirates@4.0.6
pkg-dir@4.2.0 pkg-up@3.1.0 postcss@8.4.35 postcss-calc@8.2.4 postcss-colormin@5.3.1
postcss-flexbugs-fixes@5.0.2 postcss-import@15.1.0 postcss-js@4.0.1 postcss-load-config@4.0.2
postcss-loader@6.2.1 postcss-modules-extract-imports@3.0.0 postcss-modules-local-by-default@4.0.4
postcss-modules-scope@3.1.1 postcss-modules-values@4.0.0 postcss-nested@6.0.1
postcss-normalize@10.0.1 postcss-preset-env@7.8.3 postcss-selector-parser@6.0.15
postcss-value-parser@4.2.0 prelude-ls@1.2.1 pretty-bytes@5.6.0 pretty-error@4.0.0
pretty-format@27.5.1 process-nextick-args@2.0.1 promise@8.3.0 prompts@2.4.2 prop-types@15.8.1
proxy-addr@2.0.7 proxy-from-env@1.1.0 psl@1.9.0 punycode@2.3.1 q@1.5.1 qs@6.11.0
querystringify@2.2.0 queue-microtask@1.2.3 raf@3.4.1 randombytes@2.1.0 range-parser@1.2.1
raw-body@2.5.2 react@17.0.2 react-app-polyfill@3.0.0 react-dev-utils@12.0.1 react-dom@17.0.2
react-error-overlay@6.0.11 react-is@17.0.2 react-redux@8.1.3 react-refresh@0.11.0
react-router@6.22.3 react-router-dom@6.22.3 react-scripts@5.0.1 react-transition-group@4.4.5
read-cache@1.0.0 readable-stream@3.6.2 readdirp@3.6.0 recursive-readdir@2.2.3 redux@4.2.1
redux-thunk@2.4.2 regenerate@1.4.2 regenerator-runtime@0.14.1 regexpu-core@5.3.2 relateurl@0.2.7
renderkid@3.0.0 require-directory@2.1.1 require-from-string@2.0.2 requires-port@1.0.0
reselect@4.1.8 resolve@1.22.8 resolve-cwd@3.0.0 resolve-from@5.0.0 resolve-url-loader@4.0.0
resolve.exports@1.1.1 retry@0.13.1 reusify@1.0.4 rimraf@3.0.2 rollup@2.79.1
rollup-plugin-terser@7.0.2 run-parallel@1.2.0 safe-buffer@5.2.1 safer-buffer@2.1.2 sanitize.css@13.0.0
sass-loader@12.6.0 sax@1.2.4 saxes@5.0.1 scheduler@0.20.2 schema-utils@4.2.0 select-hose@2.0.0
selfsigned@2.4.1 semver@7.6.0 send@0.18.0 serialize-javascript@6.0.2 serve-index@1.9.1
serve-static@1.15.0 setprototypeof@1.2.0 shebang-command@2.0.0 shebang-regex@3.0.0
shell-quote@1.8.1 side-channel@1.0.6 signal-exit@3.0.7 sisteransi@1.0.5 slash@3.0.0 sockjs@0.3.24
source-list-map@2.0.1 source-map@0.6.1 source-map-js@1.0.2 source-map-loader@3.0.2
source-map-support@0.5.21 sourcemap-codec@1.4.8 spdy@4.0.2 spdy-transport@3.0.0 sprintf-js@1.0.3
stable@0.1.8 stack-utils@2.0.6 stackframe@1.3.4 statuses@2.0.1 string-length@4.0.2
string-natural-compare@3.0.1 string-width@4.2.3 string_decoder@1.3.0 strip-ansi@6.0.1
strip-bom@4.0.0 strip-comments@2.0.1 strip-final-newline@2.0.0 strip-json-comments@3.1.1
style-loader@3.3.4 stylehacks@5.1.1 stylis@4.2.0 sucrase@3.35.0 supports-color@7.2.0
supports-hyperlinks@2.3.0 supports-preserve-symlinks-flag@1.0.0 svg-parser@2.0.4 svgo@1.3.2
symbol-tree@3.2.4 tailwindcss@3.4.1 tapable@2.2.1 temp-dir@2.0.0 tempy@0.6.0 terminal-link@2.1.1
terser@5.29.1 terser-webpack-plugin@5.3.10 test-exclude@6.0.0 text-table@0.2.0 throat@6.0.2
thunky@1.1.0 tmpl@1.0.5 to-fast-properties@2.0.0 to-regex-range@5.0.1 toidentifier@1.0.1
tough-cookie@4.1.3 tr46@2.1.0 tryer@1.0.1 ts-interface-checker@0.1.13 tsconfig-paths@3.15.0
tslib@2.6.2 tsutils@3.21.0 type-check@0.4.0 type-detect@4.0.8 type-fest@0.21.3 type-is@1.6.18
typescript@4.9.5 unbox-primitive@1.0.2 unicode-canonical-property-names-ecmascript@2.0.0
unique-string@2.0.0 universalify@2.0.1 unpipe@1.0.0 unquote@1.1.1 upath@1.2.0
update-browserslist-db@1.0.13 uri-js@4.4.1 url-parse@1.5.10 util-deprecate@1.0.2
utila@0.4.0 utils-merge@1.0.1 uuid@8.3.2 v8-to-istanbul@8.1.1 vary@1.1.2 w3c-hr-time@1.0.2
w3c-xmlserializer@2.0.0 walker@1.0.8 watchpack@2.4.0 wbuf@1.7.3 web-vitals@2.1.4
webidl-conversions@6.1.0 webpack@5.90.3 webpack-dev-middleware@5.3.3 webpack-dev-server@4.15.1
webpack-manifest-plugin@4.1.1 webpack-sources@3.2.3 websocket-driver@0.7.4 websocket-extensions@0.1.4
whatwg-encoding@1.0.5 whatwg-fetch@3.6.20 whatwg-mimetype@2.3.0 whatwg-url@8.7.0 which@2.0.2
word-wrap@1.2.5 workbox-background-sync@6.6.0 workbox-broadcast-update@6.6.0 workbox-build@6.6.0
workbox-cacheable-response@6.6.0 workbox-core@6.6.0 workbox-expiration@6.6.0
workbox-google-analytics@6.6.0 workbox-navigation-preload@6.6.0 workbox-precaching@6.6.0
workbox-range-requests@6.6.0 workbox-recipes@6.6.0 workbox-routing@6.6.0 workbox-strategies@6.6.0
workbox-streams@6.6.0 workbox-sw@6.6.0 workbox-webpack-plugin@6.6.0 workbox-window@6.6.0
wrap-ansi@7.0.0 wrappy@1.0.2 write-file-atomic@3.0.3 ws@8.16.0 xml-name-validator@3.0.0
xmlchars@2.2.0 y18n@5.0.8 yallist@3.1.1 yaml@1.10.2 yargs@16.2.0 yargs-parser@20.2.9 yocto-queue@0.1.0
zustand@4.5.2
"""

# packages that commonly appear again, older, nested under a dependent
NPM_NESTED = """\
semver@6.3.1 semver@5.7.2 debug@2.6.9 debug@3.2.7 ms@2.0.0 ms@2.1.3 ansi-styles@3.2.1
ansi-styles@5.2.0 chalk@2.4.2 supports-color@5.5.0 supports-color@8.1.1 has-flag@3.0.0
color-convert@1.9.3 color-name@1.1.3 escape-string-regexp@1.0.5 escape-string-regexp@2.0.0
brace-expansion@2.0.1 minimatch@5.1.6 glob@8.1.0 lru-cache@6.0.0 yallist@4.0.0 json5@1.0.2
source-map@0.7.4 source-map@0.5.7 camelcase@5.3.1 argparse@1.0.10 js-yaml@3.14.1 ws@7.5.9
iconv-lite@0.4.24 safe-buffer@5.1.2 string_decoder@1.1.1 readable-stream@2.3.8 isarray@2.0.5
tr46@1.0.1 whatwg-url@7.1.0 webidl-conversions@4.0.2 mime@2.6.0 qs@6.11.2 bytes@3.0.0 depd@1.1.2
statuses@1.5.0 http-errors@1.6.3 inherits@2.0.3 cookie@0.6.0 fs-extra@9.1.0 jsonfile@4.0.0
universalify@0.2.0 strip-ansi@7.1.0 ansi-regex@6.0.1 emoji-regex@8.0.0 string-width@5.1.2
wrap-ansi@8.1.0 cliui@8.0.1 yargs@17.7.2 yargs-parser@21.1.1 find-up@4.1.0 find-up@3.0.0
locate-path@5.0.0 locate-path@3.0.0 p-locate@4.1.0 p-locate@3.0.0 p-limit@2.3.0 path-exists@3.0.0
resolve@2.0.0-next.5 schema-utils@3.3.0 schema-utils@2.7.1 ajv@6.12.6 ajv-keywords@3.5.2
json-schema-traverse@0.4.1 loader-utils@3.2.1 acorn@7.4.1 estraverse@4.3.0 eslint-scope@5.1.1
eslint-visitor-keys@2.1.0 doctrine@2.1.0 globals@11.12.0 type-fest@0.20.2 convert-source-map@2.0.0
entities@4.5.0 dom-serializer@0.2.2 domutils@1.7.0 domelementtype@1.3.1 css-select@2.1.0
css-what@3.4.2 css-tree@1.0.0-alpha.37 mdn-data@2.0.4 nth-check@1.0.2 array-flatten@1.1.1
array-flatten@2.1.2 kind-of@3.2.2 is-number@3.0.0 pify@4.0.1 make-dir@2.1.0 signal-exit@4.1.0
commander@4.1.1 commander@7.2.0 commander@2.20.3 picomatch@3.0.1 postcss-selector-parser@6.0.10
postcss-value-parser@3.3.1 arg@4.1.3 react-is@16.13.1 react-is@18.2.0 @types/react@18.2.64
"""

NPM_DEPRECATED = {
    "inflight@1.0.6": "This module is not supported, and leaks memory. Do not use it. Check out lru-cache if you "
                      "want a good and tested way to coalesce async requests by a key value, which is much more "
                      "comprehensive and powerful.",
    "glob@7.2.3": "Glob versions prior to v9 are no longer supported",
    "glob@8.1.0": "Glob versions prior to v9 are no longer supported",
    "rimraf@3.0.2": "Rimraf versions prior to v4 are no longer supported",
    "@humanwhocodes/config-array@0.11.14": "Use @eslint/config-array instead",
    "@humanwhocodes/object-schema@2.0.2": "Use @eslint/object-schema instead",
    "abab@2.0.6": "Use your platform's native atob() and btoa() methods instead",
    "domexception@2.0.1": "Use your platform's native DOMException instead",
    "w3c-hr-time@1.0.2": "Use your platform's native performance.now() and performance.timeOrigin.",
    "sourcemap-codec@1.4.8": "Please use @jridgewell/sourcemap-codec instead",
    "rollup-plugin-terser@7.0.2": "This package has been deprecated and is no longer maintained. "
                                  "Please use @rollup/plugin-terser",
    "stable@0.1.8": "Modern JS already guarantees Array#sort() is a stable sort, so this library is deprecated. "
                    "See the compatibility table on MDN: https://developer.mozilla.org/en-US/docs/Web/JavaScript/"
                    "Reference/Global_Objects/Array/sort#browser_compatibility",
    "svgo@1.3.2": "This SVGO version is no longer supported. Upgrade to v2.x.x.",
    "q@1.5.1": "You or someone you depend on is using Q, the JavaScript Promise library that gave JavaScript "
               "developers strong feelings about promises. They can almost certainly migrate to the native "
               "JavaScript promise now. Thank you literally everyone for joining me in this bet against the odds. "
               "Be excellent to each other.",
    "workbox-cacheable-response@6.6.0": "workbox-background-sync@6.6.0",
    "workbox-google-analytics@6.6.0": "It is not compatible with newer versions of GA starting with v4, as long "
                                      "as you are using GAv3 it should be ok, but the package is not longer being "
                                      "maintained",
}
for _p in ("class-properties", "nullish-coalescing-operator", "optional-chaining", "numeric-separator",
           "private-methods", "private-property-in-object"):
    _v = {"class-properties": "7.18.6", "nullish-coalescing-operator": "7.18.6", "optional-chaining": "7.21.0",
          "numeric-separator": "7.18.6", "private-methods": "7.18.6", "private-property-in-object": "7.21.11"}[_p]
    NPM_DEPRECATED[f"@babel/plugin-proposal-{_p}@{_v}"] = (
        "This proposal has been merged to the ECMAScript standard and thus this plugin is no longer "
        f"maintained. Please use @babel/plugin-transform-{_p} instead.")


def _split_spec(spec: str) -> tuple[str, str]:
    name, _, version = spec.rpartition("@")
    return name, version


def npm_tree(rng: random.Random, size: int) -> list[tuple[str, str, str]]:
    """(install path, name, version) for a react-scripts-sized tree with nested duplicates."""
    top = [_split_spec(s) for s in NPM_TOP.split()]
    nested = [_split_spec(s) for s in NPM_NESTED.split()]
    out = [(f"node_modules/{n}", n, v) for n, v in top]
    seen = {p for p, _, _ in out}
    heavy = ("jest", "babel", "eslint", "webpack", "workbox", "postcss", "css", "react-", "@svgr", "rollup",
             "svgo", "jsdom", "istanbul", "express", "body-parser", "send", "serve", "http-", "yargs",
             "cosmiconfig", "fork-ts", "html-", "terser", "tailwind", "sucrase", "@mui", "@typescript-eslint")
    parents = [n for n, _ in top if any(h in n for h in heavy)]
    while len(out) < size:
        parent = pick(rng, parents)
        child, version = pick(rng, nested)
        path = f"node_modules/{parent}/node_modules/{child}"
        if path in seen:
            continue
        seen.add(path)
        out.append((path, child, version))
    rng.shuffle(out)
    return out


def _tgz(name: str, version: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return f"https://registry.npmjs.org/{name}/-/{base}-{version}.tgz"


def _packument(name: str) -> str:
    return "https://registry.npmjs.org/" + name.replace("/", "%2f")


def npm_flood_output(rng: random.Random, workspace: str, started: datetime) -> tuple[list[str], float, str]:
    """`npm install --loglevel silly && npm install --loglevel silly @tanstack/react-query@^5.28.4`.

    Returns the output lines, how long it ran (seconds) and the name stem of the second run's logs."""
    tree = npm_tree(rng, 1580)
    total_ms = rng.randint(52_000, 58_000)
    first_ms = total_ms + 48_002
    t1 = started + timedelta(milliseconds=rng.randint(300, 900))
    t2 = t1 + timedelta(milliseconds=first_ms + rng.randint(200, 400))

    def stem(t: datetime) -> str:
        return t.strftime("%Y-%m-%dT%H_%M_%S_") + f"{t.microsecond // 1000:03d}Z"

    log1, log2 = stem(t1), stem(t2)
    epoch_ms = int(t2.timestamp() * 1000)
    npm = "/usr/local/lib/node_modules/npm"

    def preamble(argv: list[str], title: str, logname: str) -> list[str]:
        return [
            f"npm verb cli /usr/local/bin/node {npm}/bin/npm-cli.js",
            "npm info using npm@10.2.4",
            "npm info using node@v20.11.1",
            "npm timing npm:load:whichnode Completed in 1ms",
            "npm timing config:load:defaults Completed in 1ms",
            "npm timing config:load:file:/usr/local/lib/node_modules/npm/npmrc Completed in 2ms",
            "npm timing config:load:builtin Completed in 2ms",
            "npm timing config:load:cli Completed in 2ms",
            "npm timing config:load:env Completed in 0ms",
            f"npm timing config:load:file:{workspace}/.npmrc Completed in 1ms",
            "npm timing config:load:project Completed in 4ms",
            "npm timing config:load:file:/home/dev/.npmrc Completed in 0ms",
            "npm timing config:load:user Completed in 0ms",
            "npm timing config:load:file:/usr/local/etc/npmrc Completed in 0ms",
            "npm timing config:load:global Completed in 0ms",
            "npm timing config:load:setEnvs Completed in 1ms",
            "npm timing config:load Completed in 14ms",
            "npm timing npm:load:configload Completed in 14ms",
            "npm timing config:load:flatten Completed in 3ms",
            "npm timing npm:load:mkdirpcache Completed in 1ms",
            "npm timing npm:load:mkdirplogs Completed in 0ms",
            f"npm verb title {title}",
            "npm verb argv " + " ".join(f'"{a}"' for a in argv),
            "npm timing npm:load:setTitle Completed in 1ms",
            "npm timing npm:load:display Completed in 2ms",
            f"npm verb logfile logs-max:10 dir:/home/dev/.npm/_logs/{logname}-",
            f"npm verb logfile /home/dev/.npm/_logs/{logname}-debug-0.log",
            "npm timing npm:load:logFile Completed in 9ms",
            "npm timing npm:load:timers Completed in 0ms",
            "npm timing npm:load:configScope Completed in 0ms",
            "npm timing npm:load Completed in 41ms",
            "npm sill logfile start cleaning logs, removing 1 files",
            "npm timing arborist:ctor Completed in 1ms",
            "npm sill logfile done cleaning log files",
        ]

    out = preamble(["install", "--loglevel", "silly"], "npm install", log1)
    out += [
        "npm timing idealTree:init Completed in 418ms",
        "npm sill idealTree buildDeps",
        "npm WARN old lockfile ",
        "npm WARN old lockfile The package-lock.json file was created with an old version of npm,",
        "npm WARN old lockfile so supplemental metadata must be fetched from the registry.",
        "npm WARN old lockfile ",
        "npm WARN old lockfile This is a one-time fix-up, please be patient...",
        "npm WARN old lockfile ",
    ]
    for path, name, version in tree:
        out.append(f"npm sill fetch manifest {name}@{version}")
        cache = "cache miss" if rng.random() < 0.8 else "cache revalidated"
        out.append(f"npm http fetch GET 200 {_packument(name)} {rng.randint(28, 690)}ms ({cache})")
    out += [
        f"npm timing idealTree:#root Completed in {total_ms}ms",
        f"npm timing idealTree:buildDeps Completed in {total_ms + 9}ms",
        "npm timing idealTree:fixDepFlags Completed in 31ms",
        f"npm timing idealTree Completed in {total_ms + 471}ms",
        f"npm timing reify:loadTrees Completed in {total_ms + 502}ms",
        "npm timing reify:diffTrees Completed in 233ms",
        "npm sill reify moves {}",
        "npm timing reify:retireShallow Completed in 0ms",
        "npm timing reify:createSparse Completed in 412ms",
        "npm timing reify:loadBundles Completed in 0ms",
    ]
    pending_warn = [s for s in NPM_DEPRECATED]
    unpacking: list[str] = []
    for path, name, version in tree:
        out.append(f"npm sill tarball no local data for {name}@{_tgz(name, version)}. Extracting by manifest.")
        out.append(f"npm http fetch GET 200 {_tgz(name, version)} {rng.randint(19, 1900)}ms (cache miss)")
        spec = f"{name}@{version}"
        if spec in pending_warn:
            pending_warn.remove(spec)
            out.append(f"npm WARN deprecated {spec}: {NPM_DEPRECATED[spec]}")
        unpacking.append(path)
        if len(unpacking) > 24:
            done = unpacking.pop(rng.randrange(len(unpacking)))
            out.append(f"npm timing reifyNode:{done} Completed in {rng.randint(40, 9000)}ms")
    for spec in pending_warn:
        out.append(f"npm WARN deprecated {spec}: {NPM_DEPRECATED[spec]}")
    for path in unpacking:
        out.append(f"npm timing reifyNode:{path} Completed in {rng.randint(40, 9000)}ms")
    out += [
        f"npm timing reify:unpack Completed in {rng.randint(38_000, 44_000)}ms",
        "npm timing reify:unretire Completed in 1ms",
        "npm timing build:queue Completed in 21ms",
        "npm info run core-js@3.36.0 postinstall node_modules/core-js node -e \"try{require('./postinstall')}catch(e){}\"",
        "npm info run core-js-pure@3.36.0 postinstall node_modules/core-js-pure node -e \"try{require('./postinstall')}catch(e){}\"",
        "npm info run core-js@3.36.0 postinstall { code: 0, signal: null }",
        "npm info run core-js-pure@3.36.0 postinstall { code: 0, signal: null }",
        "npm timing build:run:postinstall:node_modules/core-js Completed in 118ms",
        "npm timing build:run:postinstall:node_modules/core-js-pure Completed in 121ms",
        "npm timing build:run:postinstall Completed in 123ms",
        "npm timing build:deps Completed in 147ms",
        "npm timing build Completed in 148ms",
        "npm timing reify:build Completed in 149ms",
        "npm timing reify:trash Completed in 0ms",
        "npm timing reify:save Completed in 587ms",
        f"npm http fetch POST 200 https://registry.npmjs.org/-/npm/v1/security/advisories/bulk {rng.randint(700, 1500)}ms",
        "npm timing auditReport:getReport Completed in 1391ms",
        "npm sill audit report {}",
        "npm timing auditReport:init Completed in 0ms",
        "npm timing reify:audit Completed in 1402ms",
        f"npm timing reify Completed in {total_ms + 47_120}ms",
        "",
        f"added {len(tree)} packages, and audited {len(tree) + 1} packages in 2m",
        "",
        "263 packages are looking for funding",
        "  run `npm fund` for details",
        "",
        "8 vulnerabilities (2 moderate, 6 high)",
        "",
        "To address issues that do not require attention, run:",
        "  npm audit fix",
        "",
        "To address all issues (including breaking changes), run:",
        "  npm audit fix --force",
        "",
        "Run `npm audit` for details.",
        "npm verb exit 0",
        f"npm timing npm Completed in {first_ms}ms",
        "npm info ok",
    ]
    argv = ["install", "--loglevel", "silly", "@tanstack/react-query@^5.28.4"]
    out += preamble(argv, "npm install @tanstack/react-query@^5.28.4", log2)
    out += [
        "npm timing idealTree:init Completed in 1212ms",
        "npm sill idealTree buildDeps",
        "npm sill fetch manifest @tanstack/react-query@^5.28.4",
        f"npm http fetch GET 200 {_packument('@tanstack/react-query')} 302ms (cache miss)",
        "npm sill fetch manifest react@^17.0.2",
        f"npm http fetch GET 200 {_packument('react')} 9ms (cache hit)",
        "npm sill fetch manifest react-dom@^17.0.2",
        f"npm http fetch GET 200 {_packument('react-dom')} 6ms (cache hit)",
        "npm sill placeDep ROOT @tanstack/react-query@5.28.4 OK for: storefront-web@2.14.0 want: ^5.28.4",
        "npm sill fetch manifest @tanstack/query-core@5.28.4",
        f"npm http fetch GET 200 {_packument('@tanstack/query-core')} 118ms (cache miss)",
        "npm timing idealTree:#root Completed in 1904ms",
        "npm timing idealTree:node_modules/@tanstack/react-query Completed in 2ms",
        "npm timing idealTree:buildDeps Completed in 1911ms",
        "npm verb stack Error: could not resolve",
        f"npm verb stack     at PlaceDep.failPeerConflict ({npm}/node_modules/@npmcli/arborist/lib/place-dep.js:489:25)",
        f"npm verb stack     at new PlaceDep ({npm}/node_modules/@npmcli/arborist/lib/place-dep.js:160:21)",
        f"npm verb stack     at #buildDepStep ({npm}/node_modules/@npmcli/arborist/lib/arborist/build-ideal-tree.js:908:18)",
        f"npm verb stack     at async Arborist.buildIdealTree ({npm}/node_modules/@npmcli/arborist/lib/arborist/build-ideal-tree.js:181:7)",
        "npm verb stack     at async Promise.all (index 1)",
        f"npm verb stack     at async Arborist.reify ({npm}/node_modules/@npmcli/arborist/lib/arborist/reify.js:131:5)",
        f"npm verb stack     at async Install.exec ({npm}/lib/commands/install.js:152:5)",
        f"npm verb stack     at async module.exports ({npm}/lib/cli-entry.js:61:5)",
        f"npm verb cwd {workspace}",
        "npm verb Linux 6.5.0-25-generic",
        "npm verb node v20.11.1",
        "npm verb npm  v10.2.4",
        "npm ERR! code ERESOLVE",
        "npm ERR! ERESOLVE unable to resolve dependency tree",
        "npm ERR! ",
        "npm ERR! While resolving: storefront-web@2.14.0",
        "npm ERR! Found: react@17.0.2",
        "npm ERR! node_modules/react",
        'npm ERR!   react@"^17.0.2" from the root project',
        "npm ERR! ",
        "npm ERR! Could not resolve dependency:",
        'npm ERR! peer react@"^18.0.0" from @tanstack/react-query@5.28.4',
        "npm ERR! node_modules/@tanstack/react-query",
        'npm ERR!   @tanstack/react-query@"^5.28.4" from the root project',
        "npm ERR! ",
        "npm ERR! Fix the upstream dependency conflict, or retry",
        "npm ERR! this command with --force or --legacy-peer-deps",
        "npm ERR! to accept an incorrect (and potentially broken) dependency resolution.",
        "npm ERR! ",
        "npm ERR! ",
        "npm ERR! For a full report see:",
        f"npm ERR! /home/dev/.npm/_logs/{log2}-eresolve-report.txt",
        "npm verb exit 1",
        "npm timing npm Completed in 2637ms",
        f"npm verb unfinished npm timer reify {epoch_ms + 1241}",
        f"npm verb unfinished npm timer reify:loadTrees {epoch_ms + 1245}",
        "npm verb code 1",
        "",
        f"npm ERR! A complete log of this run can be found in: /home/dev/.npm/_logs/{log2}-debug-0.log",
    ]
    return out, (t2 - started).total_seconds() + 2.7, log2


def eresolve_report(workspace: str) -> str:
    """~/.npm/_logs/<ts>-eresolve-report.txt as npm 10 writes it."""
    peers = [("@emotion/react", "11.11.4", ">=16.8.0"), ("@emotion/styled", "11.11.0", ">=16.8.0"),
             ("@mui/material", "5.15.12", "^17.0.0 || ^18.0.0"), ("@mui/system", "5.15.12", "^17.0.0 || ^18.0.0"),
             ("@mui/base", "5.0.0-beta.38", "^17.0.0 || ^18.0.0"), ("@mui/icons-material", "5.15.12", "^17.0.0 || ^18.0.0"),
             ("@sentry/react", "7.105.0", "15.x || 16.x || 17.x || 18.x"), ("react-redux", "8.1.3", "^16.8 || ^17.0 || ^18.0"),
             ("react-router", "6.22.3", ">=16.8"), ("react-router-dom", "6.22.3", ">=16.8"),
             ("react-transition-group", "4.4.5", ">=16.6.0"), ("@testing-library/react", "12.1.5", "<18.0.0"),
             ("react-dom", "17.0.2", "17.0.2"), ("zustand", "4.5.2", ">=16.8")]
    lines = ["# npm resolution error report", "", "While resolving: storefront-web@2.14.0", "Found: react@17.0.2",
             "node_modules/react", '  react@"^17.0.2" from the root project']
    for name, ver, rng_ in peers:
        lines += [f'  peer react@"{rng_}" from {name}@{ver}', f"  node_modules/{name}",
                  f'    {name}@"^{ver}" from the root project' if name in ("@emotion/react", "@mui/material",
                                                                         "react-redux", "react-router-dom", "zustand")
                  else f'    {name}@"{ver}" from @mui/material@5.15.12']
    lines += ["", "Could not resolve dependency:", 'peer react@"^18.0.0" from @tanstack/react-query@5.28.4',
              "node_modules/@tanstack/react-query", '  @tanstack/react-query@"^5.28.4" from the root project', "",
              "Fix the upstream dependency conflict, or retry", "this command with --force or --legacy-peer-deps",
              "to accept an incorrect (and potentially broken) dependency resolution.", "", "Raw JSON explanation object:", ""]
    explanation = {
        "code": "ERESOLVE",
        "edge": {"type": "peer", "name": "react", "spec": "^18.0.0", "error": "INVALID",
                 "from": {"name": "@tanstack/react-query", "version": "5.28.4", "location": "node_modules/@tanstack/react-query",
                          "isWorkspace": False, "dependents": [{"type": "prod", "name": "@tanstack/react-query",
                                                                "spec": "^5.28.4", "from": {"location": workspace}}]}},
        "dep": {"name": "react", "version": "18.2.0", "location": "node_modules/react", "isWorkspace": False,
                "dependents": []},
        "current": {"name": "react", "version": "17.0.2", "location": "node_modules/react", "isWorkspace": False,
                    "dependents": [{"type": "prod", "name": "react", "spec": "^17.0.2", "from": {"location": workspace}}] +
                                  [{"type": "peer", "name": "react", "spec": r_, "error": None,
                                    "from": {"name": n, "version": v, "location": f"node_modules/{n}", "isWorkspace": False,
                                             "dependents": [{"type": "prod", "name": n, "spec": f"^{v}",
                                                             "from": {"location": workspace}}]}}
                                   for n, v, r_ in peers]},
        "peerConflict": None, "strictPeerDeps": False, "force": False, "isMine": True,
    }
    return "\n".join(lines) + "\n" + json.dumps(explanation, indent=2)


def package_json() -> str:
    return json.dumps({
        "name": "storefront-web",
        "version": "2.14.0",
        "private": True,
        "scripts": {
            "start": "react-scripts start",
            "build": "react-scripts build",
            "test": "react-scripts test",
            "lint": "eslint 'src/**/*.{ts,tsx}' --max-warnings=0",
            "typecheck": "tsc --noEmit -p tsconfig.json",
        },
        "dependencies": {
            "@emotion/react": "^11.11.4", "@emotion/styled": "^11.11.0",
            "@mui/icons-material": "^5.15.12", "@mui/material": "^5.15.12",
            "@reduxjs/toolkit": "^1.9.7", "@sentry/react": "^7.105.0", "axios": "^1.6.7",
            "date-fns": "^2.30.0", "lodash": "^4.17.21", "react": "^17.0.2", "react-dom": "^17.0.2",
            "react-redux": "^8.1.3", "react-router-dom": "^6.22.3", "react-scripts": "5.0.1",
            "web-vitals": "^2.1.4", "zustand": "^4.5.2",
        },
        "devDependencies": {
            "@testing-library/jest-dom": "^5.17.0", "@testing-library/react": "^12.1.5",
            "@testing-library/user-event": "^14.5.2", "@types/jest": "^29.5.12", "@types/lodash": "^4.14.202",
            "@types/node": "^18.19.22", "@types/react": "^17.0.76", "@types/react-dom": "^17.0.25",
            "@typescript-eslint/eslint-plugin": "^5.62.0", "@typescript-eslint/parser": "^5.62.0",
            "typescript": "^4.9.5",
        },
        "browserslist": {"production": [">0.2%", "not dead", "not op_mini all"],
                         "development": ["last 1 chrome version", "last 1 firefox version"]},
        "engines": {"node": ">=18"},
    }, indent=2) + "\n"


def package_lock_head(rng: random.Random, n_lines: int) -> str:
    """The top of a lockfileVersion 1 package-lock.json (npm 6 era), `n_lines` long."""
    lines = ["{", '  "name": "storefront-web",', '  "version": "2.14.0",', '  "lockfileVersion": 1,',
             '  "requires": true,', '  "dependencies": {']
    specs = sorted(set(NPM_TOP.split()), key=lambda s: (_split_spec(s)[0], s))
    alphabet = string.ascii_letters + string.digits + "+/"
    i = 0
    while len(lines) < n_lines - 1:
        name, version = _split_spec(specs[i])
        i += 1
        integrity = "sha512-" + "".join(rng.choice(alphabet) for _ in range(86)) + "=="
        lines += [f'    "{name}": {{', f'      "version": "{version}",',
                  f'      "resolved": "{_tgz(name, version)}",', f'      "integrity": "{integrity}",']
        if name.startswith("@types/") or rng.random() < 0.3:
            lines.append('      "dev": true,')
        if rng.random() < 0.5:
            reqs = [_split_spec(pick(rng, specs)) for _ in range(rng.randint(1, 3))]
            lines.append('      "requires": {')
            lines += [f'        "{n}": "^{v}"' + ("," if j < len(reqs) - 1 else "")
                      for j, (n, v) in enumerate(reqs)]
            lines.append("      }")
        else:
            lines[-1] = lines[-1].rstrip(",")
        lines.append("    },")
    return "\n".join(lines[:n_lines])


USE_ORDERS_OLD = """\
import { useCallback, useEffect, useRef, useState } from 'react';
import axios, { AxiosError } from 'axios';

import { api } from '../../lib/api';
import type { Order, OrderStatus, Page } from '../../types';

export interface OrdersQuery {
  status?: OrderStatus;
  page: number;
  pageSize: number;
  search?: string;
}

interface CacheEntry {
  at: number;
  data: Page<Order>;
}

// Poor man's cache: keeps the last pages around so going back and forth doesn't refetch.
// TODO(STORE-231): replace with react-query once we add it.
const cache = new Map<string, CacheEntry>();
const TTL_MS = 30_000;

function keyOf(q: OrdersQuery): string {
  return JSON.stringify([q.status ?? 'all', q.page, q.pageSize, q.search ?? '']);
}

export function useOrders(query: OrdersQuery) {
  const [data, setData] = useState<Page<Order> | undefined>(() => cache.get(keyOf(query))?.data);
  const [error, setError] = useState<Error | undefined>();
  const [isLoading, setLoading] = useState(!data);
  const [reloadToken, setReloadToken] = useState(0);
  const abortRef = useRef<AbortController>();

  useEffect(() => {
    const key = keyOf(query);
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < TTL_MS && reloadToken === 0) {
      setData(hit.data);
      setLoading(false);
      return;
    }
    abortRef.current?.abort();
    const controller = new AbortController();
    abortRef.current = controller;
    setLoading(true);
    let attempts = 0;

    const run = async (): Promise<void> => {
      try {
        const res = await api.get<Page<Order>>('/v1/orders', {
          params: { status: query.status, page: query.page, per_page: query.pageSize, q: query.search },
          signal: controller.signal,
        });
        cache.set(key, { at: Date.now(), data: res.data });
        setData(res.data);
        setError(undefined);
      } catch (err) {
        if (axios.isCancel(err)) return;
        const status = (err as AxiosError).response?.status;
        if ((!status || status >= 500) && attempts < 2) {
          attempts += 1;
          await new Promise((r) => setTimeout(r, 500 * 2 ** attempts));
          return run();
        }
        setError(err as Error);
      } finally {
        if (!controller.signal.aborted) setLoading(false);
      }
    };
    void run();
    return () => controller.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [query.status, query.page, query.pageSize, query.search, reloadToken]);

  const refetch = useCallback(() => {
    cache.delete(keyOf(query));
    setReloadToken((t) => t + 1);
  }, [query]);

  return { data, error, isLoading, refetch };
}
"""

USE_ORDERS_NEW = """\
import { useQuery } from '@tanstack/react-query';

import { api } from '../../lib/api';
import type { Order, OrderStatus, Page } from '../../types';

export interface OrdersQuery {
  status?: OrderStatus;
  page: number;
  pageSize: number;
  search?: string;
}

export const ordersKey = (q: OrdersQuery) =>
  ['orders', { status: q.status ?? 'all', page: q.page, pageSize: q.pageSize, search: q.search ?? '' }] as const;

async function fetchOrders(q: OrdersQuery, signal?: AbortSignal): Promise<Page<Order>> {
  const res = await api.get<Page<Order>>('/v1/orders', {
    params: { status: q.status, page: q.page, per_page: q.pageSize, q: q.search },
    signal,
  });
  return res.data;
}

// Caching, de-duplication, cancellation and retry now come from the shared QueryClient
// (src/lib/queryClient.ts): 30 s staleTime, no retry on 4xx, two retries otherwise.
export function useOrders(query: OrdersQuery) {
  const result = useQuery({
    queryKey: ordersKey(query),
    queryFn: ({ signal }) => fetchOrders(query, signal),
    keepPreviousData: true, // v4 option: no table flicker while the next page loads
  });
  return {
    data: result.data,
    error: result.error as Error | null,
    isLoading: result.isLoading,
    isFetching: result.isFetching,
    refetch: result.refetch,
  };
}
"""

ORDERS_TEST_OLD = """\
import { render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { MemoryRouter } from 'react-router-dom';

import { api } from '../../lib/api';
import OrdersPage from './OrdersPage';

jest.mock('../../lib/api');
const mockedGet = api.get as jest.MockedFunction<typeof api.get>;

const page = (n: number, items: number) => ({
  data: {
    items: Array.from({ length: items }, (_, i) => ({
      id: n * 100 + i,
      number: `SO-2024-${String(n * 100 + i).padStart(5, '0')}`,
      customer: { id: 7, name: 'Acme GmbH' },
      status: i % 3 === 0 ? 'open' : 'shipped',
      total: '129.90',
      createdAt: '2024-03-01T10:00:00Z',
    })),
    page: n,
    total: 42,
  },
});

function renderPage() {
  return render(
    <MemoryRouter initialEntries={['/orders']}>
      <OrdersPage />
    </MemoryRouter>,
  );
}

describe('OrdersPage', () => {
  beforeEach(() => mockedGet.mockReset());

  it('renders the orders table', async () => {
    mockedGet.mockResolvedValueOnce(page(1, 20));
    renderPage();
    const table = await screen.findByRole('table', { name: /orders/i });
    expect(within(table).getAllByRole('row')).toHaveLength(21);
  });

  it('shows an empty state when there are no orders', async () => {
    mockedGet.mockResolvedValueOnce({ data: { items: [], page: 1, total: 0 } });
    renderPage();
    expect(await screen.findByText(/no orders yet/i)).toBeInTheDocument();
  });

  it('filters by status', async () => {
    mockedGet.mockResolvedValue(page(1, 20));
    renderPage();
    await userEvent.click(await screen.findByRole('button', { name: /status/i }));
    await userEvent.click(screen.getByRole('option', { name: /open/i }));
    await waitFor(() =>
      expect(mockedGet).toHaveBeenLastCalledWith('/v1/orders', expect.objectContaining({
        params: expect.objectContaining({ status: 'open' }),
      })),
    );
  });

  it('paginates with the next button', async () => {
    mockedGet.mockResolvedValueOnce(page(1, 20)).mockResolvedValueOnce(page(2, 20));
    renderPage();
    await userEvent.click(await screen.findByRole('button', { name: /next page/i }));
    expect(await screen.findByText('SO-2024-00200')).toBeInTheDocument();
  });
});
"""

RENDER_WITH_CLIENT = """\
import { ReactElement } from 'react';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, RenderOptions } from '@testing-library/react';
import { MemoryRouter } from 'react-router-dom';

// A fresh client per test: no cache shared between tests, no retries (failures show at once),
// and no logging of expected errors to the console.
export function renderWithClient(ui: ReactElement, { route = '/', ...options }: RenderOptions & { route?: string } = {}) {
  const client = new QueryClient({
    defaultOptions: { queries: { retry: false, cacheTime: Infinity } },
    logger: { log: console.log, warn: console.warn, error: () => {} },
  });
  return render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[route]}>{ui}</MemoryRouter>
    </QueryClientProvider>,
    options,
  );
}
"""


def jest_no_client_failure() -> str:
    frames = ("    at useQueryClient (node_modules/@tanstack/react-query/src/QueryClientProvider.tsx:48:11)\n"
              "    at useBaseQuery (node_modules/@tanstack/react-query/src/useBaseQuery.ts:31:35)\n"
              "    at useQuery (node_modules/@tanstack/react-query/src/useQuery.ts:140:10)\n"
              "    at useOrders (src/pages/orders/useOrders.ts:29:28)\n"
              "    at OrdersPage (src/pages/orders/OrdersPage.tsx:41:41)\n"
              "    at renderWithHooks (node_modules/react-dom/cjs/react-dom.development.js:14985:18)\n"
              "    at mountIndeterminateComponent (node_modules/react-dom/cjs/react-dom.development.js:17811:13)\n"
              "    at beginWork (node_modules/react-dom/cjs/react-dom.development.js:19049:16)\n"
              "    at HTMLUnknownElement.callCallback (node_modules/react-dom/cjs/react-dom.development.js:3945:14)\n"
              "    at invokeGuardedCallbackDev (node_modules/react-dom/cjs/react-dom.development.js:3994:16)")
    block = []
    for name in ("renders the orders table", "shows an empty state when there are no orders", "filters by status",
                 "paginates with the next button"):
        block.append(f"  ● OrdersPage › {name}\n\n    No QueryClient set, use QueryClientProvider to set one\n\n"
                     "      44 |   const { data, error, isLoading, refetch } = useOrders({ status, page, pageSize: 20, search });\n"
                     "         |                                               ^\n\n" + frames + "\n")
    return ("> storefront-web@2.14.0 typecheck\n> tsc --noEmit -p tsconfig.json\n\n"
            "FAIL src/pages/orders/OrdersPage.test.tsx\n"
            "  OrdersPage\n    ✕ renders the orders table (58 ms)\n    ✕ shows an empty state when there are no orders (9 ms)\n"
            "    ✕ filters by status (7 ms)\n    ✕ paginates with the next button (6 ms)\n\n"
            "  console.error\n    The above error occurred in the <OrdersPage> component:\n\n"
            "        at OrdersPage (/home/dev/projects/storefront-web/src/pages/orders/OrdersPage.tsx:38:39)\n"
            "        at Router (/home/dev/projects/storefront-web/node_modules/react-router/dist/index.js:1207:15)\n"
            "        at MemoryRouter (/home/dev/projects/storefront-web/node_modules/react-router/dist/index.js:1101:3)\n\n"
            "    Consider adding an error boundary to your tree to customize error handling behavior.\n"
            "    Visit https://reactjs.org/link/error-boundaries to learn more about error boundaries.\n\n"
            + "\n".join(block) +
            "PASS src/pages/orders/useOrders.test.ts\n\n"
            "Test Suites: 1 failed, 1 passed, 2 total\nTests:       4 failed, 2 passed, 6 total\nSnapshots:   0 total\n"
            "Time:        7.914 s\nRan all test suites matching /src\\/pages\\/orders/i.")


def orders_page_tsx() -> str:
    return """\
import { useState } from 'react';
import {
  Alert, Box, Button, Chip, CircularProgress, IconButton, MenuItem, Paper, Stack, Table, TableBody, TableCell,
  TableContainer, TableHead, TableRow, TextField, Tooltip, Typography,
} from '@mui/material';
import RefreshIcon from '@mui/icons-material/Refresh';
import ChevronLeftIcon from '@mui/icons-material/ChevronLeft';
import ChevronRightIcon from '@mui/icons-material/ChevronRight';
import { format, parseISO } from 'date-fns';
import { Link as RouterLink, useSearchParams } from 'react-router-dom';

import { useDebounce } from '../../hooks/useDebounce';
import type { OrderStatus } from '../../types';
import { useOrders } from './useOrders';

const STATUSES: { value: OrderStatus | 'all'; label: string }[] = [
  { value: 'all', label: 'All' },
  { value: 'open', label: 'Open' },
  { value: 'paid', label: 'Paid' },
  { value: 'shipped', label: 'Shipped' },
  { value: 'cancelled', label: 'Cancelled' },
];

const STATUS_COLOR: Record<OrderStatus, 'default' | 'info' | 'success' | 'warning' | 'error'> = {
  open: 'info',
  paid: 'success',
  shipped: 'default',
  cancelled: 'error',
  refunded: 'warning',
};

export default function OrdersPage() {
  const [params, setParams] = useSearchParams();
  const status = (params.get('status') as OrderStatus | null) ?? undefined;
  const page = Number(params.get('page') ?? 1);
  const [searchInput, setSearchInput] = useState(params.get('q') ?? '');
  const search = useDebounce(searchInput, 300);
  const { data, error, isLoading, refetch } = useOrders({ status, page, pageSize: 20, search });

  const setParam = (key: string, value?: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    if (key !== 'page') next.delete('page');
    setParams(next);
  };

  const lastPage = data ? Math.max(1, Math.ceil(data.total / 20)) : 1;

  return (
    <Box sx={{ p: 3 }}>
      <Stack direction="row" alignItems="center" spacing={2} sx={{ mb: 2 }}>
        <Typography variant="h5" component="h1" sx={{ flexGrow: 1 }}>
          Orders
        </Typography>
        <TextField
          size="small"
          label="Search number or customer"
          value={searchInput}
          onChange={(e) => setSearchInput(e.target.value)}
        />
        <TextField
          select
          size="small"
          label="Status"
          value={status ?? 'all'}
          onChange={(e) => setParam('status', e.target.value === 'all' ? undefined : e.target.value)}
          sx={{ minWidth: 140 }}
        >
          {STATUSES.map((s) => (
            <MenuItem key={s.value} value={s.value}>
              {s.label}
            </MenuItem>
          ))}
        </TextField>
        <Tooltip title="Reload">
          <IconButton aria-label="reload" onClick={() => refetch()}>
            <RefreshIcon />
          </IconButton>
        </Tooltip>
      </Stack>

      {error && (
        <Alert severity="error" sx={{ mb: 2 }} action={<Button onClick={() => refetch()}>Retry</Button>}>
          Could not load orders: {error.message}
        </Alert>
      )}

      {isLoading && !data ? (
        <Box sx={{ display: 'grid', placeItems: 'center', height: 240 }}>
          <CircularProgress aria-label="loading orders" />
        </Box>
      ) : data && data.items.length === 0 ? (
        <Paper sx={{ p: 6, textAlign: 'center' }}>
          <Typography color="text.secondary">No orders yet.</Typography>
        </Paper>
      ) : (
        <TableContainer component={Paper}>
          <Table size="small" aria-label="orders">
            <TableHead>
              <TableRow>
                <TableCell>Number</TableCell>
                <TableCell>Customer</TableCell>
                <TableCell>Status</TableCell>
                <TableCell align="right">Total</TableCell>
                <TableCell>Created</TableCell>
              </TableRow>
            </TableHead>
            <TableBody>
              {data?.items.map((o) => (
                <TableRow key={o.id} hover>
                  <TableCell>
                    <RouterLink to={`/orders/${o.id}`}>{o.number}</RouterLink>
                  </TableCell>
                  <TableCell>{o.customer.name}</TableCell>
                  <TableCell>
                    <Chip size="small" label={o.status} color={STATUS_COLOR[o.status]} />
                  </TableCell>
                  <TableCell align="right">{o.total}</TableCell>
                  <TableCell>{format(parseISO(o.createdAt), 'yyyy-MM-dd HH:mm')}</TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        </TableContainer>
      )}

      <Stack direction="row" justifyContent="flex-end" alignItems="center" spacing={1} sx={{ mt: 2 }}>
        <Typography variant="body2" color="text.secondary">
          Page {page} of {lastPage}
        </Typography>
        <IconButton aria-label="previous page" disabled={page <= 1} onClick={() => setParam('page', String(page - 1))}>
          <ChevronLeftIcon />
        </IconButton>
        <IconButton aria-label="next page" disabled={page >= lastPage} onClick={() => setParam('page', String(page + 1))}>
          <ChevronRightIcon />
        </IconButton>
      </Stack>
    </Box>
  );
}
"""


def session_npm_flood() -> Recorder:
    ws = "/home/dev/projects/storefront-web"
    r = Recorder(seed=1000, title="Add react-query to storefront-web (npm ERESOLVE)",
                 created="2024-03-14T09:18:42+00:00", model="gpt-4o", window=32000, workspace=ws,
                 existing=("package.json", "package-lock.json", "src/index.tsx", "src/pages/orders/useOrders.ts",
                           "src/pages/orders/OrdersPage.tsx", "src/pages/orders/OrdersPage.test.tsx"))
    rng = r.rng
    r.system()
    r.user("Add @tanstack/react-query to storefront-web so the Orders page can stop hand-rolling its "
           "fetch/cache logic in useEffect. Wire a QueryClientProvider at the root and make sure "
           "typecheck and the Orders tests still pass.")
    r.call("I'll start by looking at the project's dependencies.", "bash", {"command": "cat package.json"},
           bash_result(package_json()))
    lock = package_lock_head(rng, 150)
    r.call("React 17.0.2 with react-scripts 5. Let me check the lockfile format and what it pins.",
           "bash", {"command": "sed -n '1,150p' package-lock.json"}, bash_result(lock))
    r.parallel("Now the code that react-query should replace: the Orders page and its data hook.",
               [("read_file", {"path": "src/pages/orders/useOrders.ts"}, USE_ORDERS_OLD),
                ("read_file", {"path": "src/pages/orders/OrdersPage.tsx"}, orders_page_tsx())])
    r.call('`useOrders` is a hand-made cache (module-level Map, 30 s TTL), AbortController and retry loop - exactly '
           'what react-query provides. Note the lockfile is `"lockfileVersion": 1`, written by npm 6, so npm 10 will '
           "have to fetch metadata for every package once. Is node_modules present?", "bash",
           {"command": "node -v && npm -v && ls node_modules | head -5; du -sh node_modules 2>/dev/null || true"},
           bash_result("v20.11.1\n10.2.4\nls: cannot access 'node_modules': No such file or directory"))
    (cid,) = r.assistant("node_modules is missing (fresh clone). I'll install the locked dependencies first "
                         "and then add the new package, with verbose logs so a failure is easy to place.",
                         [("bash", {"command": "npm install --loglevel silly 2>&1 && npm install --loglevel silly "
                                               "@tanstack/react-query@^5.28.4 2>&1"})])
    flood, ran_for, log2 = npm_flood_output(rng, ws, r.clock)
    text, source = cut_at_source(flood, session_id=r.sid, call_id=cid, exit_code=1, duration_s=ran_for)
    r.tool(cid, text, source=source, took=(ran_for, ran_for + 0.4), exit_code=1)
    spill = source["spill"]
    warn_lines = [i + 1 for i, s in enumerate(flood) if s.startswith("npm WARN")]
    grep = "\n".join(f"{i}:{flood[i - 1]}" for i in warn_lines)
    r.call("The first install succeeded (added 1580 packages) but the second one failed with ERESOLVE: @tanstack/react-query@5 wants react ^18 and we are on "
           "17.0.2. Before choosing a fix I want to know whether the first install already had to override "
           "peer dependencies - those warnings would be in the dropped middle of the output.",
           "bash", {"command": f"grep -n 'WARN' {spill}"}, bash_result(grep))
    dep_line = next(i for i in warn_lines if "deprecated" in flood[i - 1])
    start = max(1, dep_line - 12)
    r.call("Only the old-lockfile notice and deprecation warnings, no ERESOLVE overrides. Let me read the "
           "region around the first deprecation to see what was being reified at that point.",
           "read_file", {"path": spill, "start_line": start, "end_line": start + 99},
           "\n".join(flood))
    r.call("Let me see the full resolution report npm wrote, to know everything that pins React 17.", "bash",
           {"command": f"cat /home/dev/.npm/_logs/{log2}-eresolve-report.txt"},
           bash_result(eresolve_report(ws)))
    peers_v5 = "{ react: '^18.0.0' }"
    peers_v4 = ("{\n  react: '^16.8.0 || ^17.0.0 || ^18.0.0',\n  'react-dom': '^16.8.0 || ^17.0.0 || ^18.0.0',\n"
                "  'react-native': '*'\n}\npeerDependenciesMeta: { 'react-dom': { optional: true }, "
                "'react-native': { optional: true } }")
    r.parallel("That part is clean. So the only conflict is the peer range of v5. Let me compare the peer "
               "dependencies of the two major versions.",
               [("bash", {"command": "npm view @tanstack/react-query@5.28.4 peerDependencies"}, bash_result(peers_v5)),
                ("bash", {"command": "npm view @tanstack/react-query@4 peerDependencies peerDependenciesMeta "
                                     "--json | head -20"},
                 bash_result("@tanstack/react-query@4.36.1 peerDependencies = " + peers_v4))])
    r.call("Who else depends on React 17 specifically?", "bash",
           {"command": "npm ls react react-dom --depth=1 2>&1 | head -30"},
           bash_result("storefront-web@2.14.0 /home/dev/projects/storefront-web\n"
                       "├─┬ @emotion/react@11.11.4\n│ └── react@17.0.2 deduped\n"
                       "├─┬ @mui/material@5.15.12\n│ ├── react-dom@17.0.2 deduped\n│ └── react@17.0.2 deduped\n"
                       "├─┬ @sentry/react@7.105.0\n│ └── react@17.0.2 deduped\n"
                       "├─┬ @testing-library/react@12.1.5\n│ ├── react-dom@17.0.2 deduped\n│ └── react@17.0.2 deduped\n"
                       "├─┬ react-dom@17.0.2\n│ └── react@17.0.2 deduped\n"
                       "├─┬ react-redux@8.1.3\n│ ├── react-dom@17.0.2 deduped\n│ └── react@17.0.2 deduped\n"
                       "├── react@17.0.2\n└─┬ react-router-dom@6.22.3\n  ├── react-dom@17.0.2 deduped\n"
                       "  └── react@17.0.2 deduped"))
    r.assistant(
        "The install failed on a peer dependency, not a network or cache problem:\n\n"
        "```\nnpm ERR! Found: react@17.0.2\n"
        'npm ERR! Could not resolve dependency:\nnpm ERR! peer react@"^18.0.0" from @tanstack/react-query@5.28.4\n```\n\n'
        "Two clean ways out (I don't want to use `--legacy-peer-deps` - it would install v5 against React 17, "
        "which it doesn't support):\n\n"
        "1. **Stay on React 17 and use @tanstack/react-query v4** (4.36.1 accepts `^16.8 || ^17 || ^18`). The API "
        "is nearly the same as v5 (`useQuery({ queryKey, queryFn })`), so moving to v5 later is mechanical.\n"
        "2. **Upgrade to React 18** first: react, react-dom, @types/react(-dom) to 18, "
        "@testing-library/react to 13+, and `ReactDOM.render` → `createRoot`. Bigger change, touches tests.\n\n"
        "Which do you prefer?")
    r.user("Stay on React 17 — the React 18 migration is planned for Q3 with the MUI upgrade. Go with v4. "
           "And please commit the regenerated lockfile as v3, the old one keeps confusing people.",
           gap=(90, 300))
    small = ("npm WARN old lockfile \nnpm WARN old lockfile The package-lock.json file was created with an old "
             "version of npm,\nnpm WARN old lockfile so supplemental metadata must be fetched from the registry."
             "\nnpm WARN old lockfile \nnpm WARN old lockfile This is a one-time fix-up, please be patient...\n"
             "npm WARN old lockfile \n\nadded 3 packages, changed 1 package, and audited 1584 packages in 9s\n\n"
             "263 packages are looking for funding\n  run `npm fund` for details\n\n"
             "8 vulnerabilities (2 moderate, 6 high)\n\nTo address all issues (including breaking changes), run:\n"
             "  npm audit fix --force\n\nRun `npm audit` for details.")
    r.call("Installing v4 and its devtools at the same major.", "bash",
           {"command": "npm install @tanstack/react-query@^4.36.1 @tanstack/react-query-devtools@^4.36.1 2>&1"},
           bash_result(small), took=(8, 12))
    r.call("Installed. Lockfile check:", "bash",
           {"command": "grep -m1 lockfileVersion package-lock.json && git diff --stat"},
           bash_result('  "lockfileVersion": 3,\n package-lock.json | 41873 +++++++++++++++++++---------------\n'
                       " package.json      |     2 +\n 2 files changed, 24611 insertions(+), 17264 deletions(-)"))
    index_tsx = textwrap.dedent("""\
        import React from 'react';
        import ReactDOM from 'react-dom';
        import { Provider } from 'react-redux';
        import { BrowserRouter } from 'react-router-dom';
        import { CssBaseline, ThemeProvider } from '@mui/material';
        import * as Sentry from '@sentry/react';

        import App from './App';
        import { store } from './store';
        import { theme } from './theme';
        import reportWebVitals from './reportWebVitals';

        Sentry.init({
          dsn: process.env.REACT_APP_SENTRY_DSN,
          environment: process.env.REACT_APP_ENV ?? 'development',
          tracesSampleRate: 0.1,
        });

        ReactDOM.render(
          <React.StrictMode>
            <Provider store={store}>
              <ThemeProvider theme={theme}>
                <CssBaseline />
                <BrowserRouter>
                  <App />
                </BrowserRouter>
              </ThemeProvider>
            </Provider>
          </React.StrictMode>,
          document.getElementById('root'),
        );

        reportWebVitals();
        """)
    r.call("Now the root component.", "read_file", {"path": "src/index.tsx"}, index_tsx)
    client = textwrap.dedent("""\
        import { QueryClient } from '@tanstack/react-query';
        import { AxiosError } from 'axios';

        // One client for the whole app. Orders data changes often but not second to second:
        // 30 s of freshness removes the refetch storm when tabs regain focus.
        export const queryClient = new QueryClient({
          defaultOptions: {
            queries: {
              staleTime: 30_000,
              cacheTime: 5 * 60_000,
              refetchOnWindowFocus: false,
              retry: (failureCount, error) => {
                const status = (error as AxiosError)?.response?.status;
                if (status && status >= 400 && status < 500) return false; // client errors never heal
                return failureCount < 2;
              },
            },
          },
        });
        """)
    r.call("I'll put the client in its own module so tests can build a fresh one.", "write_file",
           {"path": "src/lib/queryClient.ts", "content": client}, WROTE)
    new_index = edit(index_tsx, (
        "import * as Sentry from '@sentry/react';\n",
        "import * as Sentry from '@sentry/react';\nimport { QueryClientProvider } from '@tanstack/react-query';\n"
        "import { ReactQueryDevtools } from '@tanstack/react-query-devtools';\n"), (
        "import { store } from './store';\n", "import { queryClient } from './lib/queryClient';\n"
        "import { store } from './store';\n"), (
        "    <Provider store={store}>\n      <ThemeProvider theme={theme}>\n        <CssBaseline />\n"
        "        <BrowserRouter>\n          <App />\n        </BrowserRouter>\n      </ThemeProvider>\n    </Provider>\n",
        "    <QueryClientProvider client={queryClient}>\n      <Provider store={store}>\n"
        "        <ThemeProvider theme={theme}>\n          <CssBaseline />\n          <BrowserRouter>\n"
        "            <App />\n          </BrowserRouter>\n        </ThemeProvider>\n      </Provider>\n"
        "      <ReactQueryDevtools initialIsOpen={false} />\n    </QueryClientProvider>\n"))
    r.call("Wrapping the app in QueryClientProvider (outside Redux so both can be used anywhere).",
           "write_file", {"path": "src/index.tsx", "content": new_index}, WROTE)
    r.call("Now the hook: the hand-made cache, abort and retry logic go away; the query key carries the filters so "
           "each page/status/search combination is cached separately.", "write_file",
           {"path": "src/pages/orders/useOrders.ts", "content": USE_ORDERS_NEW},
           WROTE)
    r.call("", "bash", {"command": "npm run typecheck && CI=true npx react-scripts test --watchAll=false src/pages/orders "
                                   "2>&1 | tail -80"}, bash_result(jest_no_client_failure(), 1), took=(15, 25))
    new_test = edit(ORDERS_TEST_OLD, ("import { render, screen, waitFor, within } from '@testing-library/react';",
                                       "import { screen, waitFor, within } from '@testing-library/react';"), (
        "import { MemoryRouter } from 'react-router-dom';\n", ""), (
        "import OrdersPage from './OrdersPage';", "import { renderWithClient } from '../../test/renderWithClient';\n"
        "import OrdersPage from './OrdersPage';"), (
        "function renderPage() {\n  return render(\n    <MemoryRouter initialEntries={['/orders']}>\n      <OrdersPage />\n"
        "    </MemoryRouter>,\n  );\n}", "function renderPage() {\n  return renderWithClient(<OrdersPage />, { route: '/orders' });\n}"))
    r.parallel("Expected: the tests render `OrdersPage` without a `QueryClientProvider`. I'll add a `renderWithClient` "
               "helper that gives each test a fresh client (no retries, no shared cache) and use it in the Orders tests.",
               [("write_file", {"path": "src/test/renderWithClient.tsx", "content": RENDER_WITH_CLIENT},
                 WROTE),
                ("write_file", {"path": "src/pages/orders/OrdersPage.test.tsx", "content": new_test},
                 WROTE)])
    test_out = ("> storefront-web@2.14.0 typecheck\n> tsc --noEmit -p tsconfig.json\n\n"
                "PASS src/pages/orders/OrdersPage.test.tsx (6.412 s)\n"
                "  OrdersPage\n    ✓ renders the orders table (231 ms)\n    ✓ shows an empty state when there are no orders (48 ms)\n"
                "    ✓ filters by status (119 ms)\n    ✓ paginates with the next button (97 ms)\n"
                "PASS src/pages/orders/useOrders.test.ts\n  useOrders\n    ✓ maps API rows to view models (12 ms)\n"
                "    ✓ surfaces API errors (21 ms)\n\n"
                "Test Suites: 2 passed, 2 total\nTests:       6 passed, 6 total\nSnapshots:   0 total\n"
                "Time:        8.233 s\nRan all test suites matching /src\\/pages\\/orders/i.")
    r.call("Typecheck and the Orders tests:", "bash",
           {"command": "npm run typecheck && CI=true npx react-scripts test --watchAll=false src/pages/orders 2>&1 | tail -25"},
           bash_result(test_out), took=(20, 30))
    r.assistant(
        "Done.\n\n- **Cause of the failure:** `@tanstack/react-query@5` has a peer dependency on `react@^18`; the "
        "project is on `react@17.0.2`, so npm stopped with `ERESOLVE unable to resolve dependency tree` (the last "
        "lines of an 8,000-line install log; the first install of the locked tree was fine).\n"
        "- **Fix:** installed `@tanstack/react-query@^4.36.1` + devtools (peer range `^16.8 || ^17 || ^18`). No "
        "`--legacy-peer-deps`.\n- `src/lib/queryClient.ts`: shared `QueryClient` (30 s staleTime, no retry on 4xx).\n"
        "- `src/index.tsx`: `QueryClientProvider` + devtools around the app.\n"
        "- `src/pages/orders/useOrders.ts`: `useQuery` replaces the hand-rolled cache/abort/retry (-60 lines).\n"
        "- `src/test/renderWithClient.tsx`: test helper with a fresh `QueryClient`; Orders tests use it.\n"
        "- `package-lock.json` is now lockfileVersion 3 (regenerated by npm 10).\n"
        "- Typecheck passes; Orders tests 6/6.\n\nWhen you do the React 18 upgrade in Q3, bump to v5 at the "
        "same time: rename `cacheTime` → `gcTime`, and `isLoading` → `isPending` where used.")
    return r


# ==========================================================================================
# 2. nginx-error-log
# ==========================================================================================
NGINX_WORKERS = (2871, 2872, 2873, 2874)
ORDERS_UPSTREAMS = ("10.0.3.17:8080", "10.0.3.18:8080", "10.0.3.19:8080")


def _client_pool(rng: random.Random) -> list[str]:
    nets = ("203.0.113", "198.51.100", "192.0.2", "100.64.12", "100.64.13")
    return [f"{pick(rng, nets)}.{rng.randint(2, 254)}" for _ in range(240)]


def nginx_error_log(rng: random.Random, n_lines: int = 20_000) -> list[str]:
    """An nginx error.log at level info: an orders deploy at 06:02 makes /v1/orders slower than
    proxy_read_timeout 5s; 10.0.3.19 later crash-loops; no upstream keepalive."""
    clients = _client_pool(rng)
    start = datetime(2024, 3, 14, 5, 40, 3)
    span = 13_900.0
    deploy, crash, calm = 22 * 60.0, 88 * 60.0, 105 * 60.0
    cid = 918_204
    order_reqs = ["/v1/orders", "/v1/orders", "/v1/orders", "/v1/orders?status=open",
                  "/v1/orders?status=open&page=2", "/v1/orders?customer=84120&limit=50"]
    mixes = {
        "calm": (("keepalive", 80), ("client_timeout", 8), ("reset", 4), ("ssl", 3), ("ssl_proto", 2),
                 ("buffered", 1), ("timeout", 1), ("prematurely_client", 1)),
        "slow": (("keepalive", 74), ("client_timeout", 6), ("reset", 3), ("ssl", 3), ("timeout", 8),
                 ("disabled", 2), ("prematurely_client", 1), ("addr", 1), ("ssl_proto", 1), ("buffered", 1)),
        "crash": (("keepalive", 62), ("client_timeout", 5), ("timeout", 9), ("refused", 8), ("nolive", 6),
                  ("disabled", 3), ("upstream_closed", 2), ("prematurely_client", 2), ("ssl", 3)),
        "after": (("keepalive", 74), ("client_timeout", 6), ("reset", 2), ("ssl", 3), ("timeout", 7),
                  ("refused", 3), ("nolive", 1), ("disabled", 2), ("prematurely_client", 1), ("addr", 1)),
    }
    tables = {k: ([n for n, _ in v], [w for _, w in v]) for k, v in mixes.items()}
    gaps = sorted(rng.uniform(0, span) for _ in range(n_lines - 11))  # + 11 lines of the reload
    out: list[str] = []
    reloaded = False

    def ts(sec: float) -> str:
        return (start + timedelta(seconds=sec)).strftime("%Y/%m/%d %H:%M:%S")

    for t in gaps:
        if not reloaded and t > deploy - 5:
            reloaded = True
            stamp = ts(deploy - 5)
            out += [f"{stamp} [notice] 1#1: signal 1 (SIGHUP) received from 31877, reconfiguring",
                    f"{stamp} [notice] 1#1: reconfiguring",
                    f'{stamp} [notice] 1#1: using the "epoll" event method',
                    f"{stamp} [notice] 1#1: start worker processes"]
            out += [f"{stamp} [notice] 1#1: start worker process {w}" for w in NGINX_WORKERS]
            out += [f"{stamp} [notice] 1#1: signal 17 (SIGCHLD) received from 2211",
                    f"{stamp} [notice] 1#1: worker process 2211 exited with code 0",
                    f"{stamp} [notice] 1#1: signal 29 (SIGIO) received"]
        phase = "calm" if t < deploy else "slow" if t < crash else "crash" if t < calm else "after"
        names, weights = tables[phase]
        kind = rng.choices(names, weights)[0]
        cid += rng.randint(1, 9)
        w = pick(rng, NGINX_WORKERS)
        ip = pick(rng, clients)
        head = f"{ts(t)} [{{}}] {w}#{w}: *{cid} "
        req = pick(rng, order_reqs)
        up = pick(rng, ORDERS_UPSTREAMS[:2] if phase in ("crash", "after") else ORDERS_UPSTREAMS)
        tail = f', client: {ip}, server: api.example.com, request: "GET {req} HTTP/1.1", ' \
               f'upstream: "http://{up}{req}", host: "api.example.com"'
        if kind == "keepalive":
            line = head.format("info") + f"client {ip} closed keepalive connection"
        elif kind == "client_timeout":
            line = head.format("info") + f"client timed out (110: Connection timed out) while waiting for request, client: {ip}, server: 0.0.0.0:443"
        elif kind == "reset":
            line = head.format("info") + f"recv() failed (104: Connection reset by peer) while waiting for request, client: {ip}, server: 0.0.0.0:443"
        elif kind == "ssl":
            line = head.format("crit") + f"SSL_do_handshake() failed (SSL: error:0A00006C:SSL routines::bad key share) while SSL handshaking, client: {ip}, server: 0.0.0.0:443"
        elif kind == "ssl_proto":
            line = head.format("info") + f"SSL_do_handshake() failed (SSL: error:0A000102:SSL routines::unsupported protocol) while SSL handshaking, client: {ip}, server: 0.0.0.0:443"
        elif kind == "buffered":
            path = f"/var/cache/nginx/proxy_temp/{rng.randint(0, 9)}/{rng.randint(10, 99)}/{rng.randint(1, 99999):010d}"
            line = head.format("warn") + f"an upstream response is buffered to a temporary file {path} while reading upstream" \
                + f', client: {ip}, server: api.example.com, request: "GET /v1/orders/export.csv HTTP/1.1", ' \
                  f'upstream: "http://{up}/v1/orders/export.csv", host: "api.example.com"'
        elif kind == "timeout":
            if rng.random() < 0.7:
                req = "/v1/orders"
                tail = f', client: {ip}, server: api.example.com, request: "GET /v1/orders HTTP/1.1", ' \
                       f'upstream: "http://{up}/v1/orders", host: "api.example.com"'
            line = head.format("error") + "upstream timed out (110: Connection timed out) while reading response header from upstream" + tail
        elif kind == "disabled":
            line = head.format("warn") + "upstream server temporarily disabled while reading response header from upstream" + tail
        elif kind == "prematurely_client":
            line = head.format("info") + "epoll_wait() reported that client prematurely closed connection, so upstream connection is closed too while reading response header from upstream" + tail
        elif kind == "addr":
            line = head.format("crit") + "connect() to " + up + " failed (99: Cannot assign requested address) while connecting to upstream" + tail
        elif kind == "refused":
            method, path = ("POST", "/v1/checkout") if rng.random() < 0.4 else ("GET", req)
            line = head.format("error") + "connect() failed (111: Connection refused) while connecting to upstream" \
                + f', client: {ip}, server: api.example.com, request: "{method} {path} HTTP/1.1", ' \
                  f'upstream: "http://10.0.3.19:8080{path}", host: "api.example.com"'
        elif kind == "nolive":
            line = head.format("error") + "no live upstreams while connecting to upstream" \
                + f', client: {ip}, server: api.example.com, request: "GET {req} HTTP/1.1", ' \
                  f'upstream: "http://orders_backend{req}", host: "api.example.com"'
        else:  # upstream_closed
            line = head.format("error") + "upstream prematurely closed connection while reading response header from upstream" \
                + f', client: {ip}, server: api.example.com, request: "GET {req} HTTP/1.1", ' \
                  f'upstream: "http://10.0.3.19:8080{req}", host: "api.example.com"'
        out.append(line)
    assert len(out) == n_lines
    return out


NGINX_SITE_CONF = """\
# /etc/nginx/conf.d/api.example.com.conf  (managed in ops/api-gateway, deployed by ansible)

upstream orders_backend {
    server 10.0.3.17:8080 max_fails=1 fail_timeout=30s;
    server 10.0.3.18:8080 max_fails=1 fail_timeout=30s;
    server 10.0.3.19:8080 max_fails=1 fail_timeout=30s;
}

upstream catalog_backend {
    server 10.0.4.21:8081;
    server 10.0.4.22:8081;
}

server {
    listen 443 ssl http2;
    server_name api.example.com;

    ssl_certificate     /etc/nginx/tls/api.example.com.fullchain.pem;
    ssl_certificate_key /etc/nginx/tls/api.example.com.key;
    ssl_protocols       TLSv1.3;
    ssl_session_cache   shared:SSL:20m;

    access_log /var/log/nginx/api.access.log main;
    error_log  /var/log/nginx/error.log info;   # TODO(ops-412): back to warn after the TLS rollout

    client_max_body_size 2m;

    proxy_connect_timeout 2s;
    proxy_send_timeout    5s;
    proxy_read_timeout    5s;

    proxy_set_header Host              $host;
    proxy_set_header X-Real-IP         $remote_addr;
    proxy_set_header X-Forwarded-For   $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header X-Request-Id      $request_id;

    location /v1/orders {
        proxy_pass http://orders_backend;
    }

    location /v1/checkout {
        proxy_pass http://orders_backend;
    }

    location /v1/products {
        proxy_pass http://catalog_backend;
        proxy_cache catalog;
        proxy_cache_valid 200 60s;
    }

    location = /healthz {
        access_log off;
        return 200 "ok\\n";
    }
}
"""


def session_nginx() -> Recorder:
    ws = "/home/dev/ops/api-gateway"
    r = Recorder(seed=1001, title="504s on api.example.com after the orders deploy (nginx error.log)",
                 created="2024-03-14T09:41:10+00:00", model="gpt-4o", window=128000, workspace=ws, tier1=False,
                 existing=("conf.d/api.example.com.conf",))
    rng = r.rng
    log = nginx_error_log(rng)
    text = "\n".join(log) + "\n"
    r.system()
    r.user("Since this morning's orders-api deploy (v2.31.0, ~06:00 UTC) api.example.com returns a lot of 504s "
           "on the orders list, and some 502s. I copied the gateway's /var/log/nginx/error.log to "
           "logs/error.log. Can you find out what's going on and propose a fix on the nginx side? The app team "
           "is looking at the service itself.")
    r.call("Let me read the error log.", "read_file", {"path": "logs/error.log"}, text, took=(1.5, 2.5))

    def count(pred: Callable[[str], bool]) -> int:
        return sum(1 for s in log if pred(s))

    n_timeout = count(lambda s: "upstream timed out" in s)
    n_refused = count(lambda s: "(111: Connection refused)" in s)
    n_nolive = count(lambda s: "no live upstreams" in s)
    n_ssl = count(lambda s: "SSL_do_handshake() failed" in s)
    n_addr = count(lambda s: "(99: Cannot assign requested address)" in s)
    n_disabled = count(lambda s: "temporarily disabled" in s)
    n_closed = count(lambda s: "upstream prematurely closed" in s)
    n_client = count(lambda s: "client prematurely closed" in s)
    levels: dict[str, int] = {}
    for s in log:
        lvl = s.split(" ", 3)[2]
        levels[lvl] = levels.get(lvl, 0) + 1
    r.note(
        f"That's {len(log):,} lines from 05:40 to 09:32, logged at level `info`, so most of it is noise "
        "(`closed keepalive connection`, `client timed out ... while waiting for request`). The signal:\n\n"
        "- From ~06:02, right after a reload (`signal 1 (SIGHUP) ... reconfiguring`), `upstream timed out (110: "
        "Connection timed out) while reading response header from upstream` on `GET /v1/orders` against "
        "10.0.3.17 and 10.0.3.18 - those are the 504s.\n"
        "- Each timeout is followed by `upstream server temporarily disabled` - with `max_fails=1` one slow "
        "response takes a backend out for 30 s.\n"
        "- From ~07:08 10.0.3.19 stops answering (`upstream prematurely closed connection`, "
        "`connect() failed (111: Connection refused)`), and `no live upstreams` appears whenever all three are "
        "out at once - the 502s.\n"
        "- `SSL_do_handshake() failed ... bad key share` / `unsupported protocol` - old clients vs. TLS 1.3 only; "
        "unrelated to the incident.\n\nLet me quantify rather than eyeball.")
    summary = (f"{levels.get('[info]', 0):>6} [info]\n{levels.get('[error]', 0):>6} [error]\n"
               f"{levels.get('[warn]', 0):>6} [warn]\n{levels.get('[crit]', 0):>6} [crit]\n"
               f"{levels.get('[notice]', 0):>6} [notice]\n---\n"
               f"upstream timed out: {n_timeout}\nconnect() failed (111: {n_refused}\nno live upstreams: {n_nolive}\n"
               f"temporarily disabled: {n_disabled}\nupstream prematurely closed: {n_closed}\n"
               f"client prematurely closed: {n_client}\nCannot assign requested address: {n_addr}\n"
               f"SSL_do_handshake failed: {n_ssl}")
    r.call("", "bash", {"command": "awk '{print $3}' logs/error.log | sort | uniq -c | sort -rn; echo ---; "
                                   "for p in 'upstream timed out' 'connect() failed (111' 'no live upstreams' "
                                   "'temporarily disabled' 'upstream prematurely closed' 'client prematurely closed' "
                                   "'Cannot assign requested address' 'SSL_do_handshake'; do "
                                   "printf '%s: ' \"$p\"; grep -cF \"$p\" logs/error.log; done"},
           bash_result(summary))
    buckets: dict[str, int] = {}
    for s in log:
        if "upstream timed out" in s:
            key = s[11:15] + "0"
            buckets[key] = buckets.get(key, 0) + 1
    hist = "\n".join(f"{v:>6} {k}" for k, v in sorted(buckets.items()))
    ups: dict[str, int] = {}
    for s in log:
        if "upstream timed out" in s:
            u = s.split('upstream: "', 1)[1].split('"', 1)[0]
            ups[u] = ups.get(u, 0) + 1
    top = "\n".join(f"{v:>6} {k}" for k, v in sorted(ups.items(), key=lambda kv: (-kv[1], kv[0]))[:12])
    r.parallel("Timeouts per 10 minutes, and which upstream URLs time out:",
               [("bash", {"command": "grep -F 'upstream timed out' logs/error.log | cut -c12-15 | sed 's/$/0/' | uniq -c"},
                 bash_result(hist)),
                ("bash", {"command": "grep -F 'upstream timed out' logs/error.log | grep -oE 'upstream: \"[^\"]+\"' "
                                     "| cut -d'\"' -f2 | sort | uniq -c | sort -rn | head -12"},
                 bash_result(top))])
    r.call("Timeouts start at the deploy and stay flat, almost all on the list endpoint. Now the config "
           "that governs this.", "read_file", {"path": "conf.d/api.example.com.conf"}, NGINX_SITE_CONF)
    first_refused = next(s for s in log if "(111: Connection refused)" in s)
    first_closed = next(s for s in log if "upstream prematurely closed" in s)
    nolive = [s for s in log if "no live upstreams" in s][:3]
    addr = [s for s in log if "(99: Cannot assign" in s][:2]
    r.call("Let me look at the first failures of 10.0.3.19 and the address exhaustion lines.", "bash",
           {"command": "grep -m1 -F 'upstream prematurely closed' logs/error.log; "
                       "grep -m1 -F '(111: Connection refused)' logs/error.log; "
                       "grep -m3 -F 'no live upstreams' logs/error.log; "
                       "grep -m2 -F '(99: Cannot assign' logs/error.log"},
           bash_result("\n".join([first_closed, first_refused] + nolive + addr)))
    r.assistant(
        "## Diagnosis\n\n"
        f"1. **504s = `proxy_read_timeout 5s`.** {n_timeout:,} `upstream timed out (110: Connection timed out) while "
        "reading response header from upstream`, starting with the 06:02 deploy, mostly `GET /v1/orders` on "
        "10.0.3.17/.18. The new release is slower on the list endpoint (the app team should check it), and 5 s "
        "leaves no headroom: nginx gives up while the backend is still working, and the client retries, "
        "which adds load.\n"
        "2. **`max_fails=1 fail_timeout=30s` amplifies it.** A single timeout disables a backend for 30 s "
        f"({n_disabled:,} `temporarily disabled`). With two of three busy and 10.0.3.19 crash-looping from 07:08 "
        f"({n_closed} `upstream prematurely closed`, {n_refused:,} `connect() failed (111: Connection refused)`), "
        f"the pool is regularly empty: {n_nolive:,} `no live upstreams` = the 502s.\n"
        "3. **No upstream keepalive.** Every request opens a new TCP connection to the backend (no `keepalive` "
        "in the upstream, HTTP/1.0 to the backend by default); under retries that exhausts ephemeral ports: "
        f"{n_addr} `connect() ... (99: Cannot assign requested address)`.\n"
        f"4. Unrelated: {n_ssl:,} `SSL_do_handshake() failed` are old clients hitting `ssl_protocols TLSv1.3`.\n\n"
        "## Proposed nginx change\n\n"
        "- `/v1/orders`: `proxy_read_timeout 30s` (the app's own DB timeout is 25 s); keep 5 s elsewhere.\n"
        "- upstream: `keepalive 64; keepalive_timeout 60s;` plus `proxy_http_version 1.1;` and "
        "`proxy_set_header Connection \"\";` (required for upstream keepalive).\n"
        "- `max_fails=3 fail_timeout=10s` so one slow response doesn't evict a backend.\n"
        "- `proxy_next_upstream error timeout http_502;` with `proxy_next_upstream_tries 2` for GETs.\n"
        "- `error_log ... warn` - the info level is why this file has 20k lines in 4 hours.\n\n"
        "Shall I apply it?")
    r.user("Yes, apply it. But make sure we never retry POST /v1/checkout on another backend, a double charge "
           "is worse than a 504.", gap=(60, 200))
    conf = edit(NGINX_SITE_CONF, (
        "    server 10.0.3.17:8080 max_fails=1 fail_timeout=30s;\n    server 10.0.3.18:8080 max_fails=1 fail_timeout=30s;\n"
        "    server 10.0.3.19:8080 max_fails=1 fail_timeout=30s;\n}",
        "    server 10.0.3.17:8080 max_fails=3 fail_timeout=10s;\n    server 10.0.3.18:8080 max_fails=3 fail_timeout=10s;\n"
        "    server 10.0.3.19:8080 max_fails=3 fail_timeout=10s;\n\n"
        "    # reuse connections to the backends (needs proxy_http_version 1.1 + empty Connection below)\n"
        "    keepalive 64;\n    keepalive_timeout 60s;\n    keepalive_requests 1000;\n}"), (
        "    error_log  /var/log/nginx/error.log info;   # TODO(ops-412): back to warn after the TLS rollout\n",
        "    error_log  /var/log/nginx/error.log warn;\n"), (
        "    proxy_read_timeout    5s;\n",
        "    proxy_read_timeout    5s;\n\n    proxy_http_version 1.1;\n    proxy_set_header Connection \"\";\n"), (
        "    location /v1/orders {\n        proxy_pass http://orders_backend;\n    }\n",
        "    location /v1/orders {\n        proxy_pass http://orders_backend;\n"
        "        # the list endpoint can take up to the app's 25 s DB timeout (INC-2291)\n"
        "        proxy_read_timeout 30s;\n        proxy_next_upstream error timeout http_502;\n"
        "        proxy_next_upstream_tries 2;\n        proxy_next_upstream_timeout 35s;\n    }\n"), (
        "    location /v1/checkout {\n        proxy_pass http://orders_backend;\n    }\n",
        "    location /v1/checkout {\n        proxy_pass http://orders_backend;\n"
        "        # never replay a payment on another backend: a double charge is worse than a 504\n"
        "        proxy_next_upstream off;\n    }\n"))
    r.call("nginx already refuses to pass non-idempotent requests (POST) to the next upstream unless "
           "`non_idempotent` is set, but I'll make it explicit with `proxy_next_upstream off` on /v1/checkout.",
           "write_file", {"path": "conf.d/api.example.com.conf", "content": conf},
           WROTE)
    r.call("Syntax check with the same nginx version as production:", "bash",
           {"command": "docker run --rm -v \"$PWD/conf.d:/etc/nginx/conf.d:ro\" -v \"$PWD/tls:/etc/nginx/tls:ro\" "
                       "nginx:1.24.0 nginx -t 2>&1"},
           bash_result("nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n"
                       "nginx: configuration file /etc/nginx/nginx.conf test is successful"), took=(3, 6))
    r.assistant(
        "Applied to `conf.d/api.example.com.conf`; `nginx -t` passes.\n\n"
        "- `/v1/orders`: `proxy_read_timeout 30s`, retry on `error timeout http_502` at most once (2 tries, 35 s).\n"
        "- `/v1/checkout`: `proxy_next_upstream off` - a POST is never replayed on another backend.\n"
        "- upstream: `keepalive 64` (+ `proxy_http_version 1.1`, `Connection \"\"`), `max_fails=3 fail_timeout=10s`.\n"
        "- `error_log` back to `warn`.\n\n"
        "This stops nginx from turning slow responses into 504s and evicting healthy backends, but the root cause "
        "is the orders-api v2.31.0 list endpoint being slower, and 10.0.3.19 crash-looping since 07:08 - tell the "
        "app team to check its logs (OOM kill is my guess). Roll out with `ansible-playbook gateway.yml --limit "
        "api-gw --tags nginx` and watch `upstream timed out` in the log drop.")
    return r


# ==========================================================================================
# 3. long-refactor
# ==========================================================================================
@dataclass(frozen=True)
class Entity:
    key: str                       # invoice
    cls: str                       # Invoice
    table: str                     # invoices
    scope: str                     # the field lists are filtered by, e.g. customer_id
    fields: tuple[tuple[str, str, str], ...]   # (name, python type, mapped_column args)
    actions: tuple[tuple[str, str, str], ...]  # (method, from status, to status)
    money: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return self.key.replace("_", " ")


def _f(spec: str) -> tuple[tuple[str, str, str], ...]:
    out = []
    for line in spec.strip().splitlines():
        name, typ, col = (p.strip() for p in line.split("|"))
        out.append((name, typ, col))
    return tuple(out)


ENTITIES: tuple[Entity, ...] = (
    Entity("invoice", "Invoice", "invoices", "customer_id", _f("""
        number | str | String(32), unique=True
        customer_id | int | ForeignKey("customers.id", ondelete="RESTRICT"), index=True
        status | str | String(16), default="draft"
        currency | str | String(3)
        subtotal | Decimal | Numeric(12, 2), default=Decimal("0.00")
        tax_total | Decimal | Numeric(12, 2), default=Decimal("0.00")
        total | Decimal | Numeric(12, 2), default=Decimal("0.00")
        issued_at | datetime | None | DateTime(timezone=True), nullable=True
        due_at | datetime | None | DateTime(timezone=True), nullable=True
        paid_at | datetime | None | DateTime(timezone=True), nullable=True
        """.replace("datetime | None |", "datetime_opt |")),
        (("finalize", "draft", "open"), ("void", "open", "void"), ("mark_paid", "open", "paid")),
        ("subtotal", "tax_total", "total")),
    Entity("customer", "Customer", "customers", "account_id", _f("""
        account_id | int | ForeignKey("accounts.id"), index=True
        external_ref | str | String(64), unique=True
        name | str | String(200)
        email | str | String(320)
        country | str | String(2)
        tax_id | str_opt | String(32), nullable=True
        status | str | String(16), default="active"
        credit_balance | Decimal | Numeric(12, 2), default=Decimal("0.00")
        created_at | datetime | DateTime(timezone=True), server_default=func.now()
        """), (("suspend", "active", "suspended"), ("reactivate", "suspended", "active")), ("credit_balance",)),
    Entity("payment", "Payment", "payments", "invoice_id", _f("""
        invoice_id | int | ForeignKey("invoices.id"), index=True
        amount | Decimal | Numeric(12, 2)
        currency | str | String(3)
        method | str | String(16)
        provider_ref | str_opt | String(64), nullable=True, unique=True
        status | str | String(16), default="pending"
        failure_code | str_opt | String(32), nullable=True
        captured_at | datetime_opt | DateTime(timezone=True), nullable=True
        """), (("capture", "authorized", "captured"), ("fail", "pending", "failed"), ("authorize", "pending", "authorized")),
        ("amount",)),
    Entity("line_item", "LineItem", "line_items", "invoice_id", _f("""
        invoice_id | int | ForeignKey("invoices.id", ondelete="CASCADE"), index=True
        sku | str | String(64)
        description | str | String(500)
        quantity | int | Integer, default=1
        unit_price | Decimal | Numeric(12, 4)
        tax_rate_id | int_opt | ForeignKey("tax_rates.id"), nullable=True
        amount | Decimal | Numeric(12, 2)
        status | str | String(16), default="active"
        """), (("remove", "active", "removed"),), ("amount",)),
    Entity("tax_rate", "TaxRate", "tax_rates", "country", _f("""
        country | str | String(2), index=True
        region | str_opt | String(8), nullable=True
        name | str | String(64)
        rate | Decimal | Numeric(6, 4)
        valid_from | date | Date
        valid_to | date_opt | Date, nullable=True
        status | str | String(16), default="active"
        """), (("retire", "active", "retired"),), ()),
    Entity("credit_note", "CreditNote", "credit_notes", "invoice_id", _f("""
        invoice_id | int | ForeignKey("invoices.id"), index=True
        number | str | String(32), unique=True
        amount | Decimal | Numeric(12, 2)
        reason | str | String(32)
        status | str | String(16), default="issued"
        issued_at | datetime | DateTime(timezone=True), server_default=func.now()
        applied_at | datetime_opt | DateTime(timezone=True), nullable=True
        """), (("apply", "issued", "applied"), ("cancel", "issued", "cancelled")), ("amount",)),
    Entity("subscription", "Subscription", "subscriptions", "customer_id", _f("""
        customer_id | int | ForeignKey("customers.id"), index=True
        plan_code | str | String(32)
        status | str | String(16), default="trialing"
        quantity | int | Integer, default=1
        current_period_start | datetime | DateTime(timezone=True)
        current_period_end | datetime | DateTime(timezone=True)
        cancel_at | datetime_opt | DateTime(timezone=True), nullable=True
        """), (("activate", "trialing", "active"), ("cancel", "active", "cancelled"), ("pause", "active", "paused")), ()),
    Entity("refund", "Refund", "refunds", "payment_id", _f("""
        payment_id | int | ForeignKey("payments.id"), index=True
        amount | Decimal | Numeric(12, 2)
        reason | str | String(32)
        status | str | String(16), default="requested"
        provider_ref | str_opt | String(64), nullable=True
        created_at | datetime | DateTime(timezone=True), server_default=func.now()
        """), (("approve", "requested", "approved"), ("reject", "requested", "rejected"), ("settle", "approved", "settled")),
        ("amount",)),
    Entity("dunning_attempt", "DunningAttempt", "dunning_attempts", "invoice_id", _f("""
        invoice_id | int | ForeignKey("invoices.id"), index=True
        attempt_no | int | Integer
        channel | str | String(16)
        status | str | String(16), default="scheduled"
        scheduled_at | datetime | DateTime(timezone=True)
        sent_at | datetime_opt | DateTime(timezone=True), nullable=True
        outcome | str_opt | String(32), nullable=True
        """), (("send", "scheduled", "sent"), ("skip", "scheduled", "skipped")), ()),
    Entity("webhook_event", "WebhookEvent", "webhook_events", "provider", _f("""
        provider | str | String(16), index=True
        event_id | str | String(64), unique=True
        event_type | str | String(64)
        payload | dict | JSON
        status | str | String(16), default="received"
        received_at | datetime | DateTime(timezone=True), server_default=func.now()
        processed_at | datetime_opt | DateTime(timezone=True), nullable=True
        """), (("process", "received", "processed"), ("discard", "received", "discarded")), ()),
    Entity("coupon", "Coupon", "coupons", "campaign_id", _f("""
        campaign_id | int | ForeignKey("campaigns.id"), index=True
        code | str | String(32), unique=True
        percent_off | Decimal_opt | Numeric(5, 2), nullable=True
        amount_off | Decimal_opt | Numeric(12, 2), nullable=True
        max_redemptions | int_opt | Integer, nullable=True
        times_redeemed | int | Integer, default=0
        status | str | String(16), default="active"
        expires_at | datetime_opt | DateTime(timezone=True), nullable=True
        """), (("expire", "active", "expired"), ("disable", "active", "disabled")), ("amount_off",)),
    Entity("payout", "Payout", "payouts", "merchant_id", _f("""
        merchant_id | int | ForeignKey("merchants.id"), index=True
        amount | Decimal | Numeric(14, 2)
        currency | str | String(3)
        status | str | String(16), default="pending"
        bank_ref | str_opt | String(64), nullable=True
        arrival_date | date_opt | Date, nullable=True
        created_at | datetime | DateTime(timezone=True), server_default=func.now()
        """), (("submit", "pending", "in_transit"), ("mark_paid", "in_transit", "paid"), ("fail", "in_transit", "failed")),
        ("amount",)),
)

_PYTYPE = {"str": "str", "str_opt": "str | None", "int": "int", "int_opt": "int | None", "Decimal": "Decimal",
           "Decimal_opt": "Decimal | None", "datetime": "datetime", "datetime_opt": "datetime | None",
           "date": "date", "date_opt": "date | None", "dict": "dict[str, Any]"}
PROJECT = "/home/dev/src/invoicing-api"


def model_source(e: Entity) -> str:
    cols = []
    for name, typ, col in e.fields:
        cols.append(f"    {name}: Mapped[{_PYTYPE[typ]}] = mapped_column({col})")
    rels = []
    if e.scope.endswith("_id"):
        other = e.scope[:-3]
        other_cls = "".join(p.title() for p in other.split("_"))
        rels.append(f'    {other}: Mapped["{other_cls}"] = relationship(back_populates="{e.table}", lazy="raise")')
    indexes = f'        Index("ix_{e.table}_{e.scope}_status", "{e.scope}", "status"),'
    checks = "".join(f'\n        CheckConstraint("{m} >= 0", name="ck_{e.table}_{m}_non_negative"),'
                     for m in e.money if not m.endswith("_off"))
    status_values = sorted({s for _, a, b in e.actions for s in (a, b)})
    return (f'"""ORM model for the `{e.table}` table (see migrations/versions for its history)."""\n\n'
            "from __future__ import annotations\n\n"
            "from datetime import date, datetime\nfrom decimal import Decimal\nfrom typing import TYPE_CHECKING, Any\n\n"
            "from sqlalchemy import JSON, CheckConstraint, Date, DateTime, ForeignKey, Index, Integer, Numeric, String, func\n"
            "from sqlalchemy.orm import Mapped, mapped_column, relationship\n\n"
            "from app.db.base import Base, TimestampMixin\n\n"
            "if TYPE_CHECKING:\n" + "".join(
                f"    from app.models.{r.split(':')[0].strip()} import {r.split(chr(34))[1]}\n" for r in rels) +
            ("    pass\n" if not rels else "") + "\n\n"
            f"{e.key.upper()}_STATUSES = {tuple(status_values)!r}\n\n\n"
            f"class {e.cls}(TimestampMixin, Base):\n"
            f'    __tablename__ = "{e.table}"\n'
            f"    __table_args__ = (\n{indexes}{checks}\n    )\n\n"
            "    id: Mapped[int] = mapped_column(primary_key=True)\n" + "\n".join(cols) + "\n" +
            ("\n" + "\n".join(rels) + "\n" if rels else "") +
            "\n    def __repr__(self) -> str:\n"
            f'        return f"<{e.cls} id={{self.id}} status={{self.status!r}}>"\n')


def _cols(e: Entity) -> str:
    return ", ".join(["id"] + [f[0] for f in e.fields])


def legacy_block(e: Entity) -> list[str]:
    """This entity's part of the old BillingService god class (raw SQL through psycopg2)."""
    cols = _cols(e)
    k, t = e.key, e.table
    out = [f"    # ---- {e.title}s " + "-" * (86 - len(e.title)),
           f"    def get_{k}(self, {k}_id):",
           "        cur = self.conn.cursor(cursor_factory=RealDictCursor)",
           f'        cur.execute("SELECT {cols} FROM {t} WHERE id = %s", ({k}_id,))',
           "        row = cur.fetchone()", "        cur.close()",
           "        if row is None:",
           f'            raise BillingError("{k}_not_found", "{e.title} %s not found" % {k}_id)',
           "        return dict(row)", "",
           f"    def list_{t}(self, {e.scope}, status=None, limit=50, offset=0):",
           f'        sql = "SELECT {cols} FROM {t} WHERE {e.scope} = %s"',
           f"        params = [{e.scope}]", "        if status:",
           '            sql += " AND status = %s"', "            params.append(status)",
           '        sql += " ORDER BY id DESC LIMIT %s OFFSET %s"', "        params += [limit, offset]",
           "        cur = self.conn.cursor(cursor_factory=RealDictCursor)", "        cur.execute(sql, params)",
           "        rows = [dict(r) for r in cur.fetchall()]", "        cur.close()", "        return rows", "",
           f"    def create_{k}(self, data):",
           f"        fields = [{', '.join(repr(f[0]) for f in e.fields if f[0] not in ('status', 'created_at', 'received_at', 'issued_at'))}]",
           "        missing = [f for f in fields if f not in data]",
           "        if missing:",
           f'            raise BillingError("invalid_{k}", "missing fields: " + ", ".join(missing))']
    for m in e.money:
        out += [f"        if data.get('{m}') is not None:",
                f"            data['{m}'] = round(float(data['{m}']), 2)  # FIXME: float money"]
    out += ["        cur = self.conn.cursor()",
            "        cur.execute(",
            f'            "INSERT INTO {t} (" + ", ".join(fields) + ") VALUES (" + ", ".join(["%s"] * len(fields)) + ") RETURNING id",',
            "            [data[f] for f in fields],", "        )", "        new_id = cur.fetchone()[0]",
            "        self.conn.commit()", "        cur.close()",
            f'        log.info("{k} created", extra={{"{k}_id": new_id}})',
            "        return new_id", ""]
    for method, src, dst in e.actions:
        out += [f"    def {method}_{k}(self, {k}_id, actor=None):",
                f"        {k} = self.get_{k}({k}_id)",
                f"        if {k}['status'] != '{src}':",
                f'            raise BillingError("invalid_state", "cannot {method} {e.title} in status %s" % {k}["status"])',
                "        cur = self.conn.cursor()",
                f"        cur.execute(\"UPDATE {t} SET status = '{dst}', updated_at = now() WHERE id = %s\", ({k}_id,))",
                f"        self._audit(actor, '{k}.{method}', {k}_id)",
                "        self.conn.commit()", "        cur.close()",
                f"        self.events.publish('{k}.{dst}', {{'id': {k}_id}})", ""]
    if e.money:
        m = e.money[-1]
        out += [f"    def total_{m}_for_{e.scope.removesuffix('_id')}(self, {e.scope}, since=None):",
                "        cur = self.conn.cursor()",
                f'        sql = "SELECT COALESCE(SUM({m}), 0) FROM {t} WHERE {e.scope} = %s"',
                f"        params = [{e.scope}]", "        if since is not None:",
                '            sql += " AND created_at >= %s"', "            params.append(since)",
                "        cur.execute(sql, params)", "        total = cur.fetchone()[0]", "        cur.close()",
                "        return float(total)", ""]
    return out


def legacy_service_lines() -> tuple[list[str], dict[str, tuple[int, int]]]:
    head = textwrap.dedent('''\
        """Billing service.

        Everything billing-related lives here for now. TODO: split this up (see ARCH-88).
        """

        import logging
        from datetime import datetime, timedelta

        from psycopg2.extras import RealDictCursor

        from app.events import EventBus
        from app.errors import BillingError

        log = logging.getLogger(__name__)


        class BillingService:
            """Facade over the billing tables. One instance per request (see app/deps.py)."""

            def __init__(self, conn, events=None, clock=datetime.utcnow):
                self.conn = conn
                self.events = events or EventBus()
                self.clock = clock

            def _audit(self, actor, action, object_id):
                cur = self.conn.cursor()
                cur.execute(
                    "INSERT INTO audit_log (actor, action, object_id, created_at) VALUES (%s, %s, %s, %s)",
                    (actor or "system", action, object_id, self.clock()),
                )
                cur.close()
        ''').splitlines() + [""]
    lines = list(head)
    spans: dict[str, tuple[int, int]] = {}
    for e in ENTITIES:
        start = len(lines) + 1
        lines += legacy_block(e)
        spans[e.key] = (start, len(lines))
    lines += ["    " + ln if ln else ln for ln in textwrap.dedent('''\
            # ---- reporting -----------------------------------------------------------------------
            def revenue_by_month(self, account_id, year):
                # hand-tuned by the DBA team (PERF-311); uses the partial index ix_invoices_paid_month
                cur = self.conn.cursor(cursor_factory=RealDictCursor)
                cur.execute(
                    """
                    SELECT date_trunc('month', i.paid_at) AS month,
                           i.currency,
                           SUM(i.total) FILTER (WHERE i.status = 'paid')           AS gross,
                           COALESCE(SUM(cn.amount) FILTER (WHERE cn.status = 'applied'), 0) AS credited,
                           COUNT(DISTINCT i.customer_id)                            AS paying_customers
                      FROM invoices i
                      JOIN customers c ON c.id = i.customer_id AND c.account_id = %(account_id)s
                      LEFT JOIN credit_notes cn ON cn.invoice_id = i.id
                     WHERE i.paid_at >= make_date(%(year)s, 1, 1)
                       AND i.paid_at <  make_date(%(year)s + 1, 1, 1)
                  GROUP BY 1, 2
                  ORDER BY 1, 2
                    """,
                    {"account_id": account_id, "year": year},
                )
                rows = cur.fetchall()
                cur.close()
                return [dict(r) for r in rows]
        ''').splitlines()]
    return lines, spans


def repository_source(e: Entity, *, reporting: bool = False) -> str:
    k, C = e.key, e.cls
    scope_t = "str" if not e.scope.endswith("_id") else "int"
    methods = [
        f"    def get(self, {k}_id: int) -> {C}:\n"
        f"        {k} = self._session.get({C}, {k}_id)\n"
        f"        if {k} is None:\n"
        f"            raise {C}NotFound({k}_id)\n"
        f"        return {k}\n",
        f"    def find(self, {k}_id: int) -> {C} | None:\n"
        f"        return self._session.get({C}, {k}_id)\n",
        f"    def list_for_{e.scope.removesuffix('_id')}(\n"
        f"        self, {e.scope}: {scope_t}, *, status: str | None = None, limit: int = 50, offset: int = 0\n"
        f"    ) -> Sequence[{C}]:\n"
        f"        stmt = select({C}).where({C}.{e.scope} == {e.scope})\n"
        f"        if status is not None:\n"
        f"            stmt = stmt.where({C}.status == status)\n"
        f"        stmt = stmt.order_by({C}.id.desc()).limit(limit).offset(offset)\n"
        f"        return self._session.scalars(stmt).all()\n",
        f"    def add(self, {k}: {C}) -> {C}:\n"
        f"        self._session.add({k})\n"
        f"        self._session.flush()  # assigns the id; the unit of work commits\n"
        f"        return {k}\n",
        f"    def set_status(self, {k}_id: int, status: str, *, expected: str) -> {C}:\n"
        f'        """Compare-and-set, so two workers cannot both move the same row."""\n'
        f"        stmt = (\n"
        f"            update({C})\n"
        f"            .where({C}.id == {k}_id, {C}.status == expected)\n"
        f"            .values(status=status, updated_at=func.now())\n"
        f"            .returning({C})\n"
        f"        )\n"
        f"        {k} = self._session.scalars(stmt).one_or_none()\n"
        f"        if {k} is None:\n"
        f"            current = self.get({k}_id).status\n"
        f"            raise InvalidTransition({C}, {k}_id, current, status)\n"
        f"        return {k}\n",
    ]
    if e.money:
        m = e.money[-1]
        methods.append(
            f"    def total_{m}_for_{e.scope.removesuffix('_id')}(self, {e.scope}: {scope_t}, *, since: datetime | None = None) -> Decimal:\n"
            f"        stmt = select(func.coalesce(func.sum({C}.{m}), 0)).where({C}.{e.scope} == {e.scope})\n"
            f"        if since is not None:\n"
            f"            stmt = stmt.where({C}.created_at >= since)\n"
            f"        return Decimal(self._session.scalar(stmt))\n")
    sc = e.scope.removesuffix("_id")
    methods.append(
        f"    def count_by_status(self, {e.scope}: {scope_t}) -> dict[str, int]:\n"
        f"        stmt = (\n"
        f"            select({C}.status, func.count())\n"
        f"            .where({C}.{e.scope} == {e.scope})\n"
        f"            .group_by({C}.status)\n"
        f"        )\n"
        f"        return {{status: n for status, n in self._session.execute(stmt)}}\n")
    methods.append(
        f"    def iter_for_{sc}(self, {e.scope}: {scope_t}, *, status: str | None = None, batch: int = 500) -> Iterator[{C}]:\n"
        f'        """Keyset pagination: stable under concurrent inserts, no OFFSET scans on big accounts."""\n'
        f"        last_id = 0\n"
        f"        while True:\n"
        f"            stmt = select({C}).where({C}.{e.scope} == {e.scope}, {C}.id > last_id)\n"
        f"            if status is not None:\n"
        f"                stmt = stmt.where({C}.status == status)\n"
        f"            rows = self._session.scalars(stmt.order_by({C}.id).limit(batch)).all()\n"
        f"            if not rows:\n"
        f"                return\n"
        f"            yield from rows\n"
        f"            last_id = rows[-1].id\n")
    methods.append(
        f"    def lock(self, {k}_id: int) -> {C}:\n"
        f'        """SELECT ... FOR UPDATE, for multi-row changes that must see a stable {e.title}."""\n'
        f"        stmt = select({C}).where({C}.id == {k}_id).with_for_update()\n"
        f"        {k} = self._session.scalars(stmt).one_or_none()\n"
        f"        if {k} is None:\n"
        f"            raise {C}NotFound({k}_id)\n"
        f"        return {k}\n")
    reporting_src = ""
    if reporting:
        reporting_src = textwrap.dedent('''


            class ReportingRepository:
                """Read-only reporting queries. Raw SQL on purpose: hand-tuned by the DBA team (PERF-311)."""

                REVENUE_BY_MONTH = text(
                    """
                    SELECT date_trunc('month', i.paid_at) AS month,
                           i.currency,
                           SUM(i.total) FILTER (WHERE i.status = 'paid')           AS gross,
                           COALESCE(SUM(cn.amount) FILTER (WHERE cn.status = 'applied'), 0) AS credited,
                           COUNT(DISTINCT i.customer_id)                            AS paying_customers
                      FROM invoices i
                      JOIN customers c ON c.id = i.customer_id AND c.account_id = :account_id
                      LEFT JOIN credit_notes cn ON cn.invoice_id = i.id
                     WHERE i.paid_at >= make_date(:year, 1, 1)
                       AND i.paid_at <  make_date(:year + 1, 1, 1)
                  GROUP BY 1, 2
                  ORDER BY 1, 2
                    """
                )

                def __init__(self, session: Session) -> None:
                    self._session = session

                def revenue_by_month(self, account_id: int, year: int) -> list[dict[str, Any]]:
                    rows = self._session.execute(self.REVENUE_BY_MONTH, {"account_id": account_id, "year": year})
                    return [dict(r._mapping) for r in rows]
            ''')
    return (f'"""Persistence for {e.title}s. No business rules here: see app/services/{k}_service.py."""\n\n'
            "from __future__ import annotations\n\n"
            "from collections.abc import Iterator, Sequence\nfrom datetime import datetime\nfrom decimal import Decimal\n"
            "from typing import Any\n\n"
            "from sqlalchemy import func, select, text, update\nfrom sqlalchemy.orm import Session\n\n"
            f"from app.models.{k} import {C}\n"
            "from app.repositories.errors import InvalidTransition, NotFound\n\n\n"
            f"class {C}NotFound(NotFound):\n"
            f'    code = "{k}_not_found"\n\n\n'
            f"class {C}Repository:\n"
            f"    def __init__(self, session: Session) -> None:\n"
            f"        self._session = session\n\n" + "\n".join(methods) + reporting_src)


def service_source(e: Entity, *, decimal_fix: bool = True) -> str:
    k, C = e.key, e.cls
    deps = [f"{k}s: {C}Repository"]
    if e.key in ("invoice", "credit_note", "refund", "payment"):
        deps.append("audit: AuditLog")
    deps += ["events: EventBus", "clock: Clock = utcnow"]
    init_args = ", ".join(deps)
    body = [f"class {C}Service:",
            f'    """Business rules for {e.title}s. Transactions belong to the caller (UnitOfWork)."""', "",
            f"    def __init__(self, {init_args}) -> None:",
            f"        self._{k}s = {k}s"]
    if "audit: AuditLog" in deps:
        body.append("        self._audit = audit")
    body += ["        self._events = events", "        self._clock = clock", "",
             f"    def get(self, {k}_id: int) -> {C}:",
             f"        return self._{k}s.get({k}_id)", "",
             f"    def list(self, {e.scope}, *, status: str | None = None, page: int = 1, per_page: int = 50) -> list[{C}]:",
             "        if per_page > 200:",
             '            raise ValidationError("per_page", "at most 200")',
             f"        return list(self._{k}s.list_for_{e.scope.removesuffix('_id')}({e.scope}, status=status, "
             "limit=per_page, offset=(page - 1) * per_page))", "",
             f"    def create(self, data: {C}Create) -> {C}:"]
    for m in e.money:
        if decimal_fix:
            body.append(f"        {m} = money(data.{m}) if data.{m} is not None else None")
        else:
            body.append(f"        {m} = round(float(data.{m}), 2) if data.{m} is not None else None")
    assigns = ", ".join(f"{f[0]}={f[0] if f[0] in e.money else 'data.' + f[0]}" for f in e.fields
                        if f[0] not in ("status", "created_at", "received_at", "issued_at", "times_redeemed"))
    body += [f"        {k} = {C}({assigns})",
             f"        self._{k}s.add({k})",
             f'        self._events.publish("{k}.created", {{"id": {k}.id}})',
             f'        log.info("{k} created", extra={{"{k}_id": {k}.id}})',
             f"        return {k}", ""]
    for method, src, dst in e.actions:
        body += [f"    def {method}(self, {k}_id: int, *, actor: str | None = None) -> {C}:",
                 f'        """Move a {e.title} from `{src}` to `{dst}`.',
                 "",
                 f"        Raises InvalidTransition if it is not `{src}` any more (someone else moved it first);",
                 f"        publishes `{k}.{dst}` after the status change is flushed, as BillingService.{method}_{k} did.",
                 '        """']
        body += [f'        {k} = self._{k}s.set_status({k}_id, "{dst}", expected="{src}")']
        if "audit: AuditLog" in deps:
            body.append(f'        self._audit.record(actor or "system", "{k}.{method}", {k}_id, at=self._clock())')
        if dst in ("paid", "captured", "applied", "settled", "processed", "sent"):
            stamp = {"paid": "paid_at", "captured": "captured_at", "applied": "applied_at", "settled": None,
                     "processed": "processed_at", "sent": "sent_at"}[dst]
            if stamp and stamp in [f[0] for f in e.fields]:
                body.append(f"        {k}.{stamp} = self._clock()")
        body += [f'        self._events.publish("{k}.{dst}", {{"id": {k}_id}})', f"        return {k}", ""]
    if e.money:
        m = e.money[-1]
        sc = e.scope.removesuffix("_id")
        body += [f"    def total_{m}(self, {e.scope}, *, since: datetime | None = None) -> Decimal:",
                 f"        return money(self._{k}s.total_{m}_for_{sc}({e.scope}, since=since))", ""]
    sc = e.scope.removesuffix("_id")
    body += [f"    def stats(self, {e.scope}) -> dict[str, int]:",
             f'        """Count of {e.table} per status, every status present (zeros included) for the dashboard."""',
             f"        counts = dict.fromkeys({k.upper()}_STATUSES, 0)",
             f"        counts.update(self._{k}s.count_by_status({e.scope}))",
             "        return counts", "",
             f"    def export_rows(self, {e.scope}, *, status: str | None = None) -> Iterator[list[str]]:",
             '        """Rows for the CSV export (admin UI). Amounts as strings, dates as ISO 8601, header first."""',
             f"        yield [{', '.join(repr(f[0]) for f in (('id', '', ''),) + e.fields if f[1] != 'dict')}]",
             f"        for {k} in self._{k}s.iter_for_{sc}({e.scope}, status=status, batch=500):",
             "            yield [",
             f"                str({k}.id),"]
    for name, typ, _ in e.fields:
        if typ == "dict":
            continue
        if typ.startswith("Decimal"):
            body.append(f'                to_json({k}.{name}) if {k}.{name} is not None else "",')
        elif typ.startswith(("datetime", "date")):
            body.append(f'                {k}.{name}.isoformat() if {k}.{name} else "",')
        else:
            body.append(f'                "" if {k}.{name} is None else str({k}.{name}),')
    body += ["            ]", ""]
    imports = ["from __future__ import annotations", "", "import logging", "from collections.abc import Iterator",
               "from datetime import datetime", "from decimal import Decimal", "", "from app.clock import Clock, utcnow",
               "from app.errors import ValidationError", "from app.events import EventBus",
               "from app.money import money, to_json", f"from app.models.{k} import {k.upper()}_STATUSES, {C}",
               f"from app.repositories.{k}_repository import {C}Repository", f"from app.schemas.{k} import {C}Create"]
    if "audit: AuditLog" in deps:
        imports.insert(8, "from app.audit import AuditLog")
    return (f'"""{e.title.capitalize()} use cases (split out of the old BillingService, ARCH-88)."""\n\n'
            + "\n".join(imports) + "\n\nlog = logging.getLogger(__name__)\n\n\n" + "\n".join(body).rstrip() + "\n")


def route_source(e: Entity) -> str:
    k, C = e.key, e.cls
    acts = "\n\n\n".join(
        f'@router.post("/{{{k}_id}}/{m.replace("_", "-")}", response_model={C}Out)\n'
        f"def {m}_{k}({k}_id: int, uow: UnitOfWork = Depends(get_uow), user: User = Depends(current_user)) -> {C}Out:\n"
        f"    with uow:\n"
        f"        {k} = uow.{k}s_service.{m}({k}_id, actor=user.email)\n"
        f"        uow.commit()\n"
        f"        return {C}Out.model_validate({k})"
        for m, _, _ in e.actions)
    return (f'"""HTTP routes for {e.title}s. Response field names are part of the public API (mobile v3)."""\n\n'
            "from fastapi import APIRouter, Depends, Query, status\n\n"
            "from app.api.deps import current_user, get_uow\nfrom app.auth import User\n"
            f"from app.schemas.{k} import {C}Create, {C}Out, {C}Page\nfrom app.uow import UnitOfWork\n\n"
            f'router = APIRouter(prefix="/v1/{e.table.replace("_", "-")}", tags=["{e.table}"])\n\n\n'
            f'@router.get("/{{{k}_id}}", response_model={C}Out)\n'
            f"def get_{k}({k}_id: int, uow: UnitOfWork = Depends(get_uow)) -> {C}Out:\n"
            f"    with uow:\n"
            f"        return {C}Out.model_validate(uow.{k}s_service.get({k}_id))\n\n\n"
            f'@router.get("", response_model={C}Page)\n'
            f"def list_{e.table}(\n    {e.scope}: {'int' if e.scope.endswith('_id') else 'str'},\n"
            f"    status_filter: str | None = Query(None, alias=\"status\"),\n"
            f"    page: int = Query(1, ge=1),\n    per_page: int = Query(50, ge=1, le=200),\n"
            f"    uow: UnitOfWork = Depends(get_uow),\n) -> {C}Page:\n"
            f"    with uow:\n"
            f"        items = uow.{k}s_service.list({e.scope}, status=status_filter, page=page, per_page=per_page)\n"
            f"        return {C}Page(items=[{C}Out.model_validate(i) for i in items], page=page, per_page=per_page)\n\n\n"
            f'@router.post("", response_model={C}Out, status_code=status.HTTP_201_CREATED)\n'
            f"def create_{k}(body: {C}Create, uow: UnitOfWork = Depends(get_uow)) -> {C}Out:\n"
            f"    with uow:\n"
            f"        {k} = uow.{k}s_service.create(body)\n"
            f"        uow.commit()\n"
            f"        return {C}Out.model_validate({k})\n\n\n" + acts + "\n")


def test_names(e: Entity) -> list[str]:
    k = e.key
    names = [f"test_get_{k}_returns_row", f"test_get_missing_{k}_raises_not_found", f"test_list_{e.table}_filters_by_status",
             f"test_list_{e.table}_paginates", f"test_list_{e.table}_rejects_per_page_over_200", f"test_create_{k}_persists",
             f"test_create_{k}_publishes_event"]
    for m, src, dst in e.actions:
        names += [f"test_{m}_moves_{src}_to_{dst}", f"test_{m}_rejects_wrong_status", f"test_{m}_is_idempotent_under_race"]
    for m in e.money:
        names += [f"test_create_{k}_keeps_{m}_as_decimal"]
    if e.money:
        names += [f"test_total_{e.money[-1]}_sums_decimal"]
    names += [f"test_api_get_{k}_response_shape", f"test_api_create_{k}_returns_201", f"test_api_{e.table}_404_body"]
    return names


def tests_source(e: Entity) -> str:
    k, C = e.key, e.cls
    url = "/v1/" + e.table.replace("_", "-")
    first_src, first_dst = e.actions[0][1], e.actions[0][2]
    blocks = [f'"""Tests for {C}Service and the {url} routes."""\n\n'
              "from datetime import date, datetime, timezone\nfrom decimal import Decimal\nfrom threading import Barrier, Thread\n\n"
              "import pytest\n\n"
              f"from app.models.{k} import {C}\nfrom app.repositories.{k}_repository import {C}NotFound, {C}Repository\n"
              "from app.repositories.errors import InvalidTransition\n"
              f"from app.schemas.{k} import {C}Create\n"
              f"from app.services.{k}_service import {C}Service\n"
              "from app.errors import ValidationError\n"
              f"from tests.factories import make_{k}, {k}_payload_factory\n\nNOW = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)\n\n\n"
              "@pytest.fixture\n"
              f"def service(session, event_bus, audit_log):\n"
              f"    return {C}Service({C}Repository(session), "
              + ("audit_log, " if k in ("invoice", "credit_note", "refund", "payment") else "")
              + "event_bus, clock=lambda: NOW)\n\n\n"
              f"@pytest.fixture\ndef {k}_payload() -> {C}Create:\n    return {k}_payload_factory()\n"]
    blocks.append(f"def test_get_{k}_returns_row(session, service):\n"
                  f"    {k} = make_{k}(session)\n    assert service.get({k}.id) is {k}\n")
    blocks.append(f"def test_get_missing_{k}_raises_not_found(service):\n"
                  f"    with pytest.raises({C}NotFound) as exc:\n        service.get(987654)\n"
                  f'    assert exc.value.code == "{k}_not_found"\n')
    blocks.append(f"def test_list_{e.table}_filters_by_status(session, service):\n"
                  f'    keep = make_{k}(session, status="{first_src}")\n'
                  f'    make_{k}(session, {e.scope}=keep.{e.scope}, status="{first_dst}")\n'
                  f'    result = service.list(keep.{e.scope}, status="{first_src}")\n'
                  f"    assert [x.id for x in result] == [keep.id]\n")
    blocks.append(f"def test_list_{e.table}_paginates(session, service):\n"
                  f"    first = make_{k}(session)\n"
                  f"    rows = [first] + [make_{k}(session, {e.scope}=first.{e.scope}) for _ in range(4)]\n"
                  f"    page1 = service.list(first.{e.scope}, page=1, per_page=2)\n"
                  f"    page3 = service.list(first.{e.scope}, page=3, per_page=2)\n"
                  f"    assert [x.id for x in page1] == [rows[4].id, rows[3].id]\n"
                  f"    assert [x.id for x in page3] == [rows[0].id]\n")
    blocks.append(f"def test_list_{e.table}_rejects_per_page_over_200(service):\n"
                  f"    with pytest.raises(ValidationError):\n        service.list(1, per_page=201)\n")
    blocks.append(f"def test_create_{k}_persists(session, service, {k}_payload):\n"
                  f"    created = service.create({k}_payload)\n"
                  f"    session.expire_all()\n"
                  f"    assert session.get({C}, created.id) is not None\n")
    blocks.append(f"def test_create_{k}_publishes_event(service, event_bus, {k}_payload):\n"
                  f"    created = service.create({k}_payload)\n"
                  f'    assert event_bus.published == [("{k}.created", {{"id": created.id}})]\n')
    for m, src, dst in e.actions:
        blocks.append(f"def test_{m}_moves_{src}_to_{dst}(session, service, event_bus):\n"
                      f'    {k} = make_{k}(session, status="{src}")\n'
                      f"    result = service.{m}({k}.id, actor=\"ops@example.com\")\n"
                      f'    assert result.status == "{dst}"\n'
                      f'    assert event_bus.published[-1] == ("{k}.{dst}", {{"id": {k}.id}})\n')
        blocks.append(f"def test_{m}_rejects_wrong_status(session, service):\n"
                      f'    {k} = make_{k}(session, status="{dst}")\n'
                      f"    with pytest.raises(InvalidTransition):\n        service.{m}({k}.id)\n")
        blocks.append(f"@pytest.mark.postgres\n"
                      f"def test_{m}_is_idempotent_under_race(engine, session_factory):\n"
                      f'    """Two workers {m} the same {e.title}: exactly one wins, the other gets InvalidTransition."""\n'
                      f"    with session_factory() as s:\n"
                      f'        {k}_id = make_{k}(s, status="{src}").id\n'
                      f"        s.commit()\n"
                      f"    barrier, outcomes = Barrier(2), []\n\n"
                      f"    def worker() -> None:\n"
                      f"        with session_factory() as s:\n"
                      f"            svc = {C}Service({C}Repository(s), "
                      + ("AuditLog(s), " if k in ("invoice", "credit_note", "refund", "payment") else "")
                      + f"EventBus())\n"
                      f"            barrier.wait()\n"
                      f"            try:\n"
                      f"                svc.{m}({k}_id)\n"
                      f"                s.commit()\n"
                      f'                outcomes.append("ok")\n'
                      f"            except InvalidTransition:\n"
                      f'                outcomes.append("conflict")\n\n'
                      f"    threads = [Thread(target=worker) for _ in range(2)]\n"
                      f"    for t in threads:\n        t.start()\n    for t in threads:\n        t.join()\n"
                      f'    assert sorted(outcomes) == ["conflict", "ok"]\n')
    for m in e.money:
        blocks.append(f"def test_create_{k}_keeps_{m}_as_decimal(session, service, {k}_payload):\n"
                      f'    {k}_payload.{m} = "19.99"\n'
                      f"    created = service.create({k}_payload)\n"
                      f'    assert created.{m} == Decimal("19.99")\n'
                      f"    assert isinstance(created.{m}, Decimal)\n")
    if e.money:
        m = e.money[-1]
        blocks.append(f"def test_total_{m}_sums_decimal(session, service):\n"
                      f'    first = make_{k}(session, {m}=Decimal("0.10"))\n'
                      f'    for _ in range(2):\n        make_{k}(session, {e.scope}=first.{e.scope}, {m}=Decimal("0.10"))\n'
                      f'    assert service.total_{m}(first.{e.scope}) == Decimal("0.30")  # 0.1 + 0.1 + 0.1 != 0.3 in float\n')
    blocks.append(f"def test_api_get_{k}_response_shape(client, session):\n"
                  f"    {k} = make_{k}(session)\n"
                  f'    resp = client.get(f"{url}/{{{k}.id}}")\n'
                  "    assert resp.status_code == 200\n"
                  f"    assert set(resp.json()) == {{{', '.join(repr(x) for x in ['id'] + [f[0] for f in e.fields])}}}\n")
    blocks.append(f"def test_api_create_{k}_returns_201(client, {k}_payload):\n"
                  f'    resp = client.post("{url}", json={k}_payload.model_dump(mode="json"))\n'
                  "    assert resp.status_code == 201, resp.text\n"
                  f'    assert resp.headers["content-type"] == "application/json"\n')
    blocks.append(f"def test_api_{e.table}_404_body(client):\n"
                  f'    resp = client.get("{url}/987654")\n'
                  "    assert resp.status_code == 404\n"
                  f'    assert resp.json() == {{"error": {{"code": "{k}_not_found", "message": "{e.title} 987654 not found"}}}}\n')
    return "\n\n".join(blocks)


PYTEST_HEAD = ("============================= test session starts ==============================\n"
               "platform linux -- Python 3.11.8, pytest-8.1.1, pluggy-1.4.0\n"
               f"rootdir: {PROJECT}\nconfigfile: pyproject.toml\n"
               "plugins: anyio-4.3.0, cov-4.1.0, xdist-3.5.0, randomly-3.15.0\n")


def _progress_lines(files: list[tuple[str, list[str]]], failed: set[str], total: int) -> list[str]:
    out, done = [], 0
    for path, tests in files:
        marks = "".join("F" if t in failed else "." for t in tests)
        done += len(tests)
        out.append(f"{path} {marks}".ljust(72) + f"[{int(100 * done / total):3d}%]")
    return out


def pytest_output(rng: random.Random, files: list[tuple[str, list[str]]], failures: list[tuple[str, str, str]],
                  *, verbose: bool = False, warnings: int = 0) -> tuple[str, int]:
    """failures: (test file, test name, long-format body). Returns (output, exit code)."""
    failed = {name for _, name, _ in failures}
    total = sum(len(t) for _, t in files)
    lines = [PYTEST_HEAD.rstrip("\n"), f"collected {total} items", ""]
    if verbose:
        done = 0
        for path, tests in files:
            for t in tests:
                done += 1
                res = "FAILED" if t in failed else "PASSED"
                lines.append(f"{path}::{t} {res}".ljust(72) + f" [{int(100 * done / total):3d}%]")
    else:
        lines += _progress_lines(files, failed, total)
    if failures:
        lines += ["", "=================================== FAILURES ==================================="]
        for path, name, body in failures:
            lines.append(f" {name} ".center(80, "_"))
            lines.append(body.rstrip("\n"))
    if warnings:
        lines += ["", "=============================== warnings summary ===============================",
                  ".venv/lib/python3.11/site-packages/passlib/utils/__init__.py:854",
                  "  /home/dev/src/invoicing-api/.venv/lib/python3.11/site-packages/passlib/utils/__init__.py:854: "
                  "DeprecationWarning: 'crypt' is deprecated and slated for removal in Python 3.13",
                  "    from crypt import crypt as _crypt", "",
                  "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html"]
    secs = rng.uniform(2.0, 4.0) + total * rng.uniform(0.02, 0.05)
    if failures:
        lines += ["=========================== short test summary info ============================"]
        for path, name, body in failures:
            last = [s for s in body.splitlines() if s.startswith("E   ")]
            msg = last[0][4:].strip() if last else "AssertionError"
            lines.append(f"FAILED {path}::{name} - {msg}"[:200])
        summary = f" {len(failures)} failed, {total - len(failures)} passed"
        summary += f", {warnings} warning{'s' if warnings > 1 else ''}" if warnings else ""
        summary += f" in {secs:.2f}s "
        lines.append(summary.center(80, "="))
        return "\n".join(lines), 1
    summary = f" {total} passed" + (f", {warnings} warning{'s' if warnings > 1 else ''}" if warnings else "") + f" in {secs:.2f}s "
    lines.append(summary.center(80, "="))
    return "\n".join(lines), 0


def addr_of(rng: random.Random) -> str:
    """A CPython heap address (16-byte aligned)."""
    return f"0x7f{rng.randrange(16**9):09x}0"


def failure_body(kind: str, e: Entity, test: str, rng: random.Random,
                 action: tuple[str, str, str] | None = None) -> str:
    k, C = e.key, e.cls
    tf = f"tests/services/test_{k}_service.py"
    sf = f"app/services/{k}_service.py"
    ln = rng.randint(40, 160)
    sln = rng.randint(50, 120)
    addr = addr_of(rng)
    act, a_src, a_dst = action or e.actions[0]
    if kind == "attr":
        return (f"\nsession = <sqlalchemy.orm.session.Session object at {addr}>\n"
                f"service = <app.services.{k}_service.{C}Service object at {addr_of(rng)}>\n\n"
                f"    def {test}(session, service):\n"
                f'        {k} = make_{k}(session, status="{a_src}")\n'
                f">       service.{act}({k}.id)\n\n{tf}:{ln}: \n"
                + "_ " * 40 + "\n\n"
                f"self = <app.services.{k}_service.{C}Service object at {addr_of(rng)}>, {k}_id = 1\n\n"
                f"    def {act}(self, {k}_id: int, *, actor: str | None = None) -> {C}:\n"
                f">       {k} = self._{k}s.transition({k}_id, \"{a_dst}\", expected=\"{a_src}\")\n"
                f"E       AttributeError: '{C}Repository' object has no attribute 'transition'\n\n"
                f"{sf}:{sln}: AttributeError")
    if kind == "typeerror":
        return (f"\nclient = <starlette.testclient.TestClient object at {addr}>\n"
                f"session = <sqlalchemy.orm.session.Session object at {addr_of(rng)}>\n\n"
                f"    def {test}(client, session):\n        {k} = make_{k}(session)\n"
                f'>       resp = client.get(f"/v1/{e.table.replace("_", "-")}/{{{k}.id}}")\n\n{tf}:{ln}: \n'
                + "_ " * 40 + "\n"
                ".venv/lib/python3.11/site-packages/starlette/testclient.py:523: in get\n"
                "    return super().get(\n"
                ".venv/lib/python3.11/site-packages/httpx/_client.py:1055: in get\n"
                "    return self.request(\n"
                ".venv/lib/python3.11/site-packages/starlette/testclient.py:491: in request\n"
                "    return super().request(\n"
                ".venv/lib/python3.11/site-packages/fastapi/routing.py:274: in app\n"
                "    raw_response = await run_endpoint_function(\n"
                ".venv/lib/python3.11/site-packages/fastapi/routing.py:193: in run_endpoint_function\n"
                "    return await run_in_threadpool(dependant.call, **values)\n"
                "app/uow.py:61: in __getattr__\n"
                "    return self._build_service(name)\n"
                + "_ " * 40 + "\n\n"
                f"self = <app.uow.UnitOfWork object at {addr_of(rng)}>, name = '{k}s_service'\n\n"
                "    def _build_service(self, name: str):\n"
                "        factory = SERVICE_FACTORIES[name]\n"
                ">       return factory(self.session, self.events)\n"
                f"E       TypeError: {C}Service.__init__() missing 1 required positional argument: 'events'\n\n"
                "app/uow.py:74: TypeError")
    if kind == "decimal":
        m = e.money[0] if e.money else "amount"
        return (f"\nsession = <sqlalchemy.orm.session.Session object at {addr}>\n"
                f"service = <app.services.{k}_service.{C}Service object at {addr_of(rng)}>\n"
                f"{k}_payload = {C}Create({m}='19.99', ...)\n\n"
                f"    def {test}(session, service, {k}_payload):\n"
                f'        {k}_payload.{m} = "19.99"\n        created = service.create({k}_payload)\n'
                f">       assert created.{m} == Decimal(\"19.99\")\n"
                f"E       AssertionError: assert 19.99 == Decimal('19.99')\n"
                f"E        +  where 19.99 = <{C} id=1 status='{e.actions[0][1]}'>.{m}\n"
                f"E        +  and   Decimal('19.99') = Decimal('19.99')\n\n{tf}:{ln}: AssertionError")
    if kind == "integrity":
        return (f"\nself = <sqlalchemy.engine.base.Connection object at {addr}>\n"
                "dialect = <sqlalchemy.dialects.postgresql.psycopg.PGDialect_psycopg object at 0x7f3a1c2e4d10>\n"
                "context = <sqlalchemy.dialects.postgresql.psycopg.PGExecutionContext_psycopg object at 0x7f3a1b9f0e50>\n\n"
                "    def _exec_single_context(self, dialect, context, statement, parameters):\n"
                "        ...\n"
                ">                   self.dialect.do_execute(\n"
                "                        cursor, str_statement, effective_parameters, context\n"
                "                    )\n\n"
                ".venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py:1967: \n"
                + "_ " * 40 + "\n"
                ".venv/lib/python3.11/site-packages/sqlalchemy/engine/default.py:924: in do_execute\n"
                "    cursor.execute(statement, parameters)\n"
                + "_ " * 40 + "\n\n"
                "    def execute(self, query, params=None, *, prepare=None, binary=None):\n"
                "        ...\n"
                "        except e._NO_TRACEBACK as ex:\n"
                ">           raise ex.with_traceback(None)\n"
                f'E           psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "{e.table}_pkey"\n'
                f"E           DETAIL:  Key (id)=(1) already exists.\n\n"
                ".venv/lib/python3.11/site-packages/psycopg/cursor.py:732: UniqueViolation\n\n"
                "The above exception was the direct cause of the following exception:\n\n"
                f"    def {test}(session, service, event_bus):\n"
                f"        {k} = make_{k}(session)\n"
                f">       session.flush()\n\n{tf}:{ln}: \n"
                + "_ " * 40 + "\n"
                "E   sqlalchemy.exc.IntegrityError: (psycopg.errors.UniqueViolation) duplicate key value violates unique "
                f'constraint "{e.table}_pkey"\n'
                "E   DETAIL:  Key (id)=(1) already exists.\n"
                f"E   [SQL: INSERT INTO {e.table} (id, {', '.join(f[0] for f in e.fields[:3])}, ...) VALUES (%(id)s, ...)]\n"
                "E   (Background on this error at: https://sqlalche.me/e/20/gkpj)\n\n"
                "tests/factories.py:88: IntegrityError")
    if kind == "detached":
        return (f"\nclient = <starlette.testclient.TestClient object at {addr}>\n\n"
                f"    def {test}(client, session):\n        {k} = make_{k}(session)\n"
                f'>       resp = client.get(f"/v1/{e.table.replace("_", "-")}/{{{k}.id}}")\n\n{tf}:{ln}: \n'
                + "_ " * 40 + "\n"
                f"app/api/routes/{e.table}.py:21: in get_{k}\n"
                f"    return {C}Out.model_validate(uow.{k}s_service.get({k}_id))\n"
                ".venv/lib/python3.11/site-packages/pydantic/main.py:509: in model_validate\n"
                "    return cls.__pydantic_validator__.validate_python(\n"
                ".venv/lib/python3.11/site-packages/sqlalchemy/orm/attributes.py:566: in __get__\n"
                "    return self.impl.get(state, dict_)  # type: ignore[no-any-return]\n"
                ".venv/lib/python3.11/site-packages/sqlalchemy/orm/attributes.py:1086: in get\n"
                "    value = self._fire_loader_callables(state, key, passive)\n"
                + "_ " * 40 + "\n\n"
                f"    def _load_for_state(self, state, passive, loadopt=None, extra_criteria=()):\n"
                "        ...\n"
                ">           raise orm_exc.DetachedInstanceError(\n"
                f'                "Parent instance %s is not bound to a Session; lazy load operation of attribute '
                f"'%s' cannot proceed\" % (orm_util.state_str(state), self.key)\n            )\n"
                f"E           sqlalchemy.orm.exc.DetachedInstanceError: Parent instance <{C} at {addr_of(rng)}> "
                f"is not bound to a Session; lazy load operation of attribute '{e.scope.removesuffix('_id')}' cannot proceed "
                "(Background on this error at: https://sqlalche.me/e/20/bhk3)\n\n"
                ".venv/lib/python3.11/site-packages/sqlalchemy/orm/strategies.py:863: DetachedInstanceError")
    if kind == "keyerror":
        return (f"\nclient = <starlette.testclient.TestClient object at {addr}>\n\n"
                f"    def {test}(client, session):\n        {k} = make_{k}(session)\n"
                f'        resp = client.get(f"/v1/{e.table.replace("_", "-")}/{{{k}.id}}")\n'
                "        assert resp.status_code == 200\n"
                f">       assert set(resp.json()) == {{{', '.join(repr(x) for x in ['id'] + [f[0] for f in e.fields][:4])}, ...}}\n"
                "E       AssertionError: assert {'id', " + ", ".join(repr(f[0]) for f in e.fields[:3]) +
                ", 'created_at', 'updated_at', ...} == {'id', " + ", ".join(repr(f[0]) for f in e.fields[:3]) + ", ...}\n"
                "E         \n"
                "E         Extra items in the left set:\n"
                "E         'created_at'\n"
                "E         'updated_at'\n"
                "E         Use -v to get more diff\n\n"
                f"{tf}:{ln}: AssertionError")
    if kind == "circular":
        return (f"\n    def {test}(client, session):\n>       from app.api.routes.{e.table} import router\n\n{tf}:{ln}: \n"
                + "_ " * 40 + "\n"
                f"app/api/routes/{e.table}.py:6: in <module>\n"
                "    from app.uow import UnitOfWork\n"
                "app/uow.py:9: in <module>\n"
                f"    from app.services.{k}_service import {C}Service\n"
                f"app/services/{k}_service.py:14: in <module>\n"
                f"    from app.repositories.{k}_repository import {C}Repository\n"
                f"app/repositories/{k}_repository.py:12: in <module>\n"
                "    from app.uow import current_session\n"
                "E   ImportError: cannot import name 'current_session' from partially initialized module 'app.uow' "
                f"(most likely due to a circular import) ({PROJECT}/app/uow.py)")
    raise ValueError(kind)


def grep_usages(e: Entity, rng: random.Random) -> str:
    """`grep -rn` over the callers of the legacy methods, in grep's file/line order."""
    k, t = e.key, e.table
    callers = [f"app/api/routes/{t}.py", "app/api/routes/admin.py", "app/workers/nightly.py", "scripts/run_dunning.py",
               "app/webhooks/stripe.py", "tests/api/test_admin.py", "tests/test_billing_service.py"]
    calls = [(f"get_{k}", f"{k}_id"), (f"list_{t}", f"{e.scope}, status=status")] + \
            [(f"create_{k}", "payload.dict()")] + [(f"{m}_{k}", f"{k}_id, actor=user.email") for m, _, _ in e.actions]
    hits: dict[tuple[str, int], str] = {}
    for _ in range(rng.randint(14, 26)):
        path = pick(rng, callers)
        name, args = pick(rng, calls)
        var = "svc" if path.startswith("tests/") else "billing"
        if path.startswith("tests/"):
            args = args.replace("user.email", '"ops@example.com"').replace("payload.dict()", "payload")
        line = rng.randint(12, 380)
        code = (f"        {k} = {var}.{name}({args})" if name.startswith(("get_", "create_"))
                else f"    for row in {var}.{name}({args}):" if name.startswith("list_")
                else f"        {var}.{name}({args})")
        hits[(path, line)] = code
    return "\n".join(f"{p}:{n}:{c}" for (p, n), c in sorted(hits.items()))


def git_commit(rng: random.Random, msg: str, files: list[str], log: list[str]) -> str:
    sha = f"{rng.randrange(16**7):07x}"
    log.append(f"{sha} {msg}")
    ins = sum(rng.randint(20, 220) for _ in files)
    dels = sum(rng.randint(0, 90) for _ in files)
    created = [f for f in files if f.startswith(("app/repositories/", "app/services/")) and "billing" not in f]
    lines = [f"[refactor/split-billing-service {sha}] {msg}",
             f" {len(files)} files changed, {ins} insertions(+), {dels} deletions(-)"]
    lines += [f" create mode 100644 {f}" for f in created[:2]]
    return "\n".join(lines)


def ruff_mypy(e: Entity, rng: random.Random, clean: bool) -> tuple[str, str, int, int]:
    k = e.key
    if clean:
        return "All checks passed!", "Success: no issues found in 2 source files", 0, 0
    ruff = (f"app/services/{k}_service.py:5:1: I001 [*] Import block is un-sorted or un-formatted\n"
            f"app/repositories/{k}_repository.py:9:26: F401 [*] `sqlalchemy.text` imported but unused\n"
            "Found 2 errors.\n[*] 2 fixable with the `--fix` option.")
    mypy = (f"app/services/{k}_service.py:{rng.randint(30, 60)}: error: Argument 1 to \"money\" has incompatible type "
            "\"str | None\"; expected \"str | Decimal\"  [arg-type]\n"
            f"app/services/{k}_service.py:{rng.randint(61, 90)}: error: Incompatible return value type (got "
            f"\"{e.cls} | None\", expected \"{e.cls}\")  [return-value]\n"
            "Found 2 errors in 1 file (checked 2 source files)")
    return ruff, mypy, 1, 1


def session_long_refactor() -> Recorder:
    r = Recorder(seed=1003, title="Split BillingService into repositories + services (invoicing-api)",
                 created="2024-03-18T08:02:15+00:00", model="gpt-4o", window=32000, workspace=PROJECT,
                 existing=[f"app/{d}/{n}.py" for e in ENTITIES
                           for d, n in (("api/routes", e.table), ("models", e.key), ("schemas", e.key))]
                 + ["app/uow.py", "app/money.py", "app/clock.py", "app/reports/monthly.py", "tests/factories.py",
                    "tests/conftest.py", "tests/webhooks/helpers.py", "app/services/billing_service.py"])
    rng = r.rng
    legacy, spans = legacy_service_lines()
    legacy_text = "\n".join(legacy)
    all_tests = [(f"tests/services/test_{e.key}_service.py", test_names(e)) for e in ENTITIES]
    all_tests += [("tests/api/test_admin.py", [f"test_admin_{x}" for x in ("lists_accounts", "impersonation_requires_role",
                                                                           "export_csv", "audit_trail", "rate_limit")]),
                  ("tests/test_billing_service.py", [f"test_legacy_{e.key}_{x}" for e in ENTITIES for x in ("get", "create")]),
                  ("tests/reports/test_monthly.py", ["test_revenue_by_month_groups_currency", "test_revenue_excludes_void",
                                                     "test_revenue_applies_credit_notes"]),
                  ("tests/webhooks/test_stripe.py", ["test_webhook_signature", "test_webhook_replay_is_ignored",
                                                     "test_webhook_unknown_event_is_logged"])]

    r.system()
    r.user("We're finally splitting `app/services/billing_service.py` (ARCH-88). It's a ~1,000-line god class doing "
           "raw SQL through psycopg2 for every billing table. Target layout:\n\n"
           "- `app/repositories/<entity>_repository.py` — SQLAlchemy 2.0 `select()`/`update()`, no business rules\n"
           "- `app/services/<entity>_service.py` — the use cases, taking repositories + EventBus + clock\n"
           "- routes get their services from the `UnitOfWork` (`app/uow.py` already exists, only invoices use it)\n\n"
           "Keep the HTTP API byte-compatible (mobile v3 depends on it). Do it entity by entity with the tests "
           "green after each one, and commit as you go on `refactor/split-billing-service`.")
    tree = textwrap.dedent("""\
        On branch refactor/split-billing-service
        nothing to commit, working tree clean
        4e1f0a2 (HEAD -> refactor/split-billing-service, origin/main, main) Bump fastapi to 0.110.0
        9b7c3d1 Add UnitOfWork for invoices (ARCH-88 prep)
        a0f9e54 Fix dunning schedule off-by-one around DST
        2d81c6b Webhooks: verify Stripe signature with tolerance
        77e0b1a Reports: revenue_by_month partial index (PERF-311)
        app
        ├── api
        │   ├── deps.py
        │   └── routes
        │       ├── admin.py
        """) + "".join(f"│       {'└' if e is ENTITIES[-1] else '├'}── {e.table}.py\n" for e in ENTITIES) + textwrap.dedent("""\
        ├── audit.py
        ├── clock.py
        ├── db
        │   ├── base.py
        │   └── session.py
        ├── errors.py
        ├── events.py
        ├── main.py
        ├── models
        """) + "".join(f"│   {'└' if e is ENTITIES[-1] else '├'}── {e.key}.py\n" for e in ENTITIES) + textwrap.dedent("""\
        ├── money.py
        ├── repositories
        │   ├── __init__.py
        │   └── errors.py
        ├── schemas
        ├── services
        │   ├── __init__.py
        │   └── billing_service.py
        ├── uow.py
        ├── webhooks
        │   └── stripe.py
        └── workers
            └── nightly.py
        tests
        ├── api
        ├── conftest.py
        ├── factories.py
        ├── reports
        ├── services
        ├── test_billing_service.py
        └── webhooks

        14 directories, 71 files""")
    pyproject = textwrap.dedent("""\
        [project]
        name = "invoicing-api"
        version = "3.14.2"
        requires-python = ">=3.11"
        dependencies = [
            "fastapi==0.110.0",
            "uvicorn[standard]==0.28.0",
            "sqlalchemy==2.0.28",
            "psycopg[binary]==3.1.18",
            "psycopg2-binary==2.9.9",  # legacy BillingService only
            "pydantic==2.6.4",
            "pydantic-settings==2.2.1",
            "alembic==1.13.1",
            "stripe==8.7.0",
            "structlog==24.1.0",
        ]

        [project.optional-dependencies]
        dev = ["pytest==8.1.1", "pytest-cov==4.1.0", "pytest-xdist==3.5.0", "pytest-randomly==3.15.0",
               "mypy==1.9.0", "ruff==0.3.3", "factory-boy==3.3.0", "httpx==0.27.0"]

        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider --strict-markers"
        filterwarnings = [
            "error::DeprecationWarning:app.*",
            "error::DeprecationWarning:tests.*",
            "error::sqlalchemy.exc.SAWarning",
        ]
        testpaths = ["tests"]

        [tool.mypy]
        strict = true
        plugins = ["pydantic.mypy"]
        exclude = ["app/services/billing_service.py"]

        [tool.ruff]
        line-length = 110
        target-version = "py311"

        [tool.ruff.lint]
        select = ["E", "F", "I", "B", "UP", "SIM"]
        """)
    r.parallel("Let me get oriented: branch state, layout and project config.",
               [("bash", {"command": "git status -sb | head -3; git log --oneline -5; tree -L 3 --noreport app tests | head -80"},
                 bash_result(tree)),
                ("read_file", {"path": "pyproject.toml"}, pyproject)])
    n = len(legacy)
    chunk = -(-n // 4)
    pos = 1
    first = True
    while pos <= n:
        end = min(pos + chunk - 1, n)
        msg = ("Now the god class itself; it's long, so I'll read it in ranges." if first
               else f"Continuing with lines {pos}-{end}.")
        r.call(msg, "read_file", {"path": "app/services/billing_service.py", "start_line": pos, "end_line": end},
               legacy_text)
        first = False
        pos = end + 1
    uow = textwrap.dedent('''\
        """Unit of work: one SQLAlchemy session per request, services built lazily on it."""

        from __future__ import annotations

        from collections.abc import Callable
        from typing import Any

        from sqlalchemy.orm import Session

        from app.db.session import SessionLocal
        from app.events import EventBus
        from app.repositories.invoice_repository import InvoiceRepository
        from app.services.invoice_service import InvoiceService

        SERVICE_FACTORIES: dict[str, Callable[..., Any]] = {
            "invoices_service": lambda s, ev: InvoiceService(InvoiceRepository(s), ev),
        }


        class UnitOfWork:
            def __init__(self, session_factory: Callable[[], Session] = SessionLocal) -> None:
                self._session_factory = session_factory
                self._services: dict[str, Any] = {}
                self.events = EventBus()

            def __enter__(self) -> "UnitOfWork":
                self.session = self._session_factory()
                return self

            def __exit__(self, exc_type, exc, tb) -> None:
                if exc_type is not None:
                    self.session.rollback()
                self.session.close()
                self._services.clear()

            def commit(self) -> None:
                self.session.commit()
                self.events.flush()

            def __getattr__(self, name: str) -> Any:
                if name.endswith("_service"):
                    if name not in self._services:
                        self._services[name] = self._build_service(name)
                    return self._services[name]
                raise AttributeError(name)

            def _build_service(self, name: str) -> Any:
                factory = SERVICE_FACTORIES[name]
                return factory(self.session, self.events)
        ''')
    r.call("The invoice part of the UnitOfWork already exists; let me see how it's wired.", "read_file",
           {"path": "app/uow.py"}, uow)
    baseline, code = pytest_output(rng, all_tests, [], warnings=1)
    r.call("Baseline test run before touching anything:", "bash", {"command": "python -m pytest -q -p no:randomly 2>&1 | tail -60"},
           bash_result(baseline, code), took=(20, 40))
    r.assistant(
        "Baseline is green. Plan, one entity per step, in dependency order (customers and invoices first, then "
        "what hangs off them):\n\n" + "\n".join(f"{i + 1}. `{e.cls}`: `{e.key}_repository.py` + `{e.key}_service.py`, "
                                                 f"routes via UoW, legacy methods deleted"
                                                 for i, e in enumerate(ENTITIES)) +
        "\n\nFor each: repository with `get/find/list_for_*/add/set_status` (compare-and-set on status so two "
        "workers can't both transition a row), service with the use cases, `SERVICE_FACTORIES` entry, then the "
        "routes. The legacy tests in `tests/test_billing_service.py` go away with the methods they cover. "
        "I'll keep response models untouched so the JSON stays identical.")
    r.user("Sounds good. Go.", gap=(30, 120))

    interjections = {
        2: ("Quick note from finance: money must be `Decimal` end to end. The old code does `round(float(x), 2)` in "
            "a few places and we've had 1-cent discrepancies on invoices with many line items. Please fix that as "
            "you go (and in the invoice/customer parts you've already done).", "decimal"),
        4: ("Keep the raw SQL for `revenue_by_month` — the DBA hand-tuned it (PERF-311) and it relies on a partial "
            "index. Just move it into a `ReportingRepository`, don't rewrite it with the ORM.", "reporting"),
        6: ("Wait — don't delete `billing_service.py` at the end. `scripts/run_dunning.py` (nightly cron, owned by "
            "the collections team) still imports `BillingService`. Leave a thin shim that delegates to the new "
            "services and logs a DeprecationWarning.", "shim"),
        8: ("How far along are we? Short status please, I need to update the ticket.", "status"),
        10: ("CI on the branch is red: `tests/webhooks/test_stripe.py::test_webhook_signature` fails on the Python "
             "3.12 runner (passes locally on 3.11). Can you look before continuing?", "ci"),
    }
    done: list[Entity] = []
    commits: list[str] = []
    schema_fixed: set[str] = set()
    for idx, e in enumerate(ENTITIES):
        k, C = e.key, e.cls
        tests = test_names(e)
        test_file = f"tests/services/test_{k}_service.py"
        model = model_source(e)
        r.parallel(pick(rng, [f"Next: {C}. Model, tests and the response schema first.",
                              f"On to {e.title}s. Reading the model, its tests and the schema.",
                              f"{C} is next; let me read what exists."]),
                   [("read_file", {"path": f"app/models/{k}.py"}, model),
                    ("read_file", {"path": test_file}, tests_source(e)),
                    ("read_file", {"path": f"app/schemas/{k}.py"}, schema_source(e, with_relation=True))])
        r.call(f"Who calls the legacy {e.title} methods?", "bash",
               {"command": f"grep -rn '\\(billing\\|svc\\)\\.\\(get_{k}\\|list_{e.table}\\|create_{k}\\|"
                           + "\\|".join(f"{m}_{k}" for m, _, _ in e.actions) + "\\)' app scripts tests"},
               bash_result(grep_usages(e, rng)))
        a, b = spans[k]
        r.call(f"The legacy implementation (lines {a}-{b}) once more, to keep the exact semantics: error codes, "
               "events and the audit entries.", "read_file",
               {"path": "app/services/billing_service.py", "start_line": a - 2, "end_line": b + 1},
               legacy_text)
        repo = repository_source(e)
        repo_written = repo
        if FAILURE_PLAN[idx] == "circular":
            repo_written = edit(repo, (f"from app.models.{k} ", CIRCULAR_IMPORT + f"from app.models.{k} "))
        svc_buggy = edit(service_source(e, decimal_fix=FAILURE_PLAN[idx] != "decimal"),
                         (f"self._{k}s.set_status(", f"self._{k}s.transition("))
        route = route_source(e)
        notes = legacy_notes(e, idx, rng)
        uow_w = uow_source(done + [e], buggy_last=FAILURE_PLAN[idx] == "typeerror")
        r.parallel(notes + "\n\nWriting the repository, the service, the routes and the UnitOfWork entry.",
                   [("write_file", {"path": f"app/repositories/{k}_repository.py", "content": repo_written},
                     WROTE),
                    ("write_file", {"path": f"app/services/{k}_service.py", "content": svc_buggy},
                     WROTE),
                    ("write_file", {"path": f"app/api/routes/{e.table}.py", "content": route},
                     WROTE),
                    ("write_file", {"path": "app/uow.py", "content": uow_w},
                     WROTE)])
        kind2 = FAILURE_PLAN[idx]
        second_test = {"typeerror": f"test_api_get_{k}_response_shape",
                       "decimal": f"test_create_{k}_keeps_{e.money[0]}_as_decimal" if e.money else "",
                       "integrity": f"test_create_{k}_publishes_event", "detached": f"test_api_get_{k}_response_shape",
                       "keyerror": f"test_api_get_{k}_response_shape", "circular": f"test_api_{e.table}_404_body"}[kind2]
        fails = [(test_file, f"test_{m}_moves_{src}_to_{dst}",
                  failure_body("attr", e, f"test_{m}_moves_{src}_to_{dst}", rng, action=(m, src, dst)))
                 for m, src, dst in e.actions]
        fails.append((test_file, second_test, failure_body(kind2, e, second_test, rng)))
        out, code = pytest_output(rng, [(test_file, tests)], fails)
        r.call("", "bash", {"command": f"python -m pytest {test_file} -q -p no:randomly 2>&1 | tail -120"},
               bash_result(out, code), took=(4, 12))
        svc_lines = svc_buggy.splitlines()
        li = next(i for i, s in enumerate(svc_lines) if ".transition(" in s) + 1
        r.call(f"Two separate problems. First: the service calls `transition()` but I named the repository method "
               f"`set_status()`. Second, `{second_test}`: {kind2_explanation(kind2, e)} Let me look at the service "
               "around the first one.", "read_file",
               {"path": f"app/services/{k}_service.py", "start_line": max(1, li - 25), "end_line": li + 25},
               svc_buggy)
        svc = service_source(e)
        fixes = [(f"app/services/{k}_service.py", svc)]
        if kind2 == "typeerror":
            fixes.append(("app/uow.py", uow_source(done + [e])))
        elif kind2 == "circular":
            fixes.append((f"app/repositories/{k}_repository.py", edit(repo_written, (CIRCULAR_IMPORT, ""))))
        elif kind2 == "integrity":
            fixes.append(("tests/factories.py", factories_source(done + [e])))
        elif kind2 in ("detached", "keyerror"):
            fixes.append((f"app/schemas/{k}.py", schema_source(e)))
            schema_fixed.add(k)
        r.parallel(fix_message(kind2, e), [("write_file", {"path": p, "content": c}, WROTE) for p, c in fixes])
        if kind2 not in ("detached", "keyerror") and rng.random() < 0.6:
            kind3 = "keyerror"
            t3 = f"test_api_get_{k}_response_shape"
            out, code = pytest_output(rng, [(test_file, tests)], [(test_file, t3, failure_body(kind3, e, t3, rng))])
            r.call("", "bash", {"command": f"python -m pytest {test_file} -q -p no:randomly 2>&1 | tail -80"},
                   bash_result(out, code), took=(4, 12))
            schema = schema_source(e)
            schema_fixed.add(k)
            r.call(f"Down to one failure: {kind2_explanation(kind3, e)} The response model must list the public "
                   "fields explicitly and ignore the rest.", "write_file",
                   {"path": f"app/schemas/{k}.py", "content": schema}, WROTE)
        out, code = pytest_output(rng, [(test_file, tests)], [])
        r.call("", "bash", {"command": f"python -m pytest {test_file} -q -p no:randomly 2>&1 | tail -30"},
               bash_result(out, code), took=(4, 10))
        done.append(e)
        legacy_tests = [t for t in all_tests if t[0] != "tests/test_billing_service.py"]
        legacy_left = [f"test_legacy_{x.key}_{y}" for x in ENTITIES if x not in done for y in ("get", "create")]
        suite = legacy_tests + ([("tests/test_billing_service.py", legacy_left)] if legacy_left else [])
        candidates = [x for x in done[:-1] if x.key not in schema_fixed and x.scope.endswith("_id")]
        if idx in (3, 7, 9) and candidates:
            other = candidates[-1]
            schema_fixed.add(other.key)
            t4 = f"test_api_get_{other.key}_response_shape"
            body = failure_body("detached", other, t4, rng)
            out, code = pytest_output(rng, suite, [(f"tests/services/test_{other.key}_service.py", t4, body)],
                                      verbose=True, warnings=1)
            r.call("Green. Full suite to catch cross-entity regressions:", "bash",
                   {"command": "python -m pytest -v -p no:randomly 2>&1"}, bash_result(out, code), took=(25, 45))
            rel = other.scope.removesuffix("_id")
            r.call(f"A regression in {other.title}s: serialising `{other.cls}Out` reads `{other.cls}.{rel}` after "
                   f"the UnitOfWork has closed the session (the {C} change moved `model_validate` after the `with` "
                   f"block in the shared route helper). The response should not touch `{rel}` at all - "
                   f"`{other.cls}Out` only needs `{other.scope}`. Let me check the schema.",
                   "read_file", {"path": f"app/schemas/{other.key}.py"}, schema_source(other, with_relation=True))
            fixed_schema = schema_source(other)
            r.call(f"`{other.cls}Out` declares `{rel}: {''.join(p.title() for p in rel.split('_'))}Out | None`, which "
                   "pydantic resolves by reading the relationship. It's not in the public API (checked the OpenAPI "
                   "snapshot), so removing it.", "write_file",
                   {"path": f"app/schemas/{other.key}.py", "content": fixed_schema},
                   WROTE)
            out, code = pytest_output(rng, suite, [], verbose=True, warnings=1)
            r.call("", "bash", {"command": "python -m pytest -v -p no:randomly 2>&1"}, bash_result(out, code),
                   took=(25, 45))
        else:
            out, code = pytest_output(rng, suite, [], verbose=True, warnings=1)
            r.call("Full suite:", "bash", {"command": "python -m pytest -v -p no:randomly 2>&1"},
                   bash_result(out, code), took=(25, 45))
        clean = rng.random() < 0.5
        ruff, mypy, rc1, rc2 = ruff_mypy(e, rng, clean)
        files = [f"app/repositories/{k}_repository.py", f"app/services/{k}_service.py"]
        r.parallel("Lint and types on the new modules, and a check that the OpenAPI schema is unchanged:",
                   [("bash", {"command": f"ruff check {' '.join(files)}"}, bash_result(ruff, rc1)),
                    ("bash", {"command": f"mypy {' '.join(files)}"}, bash_result(mypy, rc2)),
                    ("bash", {"command": "python scripts/dev/dump_openapi.py > /tmp/openapi.json && "
                                         "diff <(jq -S . docs/openapi.snapshot.json) <(jq -S . /tmp/openapi.json) "
                                         "&& echo 'openapi: no changes'; git diff --stat"},
                     bash_result("openapi: no changes\n" + diff_stat(e, rng)))], took=(2, 9))
        if not clean:
            r.call("Two import nits (auto-fixable) and a real typing gap: `money()` receives an optional value. "
                   "I'll apply ruff's fixes and narrow the optional before converting.", "bash",
                   {"command": f"ruff check --fix {' '.join(files)} && mypy {' '.join(files)}"},
                   bash_result("Found 2 errors (2 fixed, 0 remaining).\nSuccess: no issues found in 2 source files"),
                   took=(2, 8))
        legacy_start, legacy_end = spans[k]
        changed = files + [f"app/api/routes/{e.table}.py", "app/services/billing_service.py",
                           "tests/test_billing_service.py", "app/uow.py"] + [p for p, _ in fixes]
        changed = list(dict.fromkeys(changed))
        r.call(f"Removing the legacy {e.title} methods (lines {legacy_start}-{legacy_end}) and their legacy tests, "
               "then committing.", "bash",
               {"command": f"python scripts/dev/drop_legacy_methods.py {k} && git add -A && "
                           f"git commit -qm 'ARCH-88: {e.title}s via {C}Repository/{C}Service' && git log --stat -1 | tail -8"},
               bash_result(git_commit(rng, f"ARCH-88: {e.title}s via {C}Repository/{C}Service", changed, commits)))

        if idx + 1 in interjections:
            text, what = interjections[idx + 1]
            r.user(text, gap=(120, 900))
            if what == "decimal":
                r.call("Good call. The two services I migrated already go through `money()`; let me find every "
                       "other float conversion of money outside the legacy class.", "bash",
                       {"command": "grep -rn 'float(' app | grep -v '^app/services/billing_service.py'"},
                       bash_result("app/money.py:14:        return Decimal(str(round(float(value), 2)))\n"
                                   "app/money.py:22:    return float(value)  # used by legacy serializers\n"
                                   "app/reports/monthly.py:41:            \"gross\": float(row[\"gross\"]),\n"
                                   "app/reports/monthly.py:42:            \"credited\": float(row[\"credited\"]),\n"
                                   "app/reports/monthly.py:43:            \"net\": float(row[\"gross\"]) - float(row[\"credited\"]),"))
                money_py = textwrap.dedent('''\
                    """Money helpers. Amounts are Decimal with 2 places everywhere; never float (finance, FIN-203)."""

                    from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

                    CENT = Decimal("0.01")


                    def money(value: Decimal | str | int) -> Decimal:
                        """Parse and quantize an amount to cents with banker's rounding, like the ledger does."""
                        if isinstance(value, float):
                            raise TypeError("money() refuses floats; pass a str or Decimal")
                        try:
                            return Decimal(value).quantize(CENT, rounding=ROUND_HALF_EVEN)
                        except InvalidOperation as exc:
                            raise ValueError(f"not an amount: {value!r}") from exc


                    def to_json(value: Decimal) -> str:
                        """Amounts go over the wire as strings ("12.30"), as the API always did."""
                        return format(value.quantize(CENT), "f")
                    ''')
                monthly = textwrap.dedent('''\
                    """Monthly revenue report (finance dashboard and the CSV sent on the 1st)."""

                    from collections.abc import Iterable
                    from decimal import Decimal
                    from typing import Any

                    from app.money import money, to_json


                    def summarize(rows: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
                        """One line per month and currency; amounts as strings, net = gross - credited."""
                        out = []
                        for row in rows:
                            gross = money(row["gross"] or Decimal(0))
                            credited = money(row["credited"] or Decimal(0))
                            out.append(
                                {
                                    "month": row["month"].strftime("%Y-%m"),
                                    "currency": row["currency"],
                                    "gross": to_json(gross),
                                    "credited": to_json(credited),
                                    "net": to_json(gross - credited),
                                    "paying_customers": str(row["paying_customers"]),
                                }
                            )
                        return out
                    ''')
                r.parallel("`money()` will refuse floats outright, so any path I miss fails loudly in tests instead "
                           "of rounding silently; the report sums stay Decimal.",
                           [("write_file", {"path": "app/money.py", "content": money_py}, WROTE),
                            ("write_file", {"path": "app/reports/monthly.py", "content": monthly},
                             WROTE)])
                files2 = [(f"tests/services/test_{x.key}_service.py", test_names(x)) for x in done]
                files2.append(("tests/reports/test_monthly.py", ["test_revenue_by_month_groups_currency",
                                                                 "test_revenue_excludes_void",
                                                                 "test_revenue_applies_credit_notes"]))
                out, code = pytest_output(rng, files2, [])
                r.call("", "bash", {"command": "python -m pytest tests/services tests/reports -q -p no:randomly 2>&1 | tail -20"},
                       bash_result(out, code), took=(5, 12))
                r.note("Done: `money()` is Decimal-only with ROUND_HALF_EVEN to cents, the monthly report no "
                            "longer goes through float, and every service from here on uses `money()`. JSON keeps "
                            "sending amounts as strings, so clients see no change.")
            elif what == "reporting":
                rep = repository_source(ENTITIES[5], reporting=True).split("class ReportingRepository", 1)[1]
                rep = ('"""Read-only reporting queries."""\n\nfrom typing import Any\n\nfrom sqlalchemy import text\n'
                       "from sqlalchemy.orm import Session\n\n\nclass ReportingRepository" + rep)
                r.call("Understood - the query moves verbatim, only the parameter style changes (`%(x)s` → `:x` for "
                       "`text()`).", "write_file", {"path": "app/repositories/reporting_repository.py", "content": rep},
                       WROTE)
                out, code = pytest_output(rng, [("tests/reports/test_monthly.py", ["test_revenue_by_month_groups_currency",
                                                                                    "test_revenue_excludes_void",
                                                                                    "test_revenue_applies_credit_notes"])], [])
                r.call("", "bash", {"command": "python -m pytest tests/reports -q && psql \"$TEST_DATABASE_URL\" -c "
                                               "\"EXPLAIN SELECT 1 FROM invoices WHERE status = 'paid' AND paid_at >= "
                                               "'2024-01-01'\" | head -5"},
                       bash_result(out + "\n                                            QUERY PLAN\n"
                                   "----------------------------------------------------------------------------------\n"
                                   " Index Only Scan using ix_invoices_paid_month on invoices  (cost=0.29..8.31 rows=1 width=4)\n"
                                   "   Index Cond: (paid_at >= '2024-01-01 00:00:00+00'::timestamp with time zone)\n(2 rows)"))
                r.note("`revenue_by_month` now lives in `ReportingRepository` with the SQL unchanged; the plan "
                            "still uses `ix_invoices_paid_month`. `app/reports/monthly.py` calls the repository.")
            elif what == "shim":
                r.call("Let me see exactly what the cron job uses.", "bash",
                       {"command": "grep -n 'billing\\.' scripts/run_dunning.py"},
                       bash_result("23:    billing = BillingService(conn)\n"
                                   "31:    for inv in billing.list_invoices(customer_id, status='open'):\n"
                                   "37:        attempts = billing.list_dunning_attempts(inv['id'])\n"
                                   "44:        billing.send_dunning_attempt(attempt['id'])\n"
                                   "52:        billing.mark_paid_invoice(inv['id'], actor='dunning-cron')"))
                shim = textwrap.dedent('''\
                    """Deprecated facade kept for scripts/run_dunning.py (collections team). Do not add to it.

                    Every method delegates to the new services; see ARCH-88 for the migration.
                    """

                    import warnings
                    from typing import Any

                    from app.uow import UnitOfWork

                    _MESSAGE = "BillingService is deprecated; use the services from app.uow.UnitOfWork (ARCH-88)"


                    class BillingService:
                        def __init__(self, conn: Any = None) -> None:
                            warnings.warn(_MESSAGE, DeprecationWarning, stacklevel=2)
                            self._uow = UnitOfWork()

                        def _run(self, service: str, method: str, *args: Any, **kwargs: Any) -> Any:
                            with self._uow as uow:
                                result = getattr(getattr(uow, service), method)(*args, **kwargs)
                                uow.commit()
                                return result

                        def list_invoices(self, customer_id: int, status: str | None = None) -> list[dict[str, Any]]:
                            rows = self._run("invoices_service", "list", customer_id, status=status, per_page=200)
                            return [{"id": r.id, "status": r.status, "total": r.total} for r in rows]

                        def list_dunning_attempts(self, invoice_id: int) -> list[dict[str, Any]]:
                            rows = self._run("dunning_attempts_service", "list", invoice_id, per_page=200)
                            return [{"id": r.id, "status": r.status, "attempt_no": r.attempt_no} for r in rows]

                        def send_dunning_attempt(self, attempt_id: int) -> None:
                            self._run("dunning_attempts_service", "send", attempt_id, actor="dunning-cron")

                        def mark_paid_invoice(self, invoice_id: int, actor: str | None = None) -> None:
                            self._run("invoices_service", "mark_paid", invoice_id, actor=actor)
                    ''')
                r.call("Four methods. I'll keep `billing_service.py` as a shim with exactly those, returning the same "
                       "dict shapes the script expects; the shim replaces the god class once the last entity is "
                       "migrated.", "write_file", {"path": "app/services/legacy_billing_shim.py", "content": shim},
                       WROTE)
                r.note("Noted: the shim lives in `app/services/legacy_billing_shim.py` for now and will become "
                            "`billing_service.py` at the end, so the cron import keeps working. Continuing.")
            elif what == "status":
                r.assistant(f"**ARCH-88 status** - {len(done)} of {len(ENTITIES)} entities migrated and committed: "
                            + ", ".join(x.cls for x in done) + ".\n\n"
                            "- Each has a repository (SQLAlchemy 2.0, compare-and-set status updates), a service, "
                            "routes via the UnitOfWork; legacy methods and their tests removed.\n"
                            "- Money is Decimal end to end (`money()` refuses floats).\n"
                            "- `revenue_by_month` kept as raw SQL in `ReportingRepository`.\n"
                            "- Shim for `scripts/run_dunning.py` ready.\n\n"
                            f"Left: {', '.join(x.cls for x in ENTITIES[len(done):])}. Suite is green at every commit.")
                r.user("Thanks, carry on.", gap=(60, 300))
            elif what == "ci":
                ci_log = textwrap.dedent("""\
                    Run python -m pytest -q -p no:randomly tests/webhooks
                    ============================= test session starts ==============================
                    platform linux -- Python 3.12.2, pytest-8.1.1, pluggy-1.4.0
                    rootdir: /home/runner/work/invoicing-api/invoicing-api
                    configfile: pyproject.toml
                    plugins: anyio-4.3.0, cov-4.1.0, xdist-3.5.0, randomly-3.15.0
                    collected 3 items

                    tests/webhooks/test_stripe.py F..                                        [100%]

                    =================================== FAILURES ===================================
                    ____________________________ test_webhook_signature ____________________________

                        def test_webhook_signature(client, stripe_secret):
                            payload = b'{"id": "evt_1OqZ8b2eZvKYlo2C", "type": "invoice.paid"}'
                    >       header = sign(payload, stripe_secret)

                    tests/webhooks/test_stripe.py:19: 
                    _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

                    payload = b'{"id": "evt_1OqZ8b2eZvKYlo2C", "type": "invoice.paid"}'
                    secret = 'whsec_test_5b1f0c7e'

                        def sign(payload: bytes, secret: str) -> str:
                    >       ts = int(datetime.utcnow().timestamp())
                    E       DeprecationWarning: datetime.datetime.utcnow() is deprecated and scheduled for removal in a future version. Use timezone-aware objects to represent datetimes in UTC: datetime.datetime.now(datetime.UTC).

                    tests/webhooks/helpers.py:11: DeprecationWarning
                    =========================== short test summary info ============================
                    FAILED tests/webhooks/test_stripe.py::test_webhook_signature - DeprecationWarning: datetime.datetime.utcnow() is deprecated and scheduled for removal in a future version. Use timezone-aware objects to represent datetimes in UTC: datetime.datetime.now(datetime.UTC).
                    ========================= 1 failed, 2 passed in 0.84s ==========================
                    Error: Process completed with exit code 1.""")
                r.call("Let me pull the failing job's log.", "bash",
                       {"command": "gh run view --log-failed --job $(gh run list -b refactor/split-billing-service -L1 "
                                   "--json databaseId -q '.[0].databaseId') | sed 's/^[^\\t]*\\t[^\\t]*\\t//' | tail -40"},
                       bash_result(ci_log), took=(3, 8))
                r.call("Not related to the refactor: `datetime.utcnow()` is deprecated in 3.12, and our "
                       "`filterwarnings` turns that DeprecationWarning into an error there. Where else is it used?",
                       "bash", {"command": "grep -rn 'utcnow' app tests scripts"},
                       bash_result("app/clock.py:7:def utcnow() -> datetime:\n"
                                   "app/clock.py:8:    return datetime.utcnow().replace(tzinfo=timezone.utc)\n"
                                   "app/services/billing_service.py:22:    def __init__(self, conn, events=None, clock=datetime.utcnow):\n"
                                   "tests/webhooks/helpers.py:11:    ts = int(datetime.utcnow().timestamp())"))
                clock = textwrap.dedent('''\
                    """The one place that reads the wall clock, so tests can pin time."""

                    from collections.abc import Callable
                    from datetime import UTC, datetime

                    Clock = Callable[[], datetime]


                    def utcnow() -> datetime:
                        return datetime.now(UTC)
                    ''')
                helper = textwrap.dedent('''\
                    import hashlib
                    import hmac
                    import time


                    def sign(payload: bytes, secret: str, *, ts: int | None = None) -> str:
                        """Build a Stripe-Signature header the way stripe-python verifies it."""
                        ts = int(time.time()) if ts is None else ts
                        mac = hmac.new(secret.encode(), f"{ts}.".encode() + payload, hashlib.sha256).hexdigest()
                        return f"t={ts},v1={mac}"
                    ''')
                r.parallel("Fixing both: `app/clock.py` uses `datetime.now(UTC)`, and the test helper takes the "
                           "timestamp from `time.time()` (also bug-prone: `utcnow().timestamp()` treats a naive UTC "
                           "time as local).",
                           [("write_file", {"path": "app/clock.py", "content": clock}, WROTE),
                            ("write_file", {"path": "tests/webhooks/helpers.py", "content": helper},
                             WROTE)])
                out, code = pytest_output(rng, [("tests/webhooks/test_stripe.py", ["test_webhook_signature",
                                                                                    "test_webhook_replay_is_ignored",
                                                                                    "test_webhook_unknown_event_is_logged"])], [])
                r.call("", "bash", {"command": "uv run --python 3.12 python -m pytest -q -p no:randomly tests/webhooks "
                                               "2>&1 | tail -5 && git commit -qam 'Use timezone-aware utcnow (py3.12)' && "
                                               "git push -q"},
                       bash_result(out.replace("Python 3.11.8", "Python 3.12.2")), took=(8, 20))
                commits.append(f"{rng.randrange(16**7):07x} Use timezone-aware utcnow (py3.12)")
                r.note("CI fix pushed: `datetime.utcnow()` was deprecated in 3.12 and `filterwarnings = error` made "
                            "it fatal there. `app/clock.py` now returns `datetime.now(UTC)`; the webhook test helper "
                            "signs with `time.time()`. Back to the refactor.")

    shim_final = "app/services/billing_service.py"
    r.call("All entities are migrated. Replacing the god class with the shim, as agreed, so the cron import keeps "
           "working.", "bash",
           {"command": f"git mv -f app/services/legacy_billing_shim.py {shim_final} && wc -l {shim_final} && "
                       "python -c 'import scripts.run_dunning' 2>&1 | head -3"},
           bash_result(f"42 {shim_final}\n{PROJECT}/scripts/run_dunning.py:23: DeprecationWarning: BillingService is "
                       "deprecated; use the services from app.uow.UnitOfWork (ARCH-88)\n  billing = BillingService(conn)"))
    final_suite = [t for t in all_tests if t[0] != "tests/test_billing_service.py"]
    final_suite.append(("tests/test_legacy_shim.py", ["test_shim_warns", "test_shim_list_invoices_shape",
                                                       "test_shim_send_dunning_attempt", "test_shim_mark_paid_invoice"]))
    out, code = pytest_output(rng, final_suite, [], verbose=True, warnings=1)
    r.parallel("Final check: full suite, lint, types, and that psycopg2 is no longer imported anywhere.",
               [("bash", {"command": "python -m pytest -v 2>&1"}, bash_result(out, code)),
                ("bash", {"command": "ruff check app tests && mypy app"},
                 bash_result("All checks passed!\nSuccess: no issues found in 58 source files")),
                ("bash", {"command": "grep -rn 'psycopg2' app scripts pyproject.toml || echo 'no matches'"},
                 bash_result('pyproject.toml:10:    "psycopg2-binary==2.9.9",  # legacy BillingService only'))],
               took=(10, 40))
    r.call("psycopg2 is only left in pyproject.toml; dropping it.", "bash",
           {"command": "sed -i '/psycopg2-binary/d' pyproject.toml && uv pip compile pyproject.toml -q -o requirements.lock "
                       "&& git commit -qam 'ARCH-88: BillingService shim for run_dunning; drop psycopg2' && "
                       "git log --oneline main..HEAD"},
           bash_result("\n".join(reversed(commits + [f"{rng.randrange(16**7):07x} ARCH-88: BillingService shim for "
                                                     "run_dunning; drop psycopg2"]))))
    r.user("Great. Write me a short PR description.", gap=(120, 600))
    r.assistant(
        "**ARCH-88: split BillingService into repositories and services**\n\n"
        "The 1,000-line `BillingService` (raw SQL via psycopg2) is replaced, entity by entity, by:\n\n"
        "- `app/repositories/*_repository.py` - SQLAlchemy 2.0; status changes are compare-and-set "
        "(`UPDATE ... WHERE status = :expected RETURNING`), which fixes the read-then-update race the legacy "
        "code had.\n- `app/services/*_service.py` - use cases, taking repositories, `EventBus` and a clock.\n"
        "- Routes get services from the `UnitOfWork`; one session and one commit per request.\n\n"
        "Behaviour kept: URL paths, response fields and status codes, event names, audit action names, error codes.\n\n"
        "Also:\n- Money is `Decimal` end to end; `money()` refuses floats (FIN-203).\n"
        "- `revenue_by_month` moved verbatim to `ReportingRepository` (PERF-311 partial index still used).\n"
        "- `BillingService` remains as a deprecated shim for `scripts/run_dunning.py`.\n"
        "- `app/clock.py` is timezone-aware (`datetime.now(UTC)`), fixing CI on Python 3.12.\n"
        "- psycopg2 dependency removed.\n\n"
        f"{len(commits) + 1} commits; full suite, ruff and mypy green.")
    return r


FAILURE_PLAN = ("typeerror", "decimal", "integrity", "detached", "keyerror", "circular",
                "typeerror", "integrity", "keyerror", "detached", "circular", "typeerror")
CIRCULAR_IMPORT = "from app.uow import current_session  # noqa: F401  (for the export job)\n"


def uow_source(entities: list[Entity], *, buggy_last: bool = False) -> str:
    audited = ("invoice", "credit_note", "refund", "payment")
    imports = "".join(f"from app.repositories.{x.key}_repository import {x.cls}Repository\n"
                      f"from app.services.{x.key}_service import {x.cls}Service\n" for x in entities)
    factories = ""
    for i, x in enumerate(entities):
        audit = "AuditLog(s), " if x.key in audited else ""
        ev = "" if buggy_last and i == len(entities) - 1 else "ev"
        args = f"{x.cls}Repository(s), {audit}{ev}".rstrip(", ")
        factories += f'    "{x.table}_service": lambda s, ev: {x.cls}Service({args}),\n'
    return textwrap.dedent('''\
        """Unit of work: one SQLAlchemy session per request, services built lazily on it."""

        from __future__ import annotations

        from collections.abc import Callable
        from contextvars import ContextVar
        from typing import Any

        from sqlalchemy.orm import Session

        from app.audit import AuditLog
        from app.db.session import SessionLocal
        from app.events import EventBus
        ''') + imports + "\nSERVICE_FACTORIES: dict[str, Callable[..., Any]] = {\n" + factories + "}\n" + textwrap.dedent('''\

        current_session: ContextVar[Session | None] = ContextVar("current_session", default=None)


        class UnitOfWork:
            def __init__(self, session_factory: Callable[[], Session] = SessionLocal) -> None:
                self._session_factory = session_factory
                self._services: dict[str, Any] = {}
                self.events = EventBus()

            def __enter__(self) -> "UnitOfWork":
                self.session = self._session_factory()
                self._token = current_session.set(self.session)
                return self

            def __exit__(self, exc_type, exc, tb) -> None:
                if exc_type is not None:
                    self.session.rollback()
                    self.events.discard()
                current_session.reset(self._token)
                self.session.close()
                self._services.clear()

            def commit(self) -> None:
                self.session.commit()
                self.events.flush()  # only after the commit: listeners must never see rolled-back state

            def __getattr__(self, name: str) -> Any:
                if name.endswith("_service"):
                    if name not in self._services:
                        self._services[name] = self._build_service(name)
                    return self._services[name]
                raise AttributeError(name)

            def _build_service(self, name: str) -> Any:
                factory = SERVICE_FACTORIES[name]
                return factory(self.session, self.events)
        ''')


def factories_source(entities: list[Entity]) -> str:
    out = ['"""Test data builders. Rows are flushed, never committed: each test runs in a rolled-back transaction."""',
           "", "from datetime import date, datetime, timedelta, timezone", "from decimal import Decimal",
           "from itertools import count", "", "from sqlalchemy.orm import Session", ""]
    out += [f"from app.models.{x.key} import {x.cls}" for x in entities]
    out += [f"from app.schemas.{x.key} import {x.cls}Create" for x in entities]
    out += ["", "_seq = count(1)", "NOW = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)", ""]
    for x in entities:
        defaults = []
        for name, typ, _ in x.fields:
            if name == "status":
                val = repr(x.actions[0][1])
            elif typ in ("str",):
                val = f'f"{name[:3].upper()}-{{next(_seq):06d}}"'
            elif typ == "int":
                val = "next(_seq)" if not name.endswith("_id") else "1"
            elif typ.startswith("Decimal") and not typ.endswith("_opt"):
                val = 'Decimal("10.00")'
            elif typ == "datetime":
                val = "NOW"
            elif typ == "date":
                val = "NOW.date()"
            elif typ == "dict":
                val = "{}"
            else:
                val = "None"
            defaults.append(f"        {name}={val},")
        out += ["", "", f"def make_{x.key}(session: Session, **overrides) -> {x.cls}:",
                "    fields = dict(", *defaults, "    )", "    fields.update(overrides)",
                f"    {x.key} = {x.cls}(**fields)", f"    session.add({x.key})", "    session.flush()",
                f"    return {x.key}", "", "",
                f"def {x.key}_payload_factory(**overrides) -> {x.cls}Create:",
                "    data = dict(", *[d for d in defaults if not d.strip().startswith(
                    ("status=", "created_at=", "received_at=", "issued_at=", "times_redeemed="))],
                "    )", "    data.update(overrides)", f"    return {x.cls}Create(**data)"]
    return "\n".join(out) + "\n"


def kind2_explanation(kind: str, e: Entity) -> str:
    return {
        "attr": "the repository has no `transition` method.",
        "typeerror": f"the UnitOfWork factory still builds `{e.cls}Service` with the old argument list.",
        "decimal": "the amount comes back as a float: `round(float(x), 2)` survived from the legacy code.",
        "integrity": "the factory inserts with an explicit `id`, which collides with the sequence after the "
                     "repository's `flush()`.",
        "detached": f"the response model reads `{e.scope.removesuffix('_id')}` after the session is closed.",
        "keyerror": "the response now carries `created_at`/`updated_at` from `TimestampMixin`, which the "
                    "public API never had.",
        "circular": "a circular import: the repository imports `app.uow`, which imports the service, which "
                    "imports the repository.",
    }[kind]


def fix_message(kind: str, e: Entity) -> str:
    return {
        "typeerror": "Fixing both: the service calls `set_status`, and the UnitOfWork factory passes the "
                     "dependencies the new constructor expects.",
        "decimal": "Fixing both: `set_status`, and amounts go through `money()` (Decimal, quantized to cents) "
                   "instead of `round(float(x), 2)`.",
        "integrity": "Fixing both: `set_status` in the service; the factory no longer passes an explicit `id`, "
                     "the sequence assigns it.",
        "detached": f"Fixing both: `set_status` in the service; `{e.cls}Out` stops declaring the relationship, "
                    "which is not part of the public response anyway.",
        "keyerror": f"Fixing both: `set_status` in the service; `{e.cls}Out` lists exactly the public fields.",
        "circular": "Fixing both: `set_status` in the service; the repository must not import `app.uow` (it "
                    "only needs the session it is given).",
    }[kind]


def schema_source(e: Entity, *, with_relation: bool = False) -> str:
    C = e.cls
    out_fields = []
    for name, typ, _ in e.fields:
        t = _PYTYPE[typ]
        out_fields.append(f"    {name}: {t}")
    rel = ""
    if with_relation and e.scope.endswith("_id"):
        o = e.scope.removesuffix("_id")
        ocls = "".join(p.title() for p in o.split("_"))
        rel = f"\n    {o}: {ocls}Out | None = None  # convenience for the admin UI\n"
    create_fields = [f"    {n}: {_PYTYPE[t]}" + (" = None" if t.endswith("_opt") else "")
                     for n, t, _ in e.fields if n not in ("status", "created_at", "received_at", "issued_at", "times_redeemed")]
    return (f'"""Request and response models for {e.title}s. Field names are public API."""\n\n'
            "from __future__ import annotations\n\nfrom datetime import date, datetime\nfrom decimal import Decimal\n"
            "from typing import Any\n\nfrom pydantic import BaseModel, ConfigDict, field_serializer\n\n"
            + (f"from app.schemas.{e.scope.removesuffix('_id')} import "
               f"{''.join(p.title() for p in e.scope.removesuffix('_id').split('_'))}Out\n" if rel else "")
            + "from app.money import to_json\n\n\n"
            f"class {C}Create(BaseModel):\n" + "\n".join(create_fields) + "\n\n\n"
            f"class {C}Out(BaseModel):\n"
            '    model_config = ConfigDict(from_attributes=True, extra="ignore")\n\n'
            "    id: int\n" + "\n".join(out_fields) + "\n" + rel +
            ("\n" + "".join(f'    @field_serializer("{m}")\n    def _ser_{m}(self, v: Decimal | None) -> str | None:\n'
                            "        return None if v is None else to_json(v)\n\n" for m in e.money) if e.money else "")
            + f"\n\nclass {C}Page(BaseModel):\n    items: list[{C}Out]\n    page: int\n    per_page: int\n")


def legacy_notes(e: Entity, idx: int, rng: random.Random) -> str:
    k = e.key
    acts = ", ".join(f"`{m}_{k}` ({a} → {b})" for m, a, b in e.actions)
    lines = [f"Notes from the legacy {e.title} code:",
             f"- `get_{k}` raises `BillingError(\"{k}_not_found\")`, which the error handler maps to 404 with that "
             f"code; `{e.cls}NotFound` keeps the same code so the JSON body is identical.",
             f"- {acts}: each does a read, a status check in Python, then an unconditional `UPDATE`. Two requests "
             "can both pass the check; the repository's compare-and-set closes that.",
             f"- Events published: `{k}.created`" + "".join(f", `{k}.{b}`" for _, _, b in e.actions) +
             "; audit action names `" + "`, `".join(f"{k}.{m}" for m, _, _ in e.actions) + "` - kept verbatim."]
    if e.money:
        verb = "goes" if len(e.money) == 1 else "go"
        lines.append("- Money: `" + "`, `".join(e.money) + f"` {verb} through `round(float(x), 2)` on create (marked FIXME)"
                     + ("; keeping the legacy conversion for now so behaviour doesn't change in the same commit."
                        if FAILURE_PLAN[idx] == "decimal" else "; the service uses `money()` instead (Decimal, "
                                                               "quantized to cents), matching the Numeric columns."))
    lines.append(f"- `list_{e.table}` orders by `id DESC` with LIMIT/OFFSET; same in `list_for_"
                 f"{e.scope.removesuffix('_id')}`, plus a keyset iterator for the CSV export.")
    if rng.random() < 0.4:
        lines.append("- `self.conn.commit()` inside every method means a failure halfway through a route leaves "
                     "partial writes. With the UnitOfWork there is one commit per request.")
    return "\n".join(lines)


def diff_stat(e: Entity, rng: random.Random) -> str:
    k = e.key
    rows = [(f"app/api/routes/{e.table}.py", rng.randint(30, 80), rng.randint(20, 60)),
            (f"app/repositories/{k}_repository.py", rng.randint(110, 160), 0),
            (f"app/services/{k}_service.py", rng.randint(120, 190), 0),
            ("app/services/billing_service.py", 0, rng.randint(50, 90)),
            ("app/uow.py", rng.randint(2, 6), rng.randint(0, 2)),
            (f"app/schemas/{k}.py", rng.randint(0, 12), rng.randint(0, 6)),
            ("tests/test_billing_service.py", 0, rng.randint(20, 40))]
    out = [f" {p:<45} | {a + d:>4} {'+' * min(a // 6, 30)}{'-' * min(d // 6, 20)}" for p, a, d in rows if a + d]
    out.append(f" {len(out)} files changed, {sum(a for _, a, _ in rows)} insertions(+), {sum(d for _, _, d in rows)} deletions(-)")
    return "\n".join(out)


# ==========================================================================================
# 4. sanitizer-mess (seed 003 §4)
# ==========================================================================================
SORT_V1 = '''\
def quicksort(items):
    """Return a new sorted list (quicksort, Lomuto partition)."""
    if len(items) <= 1:
        return list(items)
    pivot = items[-1]
    smaller = [x for x in items[:-1] if x <= pivot]
    larger = [x for x in items[:-1] if x > pivot]
    return quicksort(smaller) + [pivot] + quicksort(larger)
'''

SORT_V2 = '''\
"""排序工具：quicksort（不稳定，原地三路划分）和 merge_sort（稳定，支持 key / reverse，语义同 sorted()）。"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def quicksort(items: list[T]) -> list[T]:
    """返回排好序的新列表。三路划分，大量重复元素时也是 O(n log n)；随机选主元，避免有序输入退化。"""
    a = list(items)
    stack = [(0, len(a) - 1)]          # 用显式栈代替递归，大列表不会 RecursionError
    while stack:
        lo, hi = stack.pop()
        if lo >= hi:
            continue
        pivot = a[random.randint(lo, hi)]
        lt, i, gt = lo, lo, hi
        while i <= gt:
            if a[i] < pivot:
                a[lt], a[i] = a[i], a[lt]
                lt += 1
                i += 1
            elif a[i] > pivot:
                a[i], a[gt] = a[gt], a[i]
                gt -= 1
            else:
                i += 1
        stack.append((lo, lt - 1))
        stack.append((gt + 1, hi))
    return a


def merge_sort(items: Iterable[T], *, key: Callable[[T], Any] | None = None, reverse: bool = False) -> list[T]:
    """稳定排序，参数与 sorted() 相同。reverse=True 时仍保持相等元素的原始顺序（和 sorted() 一致）。"""
    data = list(items)
    keys = [key(x) if key else x for x in data]
    order = list(range(len(data)))

    def before(i: int, j: int) -> bool:
        # 相等时取下标小的，保证稳定；reverse 只翻转比较方向，不翻转相等元素的顺序
        if keys[i] == keys[j]:
            return i < j
        return (keys[i] > keys[j]) if reverse else (keys[i] < keys[j])

    width = 1
    while width < len(order):
        merged: list[int] = []
        for start in range(0, len(order), 2 * width):
            left = order[start:start + width]
            right = order[start + width:start + 2 * width]
            li = ri = 0
            while li < len(left) and ri < len(right):
                if before(left[li], right[ri]):
                    merged.append(left[li])
                    li += 1
                else:
                    merged.append(right[ri])
                    ri += 1
            merged.extend(left[li:])
            merged.extend(right[ri:])
        order = merged
        width *= 2
    return [data[i] for i in order]
'''

SORT_TESTS = '''\
import random

import pytest

from sort_utils import merge_sort, quicksort

CASES = [[], [1], [2, 1], [3, 1, 2], [5, 5, 5], [9, -1, 0, 7, 7, -1], list(range(50, 0, -1))]


@pytest.mark.parametrize("data", CASES)
def test_quicksort_matches_sorted(data):
    assert quicksort(data) == sorted(data)


@pytest.mark.parametrize("data", CASES)
def test_merge_sort_matches_sorted(data):
    assert merge_sort(data) == sorted(data)


def test_quicksort_does_not_mutate_input():
    data = [3, 1, 2]
    quicksort(data)
    assert data == [3, 1, 2]


def test_quicksort_handles_100k_without_recursion_error():
    data = list(range(100_000))  # 有序输入：固定主元的快排在这里会退化并爆栈
    assert quicksort(data) == data


def test_merge_sort_key_and_reverse_are_stable():
    people = [("王磊", 30), ("李娜", 25), ("张伟", 30), ("刘洋", 25)]
    assert merge_sort(people, key=lambda p: p[1]) == sorted(people, key=lambda p: p[1])
    assert merge_sort(people, key=lambda p: p[1], reverse=True) == sorted(people, key=lambda p: p[1], reverse=True)


def test_random_inputs():
    rng = random.Random(42)
    for _ in range(200):
        data = [rng.randint(-50, 50) for _ in range(rng.randint(0, 60))]
        assert quicksort(data) == sorted(data)
        assert merge_sort(data, reverse=True) == sorted(data, reverse=True)
'''

BENCH = '''\
import random
import timeit

from sort_utils import merge_sort, quicksort

rng = random.Random(0)
for n in (1_000, 10_000, 100_000):
    data = [rng.random() for _ in range(n)]
    for name, fn in (("sorted", sorted), ("quicksort", quicksort), ("merge_sort", merge_sort)):
        t = min(timeit.repeat(lambda: fn(data), number=1, repeat=5))
        print(f"{name:<11} n={n:>7,}  {t * 1000:9.2f} ms")
'''


def session_sanitizer_mess() -> Recorder:
    ws = "/home/dev/playground/algos"
    r = Recorder(seed=1004, title="写个排序函数 (history with legacy and orphaned entries)",
                 created="2024-04-02T13:05:44+00:00", model="gpt-4o", window=32000, workspace=ws)
    r.system()
    r.user("写个排序函数")
    # an older agent version recorded the call as a text placeholder, and its result without an id
    r.assistant("[tool_call: quicksort]", usage=False, meta={"agent_version": "0.3.1"})
    r.tool(None, "legacy tool message")
    ids = r.assistant("先写一个快速排序，然后跑一下看看结果。",
                      [("write_file", {"path": "sort_utils.py", "content": SORT_V1}),
                       ("bash", {"command": "python -c 'from sort_utils import quicksort; print(quicksort([5, 2, 9, 1, 5, 6]))'"})])
    r.tool(ids[0], r.write_result("sort_utils.py", SORT_V1))
    # the user pressed Ctrl-C while the second call ran: it never got a result
    r.event("error", turn=r.n_asst, where="tool", tool_call_id=ids[1],
            message="cancelled by the user (KeyboardInterrupt) before bash returned")
    r.assistant("The request was cancelled by the user.", usage=False, meta={"finish_reason": "cancelled"})
    r.user("继续。用 Python 写，要能处理空列表和重复元素，再加几个测试。", gap=(30, 90))
    r.user("另外要支持 key 和 reverse 参数，和 sorted() 一样。", gap=(5, 20))
    r.assistant("好的。我先看一下刚才写到一半的文件，再一起改：快排本身不稳定，而 `sorted()` 是稳定的，"
                "所以带 `key` / `reverse` 的版本我用归并排序来保证稳定性。")
    r.call("", "read_file", {"path": "sort_utils.py"}, SORT_V1)
    # a late result of a call that no message in this history made (written after a restart)
    r.tool(r.call_id(), "[1, 2, 5, 5, 6, 9]", took=(40, 60))
    r.call("改成两个函数：`quicksort`（三路划分 + 随机主元，显式栈代替递归）和稳定的 `merge_sort`（支持 key/reverse）。",
           "write_file", {"path": "sort_utils.py", "content": SORT_V2}, WROTE)
    r.call("测试：和 `sorted()` 对拍，覆盖空列表、重复元素、逆序、10 万个有序元素，以及 key/reverse 的稳定性。",
           "write_file", {"path": "test_sort_utils.py", "content": SORT_TESTS}, WROTE)
    r.call("", "bash", {"command": "python -m pytest -q test_sort_utils.py"},
           bash_result("..................                                                       [100%]\n"
                       "18 passed in 1.92s"), took=(2, 4))
    r.assistant("写好了，`sort_utils.py` 里有两个函数：\n\n"
                "- `quicksort(items)`：返回新列表，不修改输入；三路划分处理大量重复元素，随机主元避免有序输入退化，"
                "用显式栈代替递归，10 万个元素也不会 `RecursionError`。\n"
                "- `merge_sort(items, *, key=None, reverse=False)`：稳定排序，参数和 `sorted()` 一样；"
                "`reverse=True` 时相等元素仍保持原顺序（与 `sorted()` 行为一致）。\n\n"
                "`test_sort_utils.py` 的 18 个测试全部通过（和 `sorted()` 对拍 + 随机输入 200 组）。")
    r.user("跑一下基准测试，跟内置 sorted() 比一比。", gap=(40, 120))
    bench_out = ("sorted      n=  1,000       0.09 ms\nquicksort   n=  1,000       1.41 ms\nmerge_sort  n=  1,000       2.87 ms\n"
                 "sorted      n= 10,000       1.32 ms\nquicksort   n= 10,000      18.95 ms\nmerge_sort  n= 10,000      37.40 ms\n"
                 "sorted      n=100,000      21.77 ms\nquicksort   n=100,000     239.08 ms\nmerge_sort  n=100,000     468.91 ms")
    (cid,) = r.assistant("", [("write_file", {"path": "bench_sort.py", "content": BENCH})])
    r.tool(cid, r.write_result("bench_sort.py", BENCH))
    r.call("", "bash", {"command": "python bench_sort.py"}, bash_result(bench_out), took=(8, 15))
    r.event("error", turn=r.n_asst + 1, where="model",
            message="openai.InternalServerError: Error code: 500 - {'error': {'message': 'The server had an error "
                    "while processing your request. Sorry about that!', 'type': 'server_error'}}")
    r.assistant("I'm sorry, something went wrong. Please try again.", usage=False, meta={"finish_reason": "error"})
    r.user("再试一次", gap=(10, 40))
    r.assistant("基准测试结果（随机浮点数，取 5 次最小值）：\n\n"
                "| n | sorted() | quicksort | merge_sort |\n|---|---|---|---|\n"
                "| 1,000 | 0.09 ms | 1.41 ms | 2.87 ms |\n| 10,000 | 1.32 ms | 18.95 ms | 37.40 ms |\n"
                "| 100,000 | 21.77 ms | 239.08 ms | 468.91 ms |\n\n"
                "内置 `sorted()` 快 10～20 倍：它是 C 实现的 Timsort，而我们的两个函数都是纯 Python。"
                "两者的增长趋势都是 n log n，说明实现没有退化。实际项目里请直接用 `sorted()` / `list.sort()`；"
                "这两个函数适合学习和面试场景。")
    r.user("明白了，谢谢！", gap=(20, 60))
    r.assistant("不客气！如果需要，我可以再加一个堆排序或者把基准测试画成图。")
    return r


# ==========================================================================================
# 5. mixed-zh-en
# ==========================================================================================
ZH_NAMES = ("王磊", "李娜", "张伟", "刘洋", "陈静", "杨帆", "赵敏", "黄强", "周婷", "吴昊")
ZH_CITIES = ("上海", "北京", "杭州", "深圳", "成都", "南京", "武汉", "西安")
ZH_PRODUCTS = ("无线蓝牙耳机", "不锈钢保温杯 500ml", "儿童绘本套装（全 10 册）", "机械键盘 87 键 茶轴", "有机纯牛奶 250ml×24",
               "男士休闲运动鞋", "智能手环 第 7 代", "抽纸 3 层 120 抽×18 包", "电动牙刷 声波款", "云南小粒咖啡豆 1kg")
OC = "/srv/order-center"
SITE = "/srv/order-center/venv/lib/python3.10/site-packages"

POOL_TRACE = f"""\
Traceback (most recent call last):
  File "{SITE}/flask/app.py", line 1484, in full_dispatch_request
    rv = self.dispatch_request()
  File "{SITE}/flask/app.py", line 1469, in dispatch_request
    return self.ensure_sync(self.view_functions[rule.endpoint])(**view_args)
  File "{OC}/app/api/orders.py", line 58, in create_order
    order = order_service.create_order(g.current_user.id, payload)
  File "{OC}/app/services/order_service.py", line 47, in create_order
    stock = Inventory.query.filter_by(sku=item["sku"]).with_for_update().first()
  File "{SITE}/sqlalchemy/orm/query.py", line 2728, in first
    return self.limit(1)._iter().first()  # type: ignore
  File "{SITE}/sqlalchemy/orm/query.py", line 2827, in _iter
    result: Union[ScalarResult[_T], Result[_T]] = self.session.execute(
  File "{SITE}/sqlalchemy/orm/session.py", line 2306, in execute
    return self._execute_internal(
  File "{SITE}/sqlalchemy/orm/session.py", line 2178, in _execute_internal
    conn = self._connection_for_bind(bind)
  File "{SITE}/sqlalchemy/orm/session.py", line 2047, in _connection_for_bind
    return trans._connection_for_bind(engine, execution_options)
  File "{SITE}/sqlalchemy/engine/base.py", line 3268, in connect
    return self._connection_cls(self)
  File "{SITE}/sqlalchemy/engine/base.py", line 145, in __init__
    self._dbapi_connection = engine.raw_connection()
  File "{SITE}/sqlalchemy/engine/base.py", line 3292, in raw_connection
    return self.pool.connect()
  File "{SITE}/sqlalchemy/pool/base.py", line 452, in connect
    return _ConnectionFairy._checkout(self)
  File "{SITE}/sqlalchemy/pool/base.py", line 1269, in _checkout
    fairy = _ConnectionRecord.checkout(pool)
  File "{SITE}/sqlalchemy/pool/base.py", line 716, in checkout
    rec = pool._do_get()
  File "{SITE}/sqlalchemy/pool/impl.py", line 157, in _do_get
    raise exc.TimeoutError(
sqlalchemy.exc.TimeoutError: QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00 (Background on this error at: https://sqlalche.me/e/20/3o7r)"""

GONE_TRACE = f"""\
Traceback (most recent call last):
  File "{SITE}/sqlalchemy/engine/base.py", line 1969, in _exec_single_context
    self.dialect.do_execute(
  File "{SITE}/sqlalchemy/engine/default.py", line 922, in do_execute
    cursor.execute(statement, parameters)
  File "{SITE}/pymysql/cursors.py", line 153, in execute
    result = self._query(query)
  File "{SITE}/pymysql/connections.py", line 775, in _read_query_result
    result.read()
  File "{SITE}/pymysql/connections.py", line 692, in _read_packet
    raise err.OperationalError(
pymysql.err.OperationalError: (2013, 'Lost connection to MySQL server during query')

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "{OC}/app/api/orders.py", line 91, in list_orders
    page = Order.query.filter_by(user_id=uid).order_by(Order.id.desc()).paginate(page=p, per_page=20)
sqlalchemy.exc.OperationalError: (pymysql.err.OperationalError) (2013, 'Lost connection to MySQL server during query')
[SQL: SELECT orders.id AS orders_id, orders.order_no AS orders_order_no, orders.user_id AS orders_user_id, orders.status AS orders_status, orders.amount AS orders_amount, orders.created_at AS orders_created_at 
FROM orders 
WHERE orders.user_id = %(user_id_1)s ORDER BY orders.id DESC 
 LIMIT %(param_1)s, %(param_2)s]
[parameters: {{'user_id_1': 20931, 'param_1': 0, 'param_2': 20}}]
(Background on this error at: https://sqlalche.me/e/20/e3q8)"""


def app_log(rng: random.Random, n: int, *, start: datetime, after_fix: bool = False,
            trace_rate: float = 0.35) -> list[str]:
    """order-center's app.log: Chinese messages, English tracebacks."""
    out: list[str] = []
    t = start
    pids = (2817, 2818, 2819, 2820)
    for _ in range(n):
        t += timedelta(milliseconds=rng.randint(40, 900))
        ts = t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"
        pid = pick(rng, pids)
        req = f"{rng.getrandbits(32):08x}"
        head = f"{ts} {{lvl}} [order-center] [pid={pid}] [req={req}]"
        uid = rng.randint(10000, 99999)
        order_no = f"OC{t.strftime('%Y%m%d%H%M%S')}{rng.randint(0, 9999):04d}"
        amount = f"¥{rng.randint(9, 2999)}.{rng.choice(('00', '50', '90', '99'))}"
        roll = rng.random()
        peak = "19:52" <= t.strftime("%H:%M") <= "20:33"
        if not after_fix and not peak and 0.42 <= roll < 0.95:
            roll = pick(rng, (0.1, 0.2, 0.25, 0.55, 0.58, 0.62, 0.97, 0.35))  # off-peak: no pool trouble
        if after_fix:
            if roll < 0.55:
                out.append(head.format(lvl="INFO ") + f" app.api.orders: 订单创建成功 order_no={order_no} 用户={uid} "
                           f"金额={amount} 耗时={rng.uniform(0.08, 0.6):.2f}s")
            elif roll < 0.75:
                out.append(head.format(lvl="INFO ") + f" app.services.payment: 支付回调处理完成 order_no={order_no} "
                           f"渠道={rng.choice(('alipay', 'wechat', 'unionpay'))} 耗时={rng.uniform(0.9, 9.5):.2f}s（不占用数据库连接）")
            elif roll < 0.9:
                out.append(head.format(lvl="INFO ") + f" app.db: 连接池状态 size=8 checked_out={rng.randint(0, 6)} "
                           f"overflow={rng.randint(-8, 0)}/4 等待线程=0")
            else:
                out.append(head.format(lvl="WARN ") + f" app.services.payment: 支付网关响应缓慢 gateway=alipay "
                           f"耗时={rng.uniform(6, 11):.2f}s order_no={order_no}，订单保持「待支付」，稍后由回调更新")
            continue
        if roll < 0.30:
            out.append(head.format(lvl="INFO ") + f" app.api.orders: 订单创建成功 order_no={order_no} 用户={uid} "
                       f"收货城市={pick(rng, ZH_CITIES)} 商品=「{pick(rng, ZH_PRODUCTS)}」 金额={amount} "
                       f"耗时={rng.uniform(0.3, 12.0):.2f}s")
        elif roll < 0.42:
            out.append(head.format(lvl="WARN ") + f" app.services.payment: 支付网关响应缓慢（超过 5 秒告警阈值）gateway="
                       f"{rng.choice(('alipay', 'wechat'))} 耗时={rng.uniform(5, 14):.2f}s order_no={order_no}，"
                       "当前事务仍在等待网关返回")
        elif roll < 0.52:
            out.append(head.format(lvl="WARN ") + f" app.db: 连接池使用率过高：已借出 15/15（size=5 overflow=10/10），"
                       f"另有 {rng.randint(3, 17)} 个线程在排队等待连接，请检查是否有慢请求长时间占用连接")
        elif roll < 0.60:
            out.append(head.format(lvl="INFO ") + f" app.services.inventory: 库存扣减成功 sku=SKU-{rng.randint(10000, 99999)} "
                       f"商品=「{pick(rng, ZH_PRODUCTS)}」 剩余={rng.randint(0, 800)} 仓库={pick(rng, ZH_CITIES)}仓")
        elif roll < 0.64:
            out.append(head.format(lvl="INFO ") + f" app.tasks.export: 导出任务开始 task_id=exp-{t:%Y%m%d}-{rng.randint(1, 99):04d} "
                       f"操作人={pick(rng, ZH_NAMES)} 预计行数={rng.randint(5000, 90000)}")
        elif roll < 0.67:
            out.append(head.format(lvl="INFO ") + f" app.tasks.export: 导出任务完成 文件=/data/export/订单明细_{t:%Y%m%d}_"
                       f"{rng.randint(100, 999)}.xlsx 耗时={rng.uniform(20, 240):.1f}s")
        elif roll < 0.80:
            out.append(head.format(lvl="ERROR") + f" app.api.orders: 创建订单失败 user_id={uid} "
                       f"sku=SKU-{rng.randint(10000, 99999)} 耗时=30.0{rng.randint(0, 9)}s 原因=数据库连接池超时"
                       "（已等待 30 秒仍未拿到连接），本次请求已回滚，库存未扣减")
            if rng.random() < trace_rate:
                out += POOL_TRACE.splitlines()
        elif roll < 0.85:
            out.append(head.format(lvl="ERROR") + f" app.api.orders: 查询订单列表失败 user_id={uid} "
                       "原因=数据库连接被服务端断开（连接空闲时间可能超过了 MySQL 的 wait_timeout）")
            if rng.random() < trace_rate:
                out += GONE_TRACE.splitlines()
        elif roll < 0.90:
            out.append(head.format(lvl="WARN ") + f" app.api.orders: 用户 {uid} 重复提交订单，已忽略（幂等键 "
                       f"idem-{rng.getrandbits(40):010x}）")
        elif roll < 0.95:
            g = t.strftime("%Y-%m-%d %H:%M:%S")
            out.append(f"[{g} +0800] [2811] [CRITICAL] WORKER TIMEOUT (pid:{pid})")
            out.append(f"[{g} +0800] [{pid}] [INFO] Worker exiting (pid: {pid})")
        else:
            out.append(head.format(lvl="INFO ") + f" app.api.health: 健康检查 ok db={rng.randint(2, 40)}ms redis=1ms")
    return out


ZH_CONFIG = '''\
"""order-center 配置。生产环境的值由环境变量覆盖（见 deploy/prod.env）。"""

import os


class Config:
    SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only")
    SQLALCHEMY_DATABASE_URI = os.environ.get(
        "DATABASE_URL", "mysql+pymysql://order:order@127.0.0.1:3306/order_center?charset=utf8mb4"
    )
    # 连接池参数（2022 年上线时按单实例 2 个 worker 配的，一直没改过）
    SQLALCHEMY_ENGINE_OPTIONS = {
        "pool_size": 5,          # 常驻连接数
        "max_overflow": 10,      # 高峰时额外允许的连接数
        "pool_timeout": 30,      # 拿不到连接时最多等 30 秒
        "pool_recycle": 3600,    # 一小时回收一次连接
    }
    SQLALCHEMY_ECHO = False

    # 支付网关
    PAYMENT_GATEWAY_URL = os.environ.get("PAYMENT_GATEWAY_URL", "https://pay.internal.example.com/v2")
    PAYMENT_TIMEOUT = 30  # 秒；网关偶尔很慢，给足时间

    # 导出任务
    EXPORT_DIR = os.environ.get("EXPORT_DIR", "/data/export")
    EXPORT_BATCH = 2000


class TestConfig(Config):
    TESTING = True
    SQLALCHEMY_DATABASE_URI = "sqlite://"
    SQLALCHEMY_ENGINE_OPTIONS = {}
'''

ZH_GUNICORN = '''\
# gunicorn 配置：gthread 模式，每个 worker 开多个线程
bind = "0.0.0.0:8000"
workers = 4
worker_class = "gthread"
threads = 16          # 2023-11 大促前从 4 调到 16，为了扛住并发
timeout = 60
graceful_timeout = 30
keepalive = 5
max_requests = 5000
max_requests_jitter = 500
accesslog = "-"
errorlog = "-"
loglevel = "info"
'''

ZH_ORDER_SERVICE_OLD = '''\
"""订单服务：下单、取消、查询。"""

import logging
import time
import uuid

import requests
from flask import current_app

from app.extensions import db
from app.models import Inventory, Order, OrderItem

log = logging.getLogger(__name__)


class OrderError(Exception):
    pass


def _order_no() -> str:
    return "OC" + time.strftime("%Y%m%d%H%M%S") + uuid.uuid4().hex[:4].upper()


def create_order(user_id: int, payload: dict) -> Order:
    """创建订单：锁库存 -> 写订单 -> 调支付网关预下单 -> 提交事务。"""
    started = time.monotonic()
    order = Order(order_no=_order_no(), user_id=user_id, status="pending", amount=0)
    db.session.add(order)
    total = 0
    for item in payload["items"]:
        # 行锁，防止超卖
        stock = Inventory.query.filter_by(sku=item["sku"]).with_for_update().first()
        if stock is None or stock.quantity < item["qty"]:
            db.session.rollback()
            raise OrderError(f"库存不足: {item['sku']}")
        stock.quantity -= item["qty"]
        total += stock.price * item["qty"]
        db.session.add(OrderItem(order=order, sku=item["sku"], qty=item["qty"], price=stock.price))
    order.amount = total

    # 调支付网关预下单（注意：此时事务还没提交，连接和行锁都还占着）
    resp = requests.post(
        current_app.config["PAYMENT_GATEWAY_URL"] + "/prepay",
        json={"order_no": order.order_no, "amount": str(total), "user_id": user_id},
        timeout=current_app.config["PAYMENT_TIMEOUT"],
    )
    resp.raise_for_status()
    order.prepay_id = resp.json()["prepay_id"]

    db.session.commit()
    log.info("订单创建成功 order_no=%s 用户=%s 金额=¥%s 耗时=%.2fs", order.order_no, user_id, total,
             time.monotonic() - started)
    return order


def cancel_order(order_no: str, user_id: int) -> Order:
    order = Order.query.filter_by(order_no=order_no, user_id=user_id).with_for_update().first_or_404()
    if order.status not in ("pending", "paid"):
        raise OrderError(f"订单状态 {order.status} 不允许取消")
    for item in order.items:
        Inventory.query.filter_by(sku=item.sku).update({"quantity": Inventory.quantity + item.qty})
    order.status = "cancelled"
    db.session.commit()
    return order
'''

ZH_EXPORT_OLD = '''\
"""订单导出：运营在后台点「导出」后，在后台线程里生成 Excel。"""

import logging
import threading

from openpyxl import Workbook

from app.extensions import db
from app.models import Order

log = logging.getLogger(__name__)


def start_export(app, operator: str, filters: dict) -> str:
    task_id = f"exp-{filters.get('date', 'all')}"
    # 开个线程跑，避免接口超时
    threading.Thread(target=_run_export, args=(app, task_id, operator, filters), daemon=True).start()
    return task_id


def _run_export(app, task_id: str, operator: str, filters: dict) -> None:
    with app.app_context():
        log.info("导出任务开始 task_id=%s 操作人=%s", task_id, operator)
        wb = Workbook()
        ws = wb.active
        ws.append(["订单号", "用户", "状态", "金额", "下单时间"])
        query = Order.query.filter_by(**filters).order_by(Order.id)
        for order in query.yield_per(2000):   # 流式读取，整个导出期间都占着一个连接
            ws.append([order.order_no, order.user_id, order.status, float(order.amount), order.created_at])
        path = f"{app.config['EXPORT_DIR']}/订单明细_{task_id}.xlsx"
        wb.save(path)
        log.info("导出任务完成 文件=%s", path)
        # 注意：这里没有 db.session.remove()，线程结束时连接是否归还取决于 GC
'''


def alert_log(rng: random.Random) -> list[str]:
    """Alerts and on-call notes from the ops channel, in Chinese, for five evenings."""
    out = []
    for day in (16, 17, 18, 19, 20):
        base = datetime(2024, 5, day, 19, 50, rng.randint(0, 59))
        t = base + timedelta(minutes=rng.randint(3, 8))
        oncall = pick(rng, ZH_NAMES)
        rate = rng.uniform(12, 35)
        out.append(f"{t:%Y-%m-%d %H:%M:%S} 【P2 告警】MySQL order_center 活跃连接数 {rng.randint(400, 470)}/500，"
                   f"超过 80% 水位，请相关服务负责人关注。")
        t += timedelta(minutes=rng.randint(1, 3))
        out.append(f"{t:%Y-%m-%d %H:%M:%S} 【P1 告警】order-center 下单接口 5xx 错误率 {rate:.1f}%（阈值 5%），"
                   f"持续 3 分钟，影响实例：oc-prod-{rng.randint(1, 4)}、oc-prod-{rng.randint(5, 8)}。值班人：{oncall}。")
        t += timedelta(minutes=rng.randint(2, 6))
        out.append(f"{t:%Y-%m-%d %H:%M:%S} 【P1 告警升级】下单成功率跌至 {100 - rate * 1.2:.1f}%，已自动电话通知值班负责人 "
                   f"{oncall}，并同步到「交易稳定性」群。")
        t += timedelta(minutes=rng.randint(2, 8))
        note = pick(rng, ("已重启 oc-prod-2，错误率短暂下降后又回升，怀疑和数据库有关，已联系 DBA 值班。",
                          "DBA 反馈数据库 CPU 只有 35%，慢查询不多，不像是数据库本身的问题。",
                          "支付组反馈网关晚高峰响应变慢，正在扩容，预计本周内完成。",
                          "临时把 oc-prod 扩到 10 台，没有明显改善，回滚到 8 台。",
                          "观察到 gunicorn 有 WORKER TIMEOUT，worker 被反复重启。"))
        out.append(f"{t:%Y-%m-%d %H:%M:%S} 【处理记录】{oncall}：{note}")
        t = base + timedelta(minutes=rng.randint(36, 44))
        out.append(f"{t:%Y-%m-%d %H:%M:%S} 【恢复通知】order-center 下单接口错误率恢复至 {rng.uniform(0.1, 0.6):.1f}%，"
                   f"告警自动关闭，持续时长 {rng.randint(31, 40)} 分钟。")
        out.append(f"{t + timedelta(minutes=5):%Y-%m-%d %H:%M:%S} 【复盘待办】{oncall}：原因未明，明晚继续观察；"
                   "请研发同学排查连接池配置和慢接口。")
    return out


ZH_GITLOG = """\
e41a0c7 2024-05-08 刘洋 订单导出支持按日期筛选，导出改为 yield_per 流式读取
9b2d6f1 2024-04-22 陈静 下单时调用支付网关预下单，拿到 prepay_id 后再返回给客户端
3c8e5a0 2024-03-15 张伟 通知发送改为线程池异步，避免阻塞下单接口
a1c9e02 2023-11-08 张伟 大促前扩容：gunicorn threads 4 -> 16
5f0b7d3 2023-09-19 赵敏 MySQL 迁移到新集群，wait_timeout 调整为 300（DBA 统一规范）
7f3b1d9 2023-06-12 刘洋 导出任务改为后台线程，避免接口超时
c2d4e88 2023-02-27 王磊 库存扣减加行锁（with_for_update），修复超卖
0a9f6b1 2022-08-30 王磊 order-center 初始版本：Flask + SQLAlchemy 连接池"""

ZH_EXTENSIONS = '''\
"""Flask 扩展的单例，避免循环导入。"""

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


# db.session 是 scoped_session：每个线程一个 session；请求结束时 Flask-SQLAlchemy 会自动 remove()。
# 在请求之外（后台线程、脚本）使用时必须自己调用 db.session.remove()，否则连接不会归还连接池。
db = SQLAlchemy(model_class=Base)
'''

ZH_MODELS = '''\
"""订单相关的表。金额统一用 Numeric(12, 2)，不要用 float。"""

from datetime import datetime
from decimal import Decimal

from sqlalchemy import ForeignKey, Index, Numeric, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import db


class Order(db.Model):
    __tablename__ = "orders"
    __table_args__ = (Index("ix_orders_user_id_id", "user_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    order_no: Mapped[str] = mapped_column(String(32), unique=True)       # 订单号，OC + 时间戳 + 随机后缀
    user_id: Mapped[int] = mapped_column(index=True)
    status: Mapped[str] = mapped_column(String(16), default="pending")    # pending 待支付 / paid 已支付 / cancelled 已取消
    amount: Mapped[Decimal] = mapped_column(Numeric(12, 2))               # 订单总金额（元）
    prepay_id: Mapped[str | None] = mapped_column(String(64))             # 支付网关预下单返回的 id
    created_at: Mapped[datetime] = mapped_column(default=datetime.now)

    items: Mapped[list["OrderItem"]] = relationship(back_populates="order", lazy="selectin")


class OrderItem(db.Model):
    __tablename__ = "order_items"

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"))
    sku: Mapped[str] = mapped_column(String(32))
    qty: Mapped[int]
    price: Mapped[Decimal] = mapped_column(Numeric(12, 2))                # 下单时的单价快照

    order: Mapped[Order] = relationship(back_populates="items")


class Inventory(db.Model):
    __tablename__ = "inventory"

    sku: Mapped[str] = mapped_column(String(32), primary_key=True)
    quantity: Mapped[int]                                                 # 可售库存
    price: Mapped[Decimal] = mapped_column(Numeric(12, 2))
    warehouse: Mapped[str] = mapped_column(String(16))                   # 仓库，例如「上海仓」
'''

ZH_ORDERS_API = '''\
"""订单接口。"""

import logging

from flask import Blueprint, g, jsonify, request

from app.auth import login_required
from app.models import Order
from app.services import order_service
from app.services.notify import notify_order_created

bp = Blueprint("orders", __name__)
log = logging.getLogger(__name__)


@bp.post("/orders")
@login_required
def create_order():
    payload = request.get_json(force=True)
    try:
        order = order_service.create_order(g.current_user.id, payload)
    except order_service.OrderError as exc:
        return jsonify(error={"code": "order_invalid", "message": str(exc)}), 400
    except Exception:
        log.exception("创建订单失败 user_id=%s", g.current_user.id)
        return jsonify(error={"code": "internal", "message": "系统繁忙，请稍后再试"}), 500
    notify_order_created(order.order_no, g.current_user.phone)   # 异步发短信，不阻塞
    return jsonify(order_no=order.order_no, status=order.status, amount=str(order.amount),
                   prepay_id=order.prepay_id), 201


@bp.get("/orders")
@login_required
def list_orders():
    p = request.args.get("page", 1, type=int)
    page = Order.query.filter_by(user_id=g.current_user.id).order_by(Order.id.desc()).paginate(page=p, per_page=20)
    return jsonify(items=[{"order_no": o.order_no, "status": o.status, "amount": str(o.amount),
                           "created_at": o.created_at.isoformat()} for o in page.items],
                   page=p, total=page.total)
'''

ZH_NOTIFY = '''\
"""下单成功后发短信 / 钉钉通知。只调用 HTTP 接口，不访问数据库。"""

import logging

import requests
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)
_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="notify")

SMS_TEMPLATE = "【某某商城】您的订单 {order_no} 已提交，请在 30 分钟内完成支付，超时订单将自动取消。"


def notify_order_created(order_no: str, phone: str) -> None:
    _executor.submit(_send_sms, order_no, phone)


def _send_sms(order_no: str, phone: str) -> None:
    try:
        requests.post("https://sms.internal.example.com/send", timeout=5,
                      json={"phone": phone, "text": SMS_TEMPLATE.format(order_no=order_no)})
    except requests.RequestException as exc:
        log.warning("短信发送失败 order_no=%s 原因=%s（不影响下单）", order_no, exc)
'''

ZH_DBA_DOC = """\
# 数据库连接使用规范（DBA 组，2024-01 修订）

适用范围：所有访问 MySQL 生产集群（order_center、user_center、pay_center）的服务。

## 一、连接数配额

| 集群 | max_connections | 预留给 DBA / 运维 | 业务可用 |
|---|---|---|---|
| order_center | 500 | 50 | 450 |

各服务的连接数上限 = 实例数 × 每实例进程数 × 每进程连接池上限（pool_size + max_overflow），
**必须小于分配给该服务的配额**。order-center 的配额为 400，其余留给报表服务和数据同步任务。

## 二、连接池参数要求

1. `pool_size` 不超过 10；`max_overflow` 不超过 `pool_size` 的一半。
2. `pool_recycle` 必须小于 `wait_timeout`（当前为 300 秒），建议设为 280。
3. 必须开启 `pool_pre_ping`，避免使用已被服务端关闭的连接（2013 / 2006 错误）。
4. `pool_timeout` 建议 3～10 秒。拿不到连接时应快速失败，而不是让请求长时间排队。

## 三、禁止事项

- **禁止在事务中调用外部 HTTP 接口**（支付、短信、风控等）。外部接口的延迟不可控，会长时间占用连接和行锁。
- 禁止在后台线程中使用请求级 session 而不归还连接。
- 禁止长时间的流式查询（`yield_per`、服务端游标）用于导出；请按主键分批查询。
- 禁止在业务高峰期（19:00～22:00）执行大批量导出，如有需要请走只读从库。

## 四、监控

- 连接池状态（size / checked_out / overflow）需要打到日志或指标，便于排查。
- 单个连接借出时间超过 10 秒应告警。

如有疑问请在「数据库支持」群里 @DBA 值班。
"""

ZH_RECONCILE = '''\
"""补偿任务：给「待支付」但没有 prepay_id 的订单补调支付网关预下单。

下单流程把支付网关调用移到事务外以后，网关超时或失败时订单会停在 pending 且没有 prepay_id。
本任务每分钟跑一次（crontab: * * * * * flask reconcile-pending-orders），逐单处理：
  - 每单一个短事务，调用网关前先提交，绝不在事务里等网关；
  - 超过 30 分钟仍未支付的订单直接取消并释放库存（与短信里的「30 分钟内完成支付」一致）。
"""

import logging
from datetime import datetime, timedelta

import click
import requests
from flask import current_app

from app.extensions import db
from app.models import Order
from app.services.order_service import cancel_order

log = logging.getLogger(__name__)
BATCH = 200
PAY_WINDOW = timedelta(minutes=30)


@click.command("reconcile-pending-orders")
def reconcile_pending_orders() -> None:
    now = datetime.now()
    orders = (Order.query.filter(Order.status == "pending", Order.prepay_id.is_(None))
              .order_by(Order.id).limit(BATCH).all())
    todo = [(o.order_no, o.user_id, o.amount, o.created_at) for o in orders]
    db.session.remove()                      # 先归还连接，再逐单调网关
    fixed = cancelled = failed = 0
    for order_no, user_id, amount, created_at in todo:
        if now - created_at > PAY_WINDOW:
            cancel_order(order_no, user_id)
            cancelled += 1
            continue
        try:
            resp = requests.post(current_app.config["PAYMENT_GATEWAY_URL"] + "/prepay", timeout=(3, 10),
                                 json={"order_no": order_no, "amount": str(amount), "user_id": user_id})
            resp.raise_for_status()
        except requests.RequestException as exc:
            failed += 1
            log.warning("补偿预下单失败 order_no=%s 原因=%s，下一轮重试", order_no, exc)
            continue
        order = Order.query.filter_by(order_no=order_no, status="pending").first()
        if order is not None:
            order.prepay_id = resp.json()["prepay_id"]
            db.session.commit()
            fixed += 1
        db.session.remove()
    log.info("补偿任务完成 补单=%d 取消=%d 失败=%d", fixed, cancelled, failed)
'''


def session_mixed() -> Recorder:
    ws = "/home/dev/work/order-center"
    r = Recorder(seed=1005, title="order-center 高峰期数据库连接池超时排查",
                 created="2024-05-21T01:12:09+00:00", model="qwen2.5-coder-32b-instruct", window=16000, workspace=ws,
                 existing=("app/services/order_service.py", "app/tasks/export.py", "config.py", "gunicorn.conf.py",
                           "app/__init__.py", "tests/conftest.py", "deploy/crontab"))
    rng = r.rng
    r.system(SYSTEM_PROMPT.format(workspace=ws) + "\n- 用户使用中文时，用中文回答；代码、命令和日志保持原样。")
    r.user("我们的 Flask 订单服务（order-center）最近每天晚上 8 点左右高峰期都会报数据库连接池超时，"
           "下单接口大量 500，持续半小时左右就自己恢复了。日志我拷到了 logs/app.log，帮我看看是什么原因？")
    alerts = alert_log(rng)
    log_lines = app_log(rng, 70, start=datetime(2024, 5, 20, 20, 1, 3), trace_rate=0.12)
    r.parallel("先看告警记录和高峰期的应用日志。",
               [("bash", {"command": "grep -h 'order-center\\|order_center\\|处理记录\\|恢复通知' logs/alerts-*.log | tail -n 60"},
                 bash_result("\n".join(alerts))),
                ("bash", {"command": "sed -n '/^2024-05-20 20:01:03/,$p' logs/app.log | head -n 90"},
                 bash_result("\n".join(log_lines[:90])))])
    big = app_log(random.Random(7), 9000, start=datetime(2024, 5, 20, 19, 30, 0))
    per_min: dict[str, list[int]] = {}
    for s in big:
        if s.startswith("2024-"):
            m = s[11:16]
            row = per_min.setdefault(m, [0, 0, 0])
            row[0] += "连接池超时" in s
            row[1] += "连接池使用率过高" in s
            row[2] += "订单创建成功" in s
    table = "时间   池超时  池告警  下单成功\n" + "\n".join(f"{k}  {v[0]:>6}  {v[1]:>6}  {v[2]:>8}"
                                                    for k, v in sorted(per_min.items())[::3])
    r.call("告警显示 5 月 16 日以来每晚 19:55～20:35 都在重复，持续半小时左右自动恢复。应用日志里有三类问题交织在一起："
           "`QueuePool limit of size 5 overflow 10 reached`（拿不到连接）、`Lost connection to MySQL server during query`"
           "（连接被服务端断开）、还有 gunicorn 的 `WORKER TIMEOUT`。我按分钟统计一下，看看和流量的关系。", "bash",
           {"command": "awk '/^2024-/{m=substr($2,1,5); t[m]+=/连接池超时/; w[m]+=/连接池使用率过高/; ok[m]+=/订单创建成功/} "
                       "END{for(k in t) print k, t[k], w[k], ok[k]}' logs/app.log | sort | awk 'NR%3==1'"},
           bash_result(table))
    r.parallel("超时从 19:5x 开始持续出现，和晚高峰吻合。看看连接池和 gunicorn 的配置，以及它们最近的改动。",
               [("read_file", {"path": "config.py"}, ZH_CONFIG),
                ("read_file", {"path": "gunicorn.conf.py"}, ZH_GUNICORN),
                ("bash", {"command": "git log --date=short --format='%h %ad %an %s' -12 -- config.py gunicorn.conf.py "
                                     "app/services app/tasks"}, bash_result(ZH_GITLOG))])
    r.note("第一个问题已经很明显了：\n\n"
                "- gunicorn：`workers = 4`，`worker_class = \"gthread\"`，`threads = 16`（去年 11 月大促前从 4 调上来的）"
                "→ **每个进程最多 16 个并发请求**。\n"
                "- SQLAlchemy 连接池是**每个进程一个**：`pool_size 5 + max_overflow 10 = 15` 个连接。\n\n"
                "16 个线程抢 15 个连接，本来就差一个；只要有请求长时间占着连接不放，其他线程就会在 "
                "`pool_timeout = 30` 秒后抛 `QueuePool limit ... connection timed out, timeout 30.00`。"
                "日志里失败的请求耗时都是 `30.0x s`，正好对上。\n\n"
                "但这只是放大器，关键是**谁在长时间占着连接**。我看一下数据访问层和下单的代码。")
    r.parallel("", [("read_file", {"path": "app/extensions.py"}, ZH_EXTENSIONS),
                    ("read_file", {"path": "app/models.py"}, ZH_MODELS)])
    r.call("`db.session` 是 Flask-SQLAlchemy 的 scoped session，请求结束时由 `teardown_appcontext` 自动 remove；"
           "请求之外（后台线程）就得自己管。现在看下单流程：", "read_file",
           {"path": "app/services/order_service.py"}, ZH_ORDER_SERVICE_OLD)
    r.call("看一下路由层有没有额外的事务处理：", "read_file", {"path": "app/api/orders.py"}, ZH_ORDERS_API)
    slow = [s for s in big if "支付网关响应缓慢" in s][:14]
    gateway = sorted(float(s.split("支付网关响应缓慢", 1)[1].split("耗时=", 1)[1].split("s", 1)[0])
                     for s in big if "支付网关响应缓慢" in s)
    r.call("找到了：`create_order` 在**事务还没提交**的时候调用支付网关（`requests.post(..., timeout=30)`），"
           "这期间数据库连接和库存行锁（`with_for_update()`）一直被占着。看看网关最近有多慢：", "bash",
           {"command": "grep '支付网关响应缓慢' logs/app.log | head -14; echo; grep -c '支付网关响应缓慢' logs/app.log; "
                       "grep -oP '支付网关响应缓慢.*?耗时=\\K[0-9.]+' logs/app.log | sort -n | "
                       "awk '{a[NR]=$1} END{print \"p50=\" a[int(NR*0.5)] \"s p90=\" a[int(NR*0.9)] \"s p99=\" a[int(NR*0.99)] \"s\"}'"},
           bash_result("\n".join(slow) + f"\n\n{len(gateway)}\n" + " ".join(
               f"p{q}={gateway[max(0, int(len(gateway) * q / 100) - 1)]:.2f}s" for q in (50, 90, 99))))
    r.user("支付网关那边确实最近变慢了，他们说 P99 大概 8 秒，在扩容。但是为什么 8 点过了半小时就自己恢复了？"
           "还有那个 Lost connection 是怎么回事？", gap=(60, 240))
    processlist = ("+--------+-------+--------------------+--------------+---------+------+----------+------------------+\n"
                   "| Id     | User  | Host               | db           | Command | Time | State    | Info             |\n"
                   "+--------+-------+--------------------+--------------+---------+------+----------+------------------+\n")
    for i in range(24):
        host = f"10.12.3.{rng.choice((21, 22, 23, 24))}:{rng.randint(30000, 60000)}"
        if i < 6:
            cmd, tm, st, info = "Query", rng.randint(1, 14), "updating", "UPDATE inventory SET quantity=quantity-1 WHERE sku=..."[:16]
        elif i < 9:
            cmd, tm, st, info = "Query", rng.randint(20, 49), "Sending data", "SELECT orders.id"
        else:
            cmd, tm, st, info = "Sleep", rng.randint(280, 2900), "", "NULL"
        processlist += f"| {441100 + i * 7:<6} | order | {host:<18} | order_center | {cmd:<7} | {tm:>4} | {st:<8} | {info:<16} |\n"
    processlist += ("+--------+-------+--------------------+--------------+---------+------+----------+------------------+\n"
                    "24 rows in set (0.00 sec)\n\n+---------------+-------+\n| Variable_name | Value |\n"
                    "+---------------+-------+\n| wait_timeout  | 300   |\n+---------------+-------+\n"
                    "+-----------------+-------+\n| Variable_name   | Value |\n+-----------------+-------+\n"
                    "| max_connections | 500   |\n+-----------------+-------+")
    r.call("我查一下 MySQL 那边现在的连接状态和超时设置。", "bash",
           {"command": "mysql -h db-prod-ro -u ops -e \"SELECT * FROM information_schema.PROCESSLIST WHERE USER='order' "
                       "ORDER BY TIME DESC LIMIT 24\\G\" --table 2>/dev/null | head -40; "
                       "mysql -h db-prod-ro -u ops -e \"SHOW VARIABLES LIKE 'wait_timeout'; SHOW VARIABLES LIKE 'max_connections'\""},
           bash_result(processlist))
    r.call("有很多 `Sleep` 了几百到几千秒的连接，说明有连接被借走后**一直没有归还**。请求里的 session 会被自动回收，"
           "所以先找请求之外使用数据库的地方：", "bash", {"command": "grep -rn 'Thread(\\|threading\\|executor\\|yield_per' app"},
           bash_result("app/tasks/export.py:4:import threading\n"
                       "app/tasks/export.py:16:    threading.Thread(target=_run_export, args=(app, task_id, operator, filters), daemon=True).start()\n"
                       "app/tasks/export.py:28:        for order in query.yield_per(2000):   # 流式读取，整个导出期间都占着一个连接\n"
                       "app/services/notify.py:9:from concurrent.futures import ThreadPoolExecutor\n"
                       "app/services/notify.py:12:_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix=\"notify\")"))
    r.parallel("两处：导出任务和通知发送。都看一下。",
               [("read_file", {"path": "app/tasks/export.py"}, ZH_EXPORT_OLD),
                ("read_file", {"path": "app/services/notify.py"}, ZH_NOTIFY)])
    r.assistant("两个问题都能解释了：\n\n"
                "**1. 为什么半小时后自己恢复？**\n"
                "高峰期下单量大，每个下单请求在事务里等支付网关 8～14 秒，15 个连接很快被占满，后面的请求排队 30 秒后超时。"
                "8 点半以后流量下降，占用时间 × 请求速率 < 15，连接池就够用了，所以“自己恢复”。\n\n"
                "**2. `Lost connection to MySQL server during query` 是怎么回事？**\n"
                "MySQL 的 `wait_timeout = 300`（5 分钟），而我们的 `pool_recycle = 3600`（1 小时）。"
                "空闲超过 5 分钟的连接已经被 MySQL 服务端关掉了，但连接池不知道，下次借出去一用就报 2013 错误。"
                "需要 `pool_recycle` 小于 300，再加上 `pool_pre_ping=True`。\n\n"
                "**3. 连接泄漏**\n"
                "`app/tasks/export.py` 在后台线程里用 `db.session`，结束时没有 `db.session.remove()`；"
                "`yield_per(2000)` 导出几万行时整个过程都占着一个连接。PROCESSLIST 里那些 Sleep 了几千秒的连接就是它们。\n\n"
                "**建议的修复**（按重要性）：\n"
                "1. 支付网关调用移到事务外：先提交订单（状态 `pending`），释放连接，再调网关，最后用一个短事务写回 `prepay_id`。\n"
                "2. 导出任务用独立的 session，`finally` 里 `remove()`，并分批查询而不是长游标。\n"
                "3. `pool_pre_ping=True`，`pool_recycle=280`，`pool_timeout` 缩短到 5 秒快速失败。\n"
                "4. gunicorn 的 `threads` 不要超过每个进程的连接数。\n\n要我直接改吗？")
    r.user("改吧。不过连接池参数要符合 DBA 的规范，文档在 docs/数据库连接规范.md。线上是 8 个实例，每个实例 4 个 worker。",
           gap=(90, 300))
    r.call("先看规范。", "read_file", {"path": "docs/数据库连接规范.md"}, ZH_DBA_DOC)
    r.note("按规范算一下：order-center 的配额是 **400** 个连接，上限 = 8 个实例 × 4 个 worker × 每进程 "
                "(pool_size + max_overflow)，所以每进程最多 400 / 32 = 12.5 个。\n\n"
                "- 取 `pool_size=8, max_overflow=4`：每进程 12 个，总共 8 × 4 × 12 = **384 ≤ 400**；"
                "`max_overflow` 不超过 `pool_size` 的一半，符合第二条第 1 款。\n"
                "- `pool_recycle=280`（< `wait_timeout` 300），`pool_pre_ping=True`，`pool_timeout=5`。\n"
                "- gunicorn `threads` 降到 8，保证线程数 ≤ 连接数，请求不会因为抢连接而排队。\n\n"
                "另外规范第三条明确禁止「在事务中调用外部 HTTP 接口」和「用 `yield_per` 流式导出」，"
                "正好是我们这次的两个根因，代码一起改。")
    order_new = edit(ZH_ORDER_SERVICE_OLD, (
        '''    """创建订单：锁库存 -> 写订单 -> 调支付网关预下单 -> 提交事务。"""''',
        '''    """创建订单：锁库存、写订单并提交（短事务）-> 事务外调支付网关 -> 短事务写回 prepay_id。

    支付网关 P99 约 8～14 秒，绝不能在持有数据库连接和行锁时调用它（2024-05 晚高峰连接池耗尽的根因）。
    """'''), (
        '''    # 调支付网关预下单（注意：此时事务还没提交，连接和行锁都还占着）
    resp = requests.post(
        current_app.config["PAYMENT_GATEWAY_URL"] + "/prepay",
        json={"order_no": order.order_no, "amount": str(total), "user_id": user_id},
        timeout=current_app.config["PAYMENT_TIMEOUT"],
    )
    resp.raise_for_status()
    order.prepay_id = resp.json()["prepay_id"]

    db.session.commit()
''',
        '''    db.session.commit()          # 释放行锁，连接归还连接池
    db.session.remove()          # 调网关期间本线程不持有任何连接

    try:
        resp = requests.post(
            current_app.config["PAYMENT_GATEWAY_URL"] + "/prepay",
            json={"order_no": order.order_no, "amount": str(total), "user_id": user_id},
            timeout=(3, current_app.config["PAYMENT_TIMEOUT"]),   # (连接超时, 读超时)
        )
        resp.raise_for_status()
        prepay_id = resp.json()["prepay_id"]
    except requests.RequestException as exc:
        # 订单保持 pending；支付回调或定时任务 reconcile_pending_orders 会补上 prepay_id
        log.warning("支付网关预下单失败 order_no=%s 原因=%s，订单保持待支付", order.order_no, exc)
        return Order.query.filter_by(order_no=order.order_no).one()

    order = Order.query.filter_by(order_no=order.order_no).one()
    order.prepay_id = prepay_id
    db.session.commit()
'''))
    export_new = textwrap.dedent('''\
        """订单导出：运营在后台点「导出」后，在后台线程里生成 Excel。

        后台线程不在请求上下文里，Flask-SQLAlchemy 不会自动回收它的 session，必须自己 remove()，
        否则连接会一直被占着（2024-05 排查时 PROCESSLIST 里大量 Sleep 数千秒的连接）。
        """

        import logging
        import threading

        from openpyxl import Workbook

        from app.extensions import db
        from app.models import Order

        log = logging.getLogger(__name__)
        BATCH = 2000


        def start_export(app, operator: str, filters: dict) -> str:
            task_id = f"exp-{filters.get('date', 'all')}"
            threading.Thread(target=_run_export, args=(app, task_id, operator, filters), daemon=True,
                             name=f"export-{task_id}").start()
            return task_id


        def _run_export(app, task_id: str, operator: str, filters: dict) -> None:
            with app.app_context():
                try:
                    log.info("导出任务开始 task_id=%s 操作人=%s", task_id, operator)
                    wb = Workbook(write_only=True)
                    ws = wb.create_sheet("订单明细")
                    ws.append(["订单号", "用户", "状态", "金额", "下单时间"])
                    last_id, rows = 0, 0
                    while True:
                        # 按主键分批查询：每批一个短查询，批与批之间连接归还连接池
                        batch = (Order.query.filter_by(**filters).filter(Order.id > last_id)
                                 .order_by(Order.id).limit(BATCH).all())
                        db.session.remove()
                        if not batch:
                            break
                        for order in batch:
                            ws.append([order.order_no, order.user_id, order.status, str(order.amount),
                                       order.created_at])
                        rows += len(batch)
                        last_id = batch[-1].id
                    path = f"{app.config['EXPORT_DIR']}/订单明细_{task_id}.xlsx"
                    wb.save(path)
                    log.info("导出任务完成 文件=%s 行数=%d", path, rows)
                except Exception:
                    log.exception("导出任务失败 task_id=%s", task_id)
                finally:
                    db.session.remove()
        ''')
    config_new = edit(ZH_CONFIG, ('''    # 连接池参数（2022 年上线时按单实例 2 个 worker 配的，一直没改过）
    SQLALCHEMY_ENGINE_OPTIONS = {
        "pool_size": 5,          # 常驻连接数
        "max_overflow": 10,      # 高峰时额外允许的连接数
        "pool_timeout": 30,      # 拿不到连接时最多等 30 秒
        "pool_recycle": 3600,    # 一小时回收一次连接
    }''', '''    # 连接池参数。上限：8 实例 × 4 worker × (8 + 4) = 384 < MySQL max_connections 500（DBA 要求留余量）
    SQLALCHEMY_ENGINE_OPTIONS = {
        "pool_size": 8,          # 常驻连接数；DBA 要求不超过 10
        "max_overflow": 4,       # 高峰时额外允许的连接数
        "pool_timeout": 5,       # 拿不到连接 5 秒就失败，不让请求排队 30 秒拖垮 worker
        "pool_recycle": 280,     # 必须小于 MySQL wait_timeout（300 秒），否则会拿到已被服务端关闭的连接
        "pool_pre_ping": True,   # 借出前先 ping，连接失效就重连，避免 2013 Lost connection
    }'''), ('''    PAYMENT_TIMEOUT = 30  # 秒；网关偶尔很慢，给足时间''',
                  '''    PAYMENT_TIMEOUT = 15  # 读超时（秒）；调用发生在事务外，不再占用数据库连接'''))
    gunicorn_new = edit(ZH_GUNICORN, ('''threads = 16          # 2023-11 大促前从 4 调到 16，为了扛住并发''',
                                       '''threads = 8           # 不能超过每进程连接数（pool_size 8 + max_overflow 4 = 12）'''))
    r.parallel("开始改。先改下单流程：支付网关调用挪到事务外。",
               [("write_file", {"path": "app/services/order_service.py", "content": order_new},
                 WROTE)])
    r.parallel("再改导出任务和两个配置文件。",
               [("write_file", {"path": "app/tasks/export.py", "content": export_new},
                 WROTE),
                ("write_file", {"path": "config.py", "content": config_new}, WROTE),
                ("write_file", {"path": "gunicorn.conf.py", "content": gunicorn_new},
                 WROTE)])
    pool_mon = textwrap.dedent('''\
        """连接池监控：每 30 秒打印一次连接池状态；借出超过 10 秒的连接打印调用栈，方便定位泄漏。"""

        import logging
        import time
        import traceback

        from sqlalchemy import event

        log = logging.getLogger("app.db")
        SLOW_CHECKOUT_SECONDS = 10


        def install(engine) -> None:
            pool = engine.pool

            @event.listens_for(engine, "checkout")
            def _on_checkout(dbapi_conn, record, proxy):
                record.info["checkout_at"] = time.monotonic()
                record.info["checkout_stack"] = "".join(traceback.format_stack(limit=12)[:-2])

            @event.listens_for(engine, "checkin")
            def _on_checkin(dbapi_conn, record):
                started = record.info.pop("checkout_at", None)
                stack = record.info.pop("checkout_stack", "")
                if started is not None and time.monotonic() - started > SLOW_CHECKOUT_SECONDS:
                    log.warning("连接占用过久 %.1fs，借出位置：\\n%s", time.monotonic() - started, stack)

            def report() -> None:
                while True:
                    log.info("连接池状态 size=%d checked_out=%d overflow=%d/%d", pool.size(), pool.checkedout(),
                             pool.overflow(), pool._max_overflow)
                    time.sleep(30)

            import threading
            threading.Thread(target=report, daemon=True, name="pool-monitor").start()
        ''')
    r.call("再加一个连接池监控：借出超过 10 秒的连接会打印借出时的调用栈，以后再有泄漏能直接定位到代码行。",
           "write_file", {"path": "app/db_monitor.py", "content": pool_mon}, WROTE)
    init_py = textwrap.dedent('''\
        from flask import Flask

        from app.extensions import db
        from config import Config


        def create_app(config_object=Config) -> Flask:
            app = Flask(__name__)
            app.config.from_object(config_object)
            db.init_app(app)

            from app.api import bp as api_bp
            app.register_blueprint(api_bp, url_prefix="/api/v1")

            with app.app_context():
                if not app.testing:
                    from app import db_monitor
                    db_monitor.install(db.engine)   # 连接池监控，见 app/db_monitor.py

            return app
        ''')
    r.call("在 `create_app` 里挂上监控（测试环境不装）。", "write_file", {"path": "app/__init__.py", "content": init_py},
           WROTE)
    fail_out = textwrap.dedent(f"""\
        ============================= test session starts ==============================
        platform linux -- Python 3.10.13, pytest-7.4.4, pluggy-1.3.0
        rootdir: {ws}
        plugins: mock-3.12.0, flask-1.3.0
        collected 38 items

        tests/test_orders.py ........F.....                                      [ 36%]
        tests/test_export.py .....                                               [ 50%]
        tests/test_payment.py .........                                          [ 73%]
        tests/test_inventory.py ..........                                       [100%]

        =================================== FAILURES ===================================
        ___________________ test_create_order_sets_prepay_id ___________________

        client = <FlaskClient <Flask 'app'>>, mock_gateway = <MagicMock name='post' id='140301926583504'>

            def test_create_order_sets_prepay_id(client, mock_gateway):
                \"\"\"下单成功后订单上应该有 prepay_id\"\"\"
                mock_gateway.return_value.json.return_value = {{"prepay_id": "wx20240521..."}}
                resp = client.post("/api/v1/orders", json={{"items": [{{"sku": "SKU-10001", "qty": 1}}]}})
                assert resp.status_code == 201
        >       assert resp.json["prepay_id"] == "wx20240521..."
        E       AssertionError: assert None == 'wx20240521...'

        tests/test_orders.py:74: AssertionError
        ----------------------------- Captured log call ------------------------------
        WARNING  app.services.order_service:order_service.py:58 支付网关预下单失败 order_no=OC20240521091533A1F3 原因=TypeError: 'MagicMock' object is not subscriptable，订单保持待支付
        =========================== short test summary info ============================
        FAILED tests/test_orders.py::test_create_order_sets_prepay_id - AssertionError: assert None == 'wx20240521...'
        ========================= 1 failed, 37 passed in 3.41s =========================""")
    r.call("跑一下测试。", "bash", {"command": "python -m pytest -q tests 2>&1 | tail -40"},
           bash_result(fail_out, 1), took=(4, 8))
    conftest = textwrap.dedent('''\
        import pytest

        from app import create_app
        from app.extensions import db as _db
        from config import TestConfig


        @pytest.fixture
        def app():
            app = create_app(TestConfig)
            with app.app_context():
                _db.create_all()
                yield app
                _db.session.remove()
                _db.drop_all()


        @pytest.fixture
        def client(app):
            return app.test_client()


        @pytest.fixture
        def mock_gateway(mocker):
            """模拟支付网关。注意 patch 的是 order_service 模块里的 requests.post。"""
            post = mocker.patch("app.services.order_service.requests.post")
            post.return_value.status_code = 200
            post.return_value.raise_for_status.return_value = None
            return post
        ''')
    r.call("失败的原因在测试夹具：`mock_gateway` 之前 patch 的是整个 `requests` 模块对象上的属性，"
           "而且没有设置 `raise_for_status`，新代码里 `RequestException` 分支把 MagicMock 的异常当成网关失败吞掉了。"
           "修一下 conftest。", "write_file", {"path": "tests/conftest.py", "content": conftest},
           WROTE)
    new_tests = textwrap.dedent('''\
        def test_gateway_called_outside_transaction(client, mock_gateway, app):
            """调用支付网关时，本线程不应持有任何数据库连接（连接池超时的根因）。"""
            from app.extensions import db
            seen = {}

            def fake_post(*args, **kwargs):
                seen["checked_out"] = db.engine.pool.checkedout()
                resp = mock_gateway.return_value
                resp.json.return_value = {"prepay_id": "wx-test"}
                return resp

            mock_gateway.side_effect = fake_post
            resp = client.post("/api/v1/orders", json={"items": [{"sku": "SKU-10001", "qty": 1}]})
            assert resp.status_code == 201
            assert seen["checked_out"] == 0


        def test_gateway_timeout_keeps_order_pending(client, mock_gateway):
            """网关超时：订单创建成功但保持待支付，不应该 500。"""
            import requests
            mock_gateway.side_effect = requests.Timeout("读超时")
            resp = client.post("/api/v1/orders", json={"items": [{"sku": "SKU-10001", "qty": 1}]})
            assert resp.status_code == 201
            assert resp.json["status"] == "pending"
            assert resp.json["prepay_id"] is None


        def test_export_returns_connections(app, tmp_path):
            """导出任务结束后，连接全部归还连接池。"""
            from app.extensions import db
            from app.tasks.export import _run_export
            app.config["EXPORT_DIR"] = str(tmp_path)
            _run_export(app, "exp-test", "测试", {})
            assert db.engine.pool.checkedout() == 0
            assert list(tmp_path.glob("订单明细_*.xlsx"))
        ''')
    r.call("再补三个回归测试，分别覆盖：网关调用时不持有连接、网关超时订单保持待支付、导出后连接全部归还。",
           "write_file", {"path": "tests/test_pool_regressions.py", "content": new_tests},
           WROTE)
    ok_out = textwrap.dedent(f"""\
        ============================= test session starts ==============================
        platform linux -- Python 3.10.13, pytest-7.4.4, pluggy-1.3.0
        rootdir: {ws}
        plugins: mock-3.12.0, flask-1.3.0
        collected 41 items

        tests/test_orders.py ..............                                      [ 34%]
        tests/test_export.py .....                                               [ 46%]
        tests/test_payment.py .........                                          [ 68%]
        tests/test_inventory.py ..........                                       [ 92%]
        tests/test_pool_regressions.py ...                                       [100%]

        ============================== 41 passed in 3.87s ==============================""")
    r.call("", "bash", {"command": "python -m pytest -q tests 2>&1 | tail -20"}, bash_result(ok_out), took=(4, 8))
    locust_before = textwrap.dedent("""\
        [2024-05-21 09:31:02,118] devbox/INFO/locust.main: Run time limit set to 180 seconds
        [2024-05-21 09:31:02,119] devbox/INFO/locust.main: Starting Locust 2.24.1
        [2024-05-21 09:31:02,120] devbox/INFO/locust.runners: Ramping to 300 users at a rate of 20.00 per second
        [2024-05-21 09:34:02,004] devbox/INFO/locust.main: --run-time limit reached, shutting down
        Type     Name                          # reqs      # fails |    Avg     Min     Max    Med |   req/s  failures/s
        --------|----------------------------|-------|-------------|-------|-------|-------|-------|--------|-----------
        POST     /api/v1/orders                  5218  1711(32.79%) |  14381     412   30127  11000 |   28.99        9.51
        GET      /api/v1/orders                  9031   602(6.67%) |   4012      18   30066    210 |   50.17        3.34
        GET      /api/v1/health                   903     0(0.00%) |     11       3     118      8 |    5.02        0.00
        --------|----------------------------|-------|-------------|-------|-------|-------|-------|--------|-----------
                 Aggregated                     15152  2313(15.27%) |   7343       3   30127   1400 |   84.18       12.85

        Response time percentiles (approximated)
        Type     Name                                  50%    66%    75%    80%    90%    95%    98%    99%  99.9% 99.99%   100% # reqs
        --------|--------------------------------|--------|------|------|------|------|------|------|------|------|------|------|------
        POST     /api/v1/orders                       11000  14000  18000  21000  30000  30000  30000  30000  30000  30000  30000   5218
        GET      /api/v1/orders                         210    560   2400   5100  19000  30000  30000  30000  30000  30000  30000   9031
        --------|--------------------------------|--------|------|------|------|------|------|------|------|------|------|------|------

        Error report
        # occurrences      Error
        --------------------------------------------------------------------------------------------------------------
        1711               POST /api/v1/orders: HTTPError('500 Server Error: INTERNAL SERVER ERROR for url: /api/v1/orders')
        602                GET /api/v1/orders: HTTPError('500 Server Error: INTERNAL SERVER ERROR for url: /api/v1/orders')
        --------------------------------------------------------------------------------------------------------------""")
    locust_after = textwrap.dedent("""\
        [2024-05-21 09:52:40,702] devbox/INFO/locust.main: Run time limit set to 180 seconds
        [2024-05-21 09:52:40,703] devbox/INFO/locust.main: Starting Locust 2.24.1
        [2024-05-21 09:52:40,704] devbox/INFO/locust.runners: Ramping to 300 users at a rate of 20.00 per second
        [2024-05-21 09:55:40,588] devbox/INFO/locust.main: --run-time limit reached, shutting down
        Type     Name                          # reqs      # fails |    Avg     Min     Max    Med |   req/s  failures/s
        --------|----------------------------|-------|-------------|-------|-------|-------|-------|--------|-----------
        POST     /api/v1/orders                 16690     0(0.00%) |    231      74    1890    190 |   92.72        0.00
        GET      /api/v1/orders                 29877     0(0.00%) |     41       9     702     31 |  165.98        0.00
        GET      /api/v1/health                  2981     0(0.00%) |      9       2      88      7 |   16.56        0.00
        --------|----------------------------|-------|-------------|-------|-------|-------|-------|--------|-----------
                 Aggregated                     49548     0(0.00%) |    104       2    1890     44 |  275.27        0.00

        Response time percentiles (approximated)
        Type     Name                                  50%    66%    75%    80%    90%    95%    98%    99%  99.9% 99.99%   100% # reqs
        --------|--------------------------------|--------|------|------|------|------|------|------|------|------|------|------|------
        POST     /api/v1/orders                         190    230    260    290    380    520    810   1100   1700   1900   1900  16690
        GET      /api/v1/orders                          31     38     44     49     70     95    160    230    560    700    700  29877
        --------|--------------------------------|--------|------|------|------|------|------|------|------|------|------|------|------""")
    r.user("新流程下如果支付网关超时，订单会一直停在 pending、没有 prepay_id 吗？有没有补偿机制？", gap=(60, 240))
    r.call("我查一下现在有没有相关的任务。", "bash",
           {"command": "grep -rn 'prepay_id' app --include=*.py | grep -v 'app/models.py'; crontab -l 2>/dev/null | "
                       "grep -i order; ls deploy/"},
           bash_result("app/api/orders.py:33:                   prepay_id=order.prepay_id), 201\n"
                       "app/services/order_service.py:64:        prepay_id = resp.json()[\"prepay_id\"]\n"
                       "app/services/order_service.py:71:    order.prepay_id = prepay_id\n"
                       "*/10 * * * * cd /srv/order-center && venv/bin/flask cleanup-export-files\n"
                       "crontab  prod.env  staging.env  staging.sh"))
    cron = ("# order-center 定时任务（由 deploy 脚本安装到 crontab）\n"
            "*/10 * * * * cd /srv/order-center && venv/bin/flask cleanup-export-files\n"
            "# 给网关失败、没有 prepay_id 的待支付订单补调预下单；超过 30 分钟未支付的取消并释放库存\n"
            "* * * * * cd /srv/order-center && flock -n /tmp/reconcile.lock venv/bin/flask reconcile-pending-orders\n")
    r.parallel("没有。之前网关失败会直接 500、事务回滚，所以不需要补偿；现在订单会先落库，就必须有补偿任务。"
               "我加一个 `flask reconcile-pending-orders` 命令，每分钟跑一次（用 `flock` 防止重叠），"
               "同样遵守「事务外调网关」的原则。",
               [("write_file", {"path": "app/tasks/reconcile.py", "content": ZH_RECONCILE},
                 WROTE),
                ("write_file", {"path": "deploy/crontab", "content": cron}, WROTE)])
    blueprint = '    app.register_blueprint(api_bp, url_prefix="/api/v1")\n'
    init_py2 = edit(init_py, (blueprint, blueprint + "\n    from app.tasks.reconcile import reconcile_pending_orders\n"
                                          "    app.cli.add_command(reconcile_pending_orders)\n"))
    r.call("注册 CLI 命令：", "write_file", {"path": "app/__init__.py", "content": init_py2},
           WROTE)
    rec_test = textwrap.dedent('''\
        from datetime import datetime, timedelta

        import requests

        from app.extensions import db
        from app.models import Order
        from app.tasks.reconcile import reconcile_pending_orders


        def _pending(order_no, minutes_ago):
            o = Order(order_no=order_no, user_id=1, status="pending", amount=10,
                      created_at=datetime.now() - timedelta(minutes=minutes_ago))
            db.session.add(o)
            db.session.commit()


        def test_reconcile_fills_prepay_id(app, mock_gateway):
            _pending("OC1", 2)
            mock_gateway.return_value.json.return_value = {"prepay_id": "wx-补单"}
            app.test_cli_runner().invoke(reconcile_pending_orders)
            assert Order.query.filter_by(order_no="OC1").one().prepay_id == "wx-补单"


        def test_reconcile_cancels_after_30_minutes(app, mock_gateway):
            _pending("OC2", 31)
            app.test_cli_runner().invoke(reconcile_pending_orders)
            assert Order.query.filter_by(order_no="OC2").one().status == "cancelled"
            mock_gateway.assert_not_called()


        def test_reconcile_gateway_error_retries_next_round(app, mock_gateway):
            _pending("OC3", 1)
            mock_gateway.side_effect = requests.ConnectionError("网关不可用")
            result = app.test_cli_runner().invoke(reconcile_pending_orders)
            assert result.exit_code == 0
            assert Order.query.filter_by(order_no="OC3").one().prepay_id is None
        ''')
    rec_out = edit(ok_out, ("collected 41 items", "collected 44 items"), (
        "tests/test_pool_regressions.py ...                                       [100%]",
        "tests/test_pool_regressions.py ...                                       [ 93%]\n"
        "tests/test_reconcile.py ...                                              [100%]"), (
        "41 passed in 3.87s", "44 passed in 4.12s"), ("[ 34%]", "[ 31%]"), ("[ 46%]", "[ 43%]"), (
        "[ 68%]", "[ 63%]"), ("[ 92%]", "[ 86%]"))
    r.call("补三个测试：补 prepay_id、超时取消、网关失败下一轮重试。", "write_file",
           {"path": "tests/test_reconcile.py", "content": rec_test}, WROTE)
    r.call("", "bash", {"command": "python -m pytest -q tests 2>&1 | tail -20"}, bash_result(rec_out), took=(4, 8))
    r.assistant("补偿机制加上了：`flask reconcile-pending-orders` 每分钟一次，给没有 `prepay_id` 的待支付订单补调预下单，"
                "超过 30 分钟未支付的订单取消并释放库存（和短信里「30 分钟内完成支付」的承诺一致）。"
                "44 个测试全部通过。上线时要先装好 `deploy/crontab`。")
    r.user("能不能在 staging 上压一下，对比改之前和改之后？支付网关在 staging 上有个 mock，可以设置 8 秒延迟。", gap=(120, 400))
    r.call("先在改之前的版本（`main`）上压：300 个用户，支付 mock 延迟 8 秒，跑 3 分钟。", "bash",
           {"command": "git stash -q && ./deploy/staging.sh main && PAYMENT_MOCK_DELAY=8 locust -f loadtest/locustfile.py "
                       "--headless -u 300 -r 20 -t 3m --host https://order-center.staging.internal 2>&1 | tail -30"},
           bash_result(locust_before), took=(190, 200))
    after_log = app_log(rng, 90, start=datetime(2024, 5, 21, 9, 53, 2), after_fix=True)
    r.parallel("改之后的版本：", [
        ("bash", {"command": "git stash pop -q && ./deploy/staging.sh HEAD && PAYMENT_MOCK_DELAY=8 locust -f "
                             "loadtest/locustfile.py --headless -u 300 -r 20 -t 3m --host "
                             "https://order-center.staging.internal 2>&1 | tail -30"}, bash_result(locust_after)),
        ("bash", {"command": "ssh staging-oc-1 'tail -n 90 /var/log/order-center/app.log'"},
         bash_result("\n".join(after_log)))], took=(190, 200))
    r.assistant("压测对比（staging，300 并发，支付 mock 延迟 8 秒）：\n\n"
                "| 指标 | 改之前 | 改之后 |\n|---|---|---|\n"
                "| 下单失败率 | 32.79% | 0% |\n| 下单 P50 / P99 | 11 s / 30 s | 190 ms / 1.1 s |\n"
                "| 查询订单 P99 | 30 s | 230 ms |\n| 总吞吐 | 84 req/s | 275 req/s |\n\n"
                "改之后日志里的 `连接池状态` 显示 `checked_out` 一直在 0～6 之间，没有再出现排队；"
                "支付慢的时候只会打印 `支付网关响应缓慢 ... 订单保持「待支付」`，不再影响其他请求。\n\n"
                "改动汇总：\n"
                "- `app/services/order_service.py`：支付网关调用移到事务外，失败时订单保持 `pending`。\n"
                "- `app/tasks/export.py`：分批查询 + `finally: db.session.remove()`，不再泄漏连接。\n"
                "- `config.py`：`pool_size=8, max_overflow=4, pool_timeout=5, pool_recycle=280, pool_pre_ping=True`"
                "（8 实例 × 4 worker × 12 = 384 < 500）。\n"
                "- `gunicorn.conf.py`：`threads=8`。\n"
                "- `app/db_monitor.py`：连接池状态 + 借出过久的调用栈。\n"
                "- `app/tasks/reconcile.py` + `deploy/crontab`：网关失败订单的补偿任务。\n"
                "- 新增 6 个测试，44 个测试全部通过。")
    r.user("pool_pre_ping 每次借连接都要 ping 一下，会不会影响性能？", gap=(60, 240))
    r.assistant("影响很小，可以放心开：\n\n"
                "- `pool_pre_ping` 在**每次从连接池借出连接时**执行一次轻量的 ping（PyMySQL 走的是 `COM_PING`，"
                "不解析 SQL），同机房往返通常 0.1～0.3 ms。一个请求一般只借一次连接，相比下单接口 190 ms 的中位数可以忽略。\n"
                "- 它换来的是：连接被 MySQL 按 `wait_timeout` 关闭、或者数据库主从切换之后，应用会自动重连，"
                "而不是把 `2013 Lost connection` 直接抛给用户。\n"
                "- `pool_recycle=280` 和它是互补的：recycle 主动淘汰快过期的连接，pre_ping 兜底处理意外断开的连接。\n\n"
                "压测数据里也能看出来：开了 pre_ping 之后查询订单的 P50 是 31 ms，没有可见的额外开销。")
    r.user("太好了。最后一个问题：上线的时候要注意什么？我们是滚动发布。", gap=(60, 240))
    r.assistant("滚动发布时注意这几点：\n\n"
                "1. **连接数上限在发布期间会短暂叠加**：旧实例每进程 15 个连接，新实例 12 个。滚动到一半时最坏情况约 "
                "`4×4×15 + 4×4×12 = 432`，超过了 400 的配额（仍在 500 以内）。建议一次只滚 2 台，并提前告知 DBA。\n"
                "2. **补偿任务要和应用一起上线**：新流程下网关失败的订单会保持 `pending`，"
                "靠 `flask reconcile-pending-orders` 补 `prepay_id`。发布脚本要安装 `deploy/crontab`，"
                "并确认 `flock` 锁文件路径在每台机器上可写。\n"
                "3. **观察指标**：发布后盯住 `连接池状态` 日志和 `连接占用过久` 告警；"
                "MySQL 侧看 `Threads_connected` 和 PROCESSLIST 里的 Sleep 连接是否还在增长。\n"
                "4. **回滚方案**：配置和代码是一起发布的，直接回滚镜像即可；数据库没有 schema 变更。\n\n"
                "另外建议把支付网关的 P99 告警阈值设为 5 秒，网关变慢时能提前知道。")
    r.user("好的，我去跟 DBA 和 SRE 同步一下。另外帮我写一段给他们的变更说明，中文，简短一点。", gap=(120, 400))
    r.assistant("**变更说明：order-center 数据库连接池超时修复**\n\n"
                "**背景**：5 月以来每晚 20:00 左右下单接口大量 500，日志为 `QueuePool limit of size 5 overflow 10 reached`"
                " 和 `Lost connection to MySQL server during query`。\n\n"
                "**根因**：\n"
                "1. 下单时在数据库事务内同步调用支付网关（P99 约 8～14 秒），长时间占用连接和库存行锁；\n"
                "2. 每进程 16 个线程只有 15 个连接，高峰期排队 30 秒后超时；\n"
                "3. `pool_recycle`（3600 秒）大于 MySQL `wait_timeout`（300 秒），会拿到已断开的连接；\n"
                "4. 导出任务的后台线程没有归还连接。\n\n"
                "**变更**：支付调用移出事务（新增补偿任务处理网关失败的订单）；导出任务分批查询并归还连接；连接池改为 `pool_size=8, max_overflow=4, "
                "pool_timeout=5, pool_recycle=280, pool_pre_ping=True`；gunicorn `threads=8`；新增连接池监控日志。\n\n"
                "**对数据库的影响**：最大连接数 8 实例 × 4 worker × 12 = 384（原来理论上限 480），"
                "在 order-center 的配额 400 以内，符合《数据库连接使用规范》。\n\n"
                "**验证**：staging 压测 300 并发、网关延迟 8 秒，失败率 32.8% → 0%，下单 P99 30 s → 1.1 s。\n\n"
                "**发布**：滚动发布，每次 2 台；补偿任务 `reconcile-pending-orders` 随应用一起安装到 crontab。"
                "无 schema 变更，可直接回滚。")
    return r


# -- driver ----------------------------------------------------------------------------------
SESSIONS: dict[str, Callable[[], Recorder]] = {
    "npm-install-flood.jsonl": session_npm_flood,
    "nginx-error-log.jsonl": session_nginx,
    "long-refactor.jsonl": session_long_refactor,
    "sanitizer-mess.jsonl": session_sanitizer_mess,
    "mixed-zh-en.jsonl": session_mixed,
}


def generate(out_dir: Path, only: Iterable[str] = ()) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = set(only)
    written = []
    for name, build in SESSIONS.items():
        if wanted and name not in wanted and name.removesuffix(".jsonl") not in wanted:
            continue
        path = out_dir / name
        path.write_bytes(build().dumps().encode("utf-8"))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory to write into (default: sample_sessions/)")
    ap.add_argument("--only", nargs="*", default=(), help="session file names to write (default: all)")
    args = ap.parse_args(argv)
    for path in generate(args.out, args.only):
        print(f"{path}  {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
