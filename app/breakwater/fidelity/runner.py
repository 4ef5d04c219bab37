"""Replay a session under a policy, request by request, and score what each request carries.

`replay` is the per-session engine (the workbench calls it for its gauge); `evaluate_path` is
the unit of work of `breakwater eval`, the same function whether it runs in this process, in
a local process pool or on a Dask worker; `run_local` and `run_dask` yield its results as they
complete, and `Corpus` adds them up.
"""

from __future__ import annotations

import os
import pickle
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from breakwater.core.log.message import Message
from breakwater.core.against_record import recorded_compactions, without
from breakwater.core.policy import PRESETS, Policy, PolicyError, from_mapping, preset
from breakwater.core.policy.agents import AGENT_OWN, AGENT_ROWS, AS_RECORDED, agent_of
from breakwater.core.log.session_log import Event, SessionLog, SessionLogError
from breakwater.core.log.text_cache import forget_all
from breakwater.core.fold.own_request import own_history_policy
from breakwater.core.log.models import resolve_window
from breakwater.core.simulate import make_pipeline, simulate
from breakwater.core.stages.summarize import Summarizer
from breakwater.fidelity import loops
from breakwater.fidelity.probes import CATEGORIES, extract
from breakwater.fidelity.results import (BilledCheck, FidelityRun, Money, PresetSummary, SessionSummary, Tally,
                                         fact_json, totals_json)
from breakwater.fidelity.scoring import Scorer, Tracker
from breakwater.core.log.prompt_cache import Prices, recorded_cost


def policy_for(name: str, log: SessionLog, window: int | None) -> Policy:
    """The named preset at `window`, else the session's own window, else its model's (as `simulate`:
    core/log/models.py), else the preset's. `AGENT_ROWS` name the session's own agent's."""
    if name in AGENT_ROWS:
        policy = _own_agents(name, log)
        if policy is not None:
            return policy
        name = agent_of(log.header) or log.header.get("preset")
    policy = preset(name)
    w = resolve_window(log.header, None, window)[0]
    if isinstance(w, int) and not isinstance(w, bool) and w != policy.window:
        policy = policy.with_changes(window=w)
    return policy


def _own_agents(row: str, log: SessionLog) -> Policy | None:
    """The policy of an `AGENT_ROWS` row for `log`, or None for a preset named by the log (its agent's,
    or the one Breakwater's own agent recorded it under) to be taken at the evaluated window."""
    header = log.header
    if agent_of(header):
        return own_history_policy() if row == AS_RECORDED else None
    if isinstance(header.get("policy"), dict):   # Breakwater's own agent: its policy is its strategy
        try:
            return from_mapping(header["policy"])
        except PolicyError:
            return own_history_policy()
    return None if header.get("preset") in PRESETS else own_history_policy()


def billed_check(log: SessionLog, counter: str = "exact") -> BilledCheck | None:
    """Each request of the agent's own history, predicted by the accounting model from the usage
    recorded before it, against the usage recorded for it; None when the session records none.
    Beside the tokens: the cache reads and writes the provider's rules predict (core/log/prompt_cache.py)
    against the recorded ones, and the cost of the whole history against its recorded usage priced."""
    if not any(isinstance(e, Event) and e.type == "usage" for e in log.entries):
        return None   # nothing recorded to check against: no pipeline pass for it
    check = BilledCheck()
    recorded = False
    sim = simulate(log, own_history_policy(), counter)
    prices = Prices.of(sim.prices, sim.cache_rules) if sim.prices is not None and sim.cache_rules else None
    predicted_cost = recorded_cost_ = 0.0
    for t in sim.turns:
        if t.billed_tokens is None:
            continue
        if recorded:   # the first request has no earlier usage to fit: nothing is predicted
            check.input_errors.append(abs(t.sent_tokens - t.billed_tokens) / t.billed_tokens)
            check.input_signed.append((t.sent_tokens - t.billed_tokens) / t.billed_tokens)
        if t.cache is not None:
            if t.billed_cached:   # what a hit reads, against what the requests that hit read
                check.cache_errors.append(abs(t.cache.reusable - t.billed_cached) / t.billed_cached)
            if sim.cache_rules.writes_billed and t.billed_cache_write is not None:   # misses' writes too
                check.cache_write_errors.append(abs(t.cache.write - t.billed_cache_write) / t.billed_tokens)
            if recorded:   # the share read, misses and all: the expected read against the recorded one
                check.read_share[0] += t.cache.read
                check.read_share[1] += t.cache.tokens
                check.read_share[2] += t.billed_cached or 0
                check.read_share[3] += t.billed_tokens
            if prices is not None and t.cache.cost is not None and recorded:   # predicted, as the tokens are
                predicted_cost += t.cache.cost
                recorded_cost_ += recorded_cost(prices, t.billed_tokens, t.billed_cached, t.billed_cache_write,
                                                sim.cache_rules)
        recorded = True
    if recorded_cost_ > 0:
        check.cost_errors.append((predicted_cost - recorded_cost_) / recorded_cost_)
        check.cost_predicted, check.cost_recorded = predicted_cost, recorded_cost_
    return check if recorded else None


class Stopped(Exception):
    """`replay` was told to stop: its result is no longer wanted."""


def replay(log: SessionLog, policy: Policy, counter: str = "exact", scorer: Scorer | None = None,
           summarizer: Summarizer | None = None, model: str | None = None,
           stop: Callable[[], bool] | None = None) -> FidelityRun:
    """Follow every request the pipeline would send and record which probes each one carries.

    Pass the same `scorer` to replays of one session under several policies: the messages
    they leave untouched are then searched once. `summarizer` replaces the offline one, to
    measure another summarizer on the same sessions; `model` picks the exact token counter, as
    for `simulate` (the workbench passes its own, so both runs make the same decisions)."""
    return replay_priced(log, policy, counter, scorer, summarizer, model, stop)[0]


def replay_priced(log: SessionLog, policy: Policy, counter: str = "exact", scorer: Scorer | None = None,
                  summarizer: Summarizer | None = None, model: str | None = None,
                  stop: Callable[[], bool] | None = None) -> tuple[FidelityRun, Money | None]:
    """`replay`, and the session's input in USD without and with compaction as `simulate` prices it (its
    cache model; None when its model's prices are unknown), from one pass
    of `simulate`: a replay and then a simulation planned every request twice (the second pass took
    ~75% of the first's time: its token counts were cached, its planning was not)."""
    scorer = scorer or Scorer(extract(log))
    probes = scorer.probes
    state = {"raw": 0, "sent": 0, "turns": 0, "estimated": False, "tracker": None}
    summaries: set[str] = set()
    compaction_turns: list[int] = []

    def stopped(_pipe, _i) -> None:
        if stop is not None and stop():
            raise Stopped

    def scored(pipe, plan) -> None:
        tracker = state["tracker"]
        if tracker is None:
            tracker = state["tracker"] = Tracker(scorer, pipe)
        state["turns"] = plan.turn
        state["raw"] += plan.raw_tokens
        state["sent"] += plan.sent_tokens
        state["estimated"] = state["estimated"] or plan.counted != "exact"
        tracker.update(plan, plan.built.messages if plan.built is not None else None)
        # a summary in the request, new or replayed from the log, marks a deep compaction
        for m in (plan.built.messages if plan.built is not None else plan.head):
            comp = (m.meta or {}).get("compaction") if m.meta else None
            if comp and comp not in summaries:
                summaries.add(comp)
                compaction_turns.append(plan.turn)

    sim = simulate(log, policy, counter, model, summarizer, before_turn=stopped, after_plan=scored,
                   on_turn=lambda _sim, _turn: None)
    tracker, turns = state["tracker"], state["turns"]
    kept = tuple(tracker.kept(turns)) if tracker is not None else tuple(Tracker(scorer, make_pipeline(
        log, policy, counter, model, summarizer)).kept(turns))
    run = FidelityRun(policy.preset, policy.window, turns, tuple(probes), kept, state["raw"], state["sent"],
                      tuple(compaction_turns), tuple(loops.file_reads(log)), state["estimated"])
    money = None if sim.prices is None else Money(sim.cost_raw, sim.cost_sent, sim.cache_rewritten,
                                                  sim.cache_rewrite_cost)
    return run, money


def summarize_run(run: FidelityRun, money: Money | None = None) -> PresetSummary:
    return PresetSummary(run.billed_raw, run.billed_sent, len(run.compaction_turns), run.tally(), run.lost_turns(),
                         loops.detect(run.compaction_turns, run.reads), run.sent_estimated, run.fact_states(), money)


def evaluate_path(path: str, presets: Sequence[str], window: int | None = None,
                  counter: str = "exact", reuse: bool = False, billed: bool = True, split: int = 1) -> SessionSummary:
    """One session under every preset. Never raises for a bad session: the reason is returned.
    `reuse`: take the session this process loaded last if it is this one (a worker given the
    presets of one session one at a time loads and searches it once); `billed`: check what the
    session was billed against the prediction (one of a session's presets does, for them all);
    `split`: run the presets in this many processes, forked once the session is loaded and its facts
    found (`_split_runs`)."""
    out = SessionSummary(str(path))
    try:
        log = _loaded(path) if reuse else _load(path)
        policies = [policy_for(name, log, window) for name in presets]
    except (SessionLogError, PolicyError, OSError) as exc:
        out.error = str(exc)
        return out
    scorer = _scorer(log) if reuse else Scorer(extract(log))
    probes = scorer.probes
    out.title = str(log.header.get("title") or Path(path).name)
    out.format = log.source_format or "native"
    out.turns = log.turn_count()
    out.probes = {c: sum(p.category == c for p in probes) for c in CATEGORIES}
    lines = {m.id: (m.meta or {}).get("source_line") for m in log.messages} if probes else {}
    out.facts = [fact_json(p, lines.get(p.message_id)) for p in probes]
    named = list(zip(presets, policies))
    runs = _split_runs(log, named, counter, scorer, split) if split > 1 and len(named) > 1 and _can_fork() \
        else _runs(log, named, counter, scorer)
    for name in presets:   # as one process running them in order gives it: the first failure names the error
        got = runs[name]
        if isinstance(got, str):
            out.error = got
            out.presets.clear()
            break
        out.presets[name] = got
    else:
        if billed:
            out.billed = billed_check(log, counter)
    return out


def _runs(log: SessionLog, named: Sequence[tuple[str, Policy]], counter: str, scorer: Scorer) -> dict:
    """Each preset's summary, or why it failed (and none after it: they are not run)."""
    out: dict[str, PresetSummary | str] = {}
    # a row whose policy and history an earlier row had is that row's figures, not a second replay:
    # 'agent' is 'as-recorded' on a session of no known agent, and the recorded preset's row on one of
    # Breakwater's own recordings
    done: dict[tuple[bool, Policy], PresetSummary] = {}
    for name, policy in named:
        try:
            # the agent's strategy makes the automatic compactions its agent recorded: those are taken
            # out (manual ones, which the transcript marks, stay)
            auto = {r.event_id for r in recorded_compactions(log) if r.trigger != "manual"} \
                if name == AGENT_OWN and agent_of(log.header) else set()
            run_log = without(log, auto) if auto else log
            key = (run_log is log, policy)
            if key not in done:
                done[key] = summarize_run(*replay_priced(run_log, policy, counter, scorer))
            out[name] = done[key]
        except Exception as exc:  # one broken session must not end a run over thousands
            out[name] = f"{name}: {type(exc).__name__}: {exc}"
            break
    return out


def _split_runs(log: SessionLog, named: Sequence[tuple[str, Policy]], counter: str, scorer: Scorer,
                split: int) -> dict:
    """`_runs`, the presets shared out evenly among this process and `split - 1` forked children,
    forked once the session is loaded and its facts found (the children start with both). Forking
    after the first preset instead (sharing what it scored too) timed the same on a quiet machine
    (bench corpus, --jobs 2: 1.47 vs 1.43 s) since the scorer searches only what a fact needs; one
    rule for every group is the simpler, and a session of two presets forks too. A child that fails
    to answer has its presets run here."""
    groups = [named[i::split] for i in range(split) if named[i::split]]
    # this process keeps the first group, with the first preset (a failure there names the session's
    # error, whatever the others give: `evaluate_path` reads them in order)
    waits = [(group, _forked(lambda group=group: _runs(log, group, counter, scorer))) for group in groups[1:]]
    out = _runs(log, groups[0], counter, scorer)
    for group, wait in waits:
        got = wait()
        out.update(got if got is not None else _runs(log, group, counter, scorer))
    return out


def _can_fork() -> bool:
    """A fork copies one thread: with others running (a lock one of them holds), the child could hang."""
    return hasattr(os, "fork") and threading.active_count() == 1


def _forked(fn: Callable[[], object]) -> Callable[[], object | None]:
    """Start `fn()` in a forked child; the function returned waits for its (pickled) result, None if
    the child did not give one."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: answer and leave, running nothing of the parent's on the way out
        code = 1
        try:
            os.close(read)
            with os.fdopen(write, "wb") as fh:
                pickle.dump(fn(), fh, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write)

    def wait() -> object | None:
        with os.fdopen(read, "rb") as fh:
            data = fh.read()
        _, status = os.waitpid(pid, 0)
        return pickle.loads(data) if data and os.waitstatus_to_exitcode(status) == 0 else None
    return wait


def _load(path: str) -> SessionLog:
    """The session at `path`, the caches keyed by the identity of the texts this process read before
    emptied first (they held the sessions it let go: `forget_all`)."""
    from breakwater.formats import load_session

    forget_all()
    return load_session(path)


# the session this process loaded last, its file's identity and its scorer (made when first asked)
_last: list = [None, None, None]


def _loaded(path: str) -> SessionLog:
    try:
        st = os.stat(path)
    except OSError:
        return _load(path)   # which says why it cannot be read, as for any session
    key = (path, st.st_mtime_ns, st.st_size)
    if _last[0] != key:
        _last[:] = [None, None, None]   # let the previous session go before loading the next
        _last[:] = [key, _load(path), None]
    return _last[1]


def _scorer(log: SessionLog) -> Scorer:
    if _last[1] is not log:
        return Scorer(extract(log))
    if _last[2] is None:
        _last[2] = Scorer(extract(log))
    return _last[2]


def merge(parts: Sequence[SessionSummary]) -> SessionSummary:
    """One session's summary from its presets' (in the presets' order), as `evaluate_path` of them
    all gives it: the first preset that failed names the error and no preset's figures are kept."""
    out = replace(parts[0], presets={})   # the session's own figures: the first preset's unit has them
    for part in parts:
        if part.error:
            out.error = part.error
            out.presets.clear()
            out.billed = None
            break
        out.presets.update(part.presets)
    return out


@dataclass
class Task:
    """A picklable `evaluate_path` with its settings bound (sent to pool and Dask workers)."""

    presets: tuple[str, ...]
    window: int | None
    counter: str

    def __call__(self, path: str) -> SessionSummary:
        return evaluate_path(path, self.presets, self.window, self.counter)

    def unit(self, path: str, presets: tuple[str, ...], split: int = 1) -> SessionSummary:
        """Some presets of one session, run in `split` processes: the unit of parallel work."""
        return evaluate_path(path, presets, self.window, self.counter, reuse=True,
                             billed=presets[0] == self.presets[0], split=split)

    def units(self, paths: Sequence[str], workers: int, fork: bool = False) -> list[tuple[str, tuple[str, ...], int]]:
        """(session, presets, processes) to share out among `workers`, the largest sessions first. A
        session larger than a worker's share of the corpus is split: one task per session kept a worker
        on it long after the others had finished. With `fork` (a local pool) its task forks once the
        session is loaded and its facts found, the children sharing both (`evaluate_path`); else
        (Dask) each preset is a task, and each worker given one loads the session and finds its facts
        again. The others stay whole."""
        def size(path: str) -> int:
            try:
                return os.stat(path).st_size
            except OSError:
                return 0
        sizes = {path: size(path) for path in paths}
        share = sum(sizes.values()) / max(1, workers)
        out: list[tuple[str, tuple[str, ...], int]] = []
        for path in sorted(paths, key=sizes.__getitem__, reverse=True):
            if workers > 1 and sizes[path] > share and len(self.presets) > 1:
                if fork:
                    out.append((path, self.presets, min(workers, len(self.presets))))
                else:
                    out += [(path, (name,), 1) for name in self.presets]
            else:
                out.append((path, self.presets, 1))
        return out


def task(presets: Sequence[str], window: int | None = None, counter: str = "exact") -> Task:
    return Task(tuple(presets), window, counter)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


class _Gather:
    """Puts each session's presets back together as they complete, in any order."""

    def __init__(self, presets: Sequence[str]):
        self.presets = tuple(presets)
        self.parts: dict[str, dict[str, SessionSummary]] = {}

    def add(self, path: str, presets: tuple[str, ...], part: SessionSummary) -> SessionSummary | None:
        got = self.parts.setdefault(path, {})
        got.update((name, part) for name in presets)
        if len(got) < len(self.presets):
            return None
        del self.parts[path]
        return merge([got[name] for name in self.presets])


def run_local(paths: Sequence[str], fn: Task, jobs: int) -> Iterator[SessionSummary]:
    """Results in completion order; one job runs in this process. Several jobs share out the
    sessions, the largest first, a large one's presets on several (`Task.units`)."""
    units = fn.units(paths, jobs, fork=hasattr(os, "fork"))
    if jobs <= 1 or (len(units) <= 1 and not any(split > 1 for *_, split in units)):
        for p in paths:
            yield fn(p)
        return
    # imported here: 17 ms of start-up that a run in this one process never needs
    from concurrent.futures import ProcessPoolExecutor, as_completed

    gather = _Gather(fn.presets)
    with ProcessPoolExecutor(max_workers=min(jobs, len(units))) as pool:
        futures = {pool.submit(fn.unit, path, names, split): (path, names) for path, names, split in units}
        for fut in as_completed(futures):
            whole = gather.add(*futures[fut], fut.result())
            if whole is not None:
                yield whole


class ClusterError(RuntimeError):
    pass


CONNECT_TIMEOUT_S = 10.0


def _reach(address: str, timeout: float) -> None:
    """Shake hands with the scheduler, bounded: a port that accepts connections but never answers
    as a Dask scheduler would (an HTTP server, a worker's nanny, a stray listener) holds a Client
    forever."""
    import asyncio

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address

    try:
        scheme, _ = parse_address(address)
    except ValueError as exc:
        raise ClusterError(f"--dask {address}: {exc}") from None
    if scheme == "ucx" and not any(_has(m) for m in ("distributed_ucxx", "ucp")):
        raise ClusterError(f"--dask {address}: ucx:// needs UCX support (distributed-ucxx), which is not "
                           f"installed here; use the scheduler's tcp:// address")

    async def shake() -> None:
        comm = await connect(address, timeout=timeout)
        await comm.close()

    try:
        asyncio.run(asyncio.wait_for(shake(), timeout + 1))   # connect says first if nothing listens
    except asyncio.TimeoutError:
        raise ClusterError(f"no Dask scheduler answered at {address} within {timeout:g} s (something may be "
                           f"listening there that is not a scheduler; --dask-timeout S waits longer)") from None
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address} ({exc})") from None


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def run_dask(paths: Sequence[str], fn: Task, address: str,
             timeout: float = CONNECT_TIMEOUT_S) -> Iterator[SessionSummary]:
    """The same work on an existing Dask cluster; workers must see the same session paths."""
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise ClusterError("--dask needs the cluster extra: pip install 'breakwater[cluster]'") from None
    _reach(address, timeout)
    try:
        client = Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address} ({exc})") from None
    try:
        gather = _Gather(fn.presets)
        units = fn.units(paths, max(1, sum(client.nthreads().values())))
        # the scheduler starts the highest priority first: the order of `units`, largest first
        futures = {client.submit(fn.unit, path, names, pure=False, priority=len(units) - k): (path, names)
                   for k, (path, names, _) in enumerate(units)}
        for fut in dask_completed(list(futures)):
            whole = gather.add(*futures[fut], fut.result())
            if whole is not None:
                yield whole
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
    sent_estimated: bool = False
    money: Money = field(default_factory=Money)   # over the sessions priced
    priced: int = 0

    def to_json(self) -> dict:
        return {**totals_json(self.billed_raw, self.billed_sent, self.compactions, self.tally, self.sent_estimated),
                **self.money.to_json(), "sessions_priced": self.priced,
                "sessions": self.sessions, "sessions_flagged": self.flagged}


@dataclass
class Corpus:
    presets: tuple[str, ...]
    sessions: list[SessionSummary] = field(default_factory=list)

    def add(self, s: SessionSummary) -> None:
        self.sessions.append(s)

    def totals(self) -> dict[str, PresetTotals]:
        out = {name: PresetTotals() for name in self.presets}
        # in the sessions' order, not their arrival's: sums of USD (floats) are the same however many jobs
        for s in sorted(self.sessions, key=lambda s: s.path):
            for name, ps in s.presets.items():
                t = out[name]
                t.billed_raw += ps.billed_raw
                t.billed_sent += ps.billed_sent
                t.sent_estimated = t.sent_estimated or ps.sent_estimated
                t.compactions += ps.compactions
                t.sessions += 1
                t.flagged += bool(ps.loops)
                t.tally.merge(ps.tally)
                if ps.money is not None:
                    t.money.add(ps.money)
                    t.priced += 1
        return out

    def ordered(self, order: Iterable[str]) -> list[SessionSummary]:
        rank = {p: i for i, p in enumerate(order)}
        return sorted(self.sessions, key=lambda s: rank.get(s.path, len(rank)))

    def billed_by_format(self) -> dict[str, BilledCheck]:
        out: dict[str, BilledCheck] = {}
        for s in self.sessions:
            if s.billed is not None:
                out.setdefault(s.format, BilledCheck()).merge(s.billed)
        return dict(sorted(out.items()))

    def to_json(self, order: Iterable[str]) -> dict:
        sessions = self.ordered(order)
        return {"presets": {name: t.to_json() for name, t in self.totals().items()},
                "billed_vs_predicted": {fmt: c.to_json() for fmt, c in self.billed_by_format().items()},
                "sessions": [s.to_json() for s in sessions if not s.error],
                "skipped": [s.to_json() for s in sessions if s.error]}
