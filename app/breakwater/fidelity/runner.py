"""Replay a session under a policy, request by request, and score what each request carries.

`replay` is the per-session engine (the workbench calls it for its gauge); `evaluate_path` is
the unit of work of `breakwater eval`, the same function whether it runs in this process, in
a local process pool or on a Dask worker; `run_local` and `run_dask` yield its results as they
complete, and `Corpus` adds them up.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from breakwater.core.log.message import Message
from breakwater.core.policy import Policy, PolicyError, preset
from breakwater.core.log.session_log import SessionLog, SessionLogError
from breakwater.core.simulate import make_pipeline
from breakwater.core.stages.summarize import Summarizer
from breakwater.fidelity import loops
from breakwater.fidelity.probes import CATEGORIES, extract
from breakwater.fidelity.results import FidelityRun, PresetSummary, SessionSummary, Tally, totals_json
from breakwater.fidelity.scoring import Scorer


def policy_for(name: str, log: SessionLog, window: int | None) -> Policy:
    """The named preset at `window`, else at the session's own window, else the preset's."""
    policy = preset(name)
    w = window or log.header.get("window")
    if isinstance(w, int) and not isinstance(w, bool) and w != policy.window:
        policy = policy.with_changes(window=w)
    return policy


class Stopped(Exception):
    """`replay` was told to stop: its result is no longer wanted."""


def replay(log: SessionLog, policy: Policy, counter: str = "exact", scorer: Scorer | None = None,
           summarizer: Summarizer | None = None, model: str | None = None,
           stop: Callable[[], bool] | None = None) -> FidelityRun:
    """Build every request the pipeline would send and record which probes each one carries.

    Pass the same `scorer` to replays of one session under several policies: the messages
    they leave untouched are then searched once. `summarizer` replaces the offline one, to
    measure another summarizer on the same sessions; `model` picks the exact token counter, as
    for `simulate` (the workbench passes its own, so both runs make the same decisions)."""
    scorer = scorer or Scorer(extract(log))
    probes = scorer.probes
    kept = [0] * len(probes)
    pipe = make_pipeline(log, policy, counter, model, summarizer)
    raw = sent = turns = 0
    summaries: set[str] = set()
    compaction_turns: list[int] = []
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            if stop is not None and stop():
                raise Stopped
            plan = pipe.plan()
            view = plan.built or pipe.materialize(plan)
            turns = plan.turn
            raw += plan.raw_tokens
            sent += plan.sent_tokens
            bit = 1 << (turns - 1)
            for i in scorer.carried(view.messages):
                kept[i] |= bit
            # a summary in the request, new or replayed from the log, marks a deep compaction
            for m in view.messages:
                comp = (m.meta or {}).get("compaction") if m.meta else None
                if comp and comp not in summaries:
                    summaries.add(comp)
                    compaction_turns.append(turns)
        pipe.feed(entry)
    return FidelityRun(policy.preset, policy.window, turns, tuple(probes), tuple(kept), raw, sent,
                       tuple(compaction_turns), tuple(loops.file_reads(log)))


def summarize_run(run: FidelityRun) -> PresetSummary:
    return PresetSummary(run.billed_raw, run.billed_sent, len(run.compaction_turns), run.tally(), run.lost_turns(),
                         loops.detect(run.compaction_turns, run.reads))


def evaluate_path(path: str, presets: Sequence[str], window: int | None = None,
                  counter: str = "exact") -> SessionSummary:
    """One session under every preset. Never raises for a bad session: the reason is returned."""
    from breakwater.formats import load_session

    out = SessionSummary(str(path))
    try:
        log = load_session(path)
        policies = [policy_for(name, log, window) for name in presets]
    except (SessionLogError, PolicyError, OSError) as exc:
        out.error = str(exc)
        return out
    scorer = Scorer(extract(log))
    probes = scorer.probes
    out.title = str(log.header.get("title") or Path(path).name)
    out.turns = log.turn_count()
    out.probes = {c: sum(p.category == c for p in probes) for c in CATEGORIES}
    for name, policy in zip(presets, policies):
        try:
            out.presets[name] = summarize_run(replay(log, policy, counter, scorer))
        except Exception as exc:  # one broken session must not end a run over thousands
            out.error = f"{name}: {type(exc).__name__}: {exc}"
            out.presets.clear()
            break
    return out


Task = Callable[[str], SessionSummary]


@dataclass
class _Eval:
    """A picklable `evaluate_path` with its settings bound (sent to pool and Dask workers)."""

    presets: tuple[str, ...]
    window: int | None
    counter: str

    def __call__(self, path: str) -> SessionSummary:
        return evaluate_path(path, self.presets, self.window, self.counter)


def task(presets: Sequence[str], window: int | None = None, counter: str = "exact") -> Task:
    return _Eval(tuple(presets), window, counter)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def run_local(paths: Sequence[str], fn: Task, jobs: int) -> Iterator[SessionSummary]:
    """Results in completion order; one job runs in this process."""
    if jobs <= 1 or len(paths) <= 1:
        for p in paths:
            yield fn(p)
        return
    with ProcessPoolExecutor(max_workers=min(jobs, len(paths))) as pool:
        futures = [pool.submit(fn, p) for p in paths]
        for fut in as_completed(futures):
            yield fut.result()


class ClusterError(RuntimeError):
    pass


def run_dask(paths: Sequence[str], fn: Task, address: str) -> Iterator[SessionSummary]:
    """The same work on an existing Dask cluster; workers must see the same session paths."""
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise ClusterError("--dask needs the cluster extra: pip install 'breakwater[cluster]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address} ({exc})") from None
    try:
        futures = client.map(fn, list(paths), pure=False)
        for fut in dask_completed(futures):
            yield fut.result()
    finally:
        client.close()


@dataclass
class PresetTotals:
    billed_raw: int = 0
    billed_sent: int = 0
    compactions: int = 0
    sessions: int = 0
    flagged: int = 0
    tally: Tally = field(default_factory=Tally)

    def to_json(self) -> dict:
        return {**totals_json(self.billed_raw, self.billed_sent, self.compactions, self.tally),
                "sessions": self.sessions, "sessions_flagged": self.flagged}


@dataclass
class Corpus:
    presets: tuple[str, ...]
    sessions: list[SessionSummary] = field(default_factory=list)

    def add(self, s: SessionSummary) -> None:
        self.sessions.append(s)

    def totals(self) -> dict[str, PresetTotals]:
        out = {name: PresetTotals() for name in self.presets}
        for s in self.sessions:
            for name, ps in s.presets.items():
                t = out[name]
                t.billed_raw += ps.billed_raw
                t.billed_sent += ps.billed_sent
                t.compactions += ps.compactions
                t.sessions += 1
                t.flagged += bool(ps.loops)
                t.tally.merge(ps.tally)
        return out

    def ordered(self, order: Iterable[str]) -> list[SessionSummary]:
        rank = {p: i for i, p in enumerate(order)}
        return sorted(self.sessions, key=lambda s: rank.get(s.path, len(rank)))

    def to_json(self, order: Iterable[str]) -> dict:
        sessions = self.ordered(order)
        return {"presets": {name: t.to_json() for name, t in self.totals().items()},
                "sessions": [s.to_json() for s in sessions if not s.error],
                "skipped": [s.to_json() for s in sessions if s.error]}
